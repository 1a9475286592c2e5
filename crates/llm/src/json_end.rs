//! Knows when streamed text has completed one JSON value (object or array), so a constrained
//! generation can end the moment its answer is whole.

/// Feed it the generated text piece by piece; `push` returns true once the top-level object or
/// array that the text opened has closed. Brackets inside strings (escapes included) do not count.
#[derive(Debug, Default)]
pub struct JsonEnd {
    depth: usize,
    opened: bool,
    in_string: bool,
    escaped: bool,
    done: bool,
}

impl JsonEnd {
    pub fn push(&mut self, piece: &str) -> bool {
        for c in piece.chars() {
            if self.done {
                break;
            }
            if self.in_string {
                match (self.escaped, c) {
                    (true, _) => self.escaped = false,
                    (false, '\\') => self.escaped = true,
                    (false, '"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => self.in_string = true,
                '{' | '[' => {
                    self.depth += 1;
                    self.opened = true;
                }
                '}' | ']' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.done = self.opened && self.depth == 0;
                }
                _ => {}
            }
        }
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends_at(text: &str, piece: usize) -> Option<usize> {
        let mut j = JsonEnd::default();
        let chars: Vec<char> = text.chars().collect();
        let mut seen = 0;
        for p in chars.chunks(piece) {
            seen += p.len();
            if j.push(&p.iter().collect::<String>()) {
                return Some(seen);
            }
        }
        None
    }

    #[test]
    fn ends_when_the_top_level_value_closes_and_not_before() {
        let text = r#"{"answer": "a } ] \" { [ \\", "citations": [{"chunk": 1, "quote": "}"}]}"#;
        for piece in 1..6 {
            let at = ends_at(text, piece).expect("the object closes");
            // The piece that holds the last brace ends it.
            assert!(at >= text.chars().count() && at < text.chars().count() + piece, "piece {piece}: ended at {at}");
        }
        assert_eq!(ends_at(r#"{"answer": "unfinished }"#, 1), None);
        assert_eq!(ends_at(r#"{"a": [1, 2]"#, 3), None);
        assert_eq!(ends_at(r#"  [1, {"b": 2}] trailing"#, 1), Some(15));
    }
}
