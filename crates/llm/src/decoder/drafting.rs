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
/// tokens (longest `n` first, from `max_ngram` down to `min_ngram`), at most `limit` of them.
pub fn lookup(context: &[u32], min_ngram: usize, max_ngram: usize, limit: usize) -> Vec<u32> {
    if limit == 0 {
        return Vec::new();
    }
    for n in (min_ngram..=max_ngram).rev() {
        if context.len() <= n {
            continue;
        }
        let tail = &context[context.len() - n..];
        // Most recent earlier occurrence: the nearest copy is the likeliest to continue alike.
        for start in (0..context.len() - n).rev() {
            if &context[start..start + n] == tail {
                let from = start + n;
                let to = (from + limit).min(context.len());
                if from < to {
                    return context[from..to].to_vec();
                }
            }
        }
    }
    Vec::new()
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
