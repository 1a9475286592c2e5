//! The answer model: loaded on first use (with its draft model), what it and the rest take in
//! memory, and the error that says how to get a model that is missing.

use std::path::Path;
use std::sync::atomic::Ordering;

use anyhow::Result;

use quire_llm::decoder::Placement;
use quire_llm::Llm;

use crate::{answer, context, memory, Engine, MemoryBudget};

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
                if !self.config.llm_path.is_file() {
                    return Err(missing_model(&self.config.llm_path));
                }
                if let Some(draft) = self.config.draft_path.as_deref().filter(|d| !d.is_file()) {
                    return Err(missing_model(draft));
                }
                let before = memory::MemoryReading::now().process_rss_bytes;
                self.rss_before_llm.store(before, Ordering::SeqCst);
                Llm::load_with_draft(&self.config.llm_path, self.config.draft_path.as_deref()).await
            })
            .await
    }

    /// Loads the answer model and processes the start that every answer prompt shares (chat
    /// template, instructions, the user turn's opening), so the first question waits only for
    /// its own tokens, as later ones do. For a preload: nothing here changes an answer.
    pub async fn prepare_llm(&self) -> Result<usize> {
        let start = format!("{}[1] (", context::PROMPT_START);
        self.llm().await?.warm(answer::SYSTEM_PROMPT, &start).await
    }

    /// Answer-model tokens in `text`: counted with its tokenizer once it is loaded, else
    /// estimated at 3 bytes a token.
    pub(crate) fn count_tokens(&self, text: &str) -> usize {
        self.llm.get().and_then(|llm| llm.count_tokens(text)).unwrap_or(text.len().div_ceil(3))
    }
}

pub(crate) fn missing_model(path: &Path) -> anyhow::Error {
    match quire_models::known_at(path) {
        Some(m) => quire_models::missing_model_error(m),
        None => anyhow::anyhow!(
            "no model at {}: check the path, or run `quire models fetch` for the defaults",
            path.display()
        ),
    }
}
