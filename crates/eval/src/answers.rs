//! Answer evaluation: a JSONL set of questions with their gold document and pages, and the
//! scoring of one answer against it. Running the questions is the caller's job.
//!
//! A line: `{"question": …, "answer": …, "document": "fasta_guide.pdf", "pages": [3],
//! "evidence": "words on a gold page"}`. `document` is a path relative to the documents folder;
//! `pages` lists the pages that hold the answer (empty for formats without pages); `evidence`
//! is text found on one of them, so a loader that numbers pages differently is caught before
//! any score is computed.
//!
//! A question the documents do not answer: `{"question": …, "unanswerable": true, "document":
//! "fasta_guide.pdf"}` (`document` the one it is closest to, so it is in the knowledge base);
//! the right outcome is a decline.
//!
//! `"facts": ["SIGTTIN", "five minutes|5 minutes"]` (optional) names what a right answer must
//! say: every entry, each a choice of spellings split by `|`, found in the answer (case aside,
//! not inside a longer word). Questions with facts are scored "right fact" beside gold page.
//!
//! `"kind": "list"` (optional) names what sort of question it is (a look-up, a list, a two-step
//! question, one in a non-expert's words, an unanswerable "why"…); the report gives each kind's
//! figures beside the totals.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AnswerCase {
    /// What sort of question it is, for the report's breakdown (see the module's comment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub question: String,
    /// The answer a person would accept (short; compared word by word, for information only);
    /// empty for an unanswerable question.
    #[serde(default)]
    pub answer: String,
    /// The documents do not answer it: Quire should decline.
    #[serde(default)]
    pub unanswerable: bool,
    pub document: String,
    #[serde(default)]
    pub pages: Vec<u32>,
    #[serde(default)]
    pub evidence: Option<String>,
    /// What a right answer must say (see the module's comment); empty: not scored.
    #[serde(default)]
    pub facts: Vec<String>,
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
        if case.facts.iter().any(|f| f.split('|').any(|choice| choice.trim().is_empty())) {
            bail!("{} line {}: a fact (or one of its |-separated spellings) is empty", path.display(), i + 1);
        }
        if case.question.trim().is_empty() || case.document.trim().is_empty() {
            bail!("{} line {}: the question and the document must not be empty", path.display(), i + 1);
        }
        if case.unanswerable != case.answer.trim().is_empty()
            || (case.unanswerable && (!case.pages.is_empty() || case.evidence.is_some() || !case.facts.is_empty()))
        {
            bail!(
                "{} line {}: a question has an \"answer\", or is \"unanswerable\" with no answer, pages, evidence or facts",
                path.display(),
                i + 1
            );
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
    /// Quire said the documents do not answer the question (`answer` holds what it said).
    #[serde(default)]
    pub declined: bool,
    /// A declined answer's withdrawn text: what the model wrote that nothing it cited supports.
    #[serde(default)]
    pub withdrawn: Option<String>,
    pub citations: Vec<CitedPassage>,
    /// A gold page was among the retrieved passages shown to the model.
    pub gold_retrieved: bool,
    /// The model's own, from its prompt.
    pub time_to_first_token_s: f64,
    /// From the question to the answer's first word: search, prompt and the model's time.
    #[serde(default)]
    pub first_word_s: f64,
    pub decode_tokens_per_s: f64,
    /// How sure the model was of its answer's words (the engine's `Answer::confidence`).
    #[serde(default)]
    pub confidence: Option<f32>,
    /// The passages' text as the model was shown it.
    #[serde(default)]
    pub shown: Vec<String>,
    /// The model's output (`raw`) token by token, each with the probability it was chosen
    /// with: what a measure of how sure the model was can be computed again from.
    #[serde(default)]
    pub tokens: Vec<(String, f32)>,
    /// The reply (an answer, or a decline's own first sentence) is in the question's language;
    /// None when one of the two cannot be told (a bare command name, a question of one word).
    #[serde(default)]
    pub in_question_language: Option<bool>,
}

/// The per-question verdicts the report counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AnswerVerdict {
    pub parsed: bool,
    /// Declined (for an unanswerable question, the right outcome; else a miss).
    pub declined: bool,
    /// Answered with a citation whose quote holds none of the answer's key terms (`supports`).
    pub unsupported_citation: bool,
    /// Answered with a quote that is only a number or a label (a page number, a heading of
    /// one word) which the answer does not repeat.
    pub label_quote: bool,
    pub citations_retrieved: bool,
    pub cites_gold_document: bool,
    pub cites_gold_page: bool,
    pub quotes_verbatim: bool,
    /// Share of the gold answer's words found in the answer (0..=1).
    pub gold_words: f64,
    /// The answer says every one of the case's facts (false when the case names none).
    pub right_fact: bool,
}

pub fn judge(case: &AnswerCase, outcome: &AnswerOutcome) -> AnswerVerdict {
    let Some(answer) = &outcome.answer else { return AnswerVerdict::default() };
    if outcome.declined {
        return AnswerVerdict { parsed: true, declined: true, ..AnswerVerdict::default() };
    }
    let cited = &outcome.citations;
    let terms = key_terms(answer, &case.question);
    AnswerVerdict {
        parsed: true,
        declined: false,
        unsupported_citation: cited.iter().any(|c| !supports(&c.quote, &terms)),
        label_quote: cited.iter().any(|c| is_label(&c.quote, answer)),
        citations_retrieved: !cited.is_empty() && cited.iter().all(|c| c.retrieved),
        cites_gold_document: cited.iter().any(|c| case.is_gold_document(&c.path)),
        cites_gold_page: cited.iter().any(|c| case.is_gold_page(&c.path, c.page)),
        quotes_verbatim: !cited.is_empty() && cited.iter().all(|c| c.quote_found),
        gold_words: word_overlap(&case.answer, answer),
        right_fact: !case.facts.is_empty() && case.facts.iter().all(|fact| says(answer, fact)),
    }
}

/// True when `text` says `fact`: one of its `|`-separated spellings, case aside, not inside a
/// longer word ("2" is not found in "128", "ENV" is found in "BASH_ENV").
pub fn says(text: &str, fact: &str) -> bool {
    let text = text.to_lowercase();
    fact.split('|').map(|choice| choice.trim().to_lowercase()).any(|choice| {
        text.match_indices(&choice).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + choice.len()..].chars().next();
            let starts_word = choice.chars().next().is_some_and(char::is_alphanumeric);
            let ends_word = choice.chars().next_back().is_some_and(char::is_alphanumeric);
            let glued_before = starts_word && before.is_some_and(char::is_alphanumeric);
            let glued_after = ends_word && after.is_some_and(char::is_alphanumeric);
            !glued_before && !glued_after
        })
    })
}

/// Lower-cased runs of letters and digits; a run of Chinese or Japanese, which do not space
/// words, as its overlapping pairs of characters (as keyword search reads it), so "五年寿命"
/// holds "五年".
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).flat_map(|w| {
        let mut out = Vec::new();
        let chars: Vec<char> = w.chars().collect();
        // Runs of one script or the other: "cron唤起该命令" is "cron" and 唤起 起该 该命 命令.
        for run in chars.chunk_by(|a, b| is_unspaced(*a) == is_unspaced(*b)) {
            if !is_unspaced(run[0]) {
                out.push(run.iter().collect::<String>().to_lowercase());
            } else if run.len() == 1 {
                out.push(run[0].to_string());
            } else {
                out.extend(run.windows(2).map(|pair| pair.iter().collect::<String>()));
            }
        }
        out
    })
}

/// Han and kana (the judge reads words as pairs in these scripts).
fn is_unspaced(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}')
}

/// Words that carry no claim of their own.
const STOP_WORDS: &[&str] = &[
    "the", "and", "for", "are", "was", "were", "with", "that", "this", "these", "those", "from", "into", "which",
    "what", "who", "when", "where", "how", "does", "did", "has", "have", "had", "can", "not", "yes", "but", "its",
    "their", "there", "they", "you", "your", "use", "used", "uses", "using", "also", "only", "all", "any", "one",
    "will", "would", "should", "may", "than", "then", "such", "each", "other", "about", "via", "both", "more",
];

/// The key terms of `answer` to `question`: its words that the question does not already hold
/// (compared by their first five characters, as `supports` compares: "corresponding" is the
/// question's "corresponds"), stop words aside, of three letters or more or holding a digit.
/// What a quote must show for the answer to rest on it.
pub fn key_terms(answer: &str, question: &str) -> Vec<String> {
    let asked: std::collections::HashSet<String> = words(question).map(|w| stem(&w)).collect();
    let mut terms: Vec<String> = words(answer)
        .filter(|w| !asked.contains(&stem(w)) && !STOP_WORDS.contains(&w.as_str()))
        .filter(|w| w.chars().count() >= 3 || w.chars().any(|c| c.is_ascii_digit() || is_unspaced(c)))
        .collect();
    terms.dedup();
    terms
}

/// A word's first five characters: what the judge compares words by.
fn stem(word: &str) -> String {
    word.chars().take(5).collect()
}

/// True when `quote` holds one of `terms` (a word sharing its first five characters, so
/// "slower" holds "slow" and "installs" holds "installed"), or there is no term to look for.
pub fn supports(quote: &str, terms: &[String]) -> bool {
    let quoted: std::collections::HashSet<String> = words(quote).map(|w| stem(&w)).collect();
    terms.is_empty() || terms.iter().any(|t| quoted.contains(&stem(t)))
}

/// True when `quote` is only a number or a label (fewer than two words with letters) that
/// `answer` does not itself give.
pub fn is_label(quote: &str, answer: &str) -> bool {
    let lettered = words(quote).filter(|w| w.chars().any(char::is_alphabetic)).count();
    let said: std::collections::HashSet<String> = words(answer).collect();
    lettered < 2 && !words(quote).all(|w| said.contains(&w))
}

/// Share of `gold`'s words (lower-cased, letters and digits) that appear in `text`.
pub fn word_overlap(gold: &str, text: &str) -> f64 {
    let gold: Vec<String> = words(gold).collect();
    if gold.is_empty() {
        return 0.0;
    }
    let have: std::collections::HashSet<String> = words(text).collect();
    gold.iter().filter(|w| have.contains(*w)).count() as f64 / gold.len() as f64
}

/// Shares over all questions (0..=1) and mean timings.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AnswerReport {
    pub questions: usize,
    /// Of them, questions the documents answer and questions they do not.
    pub answerable: usize,
    pub unanswerable: usize,
    pub parsed: f64,
    /// Shares of the unanswerable questions declined and of the answerable ones answered.
    pub declined_when_unanswerable: f64,
    pub answered_when_answerable: f64,
    /// Shares of the answers given (not declined) with a citation whose quote does not hold the
    /// answer's key terms, and with a quote that is only a number or a label.
    pub unsupported_citations: f64,
    pub label_quotes: f64,
    // Shares of the answers given: every citation among the retrieved passages, every quote
    // word for word in its passage.
    pub citations_retrieved: f64,
    pub quotes_verbatim: f64,
    // Shares of the answerable questions (a decline is a miss).
    pub cites_gold_document: f64,
    pub cites_gold_page: f64,
    pub gold_retrieved: f64,
    pub mean_gold_words: f64,
    /// Of the answerable questions that name facts (`with_facts` of them): shares whose answer
    /// says them all, and that do so citing a gold page.
    pub with_facts: usize,
    pub right_fact: f64,
    pub right_fact_and_gold_page: f64,
    /// Of the replies whose language can be told (`language_told` of them), the share in the
    /// question's language.
    pub language_told: usize,
    pub in_question_language: f64,
    pub mean_time_to_first_token_s: f64,
    pub mean_first_word_s: f64,
    pub mean_decode_tokens_per_s: f64,
}

/// A question, what was answered and how it was judged.
pub type Judged<'a> = (&'a AnswerCase, AnswerOutcome, AnswerVerdict);

/// The report over `outcomes`, each with the case it answers.
pub fn report(outcomes: &[Judged]) -> AnswerReport {
    type Row<'a> = &'a (&'a AnswerCase, AnswerOutcome, AnswerVerdict);
    let rows = |keep: &dyn Fn(Row) -> bool| outcomes.iter().filter(|r| keep(r)).collect::<Vec<Row>>();
    let share = |rows: &[Row], f: &dyn Fn(Row) -> bool| {
        if rows.is_empty() {
            0.0
        } else {
            rows.iter().filter(|r| f(r)).count() as f64 / rows.len() as f64
        }
    };
    let mean = |rows: &[Row], f: &dyn Fn(Row) -> f64| {
        if rows.is_empty() {
            0.0
        } else {
            rows.iter().map(|r| f(r)).sum::<f64>() / rows.len() as f64
        }
    };
    let all = rows(&|_| true);
    let answerable = rows(&|(c, _, _)| !c.unanswerable);
    let unanswerable = rows(&|(c, _, _)| c.unanswerable);
    let answered = rows(&|(_, _, v)| v.parsed && !v.declined);
    let with_facts = rows(&|(c, _, _)| !c.unanswerable && !c.facts.is_empty());
    let language_told = rows(&|(_, o, _)| o.in_question_language.is_some());
    AnswerReport {
        questions: all.len(),
        answerable: answerable.len(),
        unanswerable: unanswerable.len(),
        parsed: share(&all, &|(_, _, v)| v.parsed),
        declined_when_unanswerable: share(&unanswerable, &|(_, _, v)| v.declined),
        answered_when_answerable: share(&answerable, &|(_, _, v)| v.parsed && !v.declined),
        unsupported_citations: share(&answered, &|(_, _, v)| v.unsupported_citation),
        label_quotes: share(&answered, &|(_, _, v)| v.label_quote),
        citations_retrieved: share(&answered, &|(_, _, v)| v.citations_retrieved),
        cites_gold_document: share(&answerable, &|(_, _, v)| v.cites_gold_document),
        cites_gold_page: share(&answerable, &|(_, _, v)| v.cites_gold_page),
        quotes_verbatim: share(&answered, &|(_, _, v)| v.quotes_verbatim),
        gold_retrieved: share(&answerable, &|(_, o, _)| o.gold_retrieved),
        mean_gold_words: mean(&answerable, &|(_, _, v)| v.gold_words),
        with_facts: with_facts.len(),
        right_fact: share(&with_facts, &|(_, _, v)| v.right_fact),
        right_fact_and_gold_page: share(&with_facts, &|(_, _, v)| v.right_fact && v.cites_gold_page),
        language_told: language_told.len(),
        in_question_language: share(&language_told, &|(_, o, _)| o.in_question_language == Some(true)),
        mean_time_to_first_token_s: mean(&all, &|(_, o, _)| o.time_to_first_token_s),
        mean_first_word_s: mean(&all, &|(_, o, _)| o.first_word_s),
        mean_decode_tokens_per_s: mean(&all, &|(_, o, _)| o.decode_tokens_per_s),
    }
}

/// The figures of one group of questions: one kind (`AnswerCase::kind`) or one language.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupFigures {
    /// The kind ("list", "unanswerable-why") or the language ("German").
    pub group: String,
    pub questions: usize,
    /// Answerable questions: said every fact, citing a gold page (a question without facts: a
    /// gold page alone); unanswerable ones: declined.
    pub right: f64,
    /// Declined: a miss for an answerable kind, the right outcome for an unanswerable one.
    pub declined: f64,
    /// Of the replies whose language tells, the share in the question's language (None when
    /// none tells).
    pub in_question_language: Option<f64>,
}

/// Each kind's figures, in the order kinds first appear (questions without a kind aside).
pub fn by_kind(outcomes: &[Judged]) -> Vec<GroupFigures> {
    by_group(outcomes, |case| case.kind.clone())
}

/// The figures of each group `group_of` puts questions in, in the order groups first appear
/// (questions in no group aside): by kind, or by the question's language.
pub fn by_group(outcomes: &[Judged], group_of: impl Fn(&AnswerCase) -> Option<String>) -> Vec<GroupFigures> {
    let grouped: Vec<(Option<String>, &Judged)> = outcomes.iter().map(|row| (group_of(row.0), row)).collect();
    let mut groups: Vec<&str> = Vec::new();
    for group in grouped.iter().filter_map(|(g, _)| g.as_deref()) {
        if !groups.contains(&group) {
            groups.push(group);
        }
    }
    groups
        .into_iter()
        .map(|group| {
            let rows: Vec<_> = grouped.iter().filter(|(g, _)| g.as_deref() == Some(group)).map(|(_, r)| r).collect();
            let n = rows.len() as f64;
            let right = rows
                .iter()
                .filter(|(c, _, v)| match c.unanswerable {
                    true => v.declined,
                    false => v.cites_gold_page && (c.facts.is_empty() || v.right_fact),
                })
                .count();
            let told: Vec<bool> = rows.iter().filter_map(|(_, o, _)| o.in_question_language).collect();
            GroupFigures {
                group: group.to_string(),
                questions: rows.len(),
                right: right as f64 / n,
                declined: rows.iter().filter(|(_, _, v)| v.declined).count() as f64 / n,
                in_question_language: (!told.is_empty())
                    .then(|| told.iter().filter(|t| **t).count() as f64 / told.len() as f64),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(document: &str, pages: &[u32]) -> AnswerCase {
        AnswerCase {
            kind: None,
            question: "q".into(),
            answer: "glpk and gmp".into(),
            unanswerable: false,
            document: document.into(),
            pages: pages.to_vec(),
            evidence: None,
            facts: vec![],
        }
    }

    fn cited(path: &str, page: Option<u32>, retrieved: bool, quote_found: bool) -> CitedPassage {
        let quote = "You need the GLPK library.".into();
        CitedPassage { path: path.into(), quote, passage: String::new(), page, retrieved, quote_found }
    }

    fn outcome(citations: Vec<CitedPassage>) -> AnswerOutcome {
        AnswerOutcome {
            answer: Some("You need GLPK and GMP.".into()),
            raw: None,
            error: None,
            declined: false,
            withdrawn: None,
            citations,
            gold_retrieved: true,
            time_to_first_token_s: 2.0,
            first_word_s: 2.5,
            decode_tokens_per_s: 10.0,
            confidence: None,
            shown: Vec::new(),
            tokens: Vec::new(),
            in_question_language: Some(true),
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
                declined: false,
                unsupported_citation: false,
                label_quote: false,
                citations_retrieved: true,
                cites_gold_document: true,
                cites_gold_page: true,
                quotes_verbatim: true,
                gold_words: 1.0,
                right_fact: false,
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
        // A decline is parsed and declined, and nothing else.
        let declined = judge(&c, &AnswerOutcome { declined: true, ..outcome(vec![]) });
        assert_eq!(declined, AnswerVerdict { parsed: true, declined: true, ..AnswerVerdict::default() });
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
        let declined =
            AnswerOutcome { declined: true, answer: Some("Your documents don't say.".into()), ..outcome(vec![]) };
        let unanswerable = AnswerCase { unanswerable: true, answer: String::new(), ..case("a.pdf", &[]) };
        let cases = [&c, &c, &c, &c, &c, &unanswerable, &unanswerable];
        let untold = AnswerOutcome { in_question_language: None, ..miss.clone() };
        let other_language = AnswerOutcome { in_question_language: Some(false), ..hit.clone() };
        let outcomes = [hit, miss, untold, other_language, declined.clone(), declined, outcome(vec![])];
        let rows: Vec<_> = cases
            .into_iter()
            .zip(outcomes)
            .map(|(c, o)| {
                let v = judge(c, &o);
                (c, o, v)
            })
            .collect();
        let r = report(&rows);
        assert_eq!((r.questions, r.answerable, r.unanswerable), (7, 5, 2));
        // Gold pages over the answerable questions (a decline is a miss), quotes over the answers.
        assert_eq!(r.cites_gold_page, 2.0 / 5.0);
        assert_eq!(r.quotes_verbatim, 2.0 / 5.0);
        assert_eq!(r.answered_when_answerable, 4.0 / 5.0);
        assert_eq!(r.declined_when_unanswerable, 0.5);
        assert_eq!(r.parsed, 1.0);
        assert_eq!(r.mean_time_to_first_token_s, 2.0);
        assert_eq!(r.mean_first_word_s, 2.5);
        // The language over the replies it can be told of.
        assert_eq!(r.language_told, 6);
        assert_eq!(r.in_question_language, 5.0 / 6.0);
    }

    #[test]
    fn a_citation_supports_an_answer_when_its_quote_holds_a_key_term() {
        let terms = key_terms("It is 2 - 5X slower than fasta36.", "How much slower than fasta36 is ssearch36?");
        assert_eq!(terms, ["2", "5x"]);
        assert!(supports("ssearch36 is only 2 - 5X slower than fasta36", &terms));
        assert!(!supports("The remaining data is set by default to zero.", &terms));
        // Chinese and Japanese are read in pairs of characters.
        let terms = key_terms("每个稳定版预计有五年寿命", "Debian 稳定版预计会获得多长时间的支持？");
        assert!(supports("旧稳定版与老旧稳定版状态 每个稳定版预计有五年寿命，每二年发行新的稳定版", &terms));
        assert!(!supports("新的稳定版发布时，前个版本就变成旧稳定版", &terms));
        // Words are matched by their first five characters: inflections count.
        assert!(supports("sudo port install gmp", &key_terms("It is installed by MacPorts", "How?")));
        // A question's word in another form is the question's, not a term the answer adds.
        let terms =
            key_terms("The short option corresponding to --bytes is -c.", "Which short option corresponds to --bytes?");
        assert!(terms.is_empty(), "{terms:?}");
        // An answer that adds nothing to the question cannot be judged: not unsupported.
        assert!(supports("anything", &key_terms("Yes, it does.", "Does it?")));
        let c = case("4ti2_manual.pdf", &[44]);
        let mut paris = outcome(vec![cited("/d/4ti2_manual.pdf", Some(56), true, true)]);
        paris.answer = Some("Paris".into());
        paris.citations[0].quote = "56".into();
        let v = judge(&c, &paris);
        assert!(v.unsupported_citation && v.label_quote, "{v:?}");
        // A number the answer gives is a quote of its own.
        assert!(!is_label("1.88", "The minimum supported Rust version is 1.88"));
        assert!(!is_label("Install it with sudo port.", "sudo port"));
    }

    #[test]
    fn a_fact_is_said_as_a_whole_word_in_any_of_its_spellings() {
        assert!(says("Builtins return 2 on misuse.", "2"));
        assert!(!says("It uses 128+N.", "2"), "a digit inside a longer number");
        assert!(says("It uses 128+N.", "128"));
        assert!(says("SHELL, PATH and BASH_ENV", "ENV"), "underscores part words");
        assert!(!says("the environment", "ENV"));
        assert!(says("Uploads run every 5 minutes", "five minutes|5 minutes"));
        assert!(says("The \\A escape", "\\a"), "case aside, non-letters as they are");
        assert!(!says("", "x"));

        // Right fact over the answerable questions that name facts; with a gold page beside.
        let mut c = case("a.pdf", &[1]);
        c.facts = vec!["GLPK".into(), "GMP".into()];
        let mut one = case("a.pdf", &[1]);
        one.facts = vec!["MPFR".into()];
        let no_facts = case("a.pdf", &[1]);
        let on_page = outcome(vec![cited("/a.pdf", Some(1), true, true)]);
        let off_page = outcome(vec![cited("/a.pdf", Some(2), true, true)]);
        let rows: Vec<_> = [(&c, on_page.clone()), (&c, off_page), (&one, on_page.clone()), (&no_facts, on_page)]
            .into_iter()
            .map(|(c, o)| {
                let v = judge(c, &o);
                (c, o, v)
            })
            .collect();
        assert!(rows[0].2.right_fact && !rows[2].2.right_fact && !rows[3].2.right_fact);
        let r = report(&rows);
        assert_eq!(r.with_facts, 3);
        assert_eq!(r.right_fact, 2.0 / 3.0);
        assert_eq!(r.right_fact_and_gold_page, 1.0 / 3.0);
    }

    #[test]
    fn each_kind_is_scored_by_what_is_right_for_it() {
        let mut list = case("a.pdf", &[1]);
        list.kind = Some("list".into());
        list.facts = vec!["GLPK".into(), "GMP".into()];
        let mut why = AnswerCase { unanswerable: true, answer: String::new(), ..case("a.pdf", &[]) };
        why.kind = Some("unanswerable-why".into());
        let whole = outcome(vec![cited("/a.pdf", Some(1), true, true)]);
        let mut half = whole.clone();
        half.answer = Some("You need GLPK.".into());
        let declined = AnswerOutcome { declined: true, ..outcome(vec![]) };
        let unkinded = case("a.pdf", &[1]);
        let rows: Vec<_> =
            [(&list, whole.clone()), (&list, half), (&why, declined), (&why, whole), (&unkinded, outcome(vec![]))]
                .into_iter()
                .map(|(c, o)| {
                    let v = judge(c, &o);
                    (c, o, v)
                })
                .collect();
        let kinds = by_kind(&rows);
        let figures = |group: &str, right, declined| GroupFigures {
            group: group.into(),
            questions: 2,
            right,
            declined,
            in_question_language: Some(1.0),
        };
        assert_eq!(kinds, [figures("list", 0.5, 0.0), figures("unanswerable-why", 0.5, 0.5)]);
        // Grouped by another key (the bench groups by the question's language), with the share
        // of replies in the question's language among those that tell.
        let mut rows = rows;
        rows[0].1.in_question_language = Some(true);
        rows[1].1.in_question_language = Some(false);
        rows[2].1.in_question_language = None;
        rows[3].1.in_question_language = None;
        let by_first_letter = by_group(&rows, |c| c.kind.as_ref().map(|k| k[..1].to_uppercase()));
        assert_eq!(by_first_letter.len(), 2);
        assert_eq!(by_first_letter[0].in_question_language, Some(0.5));
        assert_eq!(by_first_letter[1].in_question_language, None);
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
        // An unanswerable question has no answer and no pages; an answerable one has an answer.
        for bad in [
            r#"{"question": "q", "unanswerable": true, "answer": "a", "document": "d.pdf"}"#,
            r#"{"question": "q", "unanswerable": true, "document": "d.pdf", "pages": [2]}"#,
            r#"{"question": "q", "document": "d.pdf"}"#,
            r#"{"question": "q", "unanswerable": true, "document": "d.pdf", "facts": ["x"]}"#,
            r#"{"question": "q", "answer": "a", "document": "d.pdf", "facts": ["x|"]}"#,
        ] {
            std::fs::write(&f, bad).unwrap();
            assert!(load_answer_set(&f).unwrap_err().to_string().contains("line 1"), "{bad}");
        }
        std::fs::write(&f, r#"{"question": "q", "unanswerable": true, "document": "d.pdf"}"#).unwrap();
        assert!(load_answer_set(&f).unwrap()[0].unanswerable);
        std::fs::write(&f, "\n").unwrap();
        assert!(load_answer_set(&f).unwrap_err().to_string().contains("no questions"));
    }
}
