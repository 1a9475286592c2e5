//! Where drafted tokens come from and how much to draft: prompt lookup over the prompt and
//! the reply so far, and the sliding acceptance windows that grow, shrink or pause each source.

use std::collections::VecDeque;

use serde::Serialize;
use ts_rs::TS;

/// A proposer of draft tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum DraftSource {
    /// Tokens the output grammar forces (JSON keys, the rest of a quoted sentence): no model runs.
    Grammar,
    /// Continuation of an earlier occurrence of the last few tokens in the prompt (the retrieved
    /// passages) or the reply: no model runs.
    Lookup,
    /// The small draft model.
    Model,
}

pub const SOURCES: [DraftSource; 3] = [DraftSource::Grammar, DraftSource::Lookup, DraftSource::Model];

/// The tokens that followed the most recent earlier occurrence of the context's last `n`
/// tokens (longest `n` first, from `max_ngram` down to `min_ngram`), at most `limit` of them:
/// the first of `lookup_branches`.
pub fn lookup(context: &[u32], min_ngram: usize, max_ngram: usize, limit: usize) -> Vec<u32> {
    lookup_branches(context, min_ngram, max_ngram, limit, 1).pop().unwrap_or_default()
}

/// `lookup`'s continuations after every earlier occurrence of the context's last `n` tokens,
/// most recent first and longest `n` first, each at most `limit` tokens, at most `branches`
/// of them, none the start of one before it (a continuation that a longer one already holds
/// adds nothing to a tree of drafts).
pub fn lookup_branches(
    context: &[u32],
    min_ngram: usize,
    max_ngram: usize,
    limit: usize,
    branches: usize,
) -> Vec<Vec<u32>> {
    let mut found: Vec<Vec<u32>> = Vec::new();
    if limit == 0 || branches == 0 {
        return found;
    }
    for n in (min_ngram..=max_ngram).rev() {
        if context.len() <= n {
            continue;
        }
        let tail = &context[context.len() - n..];
        for start in (0..context.len() - n).rev() {
            if &context[start..start + n] != tail {
                continue;
            }
            let from = start + n;
            let continuation = &context[from..(from + limit).min(context.len())];
            if !continuation.is_empty() && !found.iter().any(|f| f.starts_with(continuation)) {
                found.push(continuation.to_vec());
                if found.len() == branches {
                    return found;
                }
            }
        }
    }
    found
}

/// Accept/reject outcomes of the last `size` drafted tokens of one source.
#[derive(Debug, Clone)]
pub struct Window {
    outcomes: VecDeque<bool>,
    size: usize,
}

impl Window {
    pub fn new(size: usize) -> Window {
        Window { outcomes: VecDeque::with_capacity(size), size }
    }

    pub fn record(&mut self, accepted: bool) {
        if self.outcomes.len() == self.size {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back(accepted);
    }

    pub fn is_full(&self) -> bool {
        self.outcomes.len() == self.size
    }

    /// Share accepted; `prior` until a quarter of the window has been seen.
    pub fn rate(&self, prior: f32) -> f32 {
        if self.outcomes.len() < self.size.div_ceil(4) {
            return prior;
        }
        self.outcomes.iter().filter(|&&a| a).count() as f32 / self.outcomes.len() as f32
    }

    pub fn clear(&mut self) {
        self.outcomes.clear();
    }
}

/// Per-source state: acceptance window, draft length and pause.
#[derive(Debug, Clone)]
pub struct SourceControl {
    pub window: Window,
    pub k: usize,
    min_k: usize,
    max_k: usize,
    /// Drafting from this source is paused until this many tokens have been generated.
    pub paused_until: Option<usize>,
    pub pauses: usize,
}

/// Expected acceptance before a source has a record.
pub const PRIOR_ACCEPTANCE: f32 = 0.6;

impl SourceControl {
    pub fn new(window: usize, k: usize, max_k: usize) -> SourceControl {
        SourceControl {
            window: Window::new(window),
            k: k.clamp(1, max_k.max(1)),
            min_k: 1,
            max_k: max_k.max(1),
            paused_until: None,
            pauses: 0,
        }
    }

    pub fn active(&mut self, generated: usize) -> bool {
        match self.paused_until {
            Some(until) if generated < until => false,
            Some(_) => {
                // Probe again with a fresh record.
                self.paused_until = None;
                self.window.clear();
                true
            }
            None => true,
        }
    }

    pub fn rate(&self) -> f32 {
        self.window.rate(PRIOR_ACCEPTANCE)
    }

    /// Records one verify step's outcome for this source's `proposed` tokens, `accepted` of
    /// which were taken (the first rejection ends the step), then adapts: all taken and a high
    /// rate grows K, a low rate shrinks it, and a full window below `fallback_below` pauses
    /// the source for `probe_after` tokens.
    pub fn update(
        &mut self,
        proposed: usize,
        accepted: usize,
        generated: usize,
        fallback_below: f32,
        probe_after: usize,
    ) {
        if proposed == 0 {
            return;
        }
        for _ in 0..accepted {
            self.window.record(true);
        }
        if accepted < proposed {
            self.window.record(false);
        }
        let rate = self.rate();
        if accepted == proposed && rate >= 0.8 {
            self.k = (self.k + 1).min(self.max_k);
        } else if rate < fallback_below {
            self.k = self.k.saturating_sub(1).max(self.min_k);
        }
        if self.window.is_full() && rate < fallback_below {
            self.paused_until = Some(generated + probe_after);
            self.pauses += 1;
        }
    }

    pub fn set_max_k(&mut self, max_k: usize) {
        self.max_k = max_k.max(1);
        self.k = self.k.min(self.max_k);
    }
}

/// Seconds a verify pass takes for n tokens, fitted as a + b·n by least squares over recent
/// passes (each weighing `DECAY` times the one after it): what one more drafted token costs.
#[derive(Debug, Clone, Default)]
pub struct PassCost {
    weight: f64,
    x: f64,
    y: f64,
    xx: f64,
    xy: f64,
}

impl PassCost {
    const DECAY: f64 = 0.97;

    pub fn record(&mut self, tokens: usize, secs: f32) {
        let (x, y) = (tokens as f64, secs as f64);
        let d = PassCost::DECAY;
        self.weight = self.weight * d + 1.0;
        self.x = self.x * d + x;
        self.y = self.y * d + y;
        self.xx = self.xx * d + x * x;
        self.xy = self.xy * d + x * y;
    }

    /// The share of a pass of `n` tokens that one more token adds: b / (a + b·n); `None` until
    /// passes of different sizes have been timed.
    pub fn extra_share(&self, n: usize) -> Option<f64> {
        let spread = self.weight * self.xx - self.x * self.x;
        if self.weight < 2.0 || spread <= 1e-6 * self.weight * self.weight {
            return None;
        }
        let b = ((self.weight * self.xy - self.x * self.y) / spread).max(0.0);
        let a = ((self.y - b * self.x) / self.weight).max(0.0);
        let pass = a + b * n as f64;
        (pass > 0.0).then(|| b / pass)
    }
}

/// How many tokens the prompt lookup's further continuations (after its first) may add to a
/// step's tree. They pay when the tokens they get accepted, per token they add, are more than
/// the share of a pass one token costs (`PassCost`): then the allowance grows, else it shrinks,
/// and at none the trees pause for `probe_after` generated tokens before a probe.
#[derive(Debug, Clone)]
pub struct TreeControl {
    pub tokens: usize,
    max: usize,
    /// (tokens added, tokens of them accepted) of the latest tree steps.
    recent: VecDeque<(usize, usize)>,
    paused_until: Option<usize>,
    pub pauses: usize,
}

impl TreeControl {
    const WINDOW: usize = 8;
    const STEP: usize = 2;

    pub fn new(max: usize) -> TreeControl {
        TreeControl { tokens: max, max, recent: VecDeque::new(), paused_until: None, pauses: 0 }
    }

    /// The allowance for a step at `generated` tokens (0 while paused).
    pub fn allowance(&mut self, generated: usize) -> usize {
        match self.paused_until {
            Some(until) if generated < until => 0,
            Some(_) => {
                self.paused_until = None;
                self.recent.clear();
                self.tokens = TreeControl::STEP.min(self.max);
                self.tokens
            }
            None => self.tokens,
        }
    }

    /// A tree step's outcome: `added` tokens from further continuations, `gained` of them
    /// accepted; `share` what one token adds to a pass (`PassCost::extra_share`).
    pub fn record(&mut self, added: usize, gained: usize, share: Option<f64>, generated: usize, probe_after: usize) {
        if added == 0 {
            return;
        }
        if self.recent.len() == TreeControl::WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back((added, gained));
        let Some(share) = share else { return };
        if self.recent.len() < TreeControl::WINDOW / 2 {
            return;
        }
        let (added, gained) = self.recent.iter().fold((0, 0), |(a, g), (x, y)| (a + x, g + y));
        if gained as f64 >= share * added as f64 {
            self.tokens = (self.tokens + TreeControl::STEP).min(self.max);
        } else {
            self.tokens = self.tokens.saturating_sub(TreeControl::STEP);
            if self.tokens == 0 {
                self.paused_until = Some(generated + probe_after);
                self.pauses += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_continues_the_most_recent_longest_match() {
        // "1 2 3 4" appears twice, followed by 5 then by 9; the context ends in "2 3 4".
        let context = [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 9, 8, 2, 3, 4];
        assert_eq!(lookup(&context, 2, 3, 2), vec![9, 8]);
        // Limit respected, and no match gives nothing.
        assert_eq!(lookup(&context, 2, 3, 1), vec![9]);
        assert!(lookup(&[1, 2, 3, 7, 7], 2, 3, 4).is_empty());
        assert!(lookup(&[5, 6, 7, 8], 2, 3, 4).is_empty());
        // A shorter n-gram is used when the longer one has no earlier copy.
        assert_eq!(lookup(&[1, 2, 9, 3, 1, 2], 2, 3, 3), vec![9, 3, 1]);
    }

    #[test]
    fn lookup_branches_gathers_every_earlier_continuation() {
        // "2 3" goes on as "4 5", "7 8" and "4 6" earlier; the context ends in "2 3".
        let context = [2, 3, 4, 5, 0, 2, 3, 7, 8, 0, 2, 3, 4, 6, 0, 2, 3];
        assert_eq!(lookup_branches(&context, 2, 3, 2, 4), vec![vec![4, 6], vec![7, 8], vec![4, 5]]);
        // The first is `lookup`'s, and the count is capped.
        assert_eq!(lookup_branches(&context, 2, 3, 2, 1), vec![lookup(&context, 2, 3, 2)]);
        // A continuation already held by an earlier one is left out.
        assert_eq!(lookup_branches(&[1, 2, 9, 4, 0, 1, 2, 9, 4, 0, 1, 2], 2, 3, 2, 4), vec![vec![9, 4]]);
        assert!(lookup_branches(&[5, 6, 7, 8], 2, 3, 4, 4).is_empty());
    }

    #[test]
    fn a_pass_costs_its_fixed_part_and_a_share_per_token() {
        let mut cost = PassCost::default();
        cost.record(3, 0.13);
        assert_eq!(cost.extra_share(3), None, "one size alone says nothing of a token's share");
        for n in [1, 5, 9, 1, 12] {
            cost.record(n, 0.1 + 0.01 * n as f32);
        }
        // a = 0.1 s, b = 0.01 s: one more token on a pass of 10 is 0.01 / 0.2 of it.
        let share = cost.extra_share(10).unwrap();
        assert!((share - 0.05).abs() < 1e-3, "{share}");
    }

    #[test]
    fn further_branches_grow_while_they_pay_and_pause_when_not() {
        let mut tree = TreeControl::new(8);
        assert_eq!(tree.allowance(0), 8);
        // Half their tokens accepted against a 5 % share: they pay, and stay at the most.
        for g in 0..8 {
            tree.record(8, 4, Some(0.05), g, 64);
        }
        assert_eq!(tree.tokens, 8);
        // None accepted: the allowance falls by two a step to none, and trees pause.
        for g in 8..20 {
            tree.record(tree.tokens.max(1), 0, Some(0.05), g, 64);
            if tree.tokens == 0 {
                break;
            }
        }
        assert_eq!((tree.tokens, tree.pauses), (0, 1));
        assert_eq!(tree.allowance(30), 0, "paused");
        assert_eq!(tree.allowance(200), 2, "probed again, small");
    }

    #[test]
    fn acceptance_grows_k_then_low_acceptance_pauses_and_probing_resumes() {
        let mut c = SourceControl::new(8, 2, 6);
        for _ in 0..3 {
            c.update(c.k, c.k, 0, 0.5, 10);
        }
        assert_eq!(c.k, 5, "every draft taken: K grows by one per step");
        for g in 0..8 {
            c.update(c.k, 0, g, 0.5, 10);
        }
        assert_eq!(c.k, 1, "rejections shrink K to 1");
        assert_eq!(c.paused_until, Some(7 + 10), "a full window under 0.5 pauses the source");
        assert!(!c.active(12));
        assert!(c.active(17), "probe again after the pause");
        assert_eq!(c.rate(), PRIOR_ACCEPTANCE, "the probe starts from a clean record");
    }
}
