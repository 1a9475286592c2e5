//! What the model is told: its instructions, the label of each source, and the passages cut
//! to what a prompt can hold.

use quire_index::SearchHit;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::testing::source;

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
}
