//! The OpenAI chat format: the request's messages, and the completion (the cited answer, its
//! sources listed after it) as a whole or in chunks.

use std::time::{SystemTime, UNIX_EPOCH};

use quire_engine::Answer;
use serde::Deserialize;
use serde_json::{json, Value};

/// The model name the API answers to.
pub const MODEL_ID: &str = "quire";

#[derive(Deserialize)]
pub(crate) struct ChatRequest {
    pub(crate) messages: Vec<Message>,
    #[serde(default)]
    pub(crate) stream: bool,
}

#[derive(Deserialize)]
pub(crate) struct Message {
    pub(crate) role: String,
    pub(crate) content: Content,
}

/// A message's content: a string, or OpenAI's list of typed parts (the text parts are taken).
#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum Content {
    Text(String),
    Parts(Vec<Value>),
}

impl Content {
    pub(crate) fn text(&self) -> String {
        match self {
            Content::Text(s) => s.clone(),
            Content::Parts(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        }
    }
}

pub(crate) fn completion(id: &str, answer: &Answer) -> Value {
    json!({
        "id": id,
        "object": "chat.completion",
        "created": now_ms() / 1000,
        "model": MODEL_ID,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content(answer)}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": answer.stats.prompt_tokens, "completion_tokens": answer.stats.completion_tokens,
                  "total_tokens": answer.stats.prompt_tokens + answer.stats.completion_tokens},
        "citations": answer.citations.iter().map(|c| json!({"number": c.number, "path": c.path, "page": c.page, "quote": c.quote})).collect::<Vec<_>>(),
        "declined": answer.declined.is_some(),
    })
}

/// A whole reply's text: the answer and its sources, or a decline as it is.
fn content(answer: &Answer) -> String {
    match answer.declined {
        Some(_) => answer.text.clone(),
        None => format!("{}\n\n{}", answer.text, sources_text(answer)),
    }
}

/// What a streamed reply ends with once the answer is in, after `streamed`: its sources; for a
/// decline, what of it has not streamed yet (`quire_engine::rest_of_decline`).
pub(crate) fn stream_tail(answer: &Answer, streamed: &str) -> String {
    match &answer.declined {
        None => format!("\n\n{}", sources_text(answer)),
        Some(d) => {
            quire_engine::rest_of_decline(&answer.question, &answer.text, d.unsupported_answer.is_some(), streamed)
        }
    }
}

/// The cited places, one line each: "[1] /path/file.pdf, p. 3: “quote”".
fn sources_text(answer: &Answer) -> String {
    let lines: Vec<String> = answer
        .citations
        .iter()
        .map(|c| {
            let page = c.page.map(|p| format!(", p. {p}")).unwrap_or_default();
            format!("[{}] {}{page}: “{}”", c.number, c.path, c.quote)
        })
        .collect();
    format!("Sources:\n{}", lines.join("\n"))
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_content_as_text_or_parts() {
        let m: Message = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(m.content.text(), "a\nb");
        let m: Message = serde_json::from_str(r#"{"role":"user","content":"q"}"#).unwrap();
        assert_eq!(m.content.text(), "q");
    }
}
