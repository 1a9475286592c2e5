//! Whether an answer is given: how sure the model was of its words, what the passages shown
//! hold of it, what its quotes support, and a "yes" its own quotes say "not" to.

use std::collections::HashSet;

use quire_llm::TokenProbability;

use super::language::{language_of, reads_the_same_in_every_language};
use super::stream::answer_span;
use crate::Citation;

/// The citations among `citations` that support `answer` to `question`: those whose quote
/// shares a term (the index's analyser: stems, no stop words) with what the answer adds to the
/// question; for an answer that adds nothing (a "yes"), those whose quote holds at least half
/// of the question's terms. None when the question names something no document holds
/// (`unmentioned`) and the answer is a bare yes or no, or says something of that thing: nothing
/// in the documents can support either. Empty means the answer is withdrawn and declined (an
/// answer from the model's own memory, or a quote that bears on nothing). Costs a few analyses
/// of short texts: microseconds.
pub fn supporting(
    question: &str,
    answer: &str,
    unmentioned: &[String],
    citations: Vec<Citation>,
    terms: impl Fn(&str) -> String,
) -> Vec<Citation> {
    let set = |text: &str| term_set(text, &terms);
    let asked = set(question);
    let added = added_terms(question, answer, &terms);
    if about_the_unmentioned(question, answer, unmentioned, &terms) {
        return Vec::new();
    }
    citations
        .into_iter()
        .filter(|c| {
            let quoted = set(&c.quote);
            if added.is_empty() {
                holds_half(&asked, &quoted)
            } else {
                quoted.intersection(&added).next().is_some()
            }
        })
        .collect()
}

/// The lowest `answer_confidence` an answer is given with: below it the model was unsure of
/// some of its words, and the answer is withdrawn. Chosen on the development half of the
/// manuals set (BENCHMARKS.md, "How sure the model was").
pub const LEAST_CONFIDENCE: f32 = -1.0;

/// The citations `answer` is given with, or None when it is withdrawn. With the model's
/// `confidence` (Quire's decoder) two things decide: the model was sure of the answer's words,
/// and the answer is read from the passages shown (`passages`), not only from the quote it
/// chose: at least half of what it adds to the question occurs in them. (Term overlap with the
/// quote alone withdrew right answers beside an unrelated quote and kept invented ones that
/// repeat the question's words; confidence alone keeps what the model knows by heart, "Paris".)
/// The citations are those `supporting` finds, or all of `cited` when it finds none. Without
/// confidence (mistral.rs) `supporting` decides. Either way an answer about something no
/// document names (`unmentioned`) is withdrawn, and a "yes" its own quotes say "not" to.
pub fn supported(
    question: &str,
    answer: &str,
    unmentioned: &[String],
    confidence: Option<f32>,
    passages: &[&str],
    cited: Vec<Citation>,
    terms: impl Fn(&str) -> String,
) -> Option<Vec<Citation>> {
    let backing = supporting(question, answer, unmentioned, cited.clone(), &terms);
    let read_from_passages = || {
        if across_languages(question, answer, &cited) {
            // Words in another language than the passages' cannot be found in them; what reads
            // the same in every language (a number, a path, a command) can.
            let shown = passages.join("\n").to_lowercase();
            return neutral_words(answer).iter().all(|w| shown.contains(w.as_str()));
        }
        let added = added_terms(question, answer, &terms);
        let shown: HashSet<String> = passages.iter().flat_map(|p| term_set(p, &terms)).collect();
        2 * added.iter().filter(|t| shown.contains(*t)).count() >= added.len()
    };
    let kept = match confidence {
        None => (!backing.is_empty()).then_some(backing),
        Some(sure) if sure < LEAST_CONFIDENCE || about_the_unmentioned(question, answer, unmentioned, &terms) => None,
        Some(_) if !read_from_passages() => None,
        Some(_) if backing.is_empty() => Some(cited),
        Some(_) => Some(backing),
    };
    kept.filter(|citations| !contradicted_yes(question, answer, citations))
}

/// Whether `answer` says yes to a question put without a negation while every quote it rests on
/// says "not": "Does t.test() assume equal variances? Yes", quoting "By default the R function
/// does not assume equality of variances", is contradicted by its own evidence. Such a "yes" is
/// answered "no" (`Words::no`, in the question's language) on those quotes, the first under it:
/// on the first manuals set (studied) each of the five such answers was to a question whose
/// right answer is "no" (BENCHMARKS.md, "Answers you can rely on, second round"), where
/// withdrawing it told the person only that the documents do not say.
pub fn contradicted_yes(question: &str, answer: &str, citations: &[Citation]) -> bool {
    const YES: [&str; 8] = ["yes", "ja", "oui", "sí", "si", "はい", "是", "是的"];
    let first = answer.trim_start().split(|c: char| !c.is_alphanumeric()).next().unwrap_or("").to_lowercase();
    YES.contains(&first.as_str())
        && !negates(question)
        && !citations.is_empty()
        && citations.iter().all(|c| negates(&c.quote))
}

/// Whether `text` holds a word that negates what it says.
/// (Words of English, German, French and Spanish; in Japanese and Chinese, which do not space
/// words, the forms that negate wherever they stand.)
fn negates(text: &str) -> bool {
    const NEGATIONS: [&str; 26] = [
        "not", "never", "cannot", "neither", "nor", "no", "without", "nicht", "kein", "keine", "keinen", "keiner",
        "nie", "niemals", "ohne", "ne", "pas", "jamais", "sans", "aucun", "aucune", "nunca", "sin", "ningún",
        "ninguna", "jamás",
    ];
    const UNSPACED: [&str; 6] = ["ない", "ません", "不", "没有", "无法", "未"];
    let text = text.to_lowercase().replace('’', "'");
    text.contains("n't ")
        || text.split(|c: char| !c.is_alphanumeric()).any(|w| NEGATIONS.contains(&w))
        || UNSPACED.iter().any(|n| text.contains(n))
}

/// Whether the question names something no document holds (`unmentioned`) and the answer is a
/// bare yes or no, or says something of that thing: nothing in the documents can support either.
fn about_the_unmentioned(
    question: &str,
    answer: &str,
    unmentioned: &[String],
    terms: &impl Fn(&str) -> String,
) -> bool {
    let unheld: HashSet<String> = unmentioned.iter().flat_map(|w| term_set(w, terms)).collect();
    !unheld.is_empty()
        && (added_terms(question, answer, terms).is_empty()
            || term_set(answer, terms).intersection(&unheld).next().is_some())
}

/// Whether `answer` is in the question's language (or too short to tell) and every quote it
/// gives in another (each told by `language_of`): an answer over passages in another language than the question's (an
/// English question over a German book), which shares no words with them but names and numbers.
fn across_languages(question: &str, answer: &str, cited: &[Citation]) -> bool {
    let Some(asked) = language_of(question) else { return false };
    language_of(answer).is_none_or(|said| said == asked)
        && !cited.is_empty()
        && cited.iter().all(|c| language_of(&c.quote).is_some_and(|quoted| quoted != asked))
}

/// The words of `answer` that read the same in every language, lower-cased: those holding a
/// digit or a sign inside them (5900, /etc/skel, dpkg-reconfigure, release_signscript).
fn neutral_words(answer: &str) -> Vec<String> {
    answer
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '"' | '“' | '”' | '«' | '»' | '`'))
        .map(|w| w.trim_end_matches(['.', ':', '!', '?']).trim_start_matches(['.', ':']))
        .filter(|w| reads_the_same_in_every_language(w))
        .map(str::to_lowercase)
        .collect()
}

/// What `answer` adds to `question`, as search terms (`terms`: the index's analyser, which
/// blinds terms in an encrypted collection): its terms the question does not hold, less the
/// words that say whether rather than what ("yes", "no"), which no passage need hold.
pub(super) fn added_terms(question: &str, answer: &str, terms: &impl Fn(&str) -> String) -> HashSet<String> {
    let aside: HashSet<String> = term_set(question, terms).into_iter().chain(term_set(YES_OR_NO, terms)).collect();
    term_set(answer, terms).into_iter().filter(|t| !aside.contains(t)).collect()
}

/// The words that say whether rather than what: an answer of only these is a bare yes or no.
pub(super) const YES_OR_NO: &str = "yes no true false ja nein oui non sí si はい いいえ 是 否";

/// Whether `quoted` holds at least half of the question's terms `asked` (at least one): what
/// a quote must hold to support a bare yes or no.
pub(super) fn holds_half(asked: &HashSet<String>, quoted: &HashSet<String>) -> bool {
    2 * asked.intersection(quoted).count() >= asked.len().max(1)
}

/// `text`'s search terms (`terms`: the index's analyser), each once.
pub(super) fn term_set(text: &str, terms: &impl Fn(&str) -> String) -> HashSet<String> {
    terms(text).split_whitespace().map(str::to_owned).collect()
}

/// How sure the model was of its answer: the mean natural log of the probabilities of the
/// three tokens of the answer's words (the "answer" string of `raw`, not its quotes) it was
/// least sure of. An answer read from the passages is copied with near certainty; one the
/// model supplies itself has a few tokens it hesitated over (BENCHMARKS.md, "How sure the
/// model was"). None where the runner gives no probabilities (mistral.rs) or there is no
/// answer string.
pub fn answer_confidence(raw: &str, tokens: &[TokenProbability]) -> Option<f32> {
    let (start, end) = answer_span(raw)?;
    let mut before = 0;
    let mut logs: Vec<f32> = Vec::new();
    for token in tokens {
        if token.end > start && before < end && !completes_an_escape(raw, before, token.end) {
            logs.push(token.probability.max(1e-9).ln());
        }
        before = token.end;
    }
    if logs.is_empty() {
        return None;
    }
    logs.sort_by(f32::total_cmp);
    let least = &logs[..logs.len().min(3)];
    Some(least.iter().sum::<f32>() / least.len() as f32)
}

/// Whether the token `raw[from..to]` is the lone backslash that completes a JSON escape the
/// token before it opened: JSON's, not the model's choice. A model copying `\eqref` writes the
/// escape's backslash wanting the letter next, and the grammar leaves it only the second
/// backslash, which it gave a probability near zero (e^-10): counted, it withdrew right answers
/// that name a LaTeX command (the second manuals set's `\notag` and `\eqref`).
fn completes_an_escape(raw: &str, from: usize, to: usize) -> bool {
    let opened = raw[..from].bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1;
    raw.get(from..to) == Some("\\") && opened
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::testing::{cited, words};

    #[test]
    fn an_answer_no_cited_quote_supports_is_withdrawn() {
        let support = |q: &str, a: &str, quotes: &[&str]| -> Vec<String> {
            let citations = quotes.iter().map(|t| cited(t)).collect();
            supporting(q, a, &[], citations, words).into_iter().map(|c| c.quote).collect()
        };
        // An answer from the model's memory: no quote holds it.
        assert!(support("What is the capital of France?", "Paris", &["The remaining data is zero."]).is_empty());
        // A quote holding what the answer adds stays; one that does not is dropped.
        let q = "Which program runs a rigorous Smith-Waterman search?";
        let kept = support(q, "ssearch36", &["Searches are run by ssearch36.", "Other options follow."]);
        assert_eq!(kept, ["Searches are run by ssearch36."]);
        // A yes or no adds nothing: the quote must hold half the question's terms.
        let q = "Does notify work on Windows?";
        assert_eq!(support(q, "Yes.", &["notify watches on Windows too."]).len(), 1);
        assert!(support(q, "Yes, it works.", &["The FASTA programs are fast."]).is_empty());
        // A question about something no document names: neither a bare "no" nor an answer that
        // speaks of that thing rests on the documents; an answer about something else may.
        let q = "Does the library have a Java interface?";
        let quoted = || vec![cited("The library has a C interface and a Python interface.")];
        let java = ["Java".to_string()];
        assert!(supporting(q, "No.", &java, quoted(), words).is_empty());
        assert!(supporting(q, "The Java interface wraps the C one.", &java, quoted(), words).is_empty());
        assert_eq!(supporting(q, "It has a C and a Python interface.", &java, quoted(), words).len(), 1);
        assert_eq!(supporting(q, "No.", &[], quoted(), words).len(), 1, "without the note, half the terms");
        // In an encrypted collection the analyser blinds terms: "yes" is still no claim.
        let blinded = |t: &str| words(t).split(' ').map(|w| format!("#{w}")).collect::<Vec<_>>().join(" ");
        let says_yes = || vec![cited("Yes, it has a C interface.")];
        assert!(supporting(q, "Yes.", &java, says_yes(), blinded).is_empty());
    }

    /// `supported` over passages holding the tests' quotes and the is.nan sentence.
    fn supported_in(
        q: &str,
        answer: &str,
        unmentioned: &[String],
        confidence: Option<f32>,
        cited: Vec<Citation>,
        terms: impl Fn(&str) -> String,
    ) -> Option<Vec<Citation>> {
        let passage = "Missing values are marked NA. The function is.nan tests for NaN. \
            By default the R function does not assume equality of variances in the two samples.";
        supported(q, answer, unmentioned, confidence, &[passage], cited, terms)
    }

    /// An English answer over a German passage shares no words with it: it is given when the
    /// model was sure and what reads the same in every language (a number, a path) is in the
    /// passages; an invented number is withdrawn.
    #[test]
    fn an_answer_in_another_language_than_its_passage_is_held_to_its_names_and_numbers() {
        let passages = ["Der Daemon prüft jede halbe Stunde das Verzeichnis incoming/ auf neue Pakete. \
            Er lauscht auf Port 5900."];
        let cite = || vec![cited("Der Daemon prüft jede halbe Stunde das Verzeichnis incoming/ auf neue Pakete.")];
        let sure = Some(-0.3);
        let q = "How often does the daemon look for new packages?";
        let given =
            supported(q, "It checks the incoming/ directory every half hour.", &[], sure, &passages, cite(), words);
        assert!(given.is_some());
        let q = "Which port does the daemon listen on?";
        assert!(supported(q, "The daemon listens on port 5900.", &[], sure, &passages, cite(), words).is_some());
        assert_eq!(supported(q, "The daemon listens on port 8080.", &[], sure, &passages, cite(), words), None);
        // Unsure, it is withdrawn as in one language.
        let q = "How often does the daemon look for new packages?";
        assert_eq!(supported(q, "It checks every half hour.", &[], Some(-1.5), &passages, cite(), words), None);
        // In the passage's own language the terms decide, as before.
        let q = "Wie oft prüft der Daemon das Verzeichnis?";
        assert_eq!(supported(q, "Er prüft monatlich.", &[], sure, &passages, cite(), words), None);
    }

    /// An answer the model was sure of but that the passages shown do not hold (what it knows by
    /// heart) is withdrawn; one they hold is given.
    #[test]
    fn an_answer_the_passages_shown_do_not_hold_is_withdrawn_however_sure() {
        let passages = ["The FASTA programs compare sequences. Results are printed as tables."];
        let cite = || vec![cited("The FASTA programs compare sequences.")];
        let sure = Some(-0.05);
        let q = "What is the capital of France?";
        assert_eq!(supported(q, "Paris", &[], sure, &passages, cite(), words), None);
        let q = "What do the FASTA programs compare?";
        assert!(supported(q, "sequences", &[], sure, &passages, cite(), words).is_some());
        // Half of what it adds is enough: a sentence around the fact.
        assert!(supported(q, "They compare sequences as tables.", &[], sure, &passages, cite(), words).is_some());
        assert_eq!(supported(q, "They compare proteins quickly.", &[], sure, &passages, cite(), words), None);
    }

    /// With the model's confidence, an unsure answer is withdrawn whatever its quote holds, and a
    /// sure one is kept with its citations even where its quote shares no word with it; without
    /// it, the quotes decide. An answer about what no document names goes either way.
    #[test]
    fn how_sure_the_model_was_decides_whether_an_answer_is_given() {
        let q = "Which function tests for NaN values in R?";
        let unrelated = || vec![cited("Missing values are marked NA.")];
        let holding = || vec![cited("The function is.nan tests for NaN."), cited("Missing values are marked NA.")];
        let sure = Some(LEAST_CONFIDENCE / 4.0);
        let unsure = Some(LEAST_CONFIDENCE * 2.0);
        let quotes = |kept: Option<Vec<Citation>>| kept.map(|k| k.into_iter().map(|c| c.quote).collect::<Vec<_>>());
        assert_eq!(
            quotes(supported_in(q, "is.nan()", &[], sure, unrelated(), words)),
            Some(vec!["Missing values are marked NA.".into()])
        );
        assert_eq!(
            quotes(supported_in(q, "is.nan()", &[], sure, holding(), words)),
            Some(vec!["The function is.nan tests for NaN.".into()])
        );
        assert_eq!(supported_in(q, "is.nan()", &[], unsure, holding(), words), None);
        assert_eq!(supported_in(q, "is.nan()", &[], None, unrelated(), words), None);
        assert!(supported_in(q, "is.nan()", &[], None, holding(), words).is_some());
        let q = "Does R have a Java interface?";
        assert_eq!(supported_in(q, "No.", &["Java".to_string()], sure, holding(), words), None);
        // A "yes" its own quote says "not" to is withdrawn, however sure; a "no" to it is given.
        let q = "Does R's t.test() assume by default that the two samples have equal variances?";
        let negating =
            || vec![cited("By default the R function does not assume equality of variances in the two samples.")];
        assert_eq!(supported_in(q, "Yes", &[], sure, negating(), words), None);
        assert!(supported_in(q, "No, it does not.", &[], sure, negating(), words).is_some());
        assert!(supported_in(
            q,
            "Yes",
            &[],
            sure,
            vec![cited("The t.test function assumes equal variances by default.")],
            words
        )
        .is_some());
        // A question that itself says "not" is answered yes by a "not" quote.
        let q = "Is it true that t.test() does not assume equal variances?";
        assert!(supported_in(q, "Yes", &[], sure, negating(), words).is_some());
    }

    /// A "yes" every quote of which says "not" becomes the "no" its evidence gives; a "yes" with
    /// one quote that does not negate, a "no", and a "yes" to a question that itself negates
    /// stay as they are.
    #[test]
    fn a_yes_its_own_quotes_say_not_to_becomes_no() {
        let q = "Does R's t.test() assume by default that the two samples have equal variances?";
        let negating = cited("By default the R function does not assume equality of variances in the two samples.");
        let affirming = cited("The t.test function assumes equal variances by default.");
        assert!(contradicted_yes(q, "Yes, it does.", std::slice::from_ref(&negating)));
        assert!(contradicted_yes(q, "yes", &[negating.clone(), negating.clone()]));
        assert!(!contradicted_yes(q, "Yes", &[negating.clone(), affirming.clone()]));
        assert!(!contradicted_yes(q, "Yes", std::slice::from_ref(&affirming)));
        assert!(!contradicted_yes(q, "No, it does not.", std::slice::from_ref(&negating)));
        assert!(!contradicted_yes(q, "Yes", &[]), "no evidence, nothing to reverse on");
        let q = "Is it true that t.test() does not assume equal variances?";
        assert!(!contradicted_yes(q, "Yes", std::slice::from_ref(&negating)));
        // In German and Japanese too.
        let q = "Setzt t.test() standardmäßig gleiche Varianzen voraus?";
        let nicht = cited("Standardmäßig setzt die R-Funktion keine Gleichheit der Varianzen voraus.");
        assert!(contradicted_yes(q, "Ja.", std::slice::from_ref(&nicht)));
        let q = "t.test() は等分散を仮定しますか？";
        let nai = cited("R の関数は既定では等分散を仮定しません。");
        assert!(contradicted_yes(q, "はい、仮定します。", std::slice::from_ref(&nai)));
        assert!(!contradicted_yes(q, "いいえ。", std::slice::from_ref(&nai)));
    }

    /// The confidence is read over the answer's own tokens: its quotes and keys, however unsure,
    /// do not count; the three least sure tokens of the answer do.
    #[test]
    fn an_answers_confidence_is_its_three_least_sure_tokens() {
        let raw = r#"{"answer": "It is 10.", "citations": [{"quote": "The answer is 10.", "chunk": 1}]}"#;
        let start = raw.find("It").unwrap();
        let end = raw.find(".\"").unwrap() + 1;
        // One token per character, sure of all but three of the answer's and of the quote's.
        let tokens: Vec<TokenProbability> = (1..=raw.len())
            .map(|end_at| {
                let probability = match end_at - 1 {
                    i if i == start + 3 => 0.5,
                    i if i == start + 4 => 0.25,
                    i if i == end - 1 => 0.125,
                    i if i > end + 20 => 0.01,
                    _ => 1.0,
                };
                TokenProbability { end: end_at, probability }
            })
            .collect();
        let expected = (0.5f32.ln() + 0.25f32.ln() + 0.125f32.ln()) / 3.0;
        let got = answer_confidence(raw, &tokens).unwrap();
        assert!((got - expected).abs() < 1e-5, "{got} vs {expected}");
        assert_eq!(answer_confidence(r#"{"not_in_sources": "x"}"#, &tokens), None);
        assert_eq!(answer_confidence(raw, &[]), None);
    }

    /// The backslash that completes a JSON escape the token before opened is the format's, not
    /// the model's: however unsure, it does not count. A backslash that opens one does.
    #[test]
    fn the_backslash_that_completes_an_escape_does_not_count() {
        let raw = r#"{"answer": "Use \\eqref here.", "citations": []}"#;
        let open = raw.find(" \\").unwrap() + 2;
        let pieces = [(open, 0.9), (open + 1, 0.0001), (raw.len(), 0.8)];
        let tokens: Vec<TokenProbability> =
            pieces.iter().map(|&(end, probability)| TokenProbability { end, probability }).collect();
        let expected = (0.9f32.ln() + 0.8f32.ln()) / 2.0;
        let got = answer_confidence(raw, &tokens).unwrap();
        assert!((got - expected).abs() < 1e-5, "{got} vs {expected}");
        // The same backslash opening an escape of its own is the model's choice and counts.
        assert!(completes_an_escape(raw, open, open + 1));
        assert!(!completes_an_escape(raw, open - 1, open));
    }
}
