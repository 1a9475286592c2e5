//! Answer evaluation: a JSONL set of questions with their gold document and pages, and the
//! scoring of one answer against it. Running the questions is the caller's job.
//!
//! A line: `{"question": …, "answer": …, "document": "fasta_guide.pdf", "pages": [3],
//! "evidence": "words on a gold page"}`. `document` is a path relative to the documents folder;
//! `pages` lists the pages that hold the answer (empty for formats without pages); `evidence`
//! is text found on one of them, so a loader that numbers pages differently is caught before
//! any score is computed.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AnswerCase {
    pub question: String,
    /// The answer a person would accept (short; compared word by word, for information only).
    pub answer: String,
    pub document: String,
    #[serde(default)]
    pub pages: Vec<u32>,
    #[serde(default)]
    pub evidence: Option<String>,
}

pub fn load_answer_set(path: &Path) -> Result<Vec<AnswerCase>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: AnswerCase = serde_json::from_str(line).with_context(|| {
            format!(
                "{} line {}: not a question (expected {{\"question\", \"answer\", \"document\", \"pages\"}})",
                path.display(),
                i + 1
            )
        })?;
        if case.question.trim().is_empty() || case.document.trim().is_empty() {
            bail!("{} line {}: the question and the document must not be empty", path.display(), i + 1);
        }
        cases.push(case);
    }
    if cases.is_empty() {
        bail!("{} holds no questions", path.display());
    }
    Ok(cases)
}

impl AnswerCase {
    /// True when `path` (as stored in the index) is the gold document: its last components
    /// equal `document`'s.
    pub fn is_gold_document(&self, path: &str) -> bool {
        Path::new(path).ends_with(Path::new(&self.document))
    }

    /// True when `path`/`page` is a gold passage: the gold document, on a gold page when the
    /// case names pages.
    pub fn is_gold_page(&self, path: &str, page: Option<u32>) -> bool {
        self.is_gold_document(path) && (self.pages.is_empty() || page.is_some_and(|p| self.pages.contains(&p)))
    }
}

/// One cited passage of an answer, as the pipeline returned it.
#[derive(Debug, Clone, Serialize)]
pub struct CitedPassage {
    pub path: String,
    pub quote: String,
    /// The cited chunk's text (for reading a report).
    pub passage: String,
    pub page: Option<u32>,
    /// The cited chunk is one of the chunks retrieved for the question.
    pub retrieved: bool,
    /// The citation's quote is in the cited chunk word for word (whitespace runs aside).
    pub quote_found: bool,
}

/// What came back for one question.
#[derive(Debug, Clone, Serialize)]
pub struct AnswerOutcome {
    /// `None` when the output did not parse as an answer (the error says why).
    pub answer: Option<String>,
    /// The model's output as it came (JSON).
    pub raw: Option<String>,
    pub error: Option<String>,
    pub citations: Vec<CitedPassage>,
    /// A gold page was among the retrieved passages shown to the model.
    pub gold_retrieved: bool,
    pub time_to_first_token_s: f64,
    pub decode_tokens_per_s: f64,
}

/// The per-question verdicts the report counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AnswerVerdict {
    pub parsed: bool,
    pub citations_retrieved: bool,
    pub cites_gold_document: bool,
    pub cites_gold_page: bool,
    pub quotes_verbatim: bool,
    /// Share of the gold answer's words found in the answer (0..=1).
    pub gold_words: f64,
}

pub fn judge(case: &AnswerCase, outcome: &AnswerOutcome) -> AnswerVerdict {
    let Some(answer) = &outcome.answer else { return AnswerVerdict::default() };
    let cited = &outcome.citations;
    AnswerVerdict {
        parsed: true,
        citations_retrieved: !cited.is_empty() && cited.iter().all(|c| c.retrieved),
        cites_gold_document: cited.iter().any(|c| case.is_gold_document(&c.path)),
        cites_gold_page: cited.iter().any(|c| case.is_gold_page(&c.path, c.page)),
        quotes_verbatim: !cited.is_empty() && cited.iter().all(|c| c.quote_found),
        gold_words: word_overlap(&case.answer, answer),
    }
}

/// Share of `gold`'s words (lower-cased, letters and digits) that appear in `text`.
pub fn word_overlap(gold: &str, text: &str) -> f64 {
    let words = |s: &str| -> Vec<String> {
        s.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| w.to_lowercase()).collect()
    };
    let gold = words(gold);
    if gold.is_empty() {
        return 0.0;
    }
    let have: std::collections::HashSet<String> = words(text).into_iter().collect();
    gold.iter().filter(|w| have.contains(*w)).count() as f64 / gold.len() as f64
}

/// Shares over all questions (0..=1) and mean timings.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AnswerReport {
    pub questions: usize,
    pub parsed: f64,
    pub citations_retrieved: f64,
    pub cites_gold_document: f64,
    pub cites_gold_page: f64,
    pub quotes_verbatim: f64,
    pub gold_retrieved: f64,
    pub mean_gold_words: f64,
    pub mean_time_to_first_token_s: f64,
    pub mean_decode_tokens_per_s: f64,
}

pub fn report(outcomes: &[(AnswerOutcome, AnswerVerdict)]) -> AnswerReport {
    let n = outcomes.len();
    if n == 0 {
        return AnswerReport::default();
    }
    let share = |f: &dyn Fn(&AnswerOutcome, &AnswerVerdict) -> bool| {
        outcomes.iter().filter(|(o, v)| f(o, v)).count() as f64 / n as f64
    };
    let mean = |f: &dyn Fn(&AnswerOutcome, &AnswerVerdict) -> f64| {
        outcomes.iter().map(|(o, v)| f(o, v)).sum::<f64>() / n as f64
    };
    AnswerReport {
        questions: n,
        parsed: share(&|_, v| v.parsed),
        citations_retrieved: share(&|_, v| v.citations_retrieved),
        cites_gold_document: share(&|_, v| v.cites_gold_document),
        cites_gold_page: share(&|_, v| v.cites_gold_page),
        quotes_verbatim: share(&|_, v| v.quotes_verbatim),
        gold_retrieved: share(&|o, _| o.gold_retrieved),
        mean_gold_words: mean(&|_, v| v.gold_words),
        mean_time_to_first_token_s: mean(&|o, _| o.time_to_first_token_s),
        mean_decode_tokens_per_s: mean(&|o, _| o.decode_tokens_per_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(document: &str, pages: &[u32]) -> AnswerCase {
        AnswerCase {
            question: "q".into(),
            answer: "glpk and gmp".into(),
            document: document.into(),
            pages: pages.to_vec(),
            evidence: None,
        }
    }

    fn cited(path: &str, page: Option<u32>, retrieved: bool, quote_found: bool) -> CitedPassage {
        CitedPassage { path: path.into(), quote: "q".into(), passage: String::new(), page, retrieved, quote_found }
    }

    fn outcome(citations: Vec<CitedPassage>) -> AnswerOutcome {
        AnswerOutcome {
            answer: Some("You need GLPK and GMP.".into()),
            raw: None,
            error: None,
            citations,
            gold_retrieved: true,
            time_to_first_token_s: 2.0,
            decode_tokens_per_s: 10.0,
        }
    }

    #[test]
    fn gold_documents_match_whole_trailing_components() {
        let c = case("markdown/notify-README.md", &[]);
        assert!(c.is_gold_document("/data/sample-docs/markdown/notify-README.md"));
        assert!(!c.is_gold_document("/data/sample-docs/markdown/my-notify-README.md"));
        assert!(!c.is_gold_document("/data/sample-docs/notify-README.md"));
        // No pages named: any passage of the document is a gold passage.
        assert!(c.is_gold_page("/x/markdown/notify-README.md", None));
        let p = case("4ti2_manual.pdf", &[44, 45]);
        assert!(p.is_gold_page("/x/4ti2_manual.pdf", Some(45)));
        assert!(!p.is_gold_page("/x/4ti2_manual.pdf", Some(43)));
        assert!(!p.is_gold_page("/x/4ti2_manual.pdf", None));
    }

    #[test]
    fn each_verdict_needs_its_own_condition() {
        let c = case("4ti2_manual.pdf", &[44]);
        let good = judge(&c, &outcome(vec![cited("/d/4ti2_manual.pdf", Some(44), true, true)]));
        assert_eq!(
            good,
            AnswerVerdict {
                parsed: true,
                citations_retrieved: true,
                cites_gold_document: true,
                cites_gold_page: true,
                quotes_verbatim: true,
                gold_words: 1.0
            }
        );
        // Right document, wrong page; one quote not found; one citation not retrieved.
        let mixed = judge(
            &c,
            &outcome(vec![
                cited("/d/4ti2_manual.pdf", Some(45), true, true),
                cited("/d/fasta_guide.pdf", Some(3), false, false),
            ]),
        );
        assert!(mixed.parsed && mixed.cites_gold_document);
        assert!(!mixed.cites_gold_page && !mixed.quotes_verbatim && !mixed.citations_retrieved);
        // An answer that did not parse counts as nothing.
        let failed = AnswerOutcome { answer: None, error: Some("not JSON".into()), ..outcome(vec![]) };
        assert_eq!(judge(&c, &failed), AnswerVerdict::default());
        // No citations at all is not "all citations retrieved".
        assert!(!judge(&c, &outcome(vec![])).citations_retrieved);
    }

    #[test]
    fn report_shares_count_questions_not_citations() {
        let c = case("a.pdf", &[1]);
        let hit = outcome(vec![cited("/a.pdf", Some(1), true, true), cited("/b.pdf", Some(1), true, true)]);
        let miss = outcome(vec![cited("/b.pdf", Some(1), true, false)]);
        let rows: Vec<_> = [hit.clone(), miss.clone(), miss, hit]
            .into_iter()
            .map(|o| {
                let v = judge(&c, &o);
                (o, v)
            })
            .collect();
        let r = report(&rows);
        assert_eq!(r.questions, 4);
        assert_eq!(r.cites_gold_page, 0.5);
        assert_eq!(r.quotes_verbatim, 0.5);
        assert_eq!(r.parsed, 1.0);
        assert_eq!(r.mean_time_to_first_token_s, 2.0);
    }

    #[test]
    fn word_overlap_is_the_share_of_gold_words() {
        assert_eq!(word_overlap("glpk and gmp", "You need GLPK and GMP."), 1.0);
        assert_eq!(word_overlap("gcc 3.4 or higher", "gcc version 3.4"), 0.6);
        assert_eq!(word_overlap("", "anything"), 0.0);
    }

    #[test]
    fn bad_lines_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("set.jsonl");
        std::fs::write(
            &f,
            "{\"question\": \"q\", \"answer\": \"a\", \"document\": \"d.pdf\", \"pages\": [1]}\n\n{\"question\": 3}\n",
        )
        .unwrap();
        let err = load_answer_set(&f).unwrap_err().to_string();
        assert!(err.contains("line 3"), "{err}");
        std::fs::write(&f, "\n").unwrap();
        assert!(load_answer_set(&f).unwrap_err().to_string().contains("no questions"));
    }
}
