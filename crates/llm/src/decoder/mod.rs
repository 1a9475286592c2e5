//! Quire's own decoder: speculative decoding over a target model and optional draft model
//! (GGUF, same tokenizer), with drafts also taken from the grammar and from the prompt.
//!
//! Each verify step runs the target once over `[last token, d1 … dk]` and walks the drafts:
//! greedy keeps a draft while it equals the target's masked argmax; sampling keeps it with
//! probability min(1, p/q) and on rejection draws from (p − q)+. Either way one token more
//! than the accepted drafts comes out of every step, and the output is the target's own —
//! token for token under greedy decoding, because a token's logits do not depend on how many
//! tokens were verified with it (see `transformer`). Rejected tokens' cache entries are cut
//! off by lowering the cache's length.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Result};
use llguidance::ParserFactory;

use crate::{Generation, GenerationRequest, GenerationStats, Progress};

mod attention;
mod costs;
mod device;
mod drafting;
mod kernels;
mod network;
mod prompt_cache;
mod sampling;
mod speculation;
mod speculator;
mod text;
mod transformer;
mod weights;

pub use attention::KEY_BLOCK;
pub use device::{DeviceCache, DeviceTransformer};
pub use drafting::{lookup, lookup_branches, DraftSource, SOURCES};
pub use kernels::kernel_name;
pub use network::{Cache, Network, Placement};
pub use sampling::{argmax, probabilities, sample};
pub use speculation::{SourceStats, Speculation, SpeculationStats};
pub use text::ChatText;
pub use transformer::{open_gguf, Config, KvCache, KvPrecision, Transformer};
pub(crate) use weights::widened_to_q8_0;

use speculator::Prefilled;

pub struct Decoded {
    pub generation: Generation,
    pub tokens: Vec<u32>,
    pub speculation: SpeculationStats,
}

pub struct Decoder {
    target: Network,
    draft: Option<Network>,
    text: ChatText,
    grammar: Arc<ParserFactory>,
    target_path: PathBuf,
    draft_path: Option<PathBuf>,
    prompt_cache: prompt_cache::PromptCache,
}

/// Counts the `reused` prompt tokens in `stats`: as reused, and out of the prompt's speed
/// (which is over the tokens processed, for comparisons with other runners).
fn reused_prompt(stats: &mut GenerationStats, reused: usize) {
    stats.prompt_reused_tokens = reused;
    if stats.prompt_tokens > 0 {
        stats.prompt_tokens_per_sec *= stats.prompt_tokens.saturating_sub(reused) as f32 / stats.prompt_tokens as f32;
    }
}

impl Decoder {
    /// Loads the target (and the draft, which must share its tokenizer) from GGUF files, each
    /// header read once, onto the machine's GPU where this build and the machine have one, else
    /// for the CPU kernels (`Placement::best`).
    pub fn load(target: &Path, draft: Option<&Path>) -> Result<Decoder> {
        Decoder::load_on(target, draft, Placement::best())
    }

    /// `load`, the networks placed as `placement` says.
    pub fn load_on(target: &Path, draft: Option<&Path>, placement: Placement) -> Result<Decoder> {
        let (content, mut reader) = transformer::open_gguf(target)?;
        let text = ChatText::from_gguf(target, &content)?;
        let target_model = Network::load(target, &content, &mut reader, &placement)?;
        let draft_model = match draft {
            Some(path) => {
                let (content, mut reader) = transformer::open_gguf(path)?;
                let draft_text = ChatText::from_gguf(path, &content)?;
                if draft_text.tokenizer.get_vocab(true) != text.tokenizer.get_vocab(true) {
                    bail!(
                        "the draft model {} does not share the tokenizer of {}; pick a draft of the same family",
                        path.display(),
                        target.display()
                    );
                }
                Some(Network::load(path, &content, &mut reader, &placement)?)
            }
            None => None,
        };
        let grammar = text.grammar_factory(target_model.config().vocab)?;
        Ok(Decoder {
            target: target_model,
            draft: draft_model,
            text,
            grammar,
            target_path: target.to_path_buf(),
            draft_path: draft.map(Path::to_path_buf),
            prompt_cache: Default::default(),
        })
    }

    /// Where the networks run.
    pub fn placement(&self) -> Placement {
        self.target.placement()
    }

    /// The target network (for tests that compare placements).
    pub fn target(&self) -> &Network {
        &self.target
    }

    /// How many tokens of the last prompt are kept processed for the next one that begins the
    /// same way, and the bytes of memory they hold.
    pub fn kept_prompt(&self) -> (usize, usize) {
        self.prompt_cache.kept()
    }

    /// Processes the start that every prompt of `system` whose user turn begins with
    /// `user_start` shares (the chat template, the instructions, the turn's fixed opening) and
    /// keeps it, so the first question after loading waits only for its own tokens. Does
    /// nothing when a prompt is kept already. Returns how many tokens it processed.
    ///
    /// The tokens processed are those two prompts with different text after `user_start`
    /// share (where the tokenizer merges the end of `user_start` with what follows, that end
    /// is left out). Exact like every kept prompt: the next prompt reuses only the tokens it
    /// shares with this one (`prompt_cache`).
    pub fn warm(&self, system: &str, user_start: &str) -> Result<usize> {
        if self.prompt_cache.kept().0 > 0 {
            return Ok(0);
        }
        let one = self.text.prompt(system, &format!("{user_start}a"))?;
        let other = self.text.prompt(system, &format!("{user_start}7"))?;
        let shared = one.iter().zip(&other).take_while(|(a, b)| a == b).count();
        let prompt = &one[..shared];
        if prompt.is_empty() {
            return Ok(0);
        }
        let mut cache = self.target.new_cache(prompt.len())?;
        self.target.forward(prompt, &mut cache, prompt.len())?;
        self.prompt_cache.keep(prompt, cache);
        Ok(prompt.len())
    }

    /// Forgets the kept prompt: the next one is processed from its first token.
    pub fn forget_prompt(&self) {
        self.prompt_cache.clear();
    }

    pub fn target_path(&self) -> &Path {
        &self.target_path
    }

    pub fn draft_path(&self) -> Option<&Path> {
        self.draft_path.as_deref()
    }

    pub fn text(&self) -> &ChatText {
        &self.text
    }

    /// Decodes a reply to `request`, telling `on_progress` how far the prompt got, then each
    /// new piece of text; `stop` returning true ends it with reason "cancelled".
    pub fn generate(
        &self,
        request: &GenerationRequest,
        speculation: &Speculation,
        seed: u64,
        mut on_progress: impl FnMut(Progress<'_>),
        stop: impl Fn() -> bool,
    ) -> Result<Decoded> {
        let started = Instant::now();
        let on_prompt = &mut |done, total| on_progress(Progress::Prompt { done, total });
        let (prompt, cache, reused) = self.prefill(request, speculation, on_prompt, &stop)?;
        let on_text = |piece: &str| on_progress(Progress::Text(piece));
        let prefilled = Prefilled { prompt: &prompt, cache, started };
        let (mut decoded, cache) = self.decode_from(request, prefilled, speculation, seed, on_text, stop)?;
        reused_prompt(&mut decoded.generation.stats, reused);
        self.prompt_cache.keep(&prompt[..prompt.len() - 1], cache);
        Ok(decoded)
    }

    /// Decodes `request` once plainly and once per entry of `speculations`, all from one
    /// prompt cache (the prompt is processed once): for side-by-side benchmarks and the
    /// exactness check. The first result is the plain one; run `i` samples with seed `seed + i`
    /// (independent draws when sampling).
    pub fn compare(
        &self,
        request: &GenerationRequest,
        speculations: &[Speculation],
        seed: u64,
    ) -> Result<Vec<Decoded>> {
        let widest = speculations.iter().fold(Speculation::off(), |a, s| Speculation {
            max_free: a.max_free.max(s.max_free),
            max_k: a.max_k.max(s.max_k),
            ..a
        });
        let started = Instant::now();
        let (prompt, cache, reused) = self.prefill(request, &widest, &mut |_, _| {}, &|| false)?;
        let prompt_time = started.elapsed();
        let mut out = Vec::with_capacity(speculations.len() + 1);
        for (i, speculation) in std::iter::once(&Speculation::off()).chain(speculations).enumerate() {
            // Each run's clock starts as if its prompt had just been processed.
            let run_started = Instant::now() - prompt_time;
            let run_seed = seed.wrapping_add(i as u64);
            let prefilled = Prefilled { prompt: &prompt, cache: cache.clone(), started: run_started };
            let (mut decoded, _) = self.decode_from(request, prefilled, speculation, run_seed, |_| {}, || false)?;
            reused_prompt(&mut decoded.generation.stats, reused);
            out.push(decoded);
        }
        self.prompt_cache.keep(&prompt[..prompt.len() - 1], cache);
        Ok(out)
    }

    /// Processes the prompt (all but its last token, which the first decode step runs) into a
    /// cache, from where the kept last prompt stops matching it (`prompt_cache`), in blocks of
    /// `PREFILL_BLOCK` tokens so that `stop` is seen within a block's time (a client that went
    /// away does not keep the CPU busy for the whole prompt) and `on_prompt(done, total)` can
    /// say how far it got, before the first block and after each. Logits do not depend on how
    /// tokens are grouped into passes, so neither the blocks nor the reuse change anything
    /// else. Returns the prompt, its cache and how many of its tokens were reused.
    fn prefill(
        &self,
        request: &GenerationRequest,
        speculation: &Speculation,
        on_prompt: &mut dyn FnMut(usize, usize),
        stop: &dyn Fn() -> bool,
    ) -> Result<(Vec<u32>, Cache, usize)> {
        const PREFILL_BLOCK: usize = 256;
        let prompt = self.text.prompt(&request.system, &request.user)?;
        if prompt.is_empty() {
            bail!("the prompt is empty");
        }
        let capacity = prompt.len() + request.max_tokens + speculation.max_free.max(speculation.max_k) + 2;
        if capacity > self.target.config().context {
            bail!(
                "the prompt ({} tokens) and reply ({} tokens) exceed the model's context of {} tokens; ask with fewer passages",
                prompt.len(),
                request.max_tokens,
                self.target.config().context
            );
        }
        // Rounded up, so the next prompt of about this length fits the same buffers.
        let room = capacity.next_multiple_of(PREFILL_BLOCK).min(self.target.config().context);
        let total = prompt.len();
        let (mut cache, reused) = self.prompt_cache.start(&self.target, &prompt[..total - 1], room)?;
        on_prompt(reused, total);
        let mut done = reused;
        for block in prompt[reused..total - 1].chunks(PREFILL_BLOCK) {
            if stop() {
                bail!("cancelled");
            }
            self.target.forward(block, &mut cache, usize::MAX)?;
            done += block.len();
            on_prompt(done, total);
        }
        // The last token goes with the first decode step, a step's time: counted as done.
        on_prompt(total, total);
        Ok((prompt, cache, reused))
    }
}
