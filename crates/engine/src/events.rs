//! What the engine hands back and reports while it works: events, answers with their citations,
//! and the flag that stops a running job.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use ts_rs::TS;

use quire_llm::decoder::SpeculationStats;
use quire_llm::{GenerationStats, TokenProbability};

use crate::{FileOutcome, FileStage, QueuedFile};

/// What the engine reports while it works.
#[derive(Debug, Clone, Serialize, TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// Every file of the batch, in the order they will be processed.
    IngestStarted {
        files: Vec<QueuedFile>,
    },
    FileStarted {
        path: String,
    },
    /// Where a file is in its pipeline; `done`/`total` count chunks while embedding.
    FileProgress {
        path: String,
        stage: FileStage,
        done: u32,
        total: u32,
    },
    FileFinished {
        path: String,
        outcome: FileOutcome,
    },
    /// The batch as a whole: files finished, chunks embedded so far and per second, seconds left
    /// (estimated from the bytes read so far).
    IngestProgress {
        files_done: u32,
        files_total: u32,
        chunks_embedded: u32,
        chunks_per_s: f32,
        eta_s: Option<f32>,
    },
    IngestFinished {
        indexed: usize,
        unchanged: usize,
        removed: usize,
        failed: usize,
        chunks: usize,
        cancelled: bool,
    },
    Retrieved {
        sources: Vec<Source>,
    },
    /// The answer model has read `done` of the prompt's `total` tokens (the question and the
    /// retrieved passages): on a CPU most of the wait before the first word. Comes between
    /// `Retrieved` and the first `AnswerDelta`, where the model runs on Quire's decoder.
    PromptProgress {
        done: u32,
        total: u32,
    },
    AnswerDelta {
        text: String,
    },
    AnswerFinished,
}

/// A flag the caller sets to stop a running ingestion or answer at the next safe point: between
/// files or embedding batches, or before the next token.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The error an answer ends with when it was cancelled.
#[derive(Debug, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

/// A retrieved passage as shown to the model and to people.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, TS)]
pub struct Source {
    /// 1-based number the model cites it by.
    pub number: usize,
    pub chunk_id: String,
    pub path: String,
    pub page: Option<u32>,
    #[ts(type = "number")]
    pub start: u64,
    #[ts(type = "number")]
    pub end: u64,
    pub text: String,
    pub score: f32,
}

/// A cited passage; kept in the history too, where lines written before chunk, quote range and
/// passage were kept read back with them empty (`serde(default)`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, TS)]
pub struct Citation {
    pub number: usize,
    #[serde(default)]
    pub chunk_id: String,
    pub path: String,
    pub page: Option<u32>,
    pub quote: String,
    /// Byte range of the quote inside the cited passage, when it is there word for word.
    #[serde(default)]
    pub quote_range: Option<(usize, usize)>,
    #[serde(default)]
    pub passage: String,
}

/// Why an answer is a decline: the retrieved passages do not answer the question, as the
/// model said or as the support check found (`answer::supporting`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, TS)]
pub struct Declined {
    /// What the documents say nearest the question (a sentence, its document and page), or
    /// where the passages found are from.
    pub about: String,
    /// The answer the model wrote that no passage it cited supports, withdrawn (shown, if at
    /// all, as that); none when the model itself declined.
    pub unsupported_answer: Option<String>,
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct Answer {
    pub question: String,
    /// The answer; for a decline, the sentence that says the documents do not answer it.
    pub text: String,
    /// Set when the documents do not answer the question: `text` says so and nothing is cited.
    pub declined: Option<Declined>,
    pub citations: Vec<Citation>,
    pub sources: Vec<Source>,
    pub raw: String,
    pub stats: GenerationStats,
    /// How speculative decoding went (Quire's decoder only).
    pub speculation: Option<SpeculationStats>,
    /// Where the wait went, from the moment the question was given.
    pub timing: AnswerTiming,
    /// How sure the model was of the answer's words (`answer::answer_confidence`: the mean log
    /// probability of its three least sure tokens, 0 for certain); none from mistral.rs. An
    /// answer below `answer::LEAST_CONFIDENCE` is withdrawn.
    pub confidence: Option<f32>,
    /// Each token of `raw` as the decoder chose it: where it ends and how probable it was (none
    /// from mistral.rs). What `confidence` was read from, kept for the answer evaluation.
    #[serde(skip)]
    #[ts(skip)]
    pub token_probabilities: Vec<TokenProbability>,
}

/// Where the wait for an answer went, each figure from the moment the question was given or
/// of its own step: what `stats.time_to_first_token` (the model's own, from the prompt) leaves out.
#[derive(Debug, Clone, Default, Serialize, TS)]
pub struct AnswerTiming {
    /// Embedding the question and searching the index (reranking included).
    #[ts(type = "{ secs: number, nanos: number }")]
    pub search: Duration,
    /// Loading the answer model, where this question found it not loaded; else next to nothing.
    #[ts(type = "{ secs: number, nanos: number }")]
    pub model_load: Duration,
    /// Choosing the passages' sentences to show (the focus) and writing the prompt.
    #[ts(type = "{ secs: number, nanos: number }")]
    pub prompt_building: Duration,
    /// From the question to the first word of the answer: all of the above and the model reading
    /// the prompt.
    #[ts(type = "{ secs: number, nanos: number }")]
    pub first_word: Duration,
    /// From the question to the whole answer, its checks included.
    #[ts(type = "{ secs: number, nanos: number }")]
    pub total: Duration,
}
