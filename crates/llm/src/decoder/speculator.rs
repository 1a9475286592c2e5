//! The decode loop: verify steps over the drafts proposed for each (the grammar's, the
//! prompt lookup's, the draft model's), the tokens kept by the greedy or sampling rule, the
//! throttle and the measured costs that choose a step's draft source.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use llguidance::api::TopLevelGrammar;
use llguidance::Matcher;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use toktrie::SimpleVob;

use super::costs::{Choice, Costs};
use super::{
    argmax, drafting, probabilities, sample, text, Cache, Decoded, Decoder, DraftSource, Speculation, SpeculationStats,
    SOURCES,
};
use crate::thermal::{PowerState, Throttle};
use crate::{Generation, GenerationRequest, GenerationStats, TokenProbability};

/// A drafted token: who proposed it, the token it follows in the verify pass (0: the step's
/// first token, j: the j-th draft), whether a further lookup continuation (not the first)
/// added it, and, for sampled model drafts, the draft distribution. Drafts that each follow
/// the one before form a chain; others a tree (greedy steps only).
struct Draft {
    token: u32,
    source: DraftSource,
    parent: usize,
    further: bool,
    q: Option<Vec<f32>>,
}

/// The drafts that follow `node` (an input index of the verify pass), as input indices.
fn children(drafts: &[Draft], node: usize) -> impl Iterator<Item = usize> + '_ {
    drafts.iter().enumerate().filter(move |(_, d)| d.parent == node).map(|(j, _)| j + 1)
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
    /// The probability the target gave each token of the reply (over the whole vocabulary, at
    /// temperature 1, before any grammar), in order.
    probabilities: Vec<f32>,
}

/// A processed prompt, ready for its reply: the tokens, their cache, and when the request began.
pub(super) struct Prefilled<'p> {
    pub prompt: &'p [u32],
    pub cache: Cache,
    pub started: Instant,
}

impl Decoder {
    pub(super) fn decode_from(
        &self,
        request: &GenerationRequest,
        prefilled: Prefilled<'_>,
        speculation: &Speculation,
        seed: u64,
        mut on_text: impl FnMut(&str),
        stop: impl Fn() -> bool,
    ) -> Result<(Decoded, Cache)> {
        let Prefilled { prompt, cache, started } = prefilled;
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
            probabilities: Vec::new(),
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
            token_probabilities: self.token_probabilities(&generated, &run.probabilities, text.len()),
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

    /// Each of `tokens` with where its text ends in the reply (`len` bytes in all) and its
    /// `probabilities`. A token ending inside a character counts up to where the text has got.
    fn token_probabilities(&self, tokens: &[u32], probabilities: &[f32], len: usize) -> Vec<TokenProbability> {
        let mut end = 0;
        (1..=tokens.len())
            .zip(probabilities)
            .map(|(n, &probability)| {
                let so_far = self.text.decode(&tokens[..n]).map_or(end, |t| t.trim_end_matches('\u{fffd}').len());
                end = so_far.clamp(end, len);
                TokenProbability { end, probability }
            })
            .collect()
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
        let mut speculator = Speculator::new(self, speculation, stats);
        let mut pending = *run.tokens.last().expect("prompt is not empty");
        // Where wider passes would change a token's logits, no more drafts than fit one.
        let widest = self.target.widest_verify().unwrap_or(usize::MAX);

        loop {
            let generated = run.tokens.len() - run.prompt_len;
            if generated >= max_tokens {
                return Ok("length".into());
            }
            speculator.follow_power();
            let mask0 = match next_mask(run)? {
                Next::Done => return Ok("stop".into()),
                Next::Free => None,
                Next::Mask(mask) => Some(mask),
            };

            let budget = (max_tokens - generated - 1).min(widest - 1);
            let step_started = Instant::now();
            let (drafts, choice) = speculator.propose(run, generated, budget)?;

            let mut input = Vec::with_capacity(drafts.len() + 1);
            input.push(pending);
            input.extend(drafts.iter().map(|d| d.token));
            let base = run.cache.len();
            let parents: Vec<usize> = drafts.iter().map(|d| d.parent).collect();
            let tree = parents.iter().enumerate().any(|(j, &p)| p != j);
            let logits = if tree {
                speculator.stats.tree_steps += 1;
                self.target.forward_tree(&input, &parents, &mut run.cache, 0)?
            } else {
                self.target.forward(&input, &mut run.cache, 0)?
            };
            speculator.stats.verify_steps += 1;

            // The walk down the tree: from the step's first token, the draft that the target's
            // choice at each node matches, while one does. `path` holds the input indices taken.
            let mut path: Vec<usize> = Vec::new();
            let mut node = 0;
            let mut mask = mask0;
            let mut next = None;
            // The cache keeps the step's first token and the accepted branch, moved next to it.
            let keep = |cache: &mut Cache, path: &[usize]| {
                let slots: Vec<usize> = std::iter::once(0).chain(path.iter().copied()).map(|n| base + n).collect();
                cache.keep_branch(base, &slots)
            };
            for depth in 0..=drafts.len() {
                if depth > 0 {
                    mask = match next_mask(run)? {
                        Next::Free => None,
                        Next::Mask(mask) => Some(mask),
                        Next::Done => {
                            // The grammar is complete after the drafts accepted so far.
                            keep(&mut run.cache, &path)?;
                            on_step(run)?;
                            return Ok("stop".into());
                        }
                    };
                }
                let row = &logits[node * vocab..(node + 1) * vocab];
                // Sampling steps draft chains: the one draft after this node, if any.
                let draft = children(&drafts, node).next().map(|n| (n, &drafts[n - 1]));
                let choice = match (run.temperature, draft) {
                    (None, Some(_)) => {
                        let best = argmax(row, mask.as_ref());
                        match children(&drafts, node).find(|&n| drafts[n - 1].token == best) {
                            Some(n) => Ok(n),
                            None => Err(best),
                        }
                    }
                    (None, None) => Err(argmax(row, mask.as_ref())),
                    (Some(t), Some((n, d))) => {
                        let p = probabilities(row, mask.as_ref(), t);
                        let q_d = d.q.as_ref().map_or(1.0, |q| q[d.token as usize]);
                        let keep = q_d <= 0.0 || run.rng.random::<f32>() < (p[d.token as usize] / q_d).min(1.0);
                        if keep {
                            Ok(n)
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
                    Ok(n) => {
                        let d = &drafts[n - 1];
                        path.push(n);
                        node = n;
                        speculator.stats.source_mut(d.source).accepted += 1;
                        if self.take(run, d.token, token_probability(row, d.token))? {
                            keep(&mut run.cache, &path)?;
                            on_step(run)?;
                            return Ok("stop".into());
                        }
                    }
                    Err(token) => {
                        next = Some((token, token_probability(row, token)));
                        break;
                    }
                }
            }
            keep(&mut run.cache, &path)?;
            speculator.record(&drafts, &path, generated, choice, step_started.elapsed());
            let (token, probability) = next.expect("a verify step always yields a token");
            let ended = self.take(run, token, probability)?;
            if !on_step(run)? {
                return Ok("cancelled".into());
            }
            if ended {
                return Ok("stop".into());
            }
            pending = token;
        }
    }

    /// Appends a chosen token, with the probability the target gave it; true when it ends the
    /// reply (a stop token, or the grammar is done).
    fn take(&self, run: &mut Run, token: u32, probability: f32) -> Result<bool> {
        if run.stop_tokens.contains(&token) {
            return Ok(true);
        }
        run.tokens.push(token);
        run.probabilities.push(probability);
        if let Some(m) = run.matcher.as_mut() {
            m.consume_token(token).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
            return Ok(m.is_stopped());
        }
        Ok(false)
    }
}

/// The speculation of one reply: each draft source's control (its draft length, its pauses),
/// the power throttle, the draft model's cache, the measured cost per source, and the stats it
/// reports.
struct Speculator<'d> {
    decoder: &'d Decoder,
    settings: &'d Speculation,
    /// By source, in `SOURCES` order: grammar, lookup, model.
    controls: [drafting::SourceControl; 3],
    throttle: Throttle,
    draft_cache: Option<(Cache, Vec<u32>)>,
    costs: Costs,
    /// What a verify pass costs by its size, and the further lookup continuations' allowance.
    pass_cost: drafting::PassCost,
    tree: drafting::TreeControl,
    stats: &'d mut SpeculationStats,
}

impl<'d> Speculator<'d> {
    fn new(decoder: &'d Decoder, settings: &'d Speculation, stats: &'d mut SpeculationStats) -> Self {
        // Grammar drafts start at full length (they are almost always right); lookup and model
        // drafts start short and grow with acceptance: a rejected token costs a token's compute.
        let controls = [
            drafting::SourceControl::new(settings.window, settings.max_free, settings.max_free),
            drafting::SourceControl::new(settings.window, settings.initial_k, settings.max_free),
            drafting::SourceControl::new(settings.window, settings.initial_k, settings.max_k),
        ];
        Speculator {
            decoder,
            settings,
            controls,
            throttle: Throttle::for_state(PowerState::UNKNOWN),
            draft_cache: None,
            costs: Costs::default(),
            pass_cost: drafting::PassCost::default(),
            tree: drafting::TreeControl::new(settings.tree_tokens),
            stats,
        }
    }

    /// Every 32 verify steps, reads the machine's power state and throttles drafting by it.
    fn follow_power(&mut self) {
        let s = self.settings;
        if s.enabled && s.respect_thermal && self.stats.verify_steps.is_multiple_of(32) {
            let power = PowerState::read();
            self.throttle = Throttle::for_state(power);
            self.stats.power = Some(power);
            self.controls[2].set_max_k(s.max_k / self.throttle.max_k_divisor);
        }
    }

    /// After a verify step that took the drafts `path` (input indices, down the tree): each
    /// source's outcome and what the step cost. A source was reached when the walk got to the
    /// depth its drafts start at; it proposed as many tokens as its longest branch holds.
    fn record(&mut self, drafts: &[Draft], path: &[usize], generated: usize, choice: Choice, took: Duration) {
        // Each draft's depth, and how many drafts of its source lie on its branch up to it.
        let mut depth = vec![0usize; drafts.len() + 1];
        let mut own = vec![0usize; drafts.len() + 1];
        for (j, d) in drafts.iter().enumerate() {
            depth[j + 1] = depth[d.parent] + 1;
            let parent_own = if d.parent > 0 && drafts[d.parent - 1].source == d.source { own[d.parent] } else { 0 };
            own[j + 1] = parent_own + 1;
        }
        for (index, source) in SOURCES.iter().enumerate() {
            let nodes = || (1..=drafts.len()).filter(|&n| drafts[n - 1].source == *source);
            let Some(first) = nodes().map(|n| depth[n]).min() else { continue };
            if path.len() + 1 < first {
                continue; // rejected before this source's drafts were reached
            }
            let proposed = nodes().map(|n| own[n]).max().unwrap_or(0);
            let taken = path.iter().filter(|&&n| drafts[n - 1].source == *source).count();
            let s = self.settings;
            self.controls[index].update(proposed, taken, generated, s.fallback_below, s.probe_after);
            self.stats.source_mut(*source).pauses = self.controls[index].pauses;
        }
        self.costs.record(choice, took.as_secs_f32(), path.len() + 1);
        // The further continuations against what their tokens cost the pass.
        let pass = drafts.len() + 1;
        self.pass_cost.record(pass, took.as_secs_f32());
        let added = drafts.iter().filter(|d| d.further).count();
        let gained = path.iter().filter(|&&n| drafts[n - 1].further).count();
        let s = self.settings;
        self.tree.record(added, gained, self.pass_cost.extra_share(pass), generated, s.probe_after);
        self.stats.branch_proposed += added;
        self.stats.branch_accepted += gained;
        self.stats.tree_pauses = self.tree.pauses;
    }

    /// Drafts for the step after `run.tokens`: first what the grammar forces, then from the
    /// prompt lookup or the draft model, whichever has produced tokens at the lower cost of
    /// late; none where speculation is off or throttled, or no token is left to draft. With
    /// them, the source the step's cost is recorded under.
    fn propose(&mut self, run: &mut Run, generated: usize, budget: usize) -> Result<(Vec<Draft>, Choice)> {
        let mut chosen = Choice::Grammar;
        if !(self.settings.enabled && self.throttle.free_drafts && budget > 0) {
            return Ok((Vec::new(), chosen));
        }
        let speculation = self.settings;
        let mut drafts: Vec<Draft> = Vec::new();
        let mut consumed = 0;
        let result = (|| -> Result<()> {
            if speculation.grammar_drafts && self.controls[0].active(generated) {
                if let Some(m) = run.matcher.as_mut() {
                    let forced = m.compute_ff_tokens();
                    let take = forced.len().min(speculation.max_free).min(budget);
                    let valid = m.validate_tokens(&forced[..take]).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
                    m.consume_tokens(&forced[..valid]).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
                    consumed += valid;
                    drafts.extend(forced[..valid].iter().enumerate().map(|(j, &token)| Draft {
                        token,
                        source: DraftSource::Grammar,
                        parent: j,
                        further: false,
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
            // Greedy steps on a network that verifies trees try every earlier continuation of
            // the context's last words at once (the same words in several passages go on
            // differently); sampling steps, and candle's path, the most recent one.
            let allowance = self.tree.allowance(generated);
            let branches = if run.temperature.is_none() && self.decoder.target.verifies_trees() && allowance > 0 {
                speculation.lookup_branches.max(1)
            } else {
                1
            };
            let lookup_candidates = if speculation.lookup_drafts && self.controls[1].active(generated) {
                drafting::lookup_branches(&context, 2, 4, self.controls[1].k.min(room), branches)
            } else {
                Vec::new()
            };
            let model_ready = speculation.model_drafts
                && self.throttle.model_drafts
                && self.decoder.draft.is_some()
                && self.controls[2].active(generated);
            // Among the sources that can draft now, the one whose recent steps produced tokens at
            // the lowest cost — acceptance is what it buys, but a draft model that is right 80 %
            // of the time still loses where verifying costs nearly a step per token.
            let mut options = vec![Choice::Grammar];
            if !lookup_candidates.is_empty() {
                options.push(Choice::Lookup);
            }
            if model_ready {
                options.push(Choice::Model);
            }
            let choice = if speculation.choose_by_cost {
                self.costs.choose(&options, &self.controls)
            } else {
                options.iter().copied().find(|c| *c != Choice::Grammar).unwrap_or(Choice::Grammar)
            };
            chosen = choice;
            if choice == Choice::Lookup {
                // The candidates merged into a tree after the grammar's drafts: a shared start
                // once, the first candidate whole, the others' own tokens up to the allowance.
                let (root, first_lookup) = (drafts.len(), drafts.len());
                let mut extra = 0;
                for (b, candidate) in lookup_candidates.iter().enumerate() {
                    let valid = match run.matcher.as_mut() {
                        Some(m) => m.validate_tokens(candidate).map_err(|e| anyhow::anyhow!("grammar: {e}"))?,
                        None => candidate.len(),
                    };
                    let valid = candidate[..valid].iter().position(|t| run.stop_tokens.contains(t)).unwrap_or(valid);
                    let mut parent = root;
                    for &token in &candidate[..valid] {
                        let shared = drafts[first_lookup..]
                            .iter()
                            .position(|d| d.parent == parent && d.token == token)
                            .map(|j| first_lookup + j + 1);
                        if let Some(n) = shared {
                            parent = n;
                            continue;
                        }
                        if drafts.len() >= budget || (b > 0 && extra >= allowance) {
                            break;
                        }
                        extra += (b > 0) as usize;
                        drafts.push(Draft { token, source: DraftSource::Lookup, parent, further: b > 0, q: None });
                        parent = drafts.len();
                    }
                }
            } else if choice == Choice::Model {
                let k = self.controls[2].k.min(room);
                consumed += self.draft_from_model(run, &context, k, &mut drafts)?;
            }
            Ok(())
        })();
        if let Some(m) = run.matcher.as_mut() {
            m.rollback(consumed).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
        }
        result?;
        for d in &drafts {
            self.stats.source_mut(d.source).proposed += 1;
        }
        Ok((drafts, chosen))
    }

    /// Runs the draft model greedily (or sampling, with its distribution kept for the
    /// rejection rule) for up to `k` tokens after `context`. Returns how many tokens it fed
    /// to the grammar matcher (the caller rolls them back).
    fn draft_from_model(&mut self, run: &mut Run, context: &[u32], k: usize, drafts: &mut Vec<Draft>) -> Result<usize> {
        let speculation = self.settings;
        let target_vocab = self.decoder.target.config().vocab;
        let model = self.decoder.draft.as_ref().expect("checked by the caller");
        let vocab = model.config().vocab.min(target_vocab);
        // The draft sees the latest `draft_context` tokens of the reply's context, from a fixed
        // origin so its cache stays valid from step to step.
        let origin = run.prompt_len.saturating_sub(speculation.draft_context);
        if self.draft_cache.is_none() {
            let capacity = (run.cache.capacity() - origin).max(16);
            self.draft_cache = Some((model.new_cache(capacity)?, Vec::new()));
        }
        let (cache, fed) = self.draft_cache.as_mut().expect("made above");
        let wanted = &context[origin..];
        // At least the last token is fed again: its logits start the draft.
        let common = fed.iter().zip(wanted).take_while(|(a, b)| a == b).count().min(wanted.len() - 1);
        fed.truncate(common);
        cache.truncate(common);
        let mut logits = model.forward(&wanted[common..], cache, wanted.len() - common - 1)?;
        fed.extend_from_slice(&wanted[common..]);
        self.stats.draft_model_steps += 1;
        let temperature = speculation.draft_temperature.or(run.temperature);
        let mut consumed = 0;
        for j in 0..k {
            if j > 0 {
                let last = drafts.last().expect("a draft was pushed").token;
                logits = model.forward(&[last], cache, 0)?;
                fed.push(last);
                self.stats.draft_model_steps += 1;
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
            let q = temperature.is_some().then(|| pad(p, target_vocab));
            if let Some(m) = run.matcher.as_mut() {
                m.consume_token(token).map_err(|e| anyhow::anyhow!("grammar: {e}"))?;
                consumed += 1;
            }
            drafts.push(Draft { token, source: DraftSource::Model, parent: drafts.len(), further: false, q });
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

/// The probability softmax gives `token` over the whole `row` of logits (at temperature 1).
fn token_probability(row: &[f32], token: u32) -> f32 {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = row.iter().map(|&v| (v - max).exp()).sum();
    row.get(token as usize).map_or(0.0, |&v| (v - max).exp() / sum)
}
