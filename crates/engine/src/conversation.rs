//! Follow-up questions: what a question asked after others is searched with, and what the model
//! is told of the conversation. "What about its speed?" names nothing to search for; searched
//! together with the question before it, it finds that question's passages again (and the
//! decoder's kept prompt with them).

use serde::{Deserialize, Serialize};
use ts_rs::TS;

/// One earlier question of the conversation and the answer it got.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, TS)]
pub struct Turn {
    pub question: String,
    pub answer: String,
}

/// Earlier turns the model is shown (the latest ones): enough for "it" and "that one", short
/// enough not to lengthen the prompt much.
const TURNS_SHOWN: usize = 2;
/// An earlier answer is shown up to this many characters.
const ANSWER_CHARS: usize = 300;
/// A question of at most this many words is taken to lean on the one before ("And fasta36?").
const SHORT_QUESTION_WORDS: usize = 3;

/// Words by which a question points back at the conversation rather than naming its subject.
const POINTING_WORDS: &[&str] = &[
    "it", "its", "it's", "this", "that", "these", "those", "they", "them", "their", "theirs", "he", "him", "his",
    "she", "her", "there", "then", "same", "also", "too", "former", "latter", "above", "previous", "else", "other",
    "another",
];

/// Whether `question` leans on what was asked before: it points back ("its speed", "the same
/// for DNA"), opens with "and", "what about" or "how about", or is a few words only.
pub fn leans_on_earlier(question: &str) -> bool {
    let lower = question.to_lowercase();
    let words: Vec<&str> =
        lower.split(|c: char| !(c.is_alphanumeric() || c == '\'')).filter(|w| !w.is_empty()).collect();
    let opens = |start: &[&str]| words.len() >= start.len() && words[..start.len()] == *start;
    words.len() <= SHORT_QUESTION_WORDS
        || opens(&["and"])
        || opens(&["what", "about"])
        || opens(&["how", "about"])
        || words.iter().any(|w| POINTING_WORDS.contains(w))
}

/// What to search for `question` asked after `earlier` (oldest first): the question with the
/// last earlier question before it where it leans on it, else the question alone.
pub fn search_text(earlier: &[Turn], question: &str) -> String {
    match earlier.last() {
        Some(last) if leans_on_earlier(question) => format!("{} {}", last.question.trim(), question.trim()),
        _ => question.trim().to_string(),
    }
}

/// The conversation so far as the prompt shows it before the question ("" with none): the
/// latest `TURNS_SHOWN` turns, answers cut to `ANSWER_CHARS`.
pub fn earlier_text(earlier: &[Turn]) -> String {
    if earlier.is_empty() {
        return String::new();
    }
    let mut out = String::from("Earlier in this conversation:\n");
    for turn in &earlier[earlier.len().saturating_sub(TURNS_SHOWN)..] {
        let answer = turn.answer.trim();
        let cut = match answer.char_indices().nth(ANSWER_CHARS) {
            Some((at, _)) => format!("{}…", &answer[..at]),
            None => answer.to_string(),
        };
        out.push_str(&format!("Q: {}\nA: {cut}\n", turn.question.trim()));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(question: &str, answer: &str) -> Turn {
        Turn { question: question.into(), answer: answer.into() }
    }

    #[test]
    fn a_question_that_points_back_is_searched_with_the_one_before() {
        let earlier = [turn("What is keyring-rs?", "A library"), turn("What does ssearch36 do?", "A search")];
        for follow_up in
            ["How much slower is it than fasta36?", "And for DNA?", "What about the scoring matrix?", "Why?"]
        {
            assert!(leans_on_earlier(follow_up), "{follow_up}");
            assert_eq!(search_text(&earlier, follow_up), format!("What does ssearch36 do? {follow_up}"));
        }
        // A question that names its own subject is searched as it is, and so is a first one.
        let standalone = "Which 4ti2 function solves linear systems over the integers?";
        assert!(!leans_on_earlier(standalone));
        assert_eq!(search_text(&earlier, standalone), standalone);
        assert_eq!(search_text(&[], "How much slower is it?"), "How much slower is it?");
        // Words that only contain a pointing word do not count ("item", "there" in "thereby" …).
        assert!(!leans_on_earlier("Which item of the Makefile sets thereby the database size?"));
    }

    #[test]
    fn the_prompt_shows_the_latest_turns_with_long_answers_cut() {
        assert_eq!(earlier_text(&[]), "");
        let long = "word ".repeat(100);
        let text = earlier_text(&[turn("first?", "one"), turn("second?", "two"), turn("third?", &long)]);
        assert!(!text.contains("first?"), "{text}");
        assert!(
            text.starts_with("Earlier in this conversation:\nQ: second?\nA: two\nQ: third?\nA: word word"),
            "{text}"
        );
        assert!(text.ends_with("…\n\n") && text.len() < 400, "{text}");
    }
}
