//! The answer's text pulled out of the model's JSON as it is written, for the front ends to
//! show while the model is still writing.

use super::language::Words;

/// Pulls the value of the top-level `"answer"` string out of JSON that arrives piece by piece,
/// decoding escapes, so the answer can be shown while the model is still writing it, wherever
/// the key comes in the object (after the citations' quotes, which may say "answer" themselves);
/// a decline (`"not_in_sources"`) streams as its first sentence alone, in the question's words.
#[derive(Debug)]
pub struct AnswerTextStream {
    /// What a decline streams.
    decline: &'static str,
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

/// The byte range of the top-level "answer" string's content in `raw`.
pub(super) fn answer_span(raw: &str) -> Option<(usize, usize)> {
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
    /// A stream whose decline says `words.decline`.
    pub fn new(words: &'static Words) -> Self {
        AnswerTextStream {
            decline: words.decline,
            state: StreamState::default(),
            json: JsonPlace::default(),
            escape: None,
            surrogate: None,
        }
    }

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
                        out.push_str(self.decline);
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
    use crate::answer::decline::{declined_text, rest_of_decline};
    use crate::answer::format::RawAnswer;
    use crate::answer::language::language_of;

    const DECLINE: &str = "Your documents don't say.";

    fn stream_in_pieces(raw: &str, piece: usize) -> String {
        stream_declining_with(raw, piece, Words::english())
    }

    fn stream_declining_with(raw: &str, piece: usize, words: &'static Words) -> String {
        let mut s = AnswerTextStream::new(words);
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
        assert!(declined_text(Words::english(), "The nearest they come is a.pdf.").starts_with(DECLINE));
        // In the question's language.
        let german = language_of("Welchen Port verwendet VNC für den ersten Bildschirm?").unwrap().words();
        assert_eq!(stream_declining_with(raw, 3, german), "Ihre Dokumente sagen dazu nichts.");
    }

    /// A decline is said once: the sentence that streamed, then only the rest.
    #[test]
    fn a_streamed_decline_is_not_said_twice() {
        let text = "Your documents don't say. The nearest they come is a.pdf, page 3: “It is red.”";
        let question = "What colour is it?";
        let rest = rest_of_decline(question, text, false, DECLINE);
        assert_eq!(rest, " The nearest they come is a.pdf, page 3: “It is red.”");
        assert_eq!(format!("{DECLINE}{rest}"), text);
        // An answer that streamed and was withdrawn: said so, then the decline whole.
        let rest = rest_of_decline(question, text, true, "It is blue.");
        assert!(rest.contains("Not given") && rest.ends_with(text), "{rest}");
        let rest = rest_of_decline("Welche Farbe hat es?", text, true, "Es ist blau.");
        assert!(rest.contains("Nicht gegeben") && rest.ends_with(text), "{rest}");
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
}
