//! Answering: retrieval, the prompt (relevant sentences, carried on from the last prompt for a
//! follow-up), streamed generation, citations resolved to passages, and the exchange recorded in
//! the collection's history.

use std::collections::HashMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use quire_llm::{GenerationRequest, Progress};

use crate::history::Exchange;
use crate::{
    answer, context, conversation, Answer, AnswerTiming, Cancel, Cancelled, Declined, Engine, Event, SearchHit, Source,
    Turn,
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

/// A question asked of a library that holds no documents yet. Says what is wrong; each front
/// end says how to add documents its own way (the command line its command, the app its buttons).
#[derive(Debug, thiserror::Error)]
#[error("the library is empty: add documents first")]
pub struct EmptyLibrary;

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
        // Every figure of `AnswerTiming` counts from here: the whole wait a person has.
        let asked = Instant::now();
        let question = question.trim();
        anyhow::ensure!(!question.is_empty(), "the question is empty");
        check_question(question)?;
        let hits = self.in_earlier_order(self.retrieve(&conversation::search_text(earlier, question)).await?);
        let search = asked.elapsed();
        anyhow::ensure!(!hits.is_empty(), EmptyLibrary);
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

        let loading = Instant::now();
        let llm = self.llm().await?;
        let model_load = loading.elapsed();
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let building = Instant::now();
        let unmentioned = self.unmentioned(question, &hits).await?;
        let request = self.answer_request_following(earlier, question, &hits, &unmentioned);
        let prompt_building = building.elapsed();
        // Quire's own words (a decline, a "no") in the question's language.
        let words = answer::Words::for_question(question);
        let mut text_stream = answer::AnswerTextStream::new(words);
        let mut first_word = None;
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
                            first_word.get_or_insert_with(|| asked.elapsed());
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
        let confidence = answer::answer_confidence(&generation.text, &generation.token_probabilities);
        let raw: answer::RawReply = serde_json::from_str(&generation.text).with_context(|| {
            format!(
                "the model's answer is not complete JSON (finish reason: {}); \
                 raise the answer length limit or ask a narrower question",
                generation.stats.finish_reason
            )
        })?;
        let terms = |text: &str| self.kb.blind_terms(text);
        // A decline, the model's or the engine's, cites nothing and says what the documents say
        // nearest the question.
        let nearby = || {
            answer::nearest_sentence(question, &sources, terms, words)
                .unwrap_or_else(|| answer::about_sources(&sources, words))
        };
        let declined = |unsupported_answer: Option<String>| {
            let about = nearby();
            (answer::declined_text(words, &about), Some(Declined { about, unsupported_answer }), Vec::new())
        };
        let (text, declined, citations) = match raw {
            answer::RawReply::Declined { .. } => declined(None),
            // "None of the sources mentions Java." is a decline, in the model's words.
            answer::RawReply::Answer(raw) if self.config.declines && answer::says_not_in_sources(&raw.answer) => {
                declined(None)
            }
            answer::RawReply::Answer(raw) => {
                let cited = answer::cite(&raw, question, &sources, &hits, terms)?;
                // A "yes" its own quotes contradict is answered "No." on them, before any other check.
                let reversed = match self.config.declines {
                    true => answer::contradicted_yes(question, &raw.answer, &cited).then_some(words.no),
                    false => None,
                };
                let kept = match self.config.declines {
                    true if reversed.is_none() => {
                        let passages: Vec<&str> = sources.iter().map(|s| s.text.as_str()).collect();
                        answer::supported(question, &raw.answer, &unmentioned, confidence, &passages, cited, terms)
                    }
                    _ => Some(cited),
                };
                match kept {
                    Some(citations) => (reversed.map_or(raw.answer, str::to_owned), None, citations),
                    None => declined(Some(raw.answer)),
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
            token_probabilities: generation.token_probabilities,
            stats: generation.stats,
            speculation,
            timing: AnswerTiming {
                search,
                model_load,
                prompt_building,
                // An answer with no text of its own (a decline's sentence is ours) shows when it ends.
                first_word: first_word.unwrap_or_else(|| asked.elapsed()),
                total: asked.elapsed(),
            },
            confidence,
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
        let mut kept = self.0.kept_meanings.lock().unwrap_or_else(|p| p.into_inner());
        kept.meanings(texts, |missing| self.0.embedder.embed_passages(missing)).unwrap_or_default()
    }
}

/// The most sentence meanings kept between questions (each 1.5 kB with a 384-d embedder).
const KEPT_MEANINGS: usize = 4096;

/// Sentence meanings kept between questions, so a question over passages an earlier one was
/// shown embeds only the sentences it has not seen (the focus's embedding is most of the wait
/// before the prompt). The embedder gives a text the same vector whatever it is batched with,
/// so a kept vector is the one embedding it again would give.
#[derive(Default)]
pub(crate) struct KeptMeanings {
    vectors: HashMap<String, Vec<f32>>,
}

impl KeptMeanings {
    /// `texts`' meanings in order, embedding (through `embed`) only those not kept; all of
    /// them are kept after. An error of `embed` is returned and nothing is kept.
    fn meanings(
        &mut self,
        texts: &[&str],
        embed: impl FnOnce(&[&str]) -> Result<Vec<Vec<f32>>>,
    ) -> Result<Vec<Vec<f32>>> {
        let mut missing: Vec<&str> = texts.iter().copied().filter(|t| !self.vectors.contains_key(*t)).collect();
        missing.sort_unstable();
        missing.dedup();
        let mut embedded: HashMap<&str, Vec<f32>> = HashMap::new();
        if !missing.is_empty() {
            let vectors = embed(&missing)?;
            anyhow::ensure!(
                vectors.len() == missing.len(),
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                missing.len()
            );
            embedded.extend(missing.into_iter().zip(vectors));
        }
        let out: Vec<Vec<f32>> = texts
            .iter()
            .map(|t| embedded.get(t).or_else(|| self.vectors.get(*t)).cloned().unwrap_or_default())
            .collect();
        if self.vectors.len() + embedded.len() > KEPT_MEANINGS {
            self.vectors.clear();
            self.vectors.extend(texts.iter().zip(&out).map(|(t, v)| (t.to_string(), v.clone())));
        } else {
            self.vectors.extend(embedded.into_iter().map(|(t, v)| (t.to_owned(), v)));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_meanings_embed_only_what_they_have_not_seen_and_give_the_same_vectors() {
        let embed_calls = std::cell::RefCell::new(Vec::<Vec<String>>::new());
        let embed = |texts: &[&str]| {
            embed_calls.borrow_mut().push(texts.iter().map(|t| t.to_string()).collect());
            Ok(texts.iter().map(|t| vec![t.len() as f32, t.chars().filter(|c| *c == 'a').count() as f32]).collect())
        };
        let mut kept = KeptMeanings::default();
        let first = kept.meanings(&["question one", "alpha beta", "gamma", "alpha beta"], embed).unwrap();
        assert_eq!(first, vec![vec![12.0, 0.0], vec![10.0, 3.0], vec![5.0, 2.0], vec![10.0, 3.0]]);
        let second = kept.meanings(&["question two", "gamma", "alpha beta"], embed).unwrap();
        assert_eq!(second, vec![vec![12.0, 0.0], vec![5.0, 2.0], vec![10.0, 3.0]]);
        // Each text embedded once; the second call only its new question.
        assert_eq!(
            *embed_calls.borrow(),
            vec![
                vec!["alpha beta".to_string(), "gamma".into(), "question one".into()],
                vec!["question two".to_string()]
            ]
        );
        // Nothing missing: the embedder is not called.
        assert_eq!(kept.meanings(&["gamma"], embed).unwrap(), vec![vec![5.0, 2.0]]);
        assert_eq!(embed_calls.borrow().len(), 2);
        // A failed embedding keeps nothing and says so.
        assert!(kept.meanings(&["new"], |_: &[&str]| anyhow::bail!("no embedder")).is_err());
        assert!(!kept.vectors.contains_key("new"));
    }

    #[test]
    fn kept_meanings_stay_within_their_bound_and_keep_the_latest_call() {
        let embed = |texts: &[&str]| Ok(texts.iter().map(|t| vec![t.len() as f32]).collect());
        let mut kept = KeptMeanings::default();
        let texts: Vec<String> = (0..KEPT_MEANINGS).map(|i| format!("sentence {i}")).collect();
        kept.meanings(&texts.iter().map(String::as_str).collect::<Vec<_>>(), embed).unwrap();
        assert_eq!(kept.vectors.len(), KEPT_MEANINGS);
        let latest = ["sentence 1", "one more", "and another"];
        assert_eq!(kept.meanings(&latest, embed).unwrap(), vec![vec![10.0], vec![8.0], vec![11.0]]);
        assert_eq!(kept.vectors.len(), 3);
        assert!(latest.iter().all(|t| kept.vectors.contains_key(*t)));
    }

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
