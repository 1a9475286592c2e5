//! What a decline says: the sentence every front end starts with, and what the documents
//! do say nearest the question.

use super::checks::term_set;
use super::format::quotable_spans;
use super::language::Words;
use crate::Source;

/// True when an answer only says that the sources do not hold what was asked ("None of the
/// sources mentions Java.", "Die Quellen enthalten keine Angaben"): a decline written where the
/// answer goes, taken as one.
pub fn says_not_in_sources(answer: &str) -> bool {
    const SAYINGS: [&str; 25] = [
        "none of the sources",
        "the sources do not",
        "the sources don't",
        "the sources does not",
        "sources provided do not",
        "provided sources do not",
        "not mentioned in the sources",
        "not in the sources",
        "no information",
        "keine der quellen",
        "die quellen enthalten keine",
        "die quellen sagen nicht",
        "keine informationen",
        "aucune des sources",
        "les sources ne",
        "aucune information",
        "ninguna de las fuentes",
        "las fuentes no",
        "no hay información",
        "ソースには",
        "記載されていません",
        "情報はありません",
        "来源中没有",
        "没有提到",
        "没有相关信息",
    ];
    let answer = answer.to_lowercase().replace('’', "'");
    SAYINGS.iter().any(|s| answer.contains(s))
}

/// What a front end that streamed `streamed` (the answer's text as it came) still has to say of
/// a decline `text` to `question` once it is in: a decline streams its first sentence, and the
/// rest (what the documents say nearby) follows once, not the whole again; an answer that
/// streamed and was then withdrawn (`held_back`) is said not to be given, before the decline.
pub fn rest_of_decline(question: &str, text: &str, held_back: bool, streamed: &str) -> String {
    if held_back {
        let not_given = Words::for_question(question).not_given;
        return format!("\n\n{not_given}\n\n{text}");
    }
    match text.strip_prefix(streamed.trim()) {
        Some(rest) => rest.to_string(),
        None => format!("\n\n{text}"),
    }
}

/// The text of a decline: its first sentence and what the passages are about.
pub fn declined_text(words: &Words, about: &str) -> String {
    // Japanese and Chinese put no space after a full stop.
    let gap = if words.decline.ends_with('。') { "" } else { " " };
    format!("{}{gap}{about}", words.decline)
}

/// What a decline says the documents do say nearby: the sentence of the passages shown that
/// holds the most of the question's terms (at least two, or all of a question of one; the first
/// best by rank), with its document and page. None when no sentence comes that near.
/// `terms` is the index's blind-term analyser; `words`, what it is said in.
pub fn nearest_sentence(
    question: &str,
    sources: &[Source],
    terms: impl Fn(&str) -> String,
    words: &Words,
) -> Option<String> {
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
    Some(words.nearest(&words.place(&name, source.page), &sentence))
}

/// Whether `sentence` reads as prose: four or more words of letters alone (or eight letters of
/// a script written without spaces, Japanese or Chinese), and no link markup.
fn reads_as_prose(sentence: &str) -> bool {
    if sentence.contains("](") || sentence.contains("://") {
        return false;
    }
    let unspaced = sentence.chars().filter(|c| quire_index::terms::is_cjk(*c)).count();
    if unspaced >= 8 {
        return true;
    }
    let wordy = sentence
        .split_whitespace()
        .filter(|w| w.trim_matches(|c: char| c.is_ascii_punctuation()).chars().all(char::is_alphabetic) && w.len() > 1)
        .count();
    wordy >= 4
}

/// What a decline says the passages are about when no sentence comes near the question: their
/// documents in rank order, each with its pages, in `words`.
pub fn about_sources(sources: &[Source], words: &Words) -> String {
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
    for (_, pages) in &mut documents {
        pages.sort_unstable();
    }
    words.closest(&documents)
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
            about_sources(&sources, Words::english()),
            "The closest passages are from fasta_guide.pdf (pages 3, 12), 4ti2_manual.pdf (page 56) and notify-README.md."
        );
        assert_eq!(
            about_sources(&sources[1..2], Words::english()),
            "The closest passages are from 4ti2_manual.pdf (page 56)."
        );
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
            nearest_sentence(question, &sources, words, Words::english()).as_deref(),
            Some("The nearest they come is gnuplot.pdf, page 133: “By default a parametric surface is drawn with 10 isolines.”")
        );
        assert_eq!(nearest_sentence("Which font does the terminal use?", &sources, words, Words::english()), None);
        // A link line is not what a person reads as what the documents say.
        let links = [with_text(
            "/d/README.md",
            None,
            "[isolines docs](https://example.org/isolines) default parametric surface",
        )];
        assert_eq!(nearest_sentence(question, &links, words, Words::english()), None);
    }

    /// A question in Japanese is declined in Japanese, and the nearest sentence, written without
    /// spaces, is found by its pairs of characters (as the index reads it) and read as prose.
    #[test]
    fn a_decline_is_said_in_the_questions_language() {
        let pairs = |text: &str| words(&quire_index::terms::prepared(text));
        let sources = [Source {
            text: "クォータを設定するには edquota を使います。猶予期間は edquota -t コマンドで設定できます。".into(),
            ..placed("/d/sect.quotas.html", Some(7))
        }];
        let question = "edquota が受け付ける最長の猶予期間はどれくらいですか？";
        let words = crate::answer::language_of(question).unwrap().words();
        assert_eq!(
            nearest_sentence(question, &sources, pairs, words).as_deref(),
            Some("最も近い記述は sect.quotas.html の 7 ページ にあります：「猶予期間は edquota -t コマンドで設定できます。」")
        );
        assert_eq!(declined_text(words, "x"), "お手元の文書には書かれていません。x");
        assert_eq!(declined_text(Words::english(), "x"), "Your documents don't say. x");
        let german = crate::answer::language_of("Welche Farbe hat der Himmel?").unwrap().words();
        assert_eq!(about_sources(&sources, german), "Die nächsten Passagen stammen aus sect.quotas.html (Seite 7).");
    }
}
