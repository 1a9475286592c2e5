//! Answering: retrieval, the prompt (relevant sentences, carried on from the last prompt for a
//! follow-up), streamed generation, citations resolved to passages, and the exchange recorded in
//! the collection's history.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use quire_llm::{GenerationRequest, Progress};

use crate::history::Exchange;
use crate::{
    answer, context, conversation, Answer, Cancel, Cancelled, Declined, Engine, Event, SearchHit, Source, Turn,
};

/// The longest question taken, in characters: about 2,000 tokens of prose. A longer one would
/// take minutes of prompt processing before its first word; long text belongs in a document.
pub const MAX_QUESTION_CHARS: usize = 8_000;

/// A question past `MAX_QUESTION_CHARS`, refused before any work is done.
#[derive(Debug, thiserror::Error)]
#[error(
    "the question is {chars} characters long; Quire takes questions of up to {MAX_QUESTION_CHARS} characters \
     (about 2,000 tokens). Shorten it, or save the long text as a document, add it, and ask about it"
)]
pub struct QuestionTooLong {
    pub chars: usize,
}

/// Refuses a question too long to answer in reasonable time (`MAX_QUESTION_CHARS`); cheap
/// enough to run before anything else.
pub fn check_question(question: &str) -> Result<(), QuestionTooLong> {
    // Counting stops just past the limit: a 100 MB question costs no more than an 8 kB one.
    let chars = question.trim().chars().take(MAX_QUESTION_CHARS + 1).count();
    if chars > MAX_QUESTION_CHARS {
        return Err(QuestionTooLong { chars: question.trim().chars().count() });
    }
    Ok(())
}

impl Engine {
    /// Answers a question from the knowledge base, streaming the answer text through `on_event`.
    /// Ends with the `Cancelled` error when `cancel` is set before the answer is complete.
    pub async fn ask(
        &self,
        question: &str,
        on_event: &mut (dyn FnMut(Event) + Send),
        cancel: &Cancel,
    ) -> Result<Answer> {
        self.ask_following(&[], question, on_event, cancel).await
    }

    /// `ask` for a question asked after `earlier` turns of a conversation (oldest first): a
    /// question that leans on the one before is searched together with it, and the model is
    /// shown the latest turns (`conversation`).
    pub async fn ask_following(
        &self,
        earlier: &[Turn],
        question: &str,
        on_event: &mut (dyn FnMut(Event) + Send),
        cancel: &Cancel,
    ) -> Result<Answer> {
        let question = question.trim();
        anyhow::ensure!(!question.is_empty(), "the question is empty");
        check_question(question)?;
        let hits = self.in_earlier_order(self.retrieve(&conversation::search_text(earlier, question)).await?);
        anyhow::ensure!(
            !hits.is_empty(),
            "the knowledge base is empty: add documents first (`quire ingest <folder or files>`)"
        );
        let sources: Vec<Source> = hits
            .iter()
            .enumerate()
            .map(|(i, h)| Source {
                number: i + 1,
                chunk_id: h.chunk_id.clone(),
                path: h.path.clone(),
                page: h.page,
                start: h.start,
                end: h.end,
                text: h.text.clone(),
                score: h.score,
            })
            .collect();
        on_event(Event::Retrieved { sources: sources.clone() });

        let llm = self.llm().await?;
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let unmentioned = self.unmentioned(question, &hits).await?;
        let request = self.answer_request_following(earlier, question, &hits, &unmentioned);
        let mut text_stream = answer::AnswerTextStream::default();
        let generated = llm
            .generate_detailed(
                &request,
                |progress| match progress {
                    Progress::Prompt { done, total } => {
                        on_event(Event::PromptProgress { done: done as u32, total: total as u32 })
                    }
                    Progress::Text(piece) => {
                        let text = text_stream.push(piece);
                        if !text.is_empty() {
                            on_event(Event::AnswerDelta { text });
                        }
                    }
                },
                || cancel.is_cancelled(),
            )
            .await;
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let (generation, speculation) = generated?;
        on_event(Event::AnswerFinished);

        let raw: answer::RawReply = serde_json::from_str(&generation.text).with_context(|| {
            format!(
                "the model's answer is not complete JSON (finish reason: {}); \
                 raise the answer length limit or ask a narrower question",
                generation.stats.finish_reason
            )
        })?;
        let terms = |text: &str| self.kb.blind_terms(text);
        // A decline, the model's or the support check's, cites nothing and says what was found.
        let (text, declined, citations) = match raw {
            answer::RawReply::Declined { not_in_sources } => {
                // Words of the model's own, else (nothing, or the prompt's "..." copied) the documents.
                let about = match not_in_sources.trim() {
                    said if said.chars().any(char::is_alphabetic) => said.to_owned(),
                    _ => answer::about_sources(&sources),
                };
                (answer::declined_text(&about), Some(Declined { about, unsupported_answer: None }), Vec::new())
            }
            // "None of the sources mentions Java." is a decline, in the model's words.
            answer::RawReply::Answer(raw) if self.config.declines && answer::says_not_in_sources(&raw.answer) => {
                let about = raw.answer.trim().to_owned();
                (answer::declined_text(&about), Some(Declined { about, unsupported_answer: None }), Vec::new())
            }
            answer::RawReply::Answer(raw) => {
                let cited = answer::cite(&raw, question, &sources, &hits, terms)?;
                let supporting = match self.config.declines {
                    true => answer::supporting(question, &raw.answer, &unmentioned, cited, terms),
                    false => cited,
                };
                if supporting.is_empty() {
                    let about = answer::about_sources(&sources);
                    let text = answer::declined_text(&about);
                    (text, Some(Declined { about, unsupported_answer: Some(raw.answer) }), supporting)
                } else {
                    (raw.answer, None, supporting)
                }
            }
        };
        let answer = Answer {
            question: question.into(),
            text,
            declined,
            citations,
            sources,
            raw: generation.text,
            stats: generation.stats,
            speculation,
        };
        // Every caller (the app, the CLI, the local API) keeps the same history. An answer that
        // cannot be kept (a full disk) is still the answer: the user is told, not failed.
        let at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        if let Err(e) = self.history().append(&Exchange::of(&answer, at_ms)) {
            crate::notices::tell(format!("the answer was not kept in the conversation history: {e:#}"));
        }
        Ok(answer)
    }

    /// `hits` numbered as the last prompt numbered them, when they are its passages (a
    /// follow-up), so that prompt can be carried on; else as they are.
    pub fn in_earlier_order(&self, hits: Vec<SearchHit>) -> Vec<SearchHit> {
        let last = self.last_context.lock().unwrap_or_else(|p| p.into_inner());
        match last.as_ref() {
            Some(context)
                if context
                    .same_passages(&answer::fit_passages(&hits, answer::PASSAGE_TOKENS, |t| self.count_tokens(t))) =>
            {
                let place = |h: &SearchHit| context.passages().iter().position(|p| p.chunk_id == h.chunk_id);
                let mut hits = hits;
                hits.sort_by_key(place);
                hits
            }
            _ => hits,
        }
    }

    /// What the answer model is asked for `question` over the retrieved `hits` (numbered in
    /// this order): the prompt with each passage cut to `answer::PASSAGE_TOKENS` and, with
    /// `focus_tokens` set, only its sentences that bear on the question (`context`), carried on
    /// from the last prompt when the passages are its own; and the schema that holds citations
    /// to the sentences shown. The prompt names the question's words that no passage of the
    /// collection holds (`unmentioned`).
    pub fn answer_request(&self, question: &str, hits: &[SearchHit], unmentioned: &[String]) -> GenerationRequest {
        self.answer_request_following(&[], question, hits, unmentioned)
    }

    /// `answer_request` for a question asked after `earlier` turns: the sentences shown are
    /// chosen for what the question is searched with, and the prompt shows the latest turns.
    pub fn answer_request_following(
        &self,
        earlier: &[Turn],
        question: &str,
        hits: &[SearchHit],
        unmentioned: &[String],
    ) -> GenerationRequest {
        let shown = answer::fit_passages(hits, answer::PASSAGE_TOKENS, |text| self.count_tokens(text));
        let mut last = self.last_context.lock().unwrap_or_else(|p| p.into_inner());
        let reading = EngineReading(self);
        let searched = conversation::search_text(earlier, question);
        let carried = last.as_ref().and_then(|c| c.follow_up(&searched, &shown, &reading));
        let context =
            carried.unwrap_or_else(|| context::Context::focus(&searched, shown, self.config.focus_tokens, &reading));
        let request = GenerationRequest {
            system: answer::SYSTEM_PROMPT.into(),
            user: context.prompt(&conversation::earlier_text(earlier), question, unmentioned),
            schema: Some(answer::answer_schema(&context.quotes(), self.config.declines)),
            max_tokens: self.config.max_answer_tokens,
            temperature: None,
        };
        *last = Some(context);
        request
    }
}

/// What the relevant-sentence context reads text with: the index's analyser, the answer
/// model's tokenizer and the embedder.
struct EngineReading<'a>(&'a Engine);

impl context::Reading for EngineReading<'_> {
    fn terms(&self, text: &str) -> String {
        self.0.kb.blind_terms(text)
    }

    fn tokens(&self, text: &str) -> usize {
        self.0.count_tokens(text)
    }

    fn meanings(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        // Without meanings the terms alone choose: a failed embedding costs focus, not the answer.
        self.0.embedder.embed_passages(texts).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_past_the_limit_are_refused_with_their_length() {
        assert!(check_question(&"é".repeat(MAX_QUESTION_CHARS)).is_ok());
        assert!(check_question(&format!("  {}  \n", "a".repeat(MAX_QUESTION_CHARS))).is_ok());
        let refused = check_question(&"word ".repeat(20_000)).unwrap_err();
        assert_eq!(refused.chars, 99_999);
        assert!(refused
            .to_string()
            .starts_with("the question is 99999 characters long; Quire takes questions of up to 8000"));
    }
}
