//! The answer model as one handle (`Llm`): loading a GGUF file on the runner for its
//! architecture, generating (streamed, optionally held to a JSON schema), counting tokens.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use mistralrs::{Constraint, GgufModelBuilder, Model, RequestBuilder, Response, TextMessageRole, TextMessages};

use crate::{
    decoder, Generation, GenerationRequest, GenerationStats, JsonEnd, ModelFootprint, Progress,
    OWN_DECODER_ARCHITECTURES,
};

/// The answer model: Quire's own decoder (speculative, on the CPU or a GPU) for the
/// architectures it runs, mistral.rs for the others.
pub struct Llm {
    backend: Backend,
    path: PathBuf,
}

// One per loaded model, so the decoder's size inline costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Backend {
    Own { decoder: decoder::Decoder, speculation: decoder::Speculation },
    Mistral(Model),
}

impl Llm {
    /// Loads a GGUF model (weights, tokenizer and chat template all come from the file), with
    /// no draft model: speculation drafts from the grammar and the prompt only.
    pub async fn load(gguf: &Path) -> Result<Llm> {
        Llm::load_with_draft(gguf, None).await
    }

    /// Loads the target and, if given, a draft model sharing its tokenizer. Qwen2 and Llama
    /// GGUFs run on Quire's speculative decoder (on the GPU where the build and the machine
    /// have one: `decoder::Placement::best`); other architectures run on mistral.rs without
    /// speculation.
    pub async fn load_with_draft(gguf: &Path, draft: Option<&Path>) -> Result<Llm> {
        if !gguf.is_file() {
            bail!("no model file at {}", gguf.display());
        }
        let architecture = ModelFootprint::of_gguf(gguf)?.architecture;
        if OWN_DECODER_ARCHITECTURES.contains(&architecture.as_str()) {
            let (target, draft) = (gguf.to_path_buf(), draft.map(Path::to_path_buf));
            let decoder = blocking(move || decoder::Decoder::load(&target, draft.as_deref()))
                .await
                .with_context(|| format!("cannot load the model {}", gguf.display()))?;
            return Ok(Llm {
                backend: Backend::Own { decoder, speculation: decoder::Speculation::default() },
                path: gguf.to_path_buf(),
            });
        }
        let model = Llm::load_mistral(gguf).await?;
        Ok(Llm { backend: Backend::Mistral(model), path: gguf.to_path_buf() })
    }

    /// Which engine runs the model, and with what draft.
    pub fn describe(&self) -> String {
        match &self.backend {
            Backend::Own { decoder, .. } => {
                let on = decoder.placement().name();
                match decoder.draft_path() {
                    Some(d) => format!("Quire decoder on {on}, speculative with draft {}", d.display()),
                    None => format!("Quire decoder on {on}, speculative (grammar and prompt drafts)"),
                }
            }
            Backend::Mistral(_) => "mistral.rs".into(),
        }
    }

    /// Where the model runs, for people: "CPU", "CUDA GPU", "Metal GPU" (mistral.rs runs on
    /// the CPU but in the GPU builds: `load_mistral`).
    pub fn runs_on(&self) -> &'static str {
        match &self.backend {
            Backend::Own { decoder, .. } => decoder.placement().name(),
            Backend::Mistral(_) if cfg!(feature = "metal") => "Metal GPU",
            Backend::Mistral(_) if cfg!(feature = "cuda") => "CUDA GPU",
            Backend::Mistral(_) => "CPU",
        }
    }

    pub fn decoder(&self) -> Option<&decoder::Decoder> {
        match &self.backend {
            Backend::Own { decoder, .. } => Some(decoder),
            Backend::Mistral(_) => None,
        }
    }

    async fn load_mistral(gguf: &Path) -> Result<Model> {
        if !gguf.is_file() {
            bail!("no model file at {}", gguf.display());
        }
        let dir = gguf.parent().context("model path has no folder")?;
        let file = gguf.file_name().context("model path has no file name")?.to_string_lossy();
        // mistral.rs looks for files under `model_id` when it is an existing folder and never
        // asks a hub for them; the hub token source is set to none so nothing is read or sent.
        let builder = GgufModelBuilder::new(dir.to_string_lossy(), vec![file.to_string()]);
        // The CPU everywhere but in the GPU builds (Metal for the macOS bundle, CUDA).
        #[cfg(not(any(feature = "metal", feature = "cuda")))]
        let builder = builder.with_force_cpu();
        let mut builder = builder.with_token_source(mistralrs::TokenSource::None).with_max_num_seqs(1);
        if std::env::var_os("QUIRE_LLM_LOG").is_some() {
            builder = builder.with_logging();
        }
        builder.build().await.with_context(|| format!("cannot load the model {}", gguf.display()))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Processes the prompt start that every reply to `system` with a user turn beginning
    /// `user_start` shares, and keeps it for the first reply (`Decoder::warm`); mistral.rs keeps
    /// no prompt, so there it does nothing. Returns the tokens processed.
    pub async fn warm(&self, system: &str, user_start: &str) -> Result<usize> {
        match self.decoder() {
            Some(decoder) => in_place(|| decoder.warm(system, user_start)),
            None => Ok(0),
        }
    }

    /// How many tokens `text` is to this model, where the runner can tell (Quire's decoder,
    /// which holds the model's tokenizer); `None` on mistral.rs.
    pub fn count_tokens(&self, text: &str) -> Option<usize> {
        self.decoder()?.text().encode(text).ok().map(|ids| ids.len())
    }

    /// Generates a reply, calling `on_text` with each piece of text as it arrives. When
    /// `stop` returns true the generation ends at the next token (dropping the stream makes
    /// mistral.rs finish the sequence) and the text so far comes back with reason "cancelled".
    /// With a schema the reply is one JSON value and generation ends as soon as it is complete.
    pub async fn generate(
        &self,
        request: &GenerationRequest,
        on_progress: impl FnMut(Progress<'_>),
        stop: impl Fn() -> bool,
    ) -> Result<Generation> {
        Ok(self.generate_detailed(request, on_progress, stop).await?.0)
    }

    /// As `generate`, with the speculation figures when the own decoder ran.
    pub async fn generate_detailed(
        &self,
        request: &GenerationRequest,
        mut on_progress: impl FnMut(Progress<'_>),
        stop: impl Fn() -> bool,
    ) -> Result<(Generation, Option<decoder::SpeculationStats>)> {
        match &self.backend {
            Backend::Own { decoder, speculation } => {
                // CPU-bound for seconds to minutes: keep the async runtime's other tasks moving.
                let decoded = in_place(|| decoder.generate(request, speculation, 0, on_progress, stop))?;
                Ok((decoded.generation, Some(decoded.speculation)))
            }
            Backend::Mistral(model) => {
                let on_text = |piece: &str| on_progress(Progress::Text(piece));
                Ok((Llm::generate_mistral(model, request, on_text, stop).await?, None))
            }
        }
    }

    async fn generate_mistral(
        model: &Model,
        request: &GenerationRequest,
        mut on_text: impl FnMut(&str),
        stop: impl Fn() -> bool,
    ) -> Result<Generation> {
        let builder = RequestBuilder::new()
            .add_message(TextMessageRole::System, &request.system)
            .add_message(TextMessageRole::User, &request.user);
        // The sampler first: `set_deterministic_sampler` replaces all sampling parameters,
        // the length limit included.
        let mut builder = match request.temperature {
            None => builder.set_deterministic_sampler(),
            Some(t) => builder.set_sampler_temperature(t),
        }
        .set_sampler_max_len(request.max_tokens);
        if let Some(schema) = &request.schema {
            builder = builder.set_constraint(Constraint::JsonSchema(schema.clone()));
        }
        // Once the JSON value closes, the request ends there: the constrained sampler would
        // otherwise go on with empty steps up to the length limit (measured: 450 wasted decode
        // steps, ~50 s, after a 60-token answer).
        let mut json_end = request.schema.as_ref().map(|_| JsonEnd::default());
        let started = Instant::now();
        let mut first: Option<Duration> = None;
        let mut text = String::new();
        let mut steps = 0usize;
        let mut stream = model.stream_chat_request(builder).await?;
        let mut finish: Option<(String, Option<mistralrs::Usage>)> = None;
        while let Some(response) = stream.next().await {
            if stop() {
                finish = Some(("cancelled".to_string(), None));
                break;
            }
            match response {
                Response::Chunk(chunk) => {
                    if let Some(choice) = chunk.choices.first() {
                        steps += 1;
                        if let Some(piece) = &choice.delta.content {
                            if !piece.is_empty() {
                                first.get_or_insert_with(|| started.elapsed());
                                text.push_str(piece);
                                on_text(piece);
                                if json_end.as_mut().is_some_and(|j| j.push(piece)) {
                                    finish = Some(("stop".to_string(), chunk.usage.clone()));
                                }
                            }
                        }
                        if let Some(reason) = &choice.finish_reason {
                            finish = Some((reason.clone(), chunk.usage.clone()));
                        }
                    }
                    if finish.is_some() {
                        break;
                    }
                }
                Response::Done(done) => {
                    let reason = done.choices.first().map(|c| c.finish_reason.clone()).unwrap_or_default();
                    finish = Some((reason, Some(done.usage)));
                    break;
                }
                Response::ModelError(msg, _) | Response::CompletionModelError(msg, _) => {
                    bail!("the model failed: {msg}")
                }
                Response::InternalError(e) | Response::ValidationError(e) => bail!("the model failed: {e}"),
                _ => {}
            }
        }
        let total_time = started.elapsed();
        let (finish_reason, usage) = finish.unwrap_or_else(|| ("stopped".into(), None));
        let time_to_first_token = first.unwrap_or(total_time);
        let decode_secs = (total_time - time_to_first_token).as_secs_f32();
        // A request that ends early (JSON complete, cancelled) gets no usage figures from
        // mistral.rs: its prompt is counted here, after the answer, off the path to it.
        let prompt_tokens = match &usage {
            Some(u) => u.prompt_tokens,
            None => Llm::prompt_tokens(model, request).await?,
        };
        let stats = GenerationStats {
            prompt_tokens,
            prompt_reused_tokens: 0,
            completion_tokens: usage.as_ref().map(|u| u.completion_tokens).unwrap_or(steps),
            time_to_first_token,
            total_time,
            // The first step comes with the prompt; the rest are decode steps.
            decode_tokens_per_sec: usage.as_ref().map(|u| u.avg_compl_tok_per_sec).unwrap_or(if decode_secs > 0.0 {
                steps.saturating_sub(1) as f32 / decode_secs
            } else {
                0.0
            }),
            prompt_tokens_per_sec: usage
                .as_ref()
                .map(|u| u.avg_prompt_tok_per_sec)
                .unwrap_or(prompt_tokens as f32 / time_to_first_token.as_secs_f32().max(1e-3)),
            finish_reason,
        };
        Ok(Generation { text, stats, token_probabilities: Vec::new() })
    }

    /// Tokens of the request's prompt with the chat template applied.
    async fn prompt_tokens(model: &Model, request: &GenerationRequest) -> Result<usize> {
        let messages = TextMessages::new()
            .add_message(TextMessageRole::System, &request.system)
            .add_message(TextMessageRole::User, &request.user);
        let tokens = model
            .tokenize(either::Either::Left(messages), None, true, true, None)
            .await
            .context("cannot count the prompt's tokens")?;
        Ok(tokens.len())
    }
}

/// Runs CPU-bound work from async code: on a multi-threaded runtime the worker hands its other
/// tasks away first; elsewhere (a single-threaded test runtime) it simply runs.
fn in_place<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => tokio::task::spawn_blocking(work).await?,
        Err(_) => work(),
    }
}
