//! How to speculate (`Speculation`) and how it went (`SpeculationStats`).

use serde::Serialize;
use ts_rs::TS;

use super::DraftSource;
use crate::thermal::PowerState;

/// How (and whether) to speculate.
#[derive(Debug, Clone)]
pub struct Speculation {
    /// Off: plain decoding, one target step per token.
    pub enabled: bool,
    pub grammar_drafts: bool,
    pub lookup_drafts: bool,
    /// Use the draft model when one is loaded.
    pub model_drafts: bool,
    /// Most tokens drafted by the model in one step; K starts at `initial_k` and adapts.
    pub max_k: usize,
    pub initial_k: usize,
    /// Most tokens taken from the grammar or the prompt in one step (they cost no model run).
    pub max_free: usize,
    /// Most continuations the prompt lookup proposes in one greedy step, verified together as
    /// a tree (1: the most recent only, a chain). 1 by default: on a 2-core CPU a verified
    /// token costs a quarter of a pass, and trees of every earlier continuation were slower
    /// than chains on RAG answers (BENCHMARKS.md, "Drafts in trees")…
    pub lookup_branches: usize,
    /// …and most tokens the continuations after the first add to the tree (each costs a
    /// token's share of the verify pass; the allowance adapts below this, `TreeControl`).
    pub tree_tokens: usize,
    /// The draft model stops proposing once its top probability falls below this.
    pub min_draft_probability: f32,
    /// Outcomes remembered per source.
    pub window: usize,
    /// A source whose full window accepts less than this is paused…
    pub fallback_below: f32,
    /// …for this many generated tokens, then probed again.
    pub probe_after: usize,
    /// The draft model sees at most this many of the latest tokens (its prompt costs time too).
    pub draft_context: usize,
    /// Sampling temperature of the draft model; `None` = the target's.
    pub draft_temperature: Option<f32>,
    /// Back off under thermal pressure and on battery saver.
    pub respect_thermal: bool,
    /// Pick each step's draft source by its measured cost per produced token; `false` always
    /// drafts when a source can (lookup first, else the model): for measuring a source itself.
    pub choose_by_cost: bool,
}

impl Default for Speculation {
    fn default() -> Self {
        Speculation {
            enabled: true,
            grammar_drafts: true,
            lookup_drafts: true,
            model_drafts: true,
            max_k: 6,
            initial_k: 3,
            max_free: 16,
            lookup_branches: 1,
            tree_tokens: 8,
            min_draft_probability: 0.35,
            window: 32,
            fallback_below: 0.5,
            probe_after: 64,
            draft_context: 256,
            draft_temperature: None,
            respect_thermal: true,
            choose_by_cost: true,
        }
    }
}

impl Speculation {
    pub fn off() -> Speculation {
        Speculation { enabled: false, ..Speculation::default() }
    }
}

#[derive(Debug, Clone, Default, Serialize, TS)]
pub struct SourceStats {
    pub proposed: usize,
    pub accepted: usize,
    /// Times the source was paused for low acceptance.
    pub pauses: usize,
}

#[derive(Debug, Clone, Default, Serialize, TS)]
pub struct SpeculationStats {
    /// Target forward passes after the prompt.
    pub verify_steps: usize,
    /// Of them, passes that verified a tree of drafts (more than one continuation).
    pub tree_steps: usize,
    /// Tokens the lookup's further continuations added to trees, and of them accepted.
    pub branch_proposed: usize,
    pub branch_accepted: usize,
    /// Times trees paused because their further continuations did not pay.
    pub tree_pauses: usize,
    pub generated_tokens: usize,
    pub grammar: SourceStats,
    pub lookup: SourceStats,
    pub model: SourceStats,
    /// Draft-model forward passes (catch-up batches included).
    pub draft_model_steps: usize,
    /// Reply tokens per second of decoding (the prompt's last token runs in the first decode
    /// step, so every reply token counts).
    pub decode_tokens_per_sec: f32,
    /// Seconds from the end of the prompt to the last token.
    pub decode_secs: f32,
    pub power: Option<PowerState>,
}

impl SpeculationStats {
    /// Mean tokens produced per target step (accepted drafts plus the one the step adds).
    pub fn tokens_per_step(&self) -> f32 {
        if self.verify_steps == 0 {
            0.0
        } else {
            self.generated_tokens as f32 / self.verify_steps as f32
        }
    }

    pub fn source(&self, source: DraftSource) -> &SourceStats {
        match source {
            DraftSource::Grammar => &self.grammar,
            DraftSource::Lookup => &self.lookup,
            DraftSource::Model => &self.model,
        }
    }

    pub(super) fn source_mut(&mut self, source: DraftSource) -> &mut SourceStats {
        match source {
            DraftSource::Grammar => &mut self.grammar,
            DraftSource::Lookup => &mut self.lookup,
            DraftSource::Model => &mut self.model,
        }
    }
}
