//! The answer model: loaded on first use (with its draft model), what it and the rest take in
//! memory, and the models a configuration uses that are missing.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use anyhow::Result;

use quire_llm::decoder::Placement;
use quire_llm::Llm;

use crate::{answer, context, memory, Engine, EngineConfig, MemoryBudget};

impl Engine {
    /// Whether the answer model is in memory (it loads on first use of `llm`).
    pub fn llm_loaded(&self) -> bool {
        self.llm.initialized()
    }

    /// Where the answer model runs ("CPU", "CUDA GPU", "Metal GPU"), once it is loaded.
    pub fn llm_runs_on(&self) -> Option<&'static str> {
        self.llm.get().map(Llm::runs_on)
    }

    /// The memory budget now: the configured answer model and its draft model (loaded with
    /// it), or, without one configured, `draft` as a model not loaded.
    pub fn memory_budget(&self, draft: Option<&Path>) -> Result<MemoryBudget> {
        let context_tokens = self.config.context_tokens();
        let reading = memory::MemoryReading::now();
        let before = self.rss_before_llm.load(Ordering::SeqCst);
        let loaded = self.llm_loaded();
        let kept_prompt = self.llm.get().and_then(Llm::decoder).map_or((0, 0), |d| d.kept_prompt());
        let mut llms = vec![memory::BudgetedModel { role: "target", path: &self.config.llm_path, loaded, kept_prompt }];
        match (self.config.draft_path.as_deref(), draft) {
            (Some(d), _) => llms.push(memory::BudgetedModel { role: "draft", path: d, loaded, kept_prompt: (0, 0) }),
            (None, Some(d)) => {
                llms.push(memory::BudgetedModel { role: "draft", path: d, loaded: false, kept_prompt: (0, 0) })
            }
            (None, None) => {}
        }
        let base = if loaded && before > 0 { before } else { reading.process_rss_bytes };
        let placement = self.llm_placement();
        memory::budget(
            base,
            &self.config.embedder_dir,
            &llms,
            &placement,
            context_tokens,
            &self.config.data_dir,
            reading,
        )
    }

    /// Where Quire's decoder runs the answer models: where it put them, once loaded, else where
    /// it would.
    pub fn llm_placement(&self) -> Placement {
        self.llm.get().and_then(Llm::decoder).map_or_else(Placement::best, |d| d.placement())
    }
    pub async fn llm(&self) -> Result<&Llm> {
        self.llm
            .get_or_try_init(|| async {
                if !installed(ModelUse::Answer, &self.config.llm_path) {
                    return Err(MissingModel::at(ModelUse::Answer, &self.config.llm_path).into());
                }
                if let Some(draft) = self.config.draft_path.as_deref().filter(|d| !installed(ModelUse::Draft, d)) {
                    return Err(MissingModel::at(ModelUse::Draft, draft).into());
                }
                // The baseline of the memory panel's prediction: what the process holds, not
                // what it freed and the allocator kept.
                crate::allocator::return_freed_memory();
                let before = memory::MemoryReading::now().process_rss_bytes;
                self.rss_before_llm.store(before, Ordering::SeqCst);
                let llm = Llm::load_with_draft(&self.config.llm_path, self.config.draft_path.as_deref()).await;
                // Loading reads and converts more than it keeps: what it let go goes back now,
                // not whenever the allocator next trims (an unlock's footprint varied by ±7 %).
                crate::allocator::return_freed_memory();
                llm
            })
            .await
    }

    /// Loads the answer model and processes the start that every answer prompt shares (chat
    /// template, instructions, the user turn's opening), so the first question waits only for
    /// its own tokens, as later ones do. For a preload: nothing here changes an answer.
    pub async fn prepare_llm(&self) -> Result<usize> {
        let start = format!("{}[1] (", context::PROMPT_START);
        let warmed = self.llm().await?.warm(answer::SYSTEM_PROMPT, &start).await;
        crate::allocator::return_freed_memory();
        warmed
    }

    /// Answer-model tokens in `text`: counted with its tokenizer once it is loaded, else
    /// estimated at 3 bytes a token.
    pub(crate) fn count_tokens(&self, text: &str) -> usize {
        self.llm.get().and_then(|llm| llm.count_tokens(text)).unwrap_or(text.len().div_ceil(3))
    }
}

/// What a model is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelUse {
    Embedder,
    Answer,
    Draft,
}

impl ModelUse {
    /// As a person reads it: "embedding model", "answer model", "draft model".
    pub fn describe(self) -> &'static str {
        match self {
            ModelUse::Embedder => "embedding model",
            ModelUse::Answer => "answer model",
            ModelUse::Draft => "draft model",
        }
    }
}

/// A model the configuration uses that is not installed: what for, where it was looked for,
/// and the known model that belongs there (fetchable from its registry package), if one does.
/// An error of its own, which says what is missing and leaves the remedy to the front end: the
/// command line names its command, the app offers its Download button.
#[derive(Debug, Clone)]
pub struct MissingModel {
    pub used_as: ModelUse,
    pub path: PathBuf,
    pub known: Option<&'static quire_models::KnownModel>,
}

impl fmt::Display for MissingModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known {
            Some(m) => write!(
                f,
                "the {} {} is not installed (expected at {})",
                self.used_as.describe(),
                m.name,
                self.path.display()
            ),
            None => write!(f, "there is no {} at {}", self.used_as.describe(), self.path.display()),
        }
    }
}

impl std::error::Error for MissingModel {}

impl MissingModel {
    pub(crate) fn at(used_as: ModelUse, path: &Path) -> MissingModel {
        MissingModel { used_as, path: path.to_path_buf(), known: quire_models::known_at(path) }
    }
}

/// Whether the model `used_as` is at `path`: an embedder is a folder with its weights, the
/// others one GGUF file.
pub(crate) fn installed(used_as: ModelUse, path: &Path) -> bool {
    match used_as {
        ModelUse::Embedder => quire_embed::is_model_folder(path),
        ModelUse::Answer | ModelUse::Draft => path.is_file(),
    }
}

/// The models `config` uses that are not installed: the embedder, the answer model, the draft
/// model if one is set, in that order.
pub fn missing_models(config: &EngineConfig) -> Vec<MissingModel> {
    let used = [
        (ModelUse::Embedder, Some(config.embedder_dir.as_path())),
        (ModelUse::Answer, Some(config.llm_path.as_path())),
        (ModelUse::Draft, config.draft_path.as_deref()),
    ];
    used.into_iter()
        .filter_map(|(used_as, path)| Some((used_as, path?)))
        .filter(|(used_as, path)| !installed(*used_as, path))
        .map(|(used_as, path)| MissingModel::at(used_as, path))
        .collect()
}
