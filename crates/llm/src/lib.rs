//! Local text generation on a GGUF file: no network, tokens streamed as they are produced,
//! output optionally held to a JSON schema (llguidance), so a small model's answer always parses.
//! Qwen2 and Llama models run on Quire's own speculative decoder (`decoder`), on the CPU or a
//! GPU; other architectures run on mistral.rs.

pub mod decoder;
mod footprint;
mod json_end;
mod model;
pub mod thermal;

use std::time::Duration;

use serde::Serialize;
use ts_rs::TS;

pub use footprint::ModelFootprint;
pub use json_end::JsonEnd;
pub use model::Llm;

/// Architectures Quire's decoder runs (GGUF `general.architecture`).
pub const OWN_DECODER_ARCHITECTURES: &[&str] = &["qwen2", "llama"];

#[derive(Debug, Clone)]
pub struct GenerationRequest {
    pub system: String,
    pub user: String,
    /// JSON schema the output must follow, if any.
    pub schema: Option<serde_json::Value>,
    pub max_tokens: usize,
    /// `None` decodes greedily (deterministic); `Some(t)` samples at temperature `t`.
    pub temperature: Option<f64>,
}

/// What a generation reports while it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Progress<'a> {
    /// `done` of the prompt's `total` tokens have been processed. Quire's decoder reports this
    /// before its first block of the prompt and after each one; on a CPU the prompt is most of
    /// the wait before the first word. mistral.rs reports nothing of its prompt.
    Prompt { done: usize, total: usize },
    /// The next piece of the reply's text.
    Text(&'a str),
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    /// Prompt tokens not processed again: the start of the prompt before (Quire's decoder keeps
    /// the last prompt processed). Included in `prompt_tokens`, not in `prompt_tokens_per_sec`.
    pub prompt_reused_tokens: usize,
    pub completion_tokens: usize,
    /// From sending the request to the first streamed text.
    #[ts(type = "{ secs: number, nanos: number }")]
    pub time_to_first_token: Duration,
    #[ts(type = "{ secs: number, nanos: number }")]
    pub total_time: Duration,
    /// Decode speed reported by the engine (completion tokens per second of decoding).
    pub decode_tokens_per_sec: f32,
    pub prompt_tokens_per_sec: f32,
    pub finish_reason: String,
}

#[derive(Debug, Clone)]
pub struct Generation {
    pub text: String,
    pub stats: GenerationStats,
    /// How sure the model was of each token of `text`, in order (Quire's decoder; empty on
    /// mistral.rs, which does not say).
    pub token_probabilities: Vec<TokenProbability>,
}

/// One token of a reply: where its text ends in the reply (bytes), and the probability the model
/// gave it over its whole vocabulary, before any grammar narrowed the choice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenProbability {
    pub end: usize,
    pub probability: f32,
}
