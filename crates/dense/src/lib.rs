//! Dense layers, `out = input · weightᵀ + bias`, for the networks Quire runs itself: the
//! embedder's encoder (`quire-embed`) and the OCR recognizer (`quire-ocr`). In f32 with the
//! same bits on every CPU (`matmul`), or in 8-bit integers where the CPU has exact 8-bit
//! products and the caller asks for them (`int8`). No I/O; the work is split over the calling
//! thread's rayon pool.

pub mod int8;
mod matmul;

pub use matmul::{Dense, Packed, PANEL};
