//! What of the retrieved passages the answer model reads: the sentences that bear on the
//! question and the sentences around them, within a token budget per passage, in the passage's
//! order. On a CPU the prompt is most of the wait before the first word, and a passage is
//! ~430 tokens of which a question needs a few sentences. People still see whole passages in
//! the sources pane; citations may quote only the sentences the model read.
//!
//! How strongly a sentence bears on the question takes two signals: the question's terms it
//! holds (as the index analyses them, rare ones weighing more) and how close its meaning is to
//! the question's (the embedder's), so a sentence that answers in other words is found too.
//!
//! A follow-up over the same passages keeps everything shown before and adds the sentences it
//! needs after it, so the decoder's kept prompt is reused up to the new sentences.

use std::collections::{HashMap, HashSet};

use quire_index::SearchHit;

use crate::answer::{self, quotable_spans, source_label};

/// Past this many times the budget shown of one passage over a run of follow-ups, the next
/// question is focused afresh (a shorter prompt beats a longer kept one).
const MOST_SHOWN: usize = 3;

/// How every answer prompt's user turn begins (before the first passage's label): the part of
/// it the answer model can process once, when it loads (`Engine::prepare_llm`).
pub const PROMPT_START: &str = "Sources:\n\n";

/// What focusing needs to know of text, from the engine's parts.
pub trait Reading {
    /// `text` analysed into search terms, as the index analyses it.
    fn terms(&self, text: &str) -> String;
    /// Answer-model tokens in `text`.
    fn tokens(&self, text: &str) -> usize;
    /// The texts' meanings as unit vectors (the embedder's), in order; empty where none can be
    /// had, and then only terms count.
    fn meanings(&self, texts: &[&str]) -> Vec<Vec<f32>>;
}

/// Sentences of one passage shown together, under the passage's number.
#[derive(Debug, Clone, PartialEq)]
struct Section {
    passage: usize,
    /// Indices into the passage's quotable sentences, ascending.
    spans: Vec<usize>,
}

/// The passages of one prompt and what of each the model is shown.
#[derive(Debug, Clone)]
pub struct Context {
    /// In the order they are numbered (from 1).
    passages: Vec<SearchHit>,
    /// Each passage's quotable sentences (`answer::quotable_spans`) and their token counts.
    spans: Vec<Vec<String>>,
    tokens: Vec<Vec<usize>>,
    /// Answer-model tokens shown per passage on average; `None`: whole passages.
    budget: Option<usize>,
    /// The first section of each passage in passage order, then what follow-ups added.
    sections: Vec<Section>,
}

impl Context {
    /// The context of a new question over `passages` (already cut to the prompt's passage
    /// limit): `budget` answer-model tokens per passage on average, or, with `None`, the whole
    /// passages.
    pub fn focus(question: &str, passages: Vec<SearchHit>, budget: Option<usize>, reading: &impl Reading) -> Context {
        let spans: Vec<Vec<String>> = passages.iter().map(|p| quotable_spans(&p.text)).collect();
        let tokens: Vec<Vec<usize>> = match budget {
            Some(_) => spans.iter().map(|s| s.iter().map(|t| reading.tokens(t)).collect()).collect(),
            None => spans.iter().map(|s| vec![0; s.len()]).collect(),
        };
        let mut context = Context { passages, spans, tokens, budget, sections: Vec::new() };
        let chosen = match budget {
            Some(budget) => {
                let closeness = closeness(question, &context.spans, reading);
                let scores = context.scores(question, reading, closeness.as_deref());
                allocate(&scores, &context.tokens, &vec![HashSet::new(); scores.len()], budget)
            }
            None => context.spans.iter().map(|s| (0..s.len()).collect()).collect(),
        };
        for (passage, spans) in chosen.into_iter().enumerate() {
            context.sections.push(Section { passage, spans });
        }
        context
    }

    /// This context carried on to a follow-up `question` over the same `passages` in the same
    /// order (`same_passages` tells when a reordering would make them so): every sentence shown
    /// before, then the sentences a new question would be shown that were not. `None` when the
    /// passages differ or a passage would show more than `MOST_SHOWN` times the budget.
    pub fn follow_up(&self, question: &str, passages: &[SearchHit], reading: &impl Reading) -> Option<Context> {
        let same = |a: &SearchHit, b: &SearchHit| a.chunk_id == b.chunk_id && a.text == b.text;
        if self.passages.len() != passages.len() || !self.passages.iter().zip(passages).all(|(a, b)| same(a, b)) {
            return None;
        }
        let mut next = self.clone();
        let Some(budget) = self.budget else {
            // Whole passages: nothing more to show.
            return Some(next);
        };
        // By terms alone: a follow-up is often about the answer, not the sources ("Quote the
        // sentence that says this"), and some unshown sentence is always nearest in meaning.
        let mut scores = self.scores(question, reading, None);
        let shown: Vec<HashSet<usize>> = (0..self.passages.len()).map(|p| self.shown(p)).collect();
        // A follow-up that what is shown answers adds nothing: only sentences bearing on it more
        // than every sentence shown are added (with those around them).
        let best_shown =
            shown.iter().zip(&scores).flat_map(|(s, passage)| s.iter().map(move |&i| passage[i])).fold(0f32, f32::max);
        for (p, passage) in scores.iter_mut().enumerate() {
            for (i, score) in passage.iter_mut().enumerate() {
                if !shown[p].contains(&i) && *score <= best_shown {
                    *score = 0.0;
                }
            }
        }
        for (passage, added) in allocate(&scores, &self.tokens, &shown, budget).into_iter().enumerate() {
            let total: usize = shown[passage].iter().chain(&added).map(|&i| self.tokens[passage][i]).sum();
            if total > MOST_SHOWN * budget {
                return None;
            }
            if !added.is_empty() {
                next.sections.push(Section { passage, spans: added });
            }
        }
        Some(next)
    }

    /// True when `passages` are this context's, in some order.
    pub fn same_passages(&self, passages: &[SearchHit]) -> bool {
        let key = |p: &SearchHit| (p.chunk_id.clone(), p.text.clone());
        let mine: HashSet<_> = self.passages.iter().map(key).collect();
        passages.len() == self.passages.len() && passages.iter().all(|p| mine.contains(&key(p)))
    }

    /// The passages in the order they are numbered.
    pub fn passages(&self) -> &[SearchHit] {
        &self.passages
    }

    /// The user prompt: the numbered sections, then `earlier` (the conversation so far, as
    /// `conversation::earlier_text` gives it: after the sources, so a follow-up over them
    /// reuses their processed prompt), then the question.
    pub fn prompt(&self, earlier: &str, question: &str, unmentioned: &[String]) -> String {
        let mut out = String::from(PROMPT_START);
        let mut labelled = HashSet::new();
        for section in &self.sections {
            let p = section.passage;
            let more = if labelled.insert(p) { "" } else { ", more" };
            out.push_str(&format!("[{}] ({}{more})\n", p + 1, source_label(&self.passages[p])));
            if self.spans[p].is_empty() || section.spans.len() == self.spans[p].len() {
                // Whole, or nothing quotable (a table of symbols): the text as it is.
                out.push_str(self.passages[p].text.trim());
            } else {
                out.push_str(&self.section_text(section));
            }
            out.push_str("\n\n");
        }
        out.push_str(earlier);
        // Words of the question that no document holds: a sign the sources cannot answer it.
        if !unmentioned.is_empty() {
            out.push_str(&format!("None of the sources mentions: {}.\n", unmentioned.join(", ")));
        }
        // The answer in the question's language, its quotes in their source's.
        out.push_str(&answer::answer_language_line(answer::language_of(question)));
        out.push_str(&format!("Question: {question}"));
        out
    }

    /// Per passage, the sentences the model was shown (in the passage's order): what its
    /// citations may quote.
    pub fn quotes(&self) -> Vec<Vec<String>> {
        (0..self.passages.len())
            .map(|p| {
                let mut shown: Vec<usize> = self.shown(p).into_iter().collect();
                shown.sort_unstable();
                shown.into_iter().map(|i| self.spans[p][i].clone()).collect()
            })
            .collect()
    }

    fn shown(&self, passage: usize) -> HashSet<usize> {
        self.sections.iter().filter(|s| s.passage == passage).flat_map(|s| s.spans.iter().copied()).collect()
    }

    /// The section's sentences, with "…" where sentences of the passage were left out.
    fn section_text(&self, section: &Section) -> String {
        let spans = &self.spans[section.passage];
        let mut out = String::new();
        let mut next = 0;
        for &i in &section.spans {
            if i != next {
                out.push_str(if out.is_empty() { "… " } else { " … " });
            } else if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&spans[i]);
            next = i + 1;
        }
        if next != spans.len() {
            out.push_str(" …");
        }
        out
    }

    /// How strongly each sentence of each passage bears on `question`, from 0 (not at all) to
    /// 2: the summed rarity (over all the passages' sentences) of the question's terms it
    /// holds, over the most any sentence holds; plus, given each sentence's `closeness` to the
    /// question (`closeness`), how much closer it is than the sentence a quarter of the way
    /// down from the closest, over the closest's lead (the other three quarters get nothing of
    /// it, so the budget is left for the sentences around the chosen ones).
    fn scores(&self, question: &str, reading: &impl Reading, closeness: Option<&[Vec<f32>]>) -> Vec<Vec<f32>> {
        let set = |text: &str| reading.terms(text).split_whitespace().map(str::to_owned).collect::<HashSet<String>>();
        let asked = set(question);
        let held: Vec<Vec<HashSet<String>>> =
            self.spans.iter().map(|spans| spans.iter().map(|s| &set(s) & &asked).collect()).collect();
        let sentences = held.iter().map(Vec::len).sum::<usize>().max(1) as f32;
        let mut frequency: HashMap<&str, usize> = HashMap::new();
        for term in held.iter().flatten().flatten() {
            *frequency.entry(term).or_default() += 1;
        }
        let mut scores: Vec<Vec<f32>> = held
            .iter()
            .map(|passage| {
                passage
                    .iter()
                    .map(|terms| terms.iter().map(|t| (1.0 + sentences / frequency[t.as_str()] as f32).ln()).sum())
                    .collect()
            })
            .collect();
        let most = scores.iter().flatten().cloned().fold(0f32, f32::max);
        if most > 0.0 {
            scores.iter_mut().flatten().for_each(|s| *s /= most);
        }
        // "What does X do?": the sentences with X, the question's rarest term, as their subject
        // (among their first words: "ssearch36 performs…", "A coprocess is…") define or first
        // describe it, and weigh a half more than a side detail naming it later.
        if asks_what_a_thing_is(question) {
            let rarest = frequency.iter().min_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0))).map(|(t, _)| t.to_string());
            if let Some(rarest) = rarest {
                for (passage, spans) in scores.iter_mut().zip(&self.spans) {
                    for (score, span) in passage.iter_mut().zip(spans) {
                        let opening: String = span.split_whitespace().take(SUBJECT_WORDS).collect::<Vec<_>>().join(" ");
                        if reading.terms(&opening).split_whitespace().any(|t| t == rarest) {
                            *score += DEFINITION_BONUS;
                        }
                    }
                }
            }
        }
        if let Some(closeness) = closeness {
            let mut sorted: Vec<f32> = closeness.iter().flatten().cloned().collect();
            sorted.sort_by(f32::total_cmp);
            let (quarter, closest) = (sorted[sorted.len() * 3 / 4], sorted[sorted.len() - 1]);
            if closest > quarter {
                for (score, c) in scores.iter_mut().flatten().zip(closeness.iter().flatten()) {
                    *score += ((c - quarter) / (closest - quarter)).max(0.0);
                }
            }
        }
        scores
    }
}

/// How many of a sentence's first words may hold the thing a "what is / what does" question
/// asks about for the sentence to count as defining it, and what that adds to its score.
const SUBJECT_WORDS: usize = 4;
const DEFINITION_BONUS: f32 = 0.5;

/// True for a question asking what something is, does or is for ("What does ssearch36 do?",
/// "What is the notify crate for?", "What is a coprocess?").
fn asks_what_a_thing_is(question: &str) -> bool {
    let words: Vec<String> =
        question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect();
    match words.as_slice() {
        [what, verb, ..] if what == "what" && matches!(verb.as_str(), "is" | "are") => {
            // "What is the maximum length…" asks for a value, not what a thing is: only short
            // questions or those ending "for" / "used for".
            words.len() <= 5 || words.last().is_some_and(|w| w == "for")
        }
        [what, verb, .., last] if what == "what" && matches!(verb.as_str(), "does" | "do") => {
            matches!(last.as_str(), "do" | "does" | "provide" | "provides" | "offer")
        }
        _ => false,
    }
}

/// Each sentence's cosine to the question's meaning (the question and the sentences embedded
/// in one call), per passage; `None` where `reading` has no meanings.
fn closeness(question: &str, spans: &[Vec<String>], reading: &impl Reading) -> Option<Vec<Vec<f32>>> {
    let texts: Vec<&str> = std::iter::once(question).chain(spans.iter().flatten().map(String::as_str)).collect();
    let meanings = reading.meanings(&texts);
    let (asked, mut sentences) = match meanings.split_first() {
        Some((asked, sentences)) if meanings.len() == texts.len() && !sentences.is_empty() => (asked, sentences.iter()),
        _ => return None,
    };
    let dot = |v: &Vec<f32>| v.iter().zip(asked).map(|(a, b)| a * b).sum::<f32>();
    Some(spans.iter().map(|s| sentences.by_ref().take(s.len()).map(dot).collect()).collect())
}

/// The sentences to show of each passage (ascending), none of them already `shown`, within
/// `budget` tokens per passage over all the passages together, so the budget goes where the
/// question's terms are: first each passage's best scoring sentence, then the best scoring
/// ones of all passages, each with the sentence after it (a sentence already shown counts
/// against the budget but is not shown again), then the sentences nearest those, nearest first, a passage's until one does not
/// fit. A passage with no scoring sentence is shown its beginning if nothing was shown of it
/// yet, else nothing more.
fn allocate(scores: &[Vec<f32>], tokens: &[Vec<usize>], shown: &[HashSet<usize>], budget: usize) -> Vec<Vec<usize>> {
    let budget = budget * scores.len();
    let mut used = 0;
    let mut picked: Vec<Vec<usize>> = vec![Vec::new(); scores.len()];
    let score = |&(p, i): &(usize, usize)| scores[p][i];
    let mut ranked: Vec<(usize, usize)> =
        (0..scores.len()).flat_map(|p| (0..scores[p].len()).map(move |i| (p, i))).filter(|c| score(c) > 0.0).collect();
    ranked.sort_by(|a, b| score(b).total_cmp(&score(a)).then(a.cmp(b)));
    let firsts: Vec<(usize, usize)> =
        (0..scores.len()).filter_map(|p| ranked.iter().find(|c| c.0 == p).copied()).collect();
    let mut seen: HashSet<(usize, usize)> = HashSet::new();
    for &(p, i) in firsts.iter().chain(&ranked) {
        if !seen.insert((p, i)) {
            continue;
        }
        if shown[p].contains(&i) {
            used += tokens[p][i];
        } else if used + tokens[p][i] <= budget {
            used += tokens[p][i];
            picked[p].push(i);
            // With the sentence after it, which often finishes what it starts ("Use the
            // following commands." and the commands).
            let next = i + 1;
            if next < tokens[p].len()
                && !shown[p].contains(&next)
                && used + tokens[p][next] <= budget
                && seen.insert((p, next))
            {
                used += tokens[p][next];
                picked[p].push(next);
            }
        }
    }
    let anchors: Vec<Vec<usize>> = (0..scores.len())
        .map(|p| match (picked[p].is_empty(), shown[p].is_empty()) {
            (false, _) => picked[p].clone(),
            (true, true) => vec![0],
            (true, false) => Vec::new(),
        })
        .collect();
    let distance = |p: usize, i: usize| anchors[p].iter().map(|&a| a.abs_diff(i)).min().unwrap_or(usize::MAX);
    let mut rest: Vec<(usize, usize)> = (0..scores.len())
        .filter(|&p| !anchors[p].is_empty())
        .flat_map(|p| (0..scores[p].len()).map(move |i| (p, i)))
        .filter(|&(p, i)| !shown[p].contains(&i) && !picked[p].contains(&i))
        .collect();
    rest.sort_by_key(|&(p, i)| (distance(p, i), p, i));
    let mut closed = vec![false; scores.len()];
    for (p, i) in rest {
        if closed[p] {
            continue;
        }
        // A passage stops growing at its first sentence that does not fit: a smaller one
        // further off would leave a gap.
        if used + tokens[p][i] > budget {
            closed[p] = true;
            continue;
        }
        used += tokens[p][i];
        picked[p].push(i);
    }
    for p in 0..scores.len() {
        if picked[p].is_empty() && shown[p].is_empty() && !tokens[p].is_empty() {
            // Nothing fitted (a table of digits, or the budget spent elsewhere): the first
            // sentence, so every passage can be read and cited.
            picked[p].push(0);
        }
        picked[p].sort_unstable();
    }
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOCUS_TOKENS: usize = 160;
    const MOST_SHOWN_TOKENS: usize = MOST_SHOWN * FOCUS_TOKENS;

    /// Words, lowercased, as the terms of the test (the index's analyser does more).
    fn words(text: &str) -> String {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 2)
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// One token per word.
    fn count(text: &str) -> usize {
        text.split_whitespace().count()
    }

    /// Words as terms and tokens, and meanings from the function it holds.
    pub(super) struct Words(fn(&[&str]) -> Vec<Vec<f32>>);

    impl Reading for Words {
        fn terms(&self, text: &str) -> String {
            words(text)
        }
        fn tokens(&self, text: &str) -> usize {
            count(text)
        }
        fn meanings(&self, texts: &[&str]) -> Vec<Vec<f32>> {
            (self.0)(texts)
        }
    }

    /// No meanings: terms alone choose.
    pub(super) const WORDS: Words = Words(|_| Vec::new());
    /// A meaning that knows tides, seas and the Moon go together.
    const TIDES: Words = Words(|texts| {
        let topic = ["tides", "moon", "oceans", "sea", "pulls"];
        texts
            .iter()
            .map(|t| {
                let w = words(t);
                let near = w.split(' ').filter(|w| topic.contains(w)).count() as f32;
                let other = w.split(' ').count() as f32 - near;
                let norm = (near * near + other * other).sqrt().max(1e-6);
                vec![near / norm, other / norm]
            })
            .collect()
    });

    fn passage(id: &str, text: &str) -> SearchHit {
        SearchHit { chunk_id: id.into(), path: format!("{id}.txt"), text: text.into(), ..Default::default() }
    }

    /// A passage of `n` filler sentences of 10 words with `special` as sentence `at`.
    fn long_passage(id: &str, n: usize, at: usize, special: &str) -> SearchHit {
        let text = (0..n)
            .map(|i| {
                if i == at {
                    special.to_string()
                } else {
                    format!("Filler sentence {i} about nothing much in {id} here.")
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        passage(id, &text)
    }

    #[test]
    fn a_long_passage_shows_the_matching_sentence_and_its_neighbours_within_the_budget() {
        let special = "The ssearch36 program performs a rigorous Smith-Waterman search of the library.";
        let p = long_passage("a", 60, 30, special);
        let context = Context::focus(
            "Which program performs a Smith-Waterman search?",
            vec![p.clone()],
            Some(FOCUS_TOKENS),
            &WORDS,
        );
        let quotes = &context.quotes()[0];
        assert!(quotes.contains(&special.to_string()), "{quotes:?}");
        let shown: usize = quotes.iter().map(|q| count(q)).sum();
        assert!(shown <= FOCUS_TOKENS && shown > FOCUS_TOKENS - 12, "{shown}");
        // Neighbours on both sides, and nothing from the far ends.
        assert!(quotes.iter().any(|q| q.contains("sentence 29 ")) && quotes.iter().any(|q| q.contains("sentence 31 ")));
        assert!(!quotes.iter().any(|q| q.contains("sentence 0 ") || q.contains("sentence 59 ")));
        let prompt = context.prompt("", "Which program?", &[]);
        assert!(prompt.starts_with("Sources:\n\n[1] (a.txt)\n… Filler") && prompt.contains(special), "{prompt}");
        assert!(prompt.ends_with(" …\n\nQuestion: Which program?"), "{prompt}");
        // Every quote the model may give is in the passage people see.
        for q in quotes {
            assert!(crate::find_quote(&p.text, q).is_some(), "{q}");
        }
    }

    #[test]
    fn short_passages_are_shown_whole_and_unmatched_ones_from_their_beginning() {
        let short = passage("s", "Tides follow the Moon. Bread rises.");
        let long = long_passage("l", 40, 20, "Nothing of the question here either.");
        let context = Context::focus("Why do tides happen?", vec![short, long], Some(FOCUS_TOKENS), &WORDS);
        assert_eq!(context.quotes()[0], ["Tides follow the Moon.", "Bread rises."]);
        assert!(context.quotes()[1][0].contains("sentence 0 "), "{:?}", context.quotes()[1]);
        assert!(context
            .prompt("", "q", &[])
            .contains("[1] (s.txt)\nTides follow the Moon. Bread rises.\n\n[2] (l.txt)\nFiller"));
    }

    #[test]
    fn the_budget_goes_where_the_question_is() {
        // Two passages: one short, one long with the question's terms all through it. What the
        // short one does not use is shown of the long one, beyond a passage's share.
        let long: Vec<String> = (0..80).map(|i| format!("Notes on ssearch36 run {i} of many here today.")).collect();
        let passages = vec![passage("short", "Tides follow the Moon."), passage("long", &long.join(" "))];
        let context = Context::focus("ssearch36", passages, Some(FOCUS_TOKENS), &WORDS);
        let shown: Vec<usize> = context.quotes().iter().map(|q| q.iter().map(|s| count(s)).sum()).collect();
        assert_eq!(shown[0], 4);
        assert!(shown[1] > FOCUS_TOKENS && shown[0] + shown[1] <= 2 * FOCUS_TOKENS, "{shown:?}");
    }

    #[test]
    fn a_sentence_that_answers_in_other_words_is_shown() {
        // The answer shares no term with the question; only its meaning is near.
        let answer = "The Moon pulls the oceans toward it.";
        let p = long_passage("a", 60, 40, answer);
        let question = "Why do tides happen?";
        let by_terms = Context::focus(question, vec![p.clone()], Some(FOCUS_TOKENS), &WORDS);
        assert!(!by_terms.quotes()[0].contains(&answer.to_string()), "{:?}", by_terms.quotes());
        let by_meaning = Context::focus(question, vec![p], Some(FOCUS_TOKENS), &TIDES);
        assert!(by_meaning.quotes()[0].contains(&answer.to_string()), "{:?}", by_meaning.quotes());
    }

    #[test]
    fn a_rare_term_outweighs_a_common_one() {
        let text = "The search uses a matrix. The search is fast. The search runs ssearch36 on proteins.";
        let scores = Context::focus("q", vec![passage("a", text)], Some(FOCUS_TOKENS), &WORDS).scores(
            "search ssearch36",
            &WORDS,
            None,
        );
        assert!(scores[0][2] > scores[0][0] && scores[0][0] > 0.0, "{scores:?}");
    }

    #[test]
    fn asked_what_a_thing_does_the_sentence_it_opens_outweighs_a_side_detail() {
        let text = "Some programs use a PSSM file with ssearch36 to improve sensitivity. \
                    ssearch36 performs a rigorous Smith-Waterman search of a database.";
        let context = Context::focus("q", vec![passage("a", text)], Some(FOCUS_TOKENS), &WORDS);
        let asked = context.scores("What does the ssearch36 program do?", &WORDS, None);
        assert!(asked[0][1] > asked[0][0], "{asked:?}");
        // Any other question: the term counts the same wherever it stands.
        let other = context.scores("Which file improves ssearch36?", &WORDS, None);
        assert!(other[0][0] >= other[0][1], "{other:?}");
        for (question, defining) in [
            ("What does the ssearch36 program do?", true),
            ("What is the notify crate for?", true),
            ("What is a coprocess?", true),
            ("What does notify provide?", true),
            ("What is the maximum length of source lines in the GNU standards?", false),
            ("What does the special parameter $! expand to?", false),
            ("Which program runs a search?", false),
        ] {
            assert_eq!(asks_what_a_thing_is(question), defining, "{question}");
        }
    }

    #[test]
    fn a_follow_up_keeps_what_was_shown_and_adds_after_it() {
        let a = long_passage("a", 60, 10, "The gap open penalty is set with the -f option.");
        let b = long_passage("b", 60, 50, "Searches run faster with SSE2 vector instructions.");
        let first =
            Context::focus("What sets the gap open penalty?", vec![a.clone(), b.clone()], Some(FOCUS_TOKENS), &WORDS);
        let first_prompt = first.prompt("", "What sets the gap open penalty?", &[]);
        let prefix = &first_prompt[..first_prompt.rfind("Question:").unwrap()];

        // Same passages: the old prompt kept, the new sentences after it.
        let next = first.follow_up("How do SSE2 instructions change speed?", &[a.clone(), b.clone()], &WORDS).unwrap();
        let prompt = next.prompt("", "How do SSE2 instructions change speed?", &[]);
        assert!(prompt.starts_with(prefix), "{prompt}");
        assert!(prompt[prefix.len()..].starts_with("[2] (b.txt, more)\n"), "{prompt}");
        assert!(next.quotes()[1].iter().any(|q| q.contains("SSE2")));
        // Everything shown before is still quotable.
        assert!(first.quotes().iter().zip(next.quotes()).all(|(old, new)| old.iter().all(|q| new.contains(q))));

        // A follow-up that what is shown answers best adds nothing, though a sentence not shown
        // holds one of its terms: the prompt is reused to its question.
        let answered =
            first.follow_up("Which option sets the gap open penalty with SSE2?", &[a.clone(), b.clone()], &WORDS);
        assert_eq!(answered.unwrap().sections, first.sections);
        // A follow-up about what was shown (no new term) adds nothing: the prompt is reused to
        // its question.
        let again = next.follow_up("Say that again?", &[a.clone(), b.clone()], &WORDS).unwrap();
        assert_eq!(again.sections, next.sections);
        // The same passages in another order are told apart (to be put back in order first);
        // other passages get no follow-up.
        assert!(
            first.same_passages(&[b.clone(), a.clone()])
                && first.follow_up("q", &[b.clone(), a.clone()], &WORDS).is_none()
        );
        assert!(!first.same_passages(&[a.clone(), passage("c", "Other text.")]));
        assert!(first.follow_up("q", &[a.clone(), passage("c", "Other text.")], &WORDS).is_none());
        assert!(first.follow_up("q", &[a], &WORDS).is_none());
    }

    #[test]
    fn follow_ups_stop_growing_a_passage_past_the_limit() {
        let sentences: Vec<String> =
            (0..100).map(|i| format!("Topic{i} is explained in this sentence here.")).collect();
        let p = passage("a", &sentences.join(" "));
        let mut context = Context::focus("topic0", vec![p.clone()], Some(FOCUS_TOKENS), &WORDS);
        let mut rounds = 0;
        while let Some(next) =
            context.follow_up(&format!("topic{}", 10 * (rounds + 1)), std::slice::from_ref(&p), &WORDS)
        {
            context = next;
            rounds += 1;
            assert!(rounds < 20);
        }
        let shown: usize = context.quotes()[0].iter().map(|q| count(q)).sum();
        assert!(rounds >= 1 && shown <= MOST_SHOWN_TOKENS, "{rounds} {shown}");
    }
}

#[cfg(test)]
mod whole {
    use super::*;

    #[test]
    fn without_a_budget_passages_are_shown_whole_as_they_are() {
        let text = "First line.\nSecond  line, with spaces.\n\nA table: 1 2 3";
        let hit = SearchHit { chunk_id: "a".into(), path: "a.txt".into(), text: text.into(), ..Default::default() };
        let context = Context::focus("anything", vec![hit.clone()], None, &super::tests::WORDS);
        assert_eq!(context.prompt("", "q", &[]), format!("Sources:\n\n[1] (a.txt)\n{text}\n\nQuestion: q"));
        assert_eq!(context.quotes()[0], quotable_spans(text));
        let next = context.follow_up("other", &[hit], &super::tests::WORDS).unwrap();
        assert_eq!(next.prompt("", "other", &[]), format!("Sources:\n\n[1] (a.txt)\n{text}\n\nQuestion: other"));
        // Words of the question no document holds are named just before it.
        let noted = context.prompt("", "Which Docker image?", &["Docker".into()]);
        assert!(noted.ends_with("\n\nNone of the sources mentions: Docker.\nQuestion: Which Docker image?"), "{noted}");
    }
}
