//! The answer format: the prompt that shows the model numbered sources, the JSON schema that
//! holds its output to `{"answer": …, "citations": [{"chunk": n, "quote": …}]}` with `n` one of
//! the retrieved sources, the extractor that streams the answer text out of the JSON as it is
//! generated, and the parser that turns the finished JSON into cited passages.

use std::collections::HashSet;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;

use quire_index::SearchHit;
use quire_llm::TokenProbability;

use crate::{find_quote, Citation, Source};

pub const SYSTEM_PROMPT: &str = "You are Quire, an assistant that answers questions using only the \
numbered sources the user gives you. Reply with JSON: \"answer\" is a short, direct answer taken \
from the sources in their own words (the name, number, command or fact asked for, never a source's \
number; every one of them when the question asks for several: all the items a source lists, and \
each part of a question in two parts; what defines or first describes a thing when it asks what \
the thing is or does); \"citations\" lists the sources you used, each with its number in \"chunk\" and, \
in \"quote\", a short passage copied word for word from that source that supports the answer. \
If the sources do not answer the question, do not answer from your own knowledge: reply \
{\"not_in_sources\": \"...\"} saying in a few words what the sources are about instead.";

/// Most citations an answer may carry (keeps generation bounded).
pub const MAX_CITATIONS: usize = 3;
pub const MAX_ANSWER_CHARS: usize = 400;
pub const MAX_QUOTE_CHARS: usize = 200;
/// The longest "what the sources are about" of a decline.
pub const MAX_ABOUT_CHARS: usize = 200;

/// The escapes the answer's JSON strings may use (after `\\`): `\"` and `\\`. No `\uXXXX`, so
/// no control character (every other character is written as itself).
const ANSWER_ESCAPES: &str = "\"\\";

/// What an answer's text may be: printable characters, no ASCII double quote, and a backslash
/// only before another character, never before a second backslash or at the end. A small model
/// copying `\$`, `\W` or `\eqref` from a passage starts JSON's escape with its backslash and
/// then wants the letter, which JSON does not allow there; held only to valid JSON it wrote `\"`
/// (closing the string) or a token of two backslashes, then another, without end (`\notag`
/// became a run of 200 backslashes on the second manuals set). Held to this, the one way on from
/// the escape is the backslash it completes, then the letter. The cost: an answer cannot say
/// LaTeX's `\\` or a UNC path's `\\server`. (Ranges, not `[^"\\]`: the grammar engine reads a
/// negated class over JSON's escaped text, where it does not exclude `\\`.)
const ANSWER_PATTERN: &str = r"^([ -!#-\[\]-\x{10FFFF}]|\\[ -!#-\[\]-\x{10FFFF}])+$";

/// What a decline says first, in the app, `quire ask` and the local API alike.
pub const DECLINE: &str = "Your documents don't say.";

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
pub fn answer_schema(quotes: &[Vec<String>], declines: bool) -> serde_json::Value {
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
    let answer = json!({
        "type": "object",
        "properties": {
            "answer": { "type": "string", "maxLength": MAX_ANSWER_CHARS, "pattern": ANSWER_PATTERN },
            "citations": { "type": "array", "minItems": 1, "maxItems": MAX_CITATIONS, "items": citation }
        },
        "required": ["answer", "citations"],
        "additionalProperties": false
    });
    let decline = json!({
        "type": "object",
        "properties": { "not_in_sources": { "type": "string", "maxLength": MAX_ABOUT_CHARS } },
        "required": ["not_in_sources"],
        "additionalProperties": false
    });
    // An answer with its citations, or (`declines`) a decline that cites nothing: the first key
    // chooses.
    let replies = if declines { vec![answer, decline] } else { vec![answer] };
    json!({
        // llguidance options: fixed separators and no free whitespace between tokens, so a small
        // model cannot wander off into blank lines; string lengths bound the output. Strings
        // may escape only a quote and a backslash: a model that reached for
        // `\u001b[01;31m` (a terminal's colour code) repeated it until the answer ran out of tokens.
        "x-guidance": {
            "whitespace_flexible": false,
            "item_separator": ", ",
            "key_separator": ": ",
            "json_allowed_escapes": ANSWER_ESCAPES
        },
        "anyOf": replies
    })
}

/// A better-supported citation for an answer whose quote does not support it: when the quoted
/// sentence shares no term with what the answer adds to the question, and a quotable sentence
/// of the retrieved passages holds at least a third of those terms (at least one), that
/// sentence (the first best, by passage rank) with its passage's index. Small models often
/// answer right and then copy an unrelated sentence (BENCHMARKS.md, answer evaluation).
/// A bare yes or no adds no term: its quote must hold half the question's terms (as
/// `supporting` asks), and when it does not, the sentence holding the most of them (at least
/// half) is cited: "No" to "Should a Makefile set DESTDIR?" rests on "You should not set the
/// value of DESTDIR in your Makefile", not on the sentence about INSTALL the model copied.
/// `terms` analyses a text into its search terms (space-separated), as the index does.
pub fn better_support(
    question: &str,
    answer: &str,
    quote: &str,
    sources: &[SearchHit],
    terms: impl Fn(&str) -> String,
) -> Option<(usize, String)> {
    let set = |text: &str| term_set(text, &terms);
    let added = added_terms(question, answer, &terms);
    let (wanted, needed) = if added.is_empty() {
        // Only a bare yes or no: an answer that repeats the question's words ("4ti2-python" to
        // "Which Python package wraps 4ti2?") has nothing a sentence could be found for.
        let asked = set(question);
        let yes_or_no = term_set(YES_OR_NO, &terms);
        let bare = set(answer).iter().all(|t| yes_or_no.contains(t));
        if !bare || asked.is_empty() || holds_half(&asked, &set(quote)) {
            return None;
        }
        let half = asked.len().div_ceil(2);
        (asked, half)
    } else {
        // A quote sharing a word or two by chance ("executed") with a long answer, when
        // another sentence holds more than twice as many of its words, is not the support.
        let held = set(quote).intersection(&added).count();
        let third = added.len().div_ceil(3).max(1);
        (added, third.max(2 * held + 1))
    };
    let mut best: Option<(usize, usize, String)> = None;
    for (i, source) in sources.iter().enumerate() {
        for sentence in quotable_spans(&source.text) {
            let shared = set(&sentence).intersection(&wanted).count();
            if shared >= needed && best.as_ref().is_none_or(|(n, _, _)| shared > *n) {
                best = Some((shared, i, sentence));
            }
        }
    }
    best.map(|(_, i, sentence)| (i, sentence))
}

/// The citations of a finished answer as passages: each one's source, the quote found in it (a
/// quote that is word for word in another retrieved passage cites that one; a right answer with
/// an unrelated quote cites the sentence that says it) and where it stands in the passage; each
/// (passage, quote) once. `terms` is the index's blind-term analyser.
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
        // Two quotes moved to the same supporting sentence are one citation.
        .try_fold(Vec::new(), |mut kept: Vec<Citation>, citation: Result<Citation>| {
            let citation = citation?;
            if !kept.iter().any(|k| k.chunk_id == citation.chunk_id && k.quote == citation.quote) {
                kept.push(citation);
            }
            Ok(kept)
        })
}

/// The passages a citation may quote from `text`: its sentences with whitespace collapsed, a
/// sentence longer than `MAX_QUOTE_CHARS` cut at word boundaries, each once, each with at
/// least two words that hold letters.
pub fn quotable_spans(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut spans: Vec<String> = Vec::new();
    let mut current = String::new();
    // A quote is a span of words, not a page number, a lone figure or a one-word heading: at
    // least two words with letters.
    let flush = |current: &mut String, spans: &mut Vec<String>| {
        let worded = current.split(' ').filter(|w| w.chars().any(char::is_alphabetic)).count();
        // A control character (a PDF's stray \x01) could be written only as `\u0001`, which the
        // schema's strings do not allow (`ANSWER_ESCAPES`): such a sentence is not offered.
        if worded >= 2 && !current.chars().any(char::is_control) && !spans.contains(current) {
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

/// What the model writes (`answer_schema`): an answer with citations, or a decline.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum RawReply {
    Answer(RawAnswer),
    Declined { not_in_sources: String },
}

/// The citations among `citations` that support `answer` to `question`: those whose quote
/// shares a term (the index's analyser: stems, no stop words) with what the answer adds to the
/// question; for an answer that adds nothing (a "yes"), those whose quote holds at least half
/// of the question's terms. None when the question names something no document holds
/// (`unmentioned`) and the answer is a bare yes or no, or says something of that thing: nothing
/// in the documents can support either. Empty means the answer is withdrawn and declined (an
/// answer from the model's own memory, or a quote that bears on nothing). Costs a few analyses
/// of short texts: microseconds.
pub fn supporting(
    question: &str,
    answer: &str,
    unmentioned: &[String],
    citations: Vec<Citation>,
    terms: impl Fn(&str) -> String,
) -> Vec<Citation> {
    let set = |text: &str| term_set(text, &terms);
    let asked = set(question);
    let added = added_terms(question, answer, &terms);
    if about_the_unmentioned(question, answer, unmentioned, &terms) {
        return Vec::new();
    }
    citations
        .into_iter()
        .filter(|c| {
            let quoted = set(&c.quote);
            if added.is_empty() {
                holds_half(&asked, &quoted)
            } else {
                quoted.intersection(&added).next().is_some()
            }
        })
        .collect()
}

/// The lowest `answer_confidence` an answer is given with: below it the model was unsure of
/// some of its words, and the answer is withdrawn. Chosen on the development half of the
/// manuals set (BENCHMARKS.md, "How sure the model was").
pub const LEAST_CONFIDENCE: f32 = -1.0;

/// The citations `answer` is given with, or None when it is withdrawn. With the model's
/// `confidence` (Quire's decoder) two things decide: the model was sure of the answer's words,
/// and the answer is read from the passages shown (`passages`), not only from the quote it
/// chose: at least half of what it adds to the question occurs in them. (Term overlap with the
/// quote alone withdrew right answers beside an unrelated quote and kept invented ones that
/// repeat the question's words; confidence alone keeps what the model knows by heart, "Paris".)
/// The citations are those `supporting` finds, or all of `cited` when it finds none. Without
/// confidence (mistral.rs) `supporting` decides. Either way an answer about something no
/// document names (`unmentioned`) is withdrawn, and a "yes" its own quotes say "not" to.
pub fn supported(
    question: &str,
    answer: &str,
    unmentioned: &[String],
    confidence: Option<f32>,
    passages: &[&str],
    cited: Vec<Citation>,
    terms: impl Fn(&str) -> String,
) -> Option<Vec<Citation>> {
    let backing = supporting(question, answer, unmentioned, cited.clone(), &terms);
    let read_from_passages = || {
        let added = added_terms(question, answer, &terms);
        let shown: HashSet<String> = passages.iter().flat_map(|p| term_set(p, &terms)).collect();
        2 * added.iter().filter(|t| shown.contains(*t)).count() >= added.len()
    };
    let kept = match confidence {
        None => (!backing.is_empty()).then_some(backing),
        Some(sure) if sure < LEAST_CONFIDENCE || about_the_unmentioned(question, answer, unmentioned, &terms) => None,
        Some(_) if !read_from_passages() => None,
        Some(_) if backing.is_empty() => Some(cited),
        Some(_) => Some(backing),
    };
    kept.filter(|citations| !contradicted_yes(question, answer, citations))
}

/// What a "yes" becomes when every quote the model gave for it says "not" to a question put
/// without one (`contradicted_yes`): the answer its own evidence gives. Shown with those quotes,
/// the first under it.
pub const REVERSED_YES: &str = "No.";

/// `REVERSED_YES` when `answer` is a "yes" its quotes (`cited`) contradict, else None. "Does
/// going back from unstable to stable work? Yes", quoting "it is not supported", is answered
/// "No." on that quote: on the manuals sets every such "yes" was a wrong answer to a question
/// whose right answer was "no" (BENCHMARKS.md, "A second test half"), where withdrawing it told
/// the person only that the documents do not say.
pub fn reversed_yes(question: &str, answer: &str, cited: &[Citation]) -> Option<&'static str> {
    contradicted_yes(question, answer, cited).then_some(REVERSED_YES)
}

/// Whether `answer` says yes to a question put without a negation while every quote it rests on
/// says "not": "Does t.test() assume equal variances? Yes", quoting "By default the R function
/// does not assume equality of variances", is contradicted by its own evidence.
fn contradicted_yes(question: &str, answer: &str, citations: &[Citation]) -> bool {
    let says_yes =
        answer.trim_start().split(|c: char| !c.is_alphanumeric()).next().is_some_and(|w| w.eq_ignore_ascii_case("yes"));
    says_yes && !negates(question) && !citations.is_empty() && citations.iter().all(|c| negates(&c.quote))
}

/// Whether `text` holds a word that negates what it says.
fn negates(text: &str) -> bool {
    const NEGATIONS: [&str; 7] = ["not", "never", "cannot", "neither", "nor", "no", "without"];
    let text = text.to_lowercase().replace('’', "'");
    text.contains("n't ") || text.split(|c: char| !c.is_alphanumeric()).any(|w| NEGATIONS.contains(&w))
}

/// Whether the question names something no document holds (`unmentioned`) and the answer is a
/// bare yes or no, or says something of that thing: nothing in the documents can support either.
fn about_the_unmentioned(
    question: &str,
    answer: &str,
    unmentioned: &[String],
    terms: &impl Fn(&str) -> String,
) -> bool {
    let unheld: HashSet<String> = unmentioned.iter().flat_map(|w| term_set(w, terms)).collect();
    !unheld.is_empty()
        && (added_terms(question, answer, terms).is_empty()
            || term_set(answer, terms).intersection(&unheld).next().is_some())
}

/// What `answer` adds to `question`, as search terms (`terms`: the index's analyser, which
/// blinds terms in an encrypted collection): its terms the question does not hold, less the
/// words that say whether rather than what ("yes", "no"), which no passage need hold.
fn added_terms(question: &str, answer: &str, terms: &impl Fn(&str) -> String) -> HashSet<String> {
    let aside: HashSet<String> = term_set(question, terms).into_iter().chain(term_set(YES_OR_NO, terms)).collect();
    term_set(answer, terms).into_iter().filter(|t| !aside.contains(t)).collect()
}

/// The words that say whether rather than what: an answer of only these is a bare yes or no.
const YES_OR_NO: &str = "yes no true false";

/// Whether `quoted` holds at least half of the question's terms `asked` (at least one): what
/// a quote must hold to support a bare yes or no.
fn holds_half(asked: &HashSet<String>, quoted: &HashSet<String>) -> bool {
    2 * asked.intersection(quoted).count() >= asked.len().max(1)
}

/// `text`'s search terms (`terms`: the index's analyser), each once.
fn term_set(text: &str, terms: &impl Fn(&str) -> String) -> HashSet<String> {
    terms(text).split_whitespace().map(str::to_owned).collect()
}

/// True when an answer only says that the sources do not hold what was asked ("None of the
/// sources mentions Java."): a decline written where the answer goes, taken as one.
pub fn says_not_in_sources(answer: &str) -> bool {
    const SAYINGS: [&str; 9] = [
        "none of the sources",
        "the sources do not",
        "the sources don't",
        "the sources does not",
        "sources provided do not",
        "provided sources do not",
        "not mentioned in the sources",
        "not in the sources",
        "no information",
    ];
    let answer = answer.to_lowercase().replace('’', "'");
    SAYINGS.iter().any(|s| answer.contains(s))
}

/// What a front end that streamed `streamed` (the answer's text as it came) still has to say of
/// a decline `text` once it is in: a decline streams its first sentence, and the rest (what the
/// documents say nearby) follows once, not the whole again; an answer that streamed and was then
/// withdrawn (`held_back`) is said not to be given, before the decline.
pub fn rest_of_decline(text: &str, held_back: bool, streamed: &str) -> String {
    if held_back {
        return format!("\n\n(Not given: the passages do not bear this out.)\n\n{text}");
    }
    match text.strip_prefix(streamed.trim()) {
        Some(rest) => rest.to_string(),
        None => format!("\n\n{text}"),
    }
}

/// The text of a decline: `DECLINE` and what the passages are about.
pub fn declined_text(about: &str) -> String {
    format!("{DECLINE} {about}")
}

/// What a decline says the documents do say nearby: the sentence of the passages shown that
/// holds the most of the question's terms (at least two, or all of a question of one; the first
/// best by rank), with its document and page. None when no sentence comes that near.
/// `terms` is the index's blind-term analyser.
pub fn nearest_sentence(question: &str, sources: &[Source], terms: impl Fn(&str) -> String) -> Option<String> {
    let asked = term_set(question, &terms);
    let needed = asked.len().clamp(1, 2);
    let mut best: Option<(usize, &Source, String)> = None;
    for source in sources {
        // A sentence a person reads as one: words, not a link list or a badge line.
        for sentence in quotable_spans(&source.text).into_iter().filter(|s| reads_as_prose(s)) {
            let shared = term_set(&sentence, &terms).intersection(&asked).count();
            if shared >= needed && best.as_ref().is_none_or(|(n, _, _)| shared > *n) {
                best = Some((shared, source, sentence));
            }
        }
    }
    let (_, source, sentence) = best?;
    let name = std::path::Path::new(&source.path)
        .file_name()
        .map_or_else(|| source.path.clone(), |n| n.to_string_lossy().into_owned());
    let place = match source.page {
        Some(page) => format!("{name}, page {page}"),
        None => name,
    };
    Some(format!("The nearest they come is {place}: “{sentence}”"))
}

/// Whether `sentence` reads as prose: four or more words of letters alone, and no link markup.
fn reads_as_prose(sentence: &str) -> bool {
    let wordy = sentence
        .split_whitespace()
        .filter(|w| w.trim_matches(|c: char| c.is_ascii_punctuation()).chars().all(char::is_alphabetic) && w.len() > 1)
        .count();
    wordy >= 4 && !sentence.contains("](") && !sentence.contains("://")
}

/// What a decline says the passages are about when no sentence comes near the question: their
/// documents in rank order, each with its pages.
pub fn about_sources(sources: &[Source]) -> String {
    let mut documents: Vec<(String, Vec<u32>)> = Vec::new();
    for s in sources {
        let name = std::path::Path::new(&s.path)
            .file_name()
            .map_or_else(|| s.path.clone(), |n| n.to_string_lossy().into_owned());
        let at = match documents.iter().position(|(n, _)| *n == name) {
            Some(at) => at,
            None => {
                documents.push((name, Vec::new()));
                documents.len() - 1
            }
        };
        if let Some(p) = s.page.filter(|p| !documents[at].1.contains(p)) {
            documents[at].1.push(p);
        }
    }
    let named: Vec<String> = documents
        .into_iter()
        .map(|(name, mut pages)| {
            pages.sort_unstable();
            let pages: Vec<String> = pages.iter().map(u32::to_string).collect();
            match pages.len() {
                0 => name,
                1 => format!("{name} (page {})", pages[0]),
                _ => format!("{name} (pages {})", pages.join(", ")),
            }
        })
        .collect();
    let listed = match named.as_slice() {
        [] => return "No passage was found.".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    };
    format!("The closest passages are from {listed}.")
}

/// Pulls the value of the top-level `"answer"` string out of JSON that arrives piece by piece,
/// decoding escapes, so the answer can be shown while the model is still writing it, wherever
/// the key comes in the object (after the citations' quotes, which may say "answer" themselves);
/// a decline (`"not_in_sources"`) streams as `DECLINE` alone.
#[derive(Debug, Default)]
pub struct AnswerTextStream {
    state: StreamState,
    /// Where the JSON outside the answer string stands.
    json: JsonPlace,
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

/// Enough of a JSON reader to tell the top-level object's keys from everything else.
#[derive(Debug, Default)]
struct JsonPlace {
    /// Objects and arrays open.
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The string being read is a key of the top-level object.
    reading_key: bool,
    /// A key of the top-level object may come next (after `{` or `,` at depth 1).
    key_next: bool,
    /// The text of the top-level key being read, or of the last one read.
    key: String,
    /// The last top-level key was read and its `:` seen: its value comes next.
    value_next: bool,
}

/// What one character of the JSON outside the answer string did.
enum JsonStep {
    Nothing,
    /// The string value of this top-level key opens.
    ValueOpens(String),
}

impl JsonPlace {
    fn step(&mut self, c: char) -> JsonStep {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
                if self.reading_key {
                    self.key.push(c);
                }
            } else if c == '\\' {
                self.escaped = true;
            } else if c == '"' {
                self.in_string = false;
            } else if self.reading_key {
                self.key.push(c);
            }
            return JsonStep::Nothing;
        }
        match c {
            '"' if self.depth == 1 && self.value_next => {
                self.value_next = false;
                self.in_string = true;
                self.reading_key = false;
                return JsonStep::ValueOpens(std::mem::take(&mut self.key));
            }
            '"' => {
                self.in_string = true;
                self.reading_key = self.depth == 1 && self.key_next;
                if self.reading_key {
                    self.key.clear();
                    self.key_next = false;
                }
            }
            ':' if self.depth == 1 => self.value_next = true,
            '{' | '[' => {
                self.depth += 1;
                self.key_next = self.depth == 1 && c == '{';
                self.value_next = false;
            }
            '}' | ']' => {
                self.depth = self.depth.saturating_sub(1);
                self.value_next = false;
            }
            ',' if self.depth == 1 => {
                self.key_next = true;
                self.value_next = false;
            }
            c if c.is_whitespace() => {}
            _ => self.value_next = false,
        }
        JsonStep::Nothing
    }
}

/// How sure the model was of its answer: the mean natural log of the probabilities of the
/// three tokens of the answer's words (the "answer" string of `raw`, not its quotes) it was
/// least sure of. An answer read from the passages is copied with near certainty; one the
/// model supplies itself has a few tokens it hesitated over (BENCHMARKS.md, "How sure the
/// model was"). None where the runner gives no probabilities (mistral.rs) or there is no
/// answer string.
pub fn answer_confidence(raw: &str, tokens: &[TokenProbability]) -> Option<f32> {
    let (start, end) = answer_span(raw)?;
    let mut before = 0;
    let mut logs: Vec<f32> = Vec::new();
    for token in tokens {
        if token.end > start && before < end {
            logs.push(token.probability.max(1e-9).ln());
        }
        before = token.end;
    }
    if logs.is_empty() {
        return None;
    }
    logs.sort_by(f32::total_cmp);
    let least = &logs[..logs.len().min(3)];
    Some(least.iter().sum::<f32>() / least.len() as f32)
}

/// The byte range of the top-level "answer" string's content in `raw`.
fn answer_span(raw: &str) -> Option<(usize, usize)> {
    let mut place = JsonPlace::default();
    let mut chars = raw.char_indices();
    for (at, c) in chars.by_ref() {
        if let JsonStep::ValueOpens(key) = place.step(c) {
            if key == "answer" {
                let start = at + c.len_utf8();
                let mut escaped = false;
                for (end, c) in raw[start..].char_indices() {
                    match c {
                        _ if escaped => escaped = false,
                        '\\' => escaped = true,
                        '"' => return Some((start, start + end)),
                        _ => {}
                    }
                }
                return None;
            }
        }
    }
    None
}

impl AnswerTextStream {
    /// Feeds raw JSON text; returns the answer text it completes (possibly empty).
    pub fn push(&mut self, raw: &str) -> String {
        let mut out = String::new();
        for c in raw.chars() {
            match self.state {
                StreamState::Done => break,
                StreamState::SeekingKey => match self.json.step(c) {
                    JsonStep::ValueOpens(key) if key == "answer" => self.state = StreamState::InAnswer,
                    JsonStep::ValueOpens(key) if key == "not_in_sources" => {
                        // A decline streams its sentence; what the documents say nearby is
                        // the engine's to add (`nearest_sentence`), once, when it is done.
                        out.push_str(DECLINE);
                        self.state = StreamState::Done;
                    }
                    _ => {}
                },
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
    fn a_decline_streams_its_sentence_and_the_rest_follows_once() {
        let raw = r#"{"not_in_sources": "FASTA \"options\""}"#;
        for piece in 1..8 {
            assert_eq!(stream_in_pieces(raw, piece), DECLINE, "piece size {piece}");
        }
        // What the decline says more starts after what streamed.
        assert!(declined_text("The nearest they come is a.pdf.").starts_with(DECLINE));
    }

    /// A decline is said once: the sentence that streamed, then only the rest.
    #[test]
    fn a_streamed_decline_is_not_said_twice() {
        let text = "Your documents don't say. The nearest they come is a.pdf, page 3: “It is red.”";
        let rest = rest_of_decline(text, false, DECLINE);
        assert_eq!(rest, " The nearest they come is a.pdf, page 3: “It is red.”");
        assert_eq!(format!("{DECLINE}{rest}"), text);
        // An answer that streamed and was withdrawn: said so, then the decline whole.
        let rest = rest_of_decline(text, true, "It is blue.");
        assert!(rest.contains("Not given") && rest.ends_with(text), "{rest}");
    }

    #[test]
    fn the_answer_streams_when_it_comes_after_quotes_that_name_it() {
        let raw = r#"{"citations": [{"quote": "The \"answer\": 42 is given.", "chunk": 1}], "answer": "It is 42."}"#;
        for piece in 1..8 {
            assert_eq!(stream_in_pieces(raw, piece), "It is 42.", "piece size {piece}");
        }
        // A nested object's "answer" key is not the reply's.
        let nested = r#"{"citations": [{"answer": "no", "chunk": 1}], "answer": "yes"}"#;
        assert_eq!(stream_in_pieces(nested, 3), "yes");
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
        let schema = answer_schema(&quotes, true);
        let answer = &schema["anyOf"][0];
        let branches = answer["properties"]["citations"]["items"]["anyOf"].as_array().unwrap();
        // The second source has nothing quotable: it cannot be cited.
        assert_eq!(branches.len(), 2);
        assert_eq!(branches[0]["properties"]["chunk"]["const"], 1);
        assert_eq!(branches[0]["properties"]["quote"]["enum"], json!(["Tides follow the Moon.", "Bread rises."]));
        assert_eq!(branches[1]["properties"]["chunk"]["const"], 3);
        // The quote comes before the number.
        let keys: Vec<&String> = branches[1]["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["quote", "chunk"]);
        // The other way out: a decline, with what the sources are about and no citation.
        let decline = &schema["anyOf"][1];
        assert_eq!(decline["required"], json!(["not_in_sources"]));
        assert_eq!(decline["properties"].as_object().unwrap().len(), 1);
        let reply: RawReply = serde_json::from_str(r#"{"not_in_sources": "FASTA options"}"#).unwrap();
        assert_eq!(reply, RawReply::Declined { not_in_sources: "FASTA options".into() });
        let reply: RawReply = serde_json::from_str(r#"{"answer": "a", "citations": []}"#).unwrap();
        assert!(matches!(reply, RawReply::Answer(_)));
        // With declines off, only the answer.
        assert_eq!(answer_schema(&quotes, false)["anyOf"].as_array().unwrap().len(), 1);
    }

    /// Whether the grammar engine the decoder uses takes `reply` whole under `schema`, fed a
    /// byte at a time.
    fn allows(schema: &serde_json::Value, reply: &str) -> bool {
        let env = toktrie::ApproximateTokEnv::single_byte_env();
        let factory = llguidance::ParserFactory::new_simple(&env).unwrap();
        let grammar = llguidance::api::TopLevelGrammar::from_json_schema(schema.clone());
        let mut matcher = llguidance::Matcher::new(Ok(factory.create_parser(grammar).unwrap()));
        let bytes: Vec<u32> = reply.bytes().map(u32::from).collect();
        matcher.consume_tokens(&bytes).is_ok() && matcher.is_accepting().unwrap_or(false)
    }

    #[test]
    fn the_grammar_holds_the_answer_to_plain_text_and_the_quotes_to_sentences() {
        let quotes = vec![vec!["The \\W escape shows the basename of $PWD.".to_string()]];
        let schema = answer_schema(&quotes, true);
        let cite = r#""citations": [{"quote": "The \\W escape shows the basename of $PWD.", "chunk": 1}]"#;
        let reply = |answer: &str| format!(r#"{{"answer": "{answer}", {cite}}}"#);
        assert!(allows(&schema, &reply(r"The basename of $PWD")));
        assert!(allows(&schema, &reply(r"\\W shows the basename")), "a backslash, escaped");
        assert!(allows(&schema, r#"{"not_in_sources": "Bash prompts"}"#));
        // An answer may not end on a backslash, hold a double quote, or escape a control
        // character (the model closed its string after `\\`, wrote `\"` for `\$`, and
        // repeated `\u001b[01;31m`); a quote not among the sentences is no quote.
        assert!(!allows(&schema, &reply(r"The \\")));
        assert!(!allows(&schema, &reply(r#"The dollar sign (\")"#)));
        assert!(!allows(&schema, &reply(r"shown by \u001b[01;31m")));
        assert!(!allows(&schema, &reply(r"shown by \t")));
        // No two backslashes in a row: after an escape's backslash the way on is the one that
        // completes it, then the letter (`\\eqref`), not another (`\\\\\\eqref`, without end).
        assert!(allows(&schema, &reply(r"\\eqref adds the parentheses")));
        assert!(!allows(&schema, &reply(r"\\\\eqref adds the parentheses")));
        assert!(!allows(&schema, &reply(r"you can use the \\\\\\\\\\\\")));
        let invented = r#"{"answer": "Yes", "citations": [{"quote": "It works on Windows.", "chunk": 1}]}"#;
        assert!(!allows(&schema, invented));
    }

    fn cited(quote: &str) -> Citation {
        Citation {
            number: 1,
            chunk_id: "c".into(),
            path: "/d/fasta_guide.pdf".into(),
            page: Some(3),
            quote: quote.into(),
            quote_range: None,
            passage: String::new(),
        }
    }

    #[test]
    fn an_answer_no_cited_quote_supports_is_withdrawn() {
        let support = |q: &str, a: &str, quotes: &[&str]| -> Vec<String> {
            let citations = quotes.iter().map(|t| cited(t)).collect();
            supporting(q, a, &[], citations, words).into_iter().map(|c| c.quote).collect()
        };
        // An answer from the model's memory: no quote holds it.
        assert!(support("What is the capital of France?", "Paris", &["The remaining data is zero."]).is_empty());
        // A quote holding what the answer adds stays; one that does not is dropped.
        let q = "Which program runs a rigorous Smith-Waterman search?";
        let kept = support(q, "ssearch36", &["Searches are run by ssearch36.", "Other options follow."]);
        assert_eq!(kept, ["Searches are run by ssearch36."]);
        // A yes or no adds nothing: the quote must hold half the question's terms.
        let q = "Does notify work on Windows?";
        assert_eq!(support(q, "Yes.", &["notify watches on Windows too."]).len(), 1);
        assert!(support(q, "Yes, it works.", &["The FASTA programs are fast."]).is_empty());
        // A question about something no document names: neither a bare "no" nor an answer that
        // speaks of that thing rests on the documents; an answer about something else may.
        let q = "Does the library have a Java interface?";
        let quoted = || vec![cited("The library has a C interface and a Python interface.")];
        let java = ["Java".to_string()];
        assert!(supporting(q, "No.", &java, quoted(), words).is_empty());
        assert!(supporting(q, "The Java interface wraps the C one.", &java, quoted(), words).is_empty());
        assert_eq!(supporting(q, "It has a C and a Python interface.", &java, quoted(), words).len(), 1);
        assert_eq!(supporting(q, "No.", &[], quoted(), words).len(), 1, "without the note, half the terms");
        // In an encrypted collection the analyser blinds terms: "yes" is still no claim.
        let blinded = |t: &str| words(t).split(' ').map(|w| format!("#{w}")).collect::<Vec<_>>().join(" ");
        let says_yes = || vec![cited("Yes, it has a C interface.")];
        assert!(supporting(q, "Yes.", &java, says_yes(), blinded).is_empty());
    }

    /// `supported` over passages holding the tests' quotes and the is.nan sentence.
    fn supported_in(
        q: &str,
        answer: &str,
        unmentioned: &[String],
        confidence: Option<f32>,
        cited: Vec<Citation>,
        terms: impl Fn(&str) -> String,
    ) -> Option<Vec<Citation>> {
        let passage = "Missing values are marked NA. The function is.nan tests for NaN. \
            By default the R function does not assume equality of variances in the two samples.";
        supported(q, answer, unmentioned, confidence, &[passage], cited, terms)
    }

    /// An answer the model was sure of but that the passages shown do not hold (what it knows by
    /// heart) is withdrawn; one they hold is given.
    #[test]
    fn an_answer_the_passages_shown_do_not_hold_is_withdrawn_however_sure() {
        let passages = ["The FASTA programs compare sequences. Results are printed as tables."];
        let cite = || vec![cited("The FASTA programs compare sequences.")];
        let sure = Some(-0.05);
        let q = "What is the capital of France?";
        assert_eq!(supported(q, "Paris", &[], sure, &passages, cite(), words), None);
        let q = "What do the FASTA programs compare?";
        assert!(supported(q, "sequences", &[], sure, &passages, cite(), words).is_some());
        // Half of what it adds is enough: a sentence around the fact.
        assert!(supported(q, "They compare sequences as tables.", &[], sure, &passages, cite(), words).is_some());
        assert_eq!(supported(q, "They compare proteins quickly.", &[], sure, &passages, cite(), words), None);
    }

    /// With the model's confidence, an unsure answer is withdrawn whatever its quote holds, and a
    /// sure one is kept with its citations even where its quote shares no word with it; without
    /// it, the quotes decide. An answer about what no document names goes either way.
    #[test]
    fn how_sure_the_model_was_decides_whether_an_answer_is_given() {
        let q = "Which function tests for NaN values in R?";
        let unrelated = || vec![cited("Missing values are marked NA.")];
        let holding = || vec![cited("The function is.nan tests for NaN."), cited("Missing values are marked NA.")];
        let sure = Some(LEAST_CONFIDENCE / 4.0);
        let unsure = Some(LEAST_CONFIDENCE * 2.0);
        let quotes = |kept: Option<Vec<Citation>>| kept.map(|k| k.into_iter().map(|c| c.quote).collect::<Vec<_>>());
        assert_eq!(
            quotes(supported_in(q, "is.nan()", &[], sure, unrelated(), words)),
            Some(vec!["Missing values are marked NA.".into()])
        );
        assert_eq!(
            quotes(supported_in(q, "is.nan()", &[], sure, holding(), words)),
            Some(vec!["The function is.nan tests for NaN.".into()])
        );
        assert_eq!(supported_in(q, "is.nan()", &[], unsure, holding(), words), None);
        assert_eq!(supported_in(q, "is.nan()", &[], None, unrelated(), words), None);
        assert!(supported_in(q, "is.nan()", &[], None, holding(), words).is_some());
        let q = "Does R have a Java interface?";
        assert_eq!(supported_in(q, "No.", &["Java".to_string()], sure, holding(), words), None);
        // A "yes" its own quote says "not" to is withdrawn, however sure; a "no" to it is given.
        let q = "Does R's t.test() assume by default that the two samples have equal variances?";
        let negating =
            || vec![cited("By default the R function does not assume equality of variances in the two samples.")];
        assert_eq!(supported_in(q, "Yes", &[], sure, negating(), words), None);
        assert!(supported_in(q, "No, it does not.", &[], sure, negating(), words).is_some());
        assert!(supported_in(
            q,
            "Yes",
            &[],
            sure,
            vec![cited("The t.test function assumes equal variances by default.")],
            words
        )
        .is_some());
        // A question that itself says "not" is answered yes by a "not" quote.
        let q = "Is it true that t.test() does not assume equal variances?";
        assert!(supported_in(q, "Yes", &[], sure, negating(), words).is_some());
    }

    /// A "yes" every quote of which says "not" becomes the "no" its evidence gives; a "yes" with
    /// one quote that does not negate, a "no", and a "yes" to a question that itself negates
    /// stay as they are.
    #[test]
    fn a_yes_its_own_quotes_say_not_to_becomes_no() {
        let q = "Does R's t.test() assume by default that the two samples have equal variances?";
        let negating = cited("By default the R function does not assume equality of variances in the two samples.");
        let affirming = cited("The t.test function assumes equal variances by default.");
        assert_eq!(reversed_yes(q, "Yes, it does.", std::slice::from_ref(&negating)), Some(REVERSED_YES));
        assert_eq!(reversed_yes(q, "yes", &[negating.clone(), negating.clone()]), Some(REVERSED_YES));
        assert_eq!(reversed_yes(q, "Yes", &[negating.clone(), affirming.clone()]), None);
        assert_eq!(reversed_yes(q, "Yes", std::slice::from_ref(&affirming)), None);
        assert_eq!(reversed_yes(q, "No, it does not.", std::slice::from_ref(&negating)), None);
        assert_eq!(reversed_yes(q, "Yes", &[]), None, "no evidence, nothing to reverse on");
        let q = "Is it true that t.test() does not assume equal variances?";
        assert_eq!(reversed_yes(q, "Yes", std::slice::from_ref(&negating)), None);
    }

    #[test]
    fn an_answer_that_says_the_sources_do_not_say_is_a_decline() {
        assert!(says_not_in_sources("None of the sources mentions: moons."));
        assert!(says_not_in_sources("The sources don’t mention CUDA."));
        assert!(says_not_in_sources("The provided sources do not answer this."));
        assert!(!says_not_in_sources("ssearch36 runs a Smith-Waterman search."));
        assert!(!says_not_in_sources("No"));
    }

    fn placed(path: &str, page: Option<u32>) -> Source {
        Source {
            number: 1,
            chunk_id: "c".into(),
            path: path.into(),
            page,
            start: 0,
            end: 0,
            text: String::new(),
            score: 0.0,
        }
    }

    #[test]
    fn a_decline_names_the_documents_read_in_rank_order() {
        let sources = [
            placed("/d/fasta_guide.pdf", Some(12)),
            placed("/d/4ti2_manual.pdf", Some(56)),
            placed("/d/fasta_guide.pdf", Some(3)),
            placed("/d/md/notify-README.md", None),
        ];
        assert_eq!(
            about_sources(&sources),
            "The closest passages are from fasta_guide.pdf (pages 3, 12), 4ti2_manual.pdf (page 56) and notify-README.md."
        );
        assert_eq!(about_sources(&sources[1..2]), "The closest passages are from 4ti2_manual.pdf (page 56).");
    }

    /// A decline says what the documents do say nearby: the sentence sharing the most of the
    /// question's terms, with its document and page; none when no sentence shares two.
    #[test]
    fn a_decline_quotes_the_nearest_sentence_the_documents_hold() {
        let with_text = |path: &str, page, text: &str| Source { text: text.into(), ..placed(path, page) };
        let sources = [
            with_text("/d/gnuplot.pdf", Some(40), "Plots are drawn by the plot command. Colours come from the palette."),
            with_text(
                "/d/gnuplot.pdf",
                Some(133),
                "The isosamples command sets the number of isolines. By default a parametric surface is drawn with 10 isolines.",
            ),
        ];
        let question = "What is the default number of isolines for a parametric surface?";
        assert_eq!(
            nearest_sentence(question, &sources, words).as_deref(),
            Some("The nearest they come is gnuplot.pdf, page 133: “By default a parametric surface is drawn with 10 isolines.”")
        );
        assert_eq!(nearest_sentence("Which font does the terminal use?", &sources, words), None);
        // A link line is not what a person reads as what the documents say.
        let links = [with_text(
            "/d/README.md",
            None,
            "[isolines docs](https://example.org/isolines) default parametric surface",
        )];
        assert_eq!(nearest_sentence(question, &links, words), None);
    }

    /// The confidence is read over the answer's own tokens: its quotes and keys, however unsure,
    /// do not count; the three least sure tokens of the answer do.
    #[test]
    fn an_answers_confidence_is_its_three_least_sure_tokens() {
        let raw = r#"{"answer": "It is 10.", "citations": [{"quote": "The answer is 10.", "chunk": 1}]}"#;
        let start = raw.find("It").unwrap();
        let end = raw.find(".\"").unwrap() + 1;
        // One token per character, sure of all but three of the answer's and of the quote's.
        let tokens: Vec<TokenProbability> = (1..=raw.len())
            .map(|end_at| {
                let probability = match end_at - 1 {
                    i if i == start + 3 => 0.5,
                    i if i == start + 4 => 0.25,
                    i if i == end - 1 => 0.125,
                    i if i > end + 20 => 0.01,
                    _ => 1.0,
                };
                TokenProbability { end: end_at, probability }
            })
            .collect();
        let expected = (0.5f32.ln() + 0.25f32.ln() + 0.125f32.ln()) / 3.0;
        let got = answer_confidence(raw, &tokens).unwrap();
        assert!((got - expected).abs() < 1e-5, "{got} vs {expected}");
        assert_eq!(answer_confidence(r#"{"not_in_sources": "x"}"#, &tokens), None);
        assert_eq!(answer_confidence(raw, &[]), None);
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
        // A quote sharing one word of a long answer by chance gives way to the sentence that
        // holds more than twice as many; one sharing as many as any other stays.
        let sources = [
            source("The positional parameters are replaced when a shell function is executed."),
            source("! ($!) Expands to the process id of the job most recently placed into the background."),
        ];
        let q = "What does the special parameter $! expand to?";
        let a = "It expands to the process id of the job most recently executed in the background.";
        let chance = "The positional parameters are replaced when a shell function is executed.";
        let definition =
            Some((1, "($!) Expands to the process id of the job most recently placed into the background.".into()));
        assert_eq!(better_support(q, a, chance, &sources, words), definition);
        assert_eq!(better_support(q, "the most recent job's process id", chance, &sources, words), definition);
        assert_eq!(better_support(q, "It is executed, then replaced.", chance, &sources, words), None);
        // A quote that holds the answer stays.
        assert_eq!(
            better_support(q, "ssearch36", "Smith-Waterman searches are run by ssearch36.", &sources, words),
            None
        );
        // An answer that only repeats the question, or that no sentence supports: unchanged.
        assert_eq!(better_support(q, "Smith-Waterman search", "Other options follow.", &sources, words), None);
        assert_eq!(better_support(q, "blastp", "Other options follow.", &sources, words), None);
        // A bare "no" rests on the sentence that holds half the question's terms or more.
        let sources = [
            source("Every Makefile should define the variable INSTALL. It is the basic command."),
            source("You should not set the value of DESTDIR in your Makefile at all."),
        ];
        let q = "Should a Makefile set the value of DESTDIR?";
        let copied = "It is the basic command.";
        let moved = Some((1, "You should not set the value of DESTDIR in your Makefile at all.".to_string()));
        assert_eq!(better_support(q, "No", copied, &sources, words), moved);
        assert_eq!(better_support(q, "No", &moved.as_ref().unwrap().1, &sources, words), None);
        // An answer that only repeats the question's words is no yes or no: it is not moved.
        let q = "Which Python package should set the value of DESTDIR?";
        assert_eq!(better_support(q, "DESTDIR-python", copied, &sources, words), None);
        // No sentence holds half of them: nothing to move to (the answer is withdrawn).
        assert_eq!(
            better_support("Does DESTDIR work on Windows with Cygwin?", "Yes", copied, &sources[..1], words),
            None
        );
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
        // A page number, a lone figure or a one-word heading is no quote.
        assert_eq!(quotable_spans("It ends here. 56"), ["It ends here."]);
        assert!(quotable_spans("Installation. 3.14. Chapter 2.").is_empty());
        // A sentence with a control character cannot be written in the schema's strings.
        assert_eq!(quotable_spans("A stray \u{1} byte. A clean one."), ["A clean one."]);
        // Every span is found in the passage by the citation matcher.
        for s in &spans {
            assert!(crate::find_quote(&text, s).is_some(), "{s}");
        }
    }
}
