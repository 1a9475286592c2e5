//! Measuring retrieval and answers: the standard retrieval metrics (as pytrec_eval computes them for BEIR) and the
//! BEIR dataset format (corpus.jsonl, queries.jsonl, qrels/<split>.tsv). No I/O beyond reading
//! the dataset files it is pointed at; running queries is the caller's job. Answer sets
//! (questions with gold documents and pages) and the verdicts on each answer are in `answers`.

pub mod answers;
pub mod beir;
pub mod metrics;

pub use beir::{Dataset, Document, Qrels};
pub use metrics::{mean_scores, QueryScores};
