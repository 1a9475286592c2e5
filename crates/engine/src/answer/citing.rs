//! From the model's citations to cited passages: the quote found in its source, moved to the
//! sentence that supports the answer where the model's does not.

use anyhow::{Context, Result};

use quire_index::SearchHit;

use super::checks::{added_terms, holds_half, term_set, YES_OR_NO};
use super::format::{quotable_spans, RawAnswer};
use crate::{find_quote, Citation, Source};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::testing::{source, words};

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
}
