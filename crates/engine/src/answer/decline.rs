//! What a decline says: the sentence every front end starts with, and what the documents
//! do say nearest the question.

use super::checks::term_set;
use super::format::quotable_spans;
use crate::Source;

/// What a decline says first, in the app, `quire ask` and the local API alike.
pub const DECLINE: &str = "Your documents don't say.";

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::testing::words;

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
}
