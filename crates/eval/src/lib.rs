//! Measuring retrieval: the standard metrics (as pytrec_eval computes them for BEIR) and the
//! BEIR dataset format (corpus.jsonl, queries.jsonl, qrels/<split>.tsv). No I/O beyond reading
//! the dataset files it is pointed at; running queries is the caller's job.

pub mod beir;
pub mod metrics;

pub use beir::{Dataset, Document, Qrels};
pub use metrics::{mean_scores, QueryScores};
