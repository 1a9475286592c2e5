//! The cost chooser: which way of drafting a step takes (grammar only, prompt lookup, the
//! draft model), by measured seconds per produced token, probing losers less and less often.

use super::drafting;

/// How a step drafts beyond the grammar's forced tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Choice {
    /// Grammar drafts only (none when nothing is forced): the plain step.
    Grammar,
    Lookup,
    Model,
}

/// Seconds per produced token of recent steps, per choice (moving averages), when each was
/// last measured, and how long to wait before measuring a losing choice again.
pub(super) struct Costs {
    per_token: [Option<f32>; 3],
    measured_at: [usize; 3],
    probe_every: [usize; 3],
    steps: usize,
}

impl Default for Costs {
    fn default() -> Self {
        Costs { per_token: [None; 3], measured_at: [0; 3], probe_every: [Costs::FIRST_PROBE; 3], steps: 0 }
    }
}

impl Costs {
    /// A losing choice is measured again after this many steps (costs change: the draft
    /// model's first use pays for reading the prompt, later ones do not), then after twice as
    /// many each time it still loses, up to `LAST_PROBE`.
    const FIRST_PROBE: usize = 16;
    const LAST_PROBE: usize = 512;

    fn index(choice: Choice) -> usize {
        choice as usize
    }

    fn best(&self) -> Option<f32> {
        self.per_token.iter().flatten().cloned().reduce(f32::min)
    }

    pub(super) fn record(&mut self, choice: Choice, secs: f32, tokens: usize) {
        let i = Costs::index(choice);
        let sample = secs / tokens.max(1) as f32;
        let probe = self.steps - self.measured_at[i] >= self.probe_every[i];
        self.per_token[i] = Some(match self.per_token[i] {
            // A probe after a long pause replaces the old figure rather than nudging it.
            Some(old) if !probe => 0.7 * old + 0.3 * sample,
            _ => sample,
        });
        self.steps += 1;
        self.measured_at[i] = self.steps;
        if self.best().is_some_and(|b| sample > b * 1.05) {
            if probe {
                self.probe_every[i] = (self.probe_every[i] * 2).min(Costs::LAST_PROBE);
            }
        } else {
            self.probe_every[i] = Costs::FIRST_PROBE;
        }
    }

    /// The cheapest option; an option never measured, or due for a probe, is tried.
    pub(super) fn choose(&self, options: &[Choice], controls: &[drafting::SourceControl; 3]) -> Choice {
        let due = |c: &Choice| {
            let i = Costs::index(*c);
            self.per_token[i].is_none() || self.steps - self.measured_at[i] >= self.probe_every[i]
        };
        if let Some(c) = options.iter().find(|c| due(c)) {
            return *c;
        }
        // Equal costs favour the source that accepts more.
        *options
            .iter()
            .min_by(|a, b| {
                let cost = |c: &Choice| self.per_token[Costs::index(*c)].unwrap_or(f32::MAX);
                cost(a).total_cmp(&cost(b)).then_with(|| {
                    let rate = |c: &Choice| match c {
                        Choice::Grammar => 0.0,
                        Choice::Lookup => controls[1].rate(),
                        Choice::Model => controls[2].rate(),
                    };
                    rate(b).total_cmp(&rate(a))
                })
            })
            .expect("options hold at least the plain step")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cheapest_way_of_drafting_wins_and_losers_are_probed_less_and_less() {
        let controls = [
            drafting::SourceControl::new(32, 4, 8),
            drafting::SourceControl::new(32, 4, 8),
            drafting::SourceControl::new(32, 4, 8),
        ];
        let all = [Choice::Grammar, Choice::Lookup, Choice::Model];
        let mut costs = Costs::default();
        // Each option is tried once first.
        for expected in all {
            let c = costs.choose(&all, &controls);
            assert_eq!(c, expected);
            let secs = match c {
                Choice::Grammar => 0.030,
                Choice::Lookup => 0.020,
                Choice::Model => 0.060,
            };
            costs.record(c, secs, 1);
        }
        // Then the cheapest, until a loser is due for a probe; a probe that still loses
        // doubles the wait before the next one.
        let mut model_probes = Vec::new();
        for step in 0..200 {
            let c = costs.choose(&all, &controls);
            let secs = match c {
                Choice::Grammar => 0.030,
                Choice::Lookup => 0.020,
                Choice::Model => 0.060,
            };
            if c == Choice::Model {
                model_probes.push(step);
            }
            costs.record(c, secs, 1);
        }
        assert!(model_probes.len() >= 2, "{model_probes:?}");
        let gaps: Vec<usize> = model_probes.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] > g[0]), "probes back off: {gaps:?}");
        // A choice that becomes cheapest takes over (the average follows within a few steps).
        for _ in 0..5 {
            costs.record(Choice::Model, 0.005, 1);
        }
        assert_eq!(costs.choose(&all, &controls), Choice::Model);
        // Only the options offered are chosen.
        assert_eq!(costs.choose(&[Choice::Grammar], &controls), Choice::Grammar);
    }
}
