//! What the model may write: the JSON schema (and the grammar it becomes) that holds an answer
//! to plain text and its quotes to the sentences shown, and the reply it parses into.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::prompt::{MAX_ABOUT_CHARS, MAX_ANSWER_CHARS, MAX_CITATIONS, MAX_QUOTE_CHARS};

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

/// The passages a citation may quote from `text`: its sentences with whitespace collapsed, a
/// sentence longer than `MAX_QUOTE_CHARS` cut at word boundaries, each once, each with at
/// least two words that hold letters. Japanese and Chinese, written without spaces, end
/// sentences with "。！？；" inside a run of characters and count four of their letters as
/// words enough; a run longer than the limit is cut between characters.
pub fn quotable_spans(text: &str) -> Vec<String> {
    let mut spans: Vec<String> = Vec::new();
    let mut current = String::new();
    // A quote is a span of words, not a page number, a lone figure or a one-word heading: at
    // least two words with letters (or four letters of a script that does not space words).
    let flush = |current: &mut String, spans: &mut Vec<String>| {
        let worded = current.split(' ').filter(|w| w.chars().any(char::is_alphabetic)).count();
        let enough = worded >= 2 || current.chars().filter(|c| quire_index::terms::is_cjk(*c)).count() >= 4;
        // A control character (a PDF's stray \x01) could be written only as `\u0001`, which the
        // schema's strings do not allow (`ANSWER_ESCAPES`): such a sentence is not offered.
        if enough && !current.chars().any(char::is_control) && !spans.contains(current) {
            spans.push(std::mem::take(current));
        }
        current.clear();
    };
    for (piece, glued) in pieces(text) {
        let length = piece.chars().count();
        if !current.is_empty() && current.chars().count() + usize::from(!glued) + length > MAX_QUOTE_CHARS {
            flush(&mut current, &mut spans);
        }
        if !current.is_empty() && !glued {
            current.push(' ');
        }
        // A single word longer than the limit (a URL, a sequence) is cut.
        current.extend(piece.chars().take(MAX_QUOTE_CHARS));
        if piece.ends_with(['.', '!', '?', ';']) || piece.ends_with(UNSPACED_SENTENCE_ENDS) {
            flush(&mut current, &mut spans);
        }
    }
    flush(&mut current, &mut spans);
    spans
}

/// The marks that end a sentence of Japanese or Chinese, inside a run of characters.
const UNSPACED_SENTENCE_ENDS: [char; 4] = ['。', '！', '？', '；'];

/// `text`'s words, each with whether it follows the one before without a space: a word holding
/// letters of a script that does not space words is cut after each of its sentence ends and
/// every `MAX_QUOTE_CHARS` characters, its pieces glued.
fn pieces(text: &str) -> Vec<(&str, bool)> {
    let mut pieces = Vec::new();
    for word in text.split_whitespace() {
        if !word.chars().any(quire_index::terms::is_cjk) {
            pieces.push((word, false));
            continue;
        }
        let mut glued = false;
        let mut start = 0;
        let mut count = 0;
        for (at, c) in word.char_indices() {
            count += 1;
            let end = at + c.len_utf8();
            if UNSPACED_SENTENCE_ENDS.contains(&c) || count == MAX_QUOTE_CHARS {
                pieces.push((&word[start..end], glued));
                glued = true;
                start = end;
                count = 0;
            }
        }
        if start < word.len() {
            pieces.push((&word[start..], glued));
        }
    }
    pieces
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

#[cfg(test)]
mod tests {
    use super::*;

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
        // Japanese and Chinese: sentences end inside a run of characters.
        assert_eq!(
            quotable_spans("クォータは edquota で設定します。猶予期間は edquota -t で決めます。図 3"),
            ["クォータは edquota で設定します。", "猶予期間は edquota -t で決めます。"]
        );
        assert_eq!(
            quotable_spans("每个用户的配额由管理员设置。超过软限制时会收到警告！"),
            ["每个用户的配额由管理员设置。", "超过软限制时会收到警告！"]
        );
        // A run longer than the limit is cut between characters, nothing lost.
        let long = "配".repeat(MAX_QUOTE_CHARS + 10) + "。";
        let cut = quotable_spans(&long);
        assert_eq!(cut.len(), 2);
        assert_eq!(cut.concat(), long);
        // Every span is found in the passage by the citation matcher.
        for s in &spans {
            assert!(crate::find_quote(&text, s).is_some(), "{s}");
        }
    }
}
