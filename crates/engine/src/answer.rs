//! The answer format: the prompt that shows the model numbered sources, the JSON schema that
//! holds its output to `{"answer": …, "citations": [{"chunk": n, "quote": …}]}` with `n` one of
//! the retrieved sources, the extractor that streams the answer text out of the JSON as it is
//! generated, and the parser that turns the finished JSON into cited passages.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

use quire_index::SearchHit;

use crate::{find_quote, Citation, Source};

pub const SYSTEM_PROMPT: &str = "You are Quire, an assistant that answers questions using only the \
numbered sources the user gives you. Reply with JSON: \"answer\" is a short, direct answer taken \
from the sources in their own words (the name, number, command or fact asked for, never a source's \
number); \"citations\" lists the sources you used, each with its number in \"chunk\" and, \
in \"quote\", a short passage copied word for word from that source that supports the answer. \
If the sources do not contain the answer, say so in \"answer\" and cite the closest source.";

/// Most citations an answer may carry (keeps generation bounded).
pub const MAX_CITATIONS: usize = 3;
pub const MAX_ANSWER_CHARS: usize = 400;
pub const MAX_QUOTE_CHARS: usize = 200;

/// Short label of a source for the prompt and for people: file name and page.
pub fn source_label(hit: &SearchHit) -> String {
    let name = std::path::Path::new(&hit.path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| hit.path.clone());
    match hit.page {
        Some(p) => format!("{name}, page {p}"),
        None => name,
    }
}

/// The most answer-model tokens one passage may take in the prompt. Passages are chunks of at
/// most 500 embedder tokens and 8 KiB (600–700 tokens of ordinary text, more for tables of
/// digits, which the answer model reads a digit a token); a passage over this
/// (text the embedder counts short, or a chunk stored before chunks were bounded in bytes) is
/// cut to fit, so that one odd file cannot make a prompt of millions of tokens.
pub const PASSAGE_TOKENS: usize = 1536;

/// `hits` as the model is shown them: each passage cut at a word (a character, failing that)
/// to at most `budget` tokens as `count` counts them. Text is cut to `budget` × 16 bytes before
/// it is counted, so counting never tokenizes a huge passage.
pub fn fit_passages(hits: &[SearchHit], budget: usize, count: impl Fn(&str) -> usize) -> Vec<SearchHit> {
    hits.iter()
        .map(|hit| {
            let mut text = prefix(&hit.text, budget * 16);
            if count(text) > budget {
                // The longest prefix that fits, by halving (counts grow with the prefix).
                let (mut fits, mut over) = (0, text.len());
                while over - fits > 1 {
                    let mid = (fits + over) / 2;
                    if count(prefix(text, mid)) <= budget {
                        fits = mid;
                    } else {
                        over = mid;
                    }
                }
                let kept = prefix(text, fits);
                text = match kept.rfind(char::is_whitespace) {
                    Some(space) if space > kept.len() / 2 => &kept[..space],
                    _ => kept,
                };
            }
            SearchHit { text: text.to_owned(), ..hit.clone() }
        })
        .collect()
}

/// The longest prefix of `text` of at most `bytes` bytes that ends on a character boundary.
fn prefix(text: &str, bytes: usize) -> &str {
    let mut end = bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The schema for an answer over numbered sources whose quotable sentences (as
/// `quotable_spans` makes them, of what the model was shown) are `quotes`. Each citation is one
/// of a fixed set of objects, one per source: its quote must be one of that source's sentences,
/// and its number is that source's. The quote comes
/// first, so the number follows from the passage the model chose to copy: a citation cannot
/// name a passage that was not retrieved, and its quote is in the passage it names, word for word.
pub fn answer_schema(quotes: &[Vec<String>]) -> serde_json::Value {
    let citations: Vec<serde_json::Value> = quotes
        .iter()
        .enumerate()
        .filter(|(_, quotes)| !quotes.is_empty())
        .map(|(i, quotes)| {
            json!({
                "type": "object",
                "properties": {
                    "quote": { "type": "string", "enum": quotes },
                    "chunk": { "type": "integer", "const": i + 1 }
                },
                "required": ["quote", "chunk"],
                "additionalProperties": false
            })
        })
        .collect();
    let citation = if citations.is_empty() {
        // No source has a sentence to quote (tables of symbols): any short quote, numbers only
        // among the retrieved ones.
        let ids: Vec<usize> = (1..=quotes.len()).collect();
        json!({
            "type": "object",
            "properties": {
                "quote": { "type": "string", "maxLength": MAX_QUOTE_CHARS },
                "chunk": { "type": "integer", "enum": ids }
            },
            "required": ["quote", "chunk"],
            "additionalProperties": false
        })
    } else {
        json!({ "anyOf": citations })
    };
    json!({
        // llguidance options: fixed separators and no free whitespace between tokens, so a small
        // model cannot wander off into blank lines; string lengths bound the output.
        "x-guidance": { "whitespace_flexible": false, "item_separator": ", ", "key_separator": ": " },
        "type": "object",
        "properties": {
            "answer": { "type": "string", "maxLength": MAX_ANSWER_CHARS },
            "citations": { "type": "array", "minItems": 1, "maxItems": MAX_CITATIONS, "items": citation }
        },
        "required": ["answer", "citations"],
        "additionalProperties": false
    })
}

/// A better-supported citation for an answer whose quote does not support it: when the quoted
/// sentence shares no term with what the answer adds to the question, and a quotable sentence
/// of the retrieved passages holds at least a third of those terms (at least one), that
/// sentence (the first best, by passage rank) with its passage's index. Small models often
/// answer right and then copy an unrelated sentence (BENCHMARKS.md, answer evaluation).
/// `terms` analyses a text into its search terms (space-separated), as the index does.
pub fn better_support(
    question: &str,
    answer: &str,
    quote: &str,
    sources: &[SearchHit],
    terms: impl Fn(&str) -> String,
) -> Option<(usize, String)> {
    use std::collections::HashSet;
    let set = |text: &str| terms(text).split_whitespace().map(str::to_owned).collect::<HashSet<String>>();
    let asked = set(question);
    let added: HashSet<String> = set(answer).into_iter().filter(|t| !asked.contains(t)).collect();
    if added.is_empty() || set(quote).intersection(&added).next().is_some() {
        return None;
    }
    let needed = added.len().div_ceil(3).max(1);
    let mut best: Option<(usize, usize, String)> = None;
    for (i, source) in sources.iter().enumerate() {
        for sentence in quotable_spans(&source.text) {
            let shared = set(&sentence).intersection(&added).count();
            if shared >= needed && best.as_ref().is_none_or(|(n, _, _)| shared > *n) {
                best = Some((shared, i, sentence));
            }
        }
    }
    best.map(|(_, i, sentence)| (i, sentence))
}

/// The citations of a finished answer as passages: each one's source, the quote found in it (a
/// quote that is word for word in another retrieved passage cites that one; a right answer with
/// an unrelated quote cites the sentence that says it) and where it stands in the passage.
/// `terms` is the index's blind-term analyser.
pub(crate) fn cite(
    raw: &RawAnswer,
    question: &str,
    sources: &[Source],
    hits: &[SearchHit],
    terms: impl Fn(&str) -> String,
) -> Result<Vec<Citation>> {
    raw.citations
        .iter()
        .map(|c| {
            // The schema allows only 1..=sources.len(); a number outside it is a bug upstream.
            let source = sources
                .get(c.chunk.wrapping_sub(1))
                .with_context(|| format!("the answer cites source {} which was not retrieved", c.chunk))?;
            // The quote decides which passage is cited: small models copy a passage well
            // but often write the wrong number beside it. A quote that is not in the source
            // it names but is word for word in another retrieved one cites that one.
            let (source, quote_range) = match find_quote(&source.text, &c.quote) {
                Some(range) => (source, Some(range)),
                None => sources
                    .iter()
                    .find_map(|s| find_quote(&s.text, &c.quote).map(|r| (s, Some(r))))
                    .unwrap_or((source, None)),
            };
            // A right answer with an unrelated quote: cite the sentence that says it.
            let (source, quote, quote_range) = match better_support(question, &raw.answer, &c.quote, hits, &terms) {
                Some((i, sentence)) => {
                    let range = find_quote(&sources[i].text, &sentence);
                    (&sources[i], sentence, range)
                }
                None => (source, c.quote.clone(), quote_range),
            };
            Ok(Citation {
                number: source.number,
                chunk_id: source.chunk_id.clone(),
                path: source.path.clone(),
                page: source.page,
                quote,
                quote_range,
                passage: source.text.clone(),
            })
        })
        .collect()
}

/// The passages a citation may quote from `text`: its sentences with whitespace collapsed, a
/// sentence longer than `MAX_QUOTE_CHARS` cut at word boundaries, each once.
pub fn quotable_spans(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut spans: Vec<String> = Vec::new();
    let mut current = String::new();
    let flush = |current: &mut String, spans: &mut Vec<String>| {
        if current.chars().any(char::is_alphanumeric) && !spans.contains(current) {
            spans.push(std::mem::take(current));
        }
        current.clear();
    };
    for word in words {
        if !current.is_empty() && current.chars().count() + 1 + word.chars().count() > MAX_QUOTE_CHARS {
            flush(&mut current, &mut spans);
        }
        if !current.is_empty() {
            current.push(' ');
        }
        // A single word longer than the limit (a URL, a sequence) is cut.
        current.extend(word.chars().take(MAX_QUOTE_CHARS));
        if word.ends_with(['.', '!', '?', ';']) {
            flush(&mut current, &mut spans);
        }
    }
    flush(&mut current, &mut spans);
    spans
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct RawCitation {
    pub chunk: usize,
    pub quote: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
pub struct RawAnswer {
    pub answer: String,
    pub citations: Vec<RawCitation>,
}

/// Pulls the value of the top-level `"answer"` string out of JSON that arrives piece by piece,
/// decoding escapes, so the answer can be shown while the model is still writing it.
#[derive(Debug, Default)]
pub struct AnswerTextStream {
    state: StreamState,
    /// Characters of the JSON seen so far outside the answer string (to find the key).
    prefix: String,
    escape: Option<String>,
    /// A high surrogate waiting for its low half.
    surrogate: Option<u16>,
}

#[derive(Debug, Default, PartialEq)]
enum StreamState {
    #[default]
    SeekingKey,
    InAnswer,
    Done,
}

impl AnswerTextStream {
    /// Feeds raw JSON text; returns the answer text it completes (possibly empty).
    pub fn push(&mut self, raw: &str) -> String {
        let mut out = String::new();
        for c in raw.chars() {
            match self.state {
                StreamState::Done => break,
                StreamState::SeekingKey => {
                    self.prefix.push(c);
                    if c == '"' && answer_value_opens(&self.prefix) {
                        self.state = StreamState::InAnswer;
                    }
                }
                StreamState::InAnswer => self.answer_char(c, &mut out),
            }
        }
        out
    }

    fn answer_char(&mut self, c: char, out: &mut String) {
        if let Some(esc) = &mut self.escape {
            esc.push(c);
            let decoded = match esc.as_str() {
                "\"" => Some('"'),
                "\\" => Some('\\'),
                "/" => Some('/'),
                "n" => Some('\n'),
                "t" => Some('\t'),
                "r" => Some('\r'),
                "b" => Some('\u{8}'),
                "f" => Some('\u{c}'),
                s if s.starts_with('u') && s.len() == 5 => {
                    let unit = u16::from_str_radix(&s[1..], 16).unwrap_or(0xfffd);
                    self.escape = None;
                    self.push_utf16(unit, out);
                    return;
                }
                s if s.starts_with('u') => return, // more hex digits to come
                _ => Some('\u{fffd}'),
            };
            self.escape = None;
            if let Some(d) = decoded {
                out.push(d);
            }
            return;
        }
        match c {
            '\\' => self.escape = Some(String::new()),
            '"' => self.state = StreamState::Done,
            _ => out.push(c),
        }
    }

    fn push_utf16(&mut self, unit: u16, out: &mut String) {
        match (self.surrogate.take(), unit) {
            (None, 0xd800..=0xdbff) => self.surrogate = Some(unit),
            (Some(high), 0xdc00..=0xdfff) => {
                out.extend(char::decode_utf16([high, unit]).map(|r| r.unwrap_or('\u{fffd}')))
            }
            (_, unit) => out.push(char::from_u32(unit as u32).unwrap_or('\u{fffd}')),
        }
    }
}

/// True when `prefix` ends with `"answer"`, optional spaces, `:`, optional spaces and `"` at the
/// top level of the object.
fn answer_value_opens(prefix: &str) -> bool {
    let t = prefix.trim_end_matches('"').trim_end();
    let Some(t) = t.strip_suffix(':') else { return false };
    let t = t.trim_end();
    t.ends_with("\"answer\"") && !t[..t.len() - 8].contains("\"answer\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_in_pieces(raw: &str, piece: usize) -> String {
        let mut s = AnswerTextStream::default();
        let chars: Vec<char> = raw.chars().collect();
        chars.chunks(piece).map(|c| s.push(&c.iter().collect::<String>())).collect()
    }

    #[test]
    fn answer_text_streams_with_escapes_split_anywhere() {
        let raw = r#"{"answer": "ssearch36 \"does\" SW\n\u00e9\ud83d\ude00 done", "citations": [{"chunk": 1, "quote": "x"}]}"#;
        let want = "ssearch36 \"does\" SW\né😀 done";
        for piece in 1..8 {
            assert_eq!(stream_in_pieces(raw, piece), want, "piece size {piece}");
        }
        let parsed: RawAnswer = serde_json::from_str(raw).unwrap();
        assert_eq!(parsed.answer, want);
    }

    #[test]
    fn only_the_answer_value_is_streamed() {
        let raw = r#"{ "answer" :"yes","citations":[{"chunk":2,"quote":"answer"}]}"#;
        assert_eq!(stream_in_pieces(raw, 3), "yes");
    }

    fn source(text: &str) -> SearchHit {
        SearchHit { chunk_id: "c".into(), text: text.into(), ..Default::default() }
    }

    #[test]
    fn passages_over_the_budget_are_cut_and_others_kept_whole() {
        // One "token" per 4 bytes, as a stand-in tokenizer.
        let count = |t: &str| t.len().div_ceil(4);
        let short = "A short passage that fits.";
        let words = "word ".repeat(10_000);
        let blob = "é".repeat(20_000_000 / 2);
        let shown = fit_passages(&[source(short), source(&words), source(&blob)], 100, count);
        assert_eq!(shown[0].text, short);
        assert!(count(&shown[1].text) <= 100 && shown[1].text.len() > 300, "{}", shown[1].text.len());
        assert!(words.starts_with(&shown[1].text) && shown[1].text.ends_with("word"), "cut at a word");
        assert!(count(&shown[2].text) <= 100 && blob.starts_with(&shown[2].text) && !shown[2].text.is_empty());
    }

    #[test]
    fn schema_ties_each_quote_to_the_source_it_comes_from() {
        let quotes = ["Tides follow the Moon.  Bread rises.", "@@ ##", "Lava is hot."].map(quotable_spans);
        let schema = answer_schema(&quotes);
        let branches = schema["properties"]["citations"]["items"]["anyOf"].as_array().unwrap();
        // The second source has nothing quotable: it cannot be cited.
        assert_eq!(branches.len(), 2);
        assert_eq!(branches[0]["properties"]["chunk"]["const"], 1);
        assert_eq!(branches[0]["properties"]["quote"]["enum"], json!(["Tides follow the Moon.", "Bread rises."]));
        assert_eq!(branches[1]["properties"]["chunk"]["const"], 3);
        // The quote comes before the number.
        let keys: Vec<&String> = branches[1]["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["quote", "chunk"]);
    }

    /// Words, lowercased, as the terms of the test (the index's analyser does more).
    fn words(text: &str) -> String {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2)
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn an_unrelated_quote_moves_to_the_sentence_that_supports_the_answer() {
        let sources = [
            source("The remaining data is set by default to zero. Other options follow."),
            source("Smith-Waterman searches are run by ssearch36. It is slower than fasta36."),
        ];
        let q = "Which program runs a rigorous Smith-Waterman search?";
        // The quote says nothing of the answer: the sentence naming ssearch36 is cited instead.
        let moved = better_support(q, "ssearch36", "The remaining data is set by default to zero.", &sources, words);
        assert_eq!(moved, Some((1, "Smith-Waterman searches are run by ssearch36.".to_string())));
        // A quote that holds the answer stays.
        assert_eq!(
            better_support(q, "ssearch36", "Smith-Waterman searches are run by ssearch36.", &sources, words),
            None
        );
        // An answer that only repeats the question, or that no sentence supports: unchanged.
        assert_eq!(better_support(q, "Smith-Waterman search", "Other options follow.", &sources, words), None);
        assert_eq!(better_support(q, "blastp", "Other options follow.", &sources, words), None);
    }

    #[test]
    fn quotable_spans_are_sentences_within_the_length_limit() {
        let long = (0..80).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
        let text = format!("First  one.\nSecond\tone? {long} Tail without stop First one.");
        let spans = quotable_spans(&text);
        assert_eq!(&spans[..2], ["First one.", "Second one?"]);
        assert!(spans.iter().all(|s| s.chars().count() <= MAX_QUOTE_CHARS), "{spans:?}");
        // The long run is cut at word boundaries and nothing is lost or doubled.
        let rest = spans[2..].join(" ");
        assert_eq!(rest, format!("{long} Tail without stop First one."));
        assert_eq!(spans.iter().filter(|s| *s == "First one.").count(), 1);
        // Every span is found in the passage by the citation matcher.
        for s in &spans {
            assert!(crate::find_quote(&text, s).is_some(), "{s}");
        }
    }
}
