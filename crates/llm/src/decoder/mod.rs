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
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use llguidance::api::TopLevelGrammar;
use llguidance::{Matcher, ParserFactory};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use toktrie::SimpleVob;
use ts_rs::TS;

use crate::thermal::{PowerState, Throttle};
use crate::{Generation, GenerationRequest, GenerationStats, Progress};
use costs::{Choice, Costs};

mod attention;
mod costs;
mod device;
mod drafting;
mod kernels;
mod network;
mod prompt_cache;
mod sampling;
mod text;
mod transformer;
mod weights;

pub use device::{DeviceCache, DeviceTransformer};
pub use drafting::{lookup, DraftSource, SOURCES};
pub use kernels::kernel_name;
pub use network::{Cache, Network, Placement};
pub use sampling::{argmax, probabilities, sample};
pub use text::ChatText;
pub use transformer::{open_gguf, Config, KvCache, Transformer};
pub(crate) use weights::widened_to_q8_0;

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

    fn source_mut(&mut self, source: DraftSource) -> &mut SourceStats {
        match source {
            DraftSource::Grammar => &mut self.grammar,
            DraftSource::Lookup => &mut self.lookup,
            DraftSource::Model => &mut self.model,
        }
    }
}

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

/// A drafted token: who proposed it and, for sampled model drafts, the draft distribution.
struct Draft {
    token: u32,
    source: DraftSource,
    q: Option<Vec<f32>>,
}

/// The state of one reply being decoded.
struct Run {
    tokens: Vec<u32>,
    prompt_len: usize,
    cache: Cache,
    matcher: Option<Matcher>,
    rng: StdRng,
    temperature: Option<f32>,
    stop_tokens: Vec<u32>,
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
        let (mut decoded, cache) =
            self.decode_from(request, &prompt, cache, started, speculation, seed, on_text, stop)?;
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
            let (mut decoded, _) = self.decode_from(
                request,
                &prompt,
                cache.clone(),
                run_started,
                speculation,
                run_seed,
                |_| {},
                || false,
            )?;
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

    #[allow(clippy::too_many_arguments)]
    fn decode_from(
        &self,
        request: &GenerationRequest,
        prompt: &[u32],
        cache: Cache,
        started: Instant,
        speculation: &Speculation,
        seed: u64,
        mut on_text: impl FnMut(&str),
        stop: impl Fn() -> bool,
    ) -> Result<(Decoded, Cache)> {
        let prompt_done = started.elapsed();
        let matcher = match &request.schema {
            Some(schema) => {
                let parser = self
                    .grammar
                    .create_parser(TopLevelGrammar::from_json_schema(schema.clone()))
                    .context("the answer schema is not a grammar the decoder accepts")?;
                Some(Matcher::new(Ok(parser)))
            }
            None => None,
        };
        let mut run = Run {
            tokens: prompt.to_vec(),
            prompt_len: prompt.len(),
            cache,
            matcher,
            rng: StdRng::seed_from_u64(seed),
            temperature: request.temperature.map(|t| t as f32).filter(|t| *t > 0.0),
            stop_tokens: self.text.stop.clone(),
        };
        let mut stream = text::TextStream::default();
        let mut first_text: Option<Duration> = None;
        let mut stats = SpeculationStats::default();
        let decode_started = Instant::now();
        let finish_reason = self.decode(&mut run, request.max_tokens, speculation, &mut stats, &mut |run: &Run| {
            if let Some(piece) = stream.next(&self.text, &run.tokens[run.prompt_len..])? {
                first_text.get_or_insert_with(|| started.elapsed());
                on_text(&piece);
            }
            Ok(!stop())
        })?;
        let decode_time = decode_started.elapsed();
        let total_time = started.elapsed();
        let generated: Vec<u32> = run.tokens[run.prompt_len..].to_vec();
        stats.generated_tokens = generated.len();
        stats.decode_secs = decode_time.as_secs_f32();
        stats.decode_tokens_per_sec = per_second(generated.len(), decode_time);
        let text = self.text.decode(&generated)?;
        let generation = Generation {
            text,
            stats: GenerationStats {
                prompt_tokens: prompt.len(),
                prompt_reused_tokens: 0,
                completion_tokens: generated.len(),
                time_to_first_token: first_text.unwrap_or(total_time),
                total_time,
                decode_tokens_per_sec: stats.decode_tokens_per_sec,
                prompt_tokens_per_sec: per_second(prompt.len(), prompt_done),
                finish_reason,
            },
        };
        Ok((Decoded { generation, tokens: generated, speculation: stats }, run.cache))
    }

    /// The decode loop. `on_step` sees the run after each verify step and returns false to
    /// cancel. Returns the finish reason.
    fn decode(
        &self,
        run: &mut Run,
        max_tokens: usize,
        speculation: &Speculation,
        stats: &mut SpeculationStats,
        on_step: &mut dyn FnMut(&Run) -> Result<bool>,
    ) -> Result<String> {
        let vocab = self.target.config().vocab;
        // Grammar drafts start at full length (they are almost always right); lookup and model
        // drafts start short and grow with acceptance: a rejected token costs a token's compute.
        let mut controls = [
            drafting::SourceControl::new(speculation.window, speculation.max_free, speculation.max_free),
            drafting::SourceControl::new(speculation.window, speculation.initial_k, speculation.max_free),
            drafting::SourceControl::new(speculation.window, speculation.initial_k, speculation.max_k),
        ];
        let mut power = PowerState::UNKNOWN;
        let mut throttle = Throttle::for_state(power);
        let mut draft_cache: Option<(Cache, Vec<u32>)> = None;
        let mut costs = Costs::default();
        let mut pending = *run.tokens.last().expect("prompt is not empty");
        // Where wider passes would change a token's logits, no more drafts than fit one.
        let widest = self.target.widest_verify().unwrap_or(usize::MAX);

        loop {
            let generated = run.tokens.len() - run.prompt_len;
            if generated >= max_tokens {
                return Ok("length".into());
            }
            if speculation.enabled && speculation.respect_thermal && stats.verify_steps.is_multiple_of(32) {
                power = PowerState::read();
                throttle = Throttle::for_state(power);
                stats.power = Some(power);
                controls[2].set_max_k(speculation.max_k / throttle.max_k_divisor);
            }
            let mask0 = match next_mask(run)? {
                Next::Done => return Ok("stop".into()),
                Next::Free => None,
                Next::Mask(mask) => Some(mask),
            };

            let budget = (max_tokens - generated - 1).min(widest - 1);
            let step_started = Instant::now();
            let mut choice = Choice::Grammar;
            let drafts = if speculation.enabled && throttle.free_drafts && budget > 0 {
                self.propose(
                    run,
                    speculation,
                    &mut controls,
                    throttle,
                    &mut draft_cache,
                    generated,
                    budget,
                    stats,
                    &mut costs,
                    &mut choice,
                )?
            } else {
                Vec::new()
            };

            let mut input = Vec::with_capacity(drafts.len() + 1);
            input.push(pending);
            input.extend(drafts.iter().map(|d| d.token));
            let base = run.cache.len();
            let logits = self.target.forward(&input, &mut run.cache, 0)?;
            stats.verify_steps += 1;

            let mut accepted = 0;
            let mut mask = mask0;
            let mut next = None;
            for i in 0..=drafts.len() {
                if i > 0 {
                    mask = match next_mask(run)? {
                        Next::Free => None,
                        Next::Mask(mask) => Some(mask),
                        Next::Done => {
                            // The grammar is complete after the drafts accepted so far.
                            run.cache.truncate(base + 1 + accepted);
                            on_step(run)?;
                            return Ok("stop".into());
                        }
                    };
                }
                let row = &logits[i * vocab..(i + 1) * vocab];
                let draft = drafts.get(i);
                let choice = match (run.temperature, draft) {
                    (None, Some(d)) => {
                        let best = argmax(row, mask.as_ref());
                        if best == d.token {
                            Ok(())
                        } else {
                            Err(best)
                        }
                    }
                    (None, None) => Err(argmax(row, mask.as_ref())),
                    (Some(t), Some(d)) => {
                        let p = probabilities(row, mask.as_ref(), t);
                        let q_d = d.q.as_ref().map_or(1.0, |q| q[d.token as usize]);
                        let keep = q_d <= 0.0 || run.rng.random::<f32>() < (p[d.token as usize] / q_d).min(1.0);
                        if keep {
                            Ok(())
                        } else {
                            // Residual (p − q)+: with a one-hot q, p without the drafted token.
                            let mut residual = p.clone();
                            match &d.q {
                                Some(q) => residual.iter_mut().zip(q).for_each(|(r, qi)| *r = (*r - qi).max(0.0)),
                                None => residual[d.token as usize] = 0.0,
                            }
                            Err(sample(&residual, &mut run.rng)
                                .unwrap_or_else(|| sample(&p, &mut run.rng).unwrap_or(d.token)))
                        }
                    }
                    (Some(t), None) => {
                        let p = probabilities(row, mask.as_ref(), t);
                        Err(sample(&p, &mut run.rng).context("no token is allowed here")?)
                    }
                };
                match choice {
                    Ok(()) => {
                        let d = &drafts[i];
                        accepted += 1;
                        stats.source_mut(d.source).accepted += 1;
                        if self.take(run, d.token)? {
                            run.cache.truncate(base + 1 + accepted);
                            on_step(run)?;
                            return Ok("stop".into());
                        }
                    }
                    Err(token) => {
                        next = Some(token);
                        break;
                    }
                }
            }
            // Per-source outcomes: drafts are grouped by source in proposal order.
            for (index, source) in SOURCES.iter().enumerate() {
                let Some(first) = drafts.iter().position(|d| d.source == *source) else { continue };
                if accepted < first {
                    continue; // rejected before this source's drafts were reached
                }
                let proposed = drafts.iter().filter(|d| d.source == *source).count();
                let taken = (accepted - first).min(proposed);
                controls[index].update(proposed, taken, generated, speculation.fallback_below, speculation.probe_after);
                stats.source_mut(*source).pauses = controls[index].pauses;
            }
            run.cache.truncate(base + 1 + accepted);
            costs.record(choice, step_started.elapsed().as_secs_f32(), accepted + 1);
            let token = next.expect("a verify step always yields a token");
            let ended = self.take(run, token)?;
            if !on_step(run)? {
                return Ok("cancelled".into());
            }
            if ended {
                return Ok("stop".into());
            }
            pending = token;
        }
    }

    /// Appends a chosen token; true when it ends the reply (a stop token, or the grammar is done).
    fn take(&self, run: &mut Run, token: u32) -> Result<bool> {
        if run.stop_tokens.contains(&token) {
            return Ok(true);
        }
        run.tokens.push(token);
        if let Some(m) = run.matcher.as_mut() {
            m.consume_token(token).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
            return Ok(m.is_stopped());
        }
        Ok(false)
    }

    /// Drafts for the step after `run.tokens`: first what the grammar forces, then from the
    /// prompt lookup or the draft model, whichever has accepted more of late.
    #[allow(clippy::too_many_arguments)]
    fn propose(
        &self,
        run: &mut Run,
        speculation: &Speculation,
        controls: &mut [drafting::SourceControl; 3],
        throttle: Throttle,
        draft_cache: &mut Option<(Cache, Vec<u32>)>,
        generated: usize,
        budget: usize,
        stats: &mut SpeculationStats,
        costs: &mut Costs,
        chosen: &mut Choice,
    ) -> Result<Vec<Draft>> {
        let mut drafts: Vec<Draft> = Vec::new();
        let mut consumed = 0;
        let result = (|| -> Result<()> {
            if speculation.grammar_drafts && controls[0].active(generated) {
                if let Some(m) = run.matcher.as_mut() {
                    let forced = m.compute_ff_tokens();
                    let take = forced.len().min(speculation.max_free).min(budget);
                    let valid = m.validate_tokens(&forced[..take]).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
                    m.consume_tokens(&forced[..valid]).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
                    consumed += valid;
                    drafts.extend(forced[..valid].iter().map(|&token| Draft {
                        token,
                        source: DraftSource::Grammar,
                        q: None,
                    }));
                }
            }
            let room = budget - drafts.len();
            if room == 0 {
                return Ok(());
            }
            let mut context = run.tokens.clone();
            context.extend(drafts.iter().map(|d| d.token));
            let lookup_candidate = if speculation.lookup_drafts && controls[1].active(generated) {
                drafting::lookup(&context, 2, 4, controls[1].k.min(room))
            } else {
                Vec::new()
            };
            let model_ready = speculation.model_drafts
                && throttle.model_drafts
                && self.draft.is_some()
                && controls[2].active(generated);
            // Among the sources that can draft now, the one whose recent steps produced tokens at
            // the lowest cost — acceptance is what it buys, but a draft model that is right 80 %
            // of the time still loses where verifying costs nearly a step per token.
            let mut options = vec![Choice::Grammar];
            if !lookup_candidate.is_empty() {
                options.push(Choice::Lookup);
            }
            if model_ready {
                options.push(Choice::Model);
            }
            let choice = if speculation.choose_by_cost {
                costs.choose(&options, controls)
            } else {
                options.iter().copied().find(|c| *c != Choice::Grammar).unwrap_or(Choice::Grammar)
            };
            *chosen = choice;
            if choice == Choice::Lookup {
                let valid = match run.matcher.as_mut() {
                    Some(m) => m.validate_tokens(&lookup_candidate).map_err(|e| anyhow::anyhow!("grammar: {e}"))?,
                    None => lookup_candidate.len(),
                };
                let valid = lookup_candidate[..valid].iter().position(|t| run.stop_tokens.contains(t)).unwrap_or(valid);
                drafts.extend(lookup_candidate[..valid].iter().map(|&token| Draft {
                    token,
                    source: DraftSource::Lookup,
                    q: None,
                }));
            } else if choice == Choice::Model {
                let k = controls[2].k.min(room);
                consumed += self.draft_from_model(run, speculation, &context, k, draft_cache, &mut drafts, stats)?;
            }
            Ok(())
        })();
        if let Some(m) = run.matcher.as_mut() {
            m.rollback(consumed).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
        }
        result?;
        for d in &drafts {
            stats.source_mut(d.source).proposed += 1;
        }
        Ok(drafts)
    }

    /// Runs the draft model greedily (or sampling, with its distribution kept for the
    /// rejection rule) for up to `k` tokens after `context`. Returns how many tokens it fed
    /// to the grammar matcher (the caller rolls them back).
    #[allow(clippy::too_many_arguments)]
    fn draft_from_model(
        &self,
        run: &mut Run,
        speculation: &Speculation,
        context: &[u32],
        k: usize,
        draft_cache: &mut Option<(Cache, Vec<u32>)>,
        drafts: &mut Vec<Draft>,
        stats: &mut SpeculationStats,
    ) -> Result<usize> {
        let model = self.draft.as_ref().expect("checked by the caller");
        let vocab = model.config().vocab.min(self.target.config().vocab);
        // The draft sees the latest `draft_context` tokens of the reply's context, from a fixed
        // origin so its cache stays valid from step to step.
        let origin = run.prompt_len.saturating_sub(speculation.draft_context);
        if draft_cache.is_none() {
            let capacity = (run.cache.capacity() - origin).max(16);
            *draft_cache = Some((model.new_cache(capacity)?, Vec::new()));
        }
        let (cache, fed) = draft_cache.as_mut().expect("made above");
        let wanted = &context[origin..];
        // At least the last token is fed again: its logits start the draft.
        let common = fed.iter().zip(wanted).take_while(|(a, b)| a == b).count().min(wanted.len() - 1);
        fed.truncate(common);
        cache.truncate(common);
        let mut logits = model.forward(&wanted[common..], cache, wanted.len() - common - 1)?;
        fed.extend_from_slice(&wanted[common..]);
        stats.draft_model_steps += 1;
        let temperature = speculation.draft_temperature.or(run.temperature);
        let mut consumed = 0;
        for j in 0..k {
            if j > 0 {
                let last = drafts.last().expect("a draft was pushed").token;
                logits = model.forward(&[last], cache, 0)?;
                fed.push(last);
                stats.draft_model_steps += 1;
            }
            let mask = match next_mask(run)? {
                Next::Free => None,
                Next::Mask(mask) => Some(mask),
                Next::Done => break,
            };
            let row = &logits[..vocab];
            let p = probabilities(row, mask.as_ref(), temperature.unwrap_or(1.0));
            let token = match temperature {
                None => argmax(row, mask.as_ref()),
                Some(_) => match sample(&p, &mut run.rng) {
                    Some(t) => t,
                    None => break,
                },
            };
            let top = p.iter().cloned().fold(0.0f32, f32::max);
            if top < speculation.min_draft_probability || run.stop_tokens.contains(&token) {
                break;
            }
            // Sampled drafts keep their distribution for the rejection rule.
            let q = temperature.is_some().then(|| pad(p, self.target.config().vocab));
            if let Some(m) = run.matcher.as_mut() {
                m.consume_token(token).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
                consumed += 1;
            }
            drafts.push(Draft { token, source: DraftSource::Model, q });
        }
        Ok(consumed)
    }
}

/// What may come next under the grammar.
enum Next {
    /// No grammar: any token.
    Free,
    Mask(SimpleVob),
    /// The grammar is complete: only an end-of-reply token could follow.
    Done,
}

fn next_mask(run: &mut Run) -> Result<Next> {
    let Some(m) = run.matcher.as_mut() else { return Ok(Next::Free) };
    if m.is_stopped() {
        return Ok(Next::Done);
    }
    match m.compute_mask() {
        Ok(mask) => {
            let only_stop =
                mask.num_set() <= run.stop_tokens.len() && mask.iter().all(|t| run.stop_tokens.contains(&t));
            Ok(if only_stop { Next::Done } else { Next::Mask(mask) })
        }
        // The parser can find out it is finished while computing the mask.
        Err(_) if m.is_stopped() => Ok(Next::Done),
        Err(e) => Err(anyhow::anyhow!("grammar: {e}")),
    }
}

fn pad(mut p: Vec<f32>, len: usize) -> Vec<f32> {
    p.resize(len, 0.0);
    p
}

fn per_second(tokens: usize, time: Duration) -> f32 {
    let secs = time.as_secs_f32();
    if secs > 0.0 {
        tokens as f32 / secs
    } else {
        0.0
    }
}
