//! The benchmark and evaluation harness behind `quire bench` and `quire eval`: Quire's figures
//! measured on this machine (embedding, search, ingestion, decoding, the first token, speculation)
//! beside the peers people would otherwise use, and its quality on benchmark and question sets.
//! The command line hands it its parsed arguments; it prints its reports.

mod bench;
mod bench_inputs;
mod embed_bench;
mod eval;
mod kv_bench;
mod ocr_bench;
mod speculative;
mod sustained;
mod ttft;

pub use bench::{run as bench, BenchArgs};
pub use eval::{run as eval, EvalCommand};
