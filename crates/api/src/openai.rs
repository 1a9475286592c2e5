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
/// decline, what of it has not streamed yet (`decline_tail`).
pub(crate) fn stream_tail(answer: &Answer, streamed: &str) -> String {
    match &answer.declined {
        None => format!("\n\n{}", sources_text(answer)),
        Some(d) => decline_tail(&answer.text, d.unsupported_answer.is_some(), streamed),
    }
}

/// The rest of a decline `text` after `streamed`: a decline streams its first sentence, and the
/// rest (what the documents say nearby) follows once, not the whole again; an answer that
/// streamed and was then held back is said to be so before the decline.
fn decline_tail(text: &str, held_back: bool, streamed: &str) -> String {
    if held_back {
        return format!("\n\n(Not given: the passages do not bear this out.)\n\n{text}");
    }
    match text.strip_prefix(streamed.trim()) {
        Some(rest) => rest.to_string(),
        None => format!("\n\n{text}"),
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

    /// A decline is said once: the sentence that streamed, then only the rest.
    #[test]
    fn a_streamed_decline_is_not_said_twice() {
        let text = "Your documents don't say. The nearest they come is a.pdf, page 3: “It is red.”";
        let tail = decline_tail(text, false, "Your documents don't say.");
        assert_eq!(tail, " The nearest they come is a.pdf, page 3: “It is red.”");
        assert_eq!(format!("Your documents don't say.{tail}"), text);
        // An answer that streamed and was held back: said so, then the decline whole.
        let tail = decline_tail(text, true, "It is blue.");
        assert!(tail.contains("Not given") && tail.ends_with(text), "{tail}");
    }

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
