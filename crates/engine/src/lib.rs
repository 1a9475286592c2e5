//! The RAG loop: ingestion (load → chunk → embed → store) and answering (embed the question →
//! hybrid search → constrained generation → cited passages), reporting progress as `Event`s.
//! The engine does not know who listens: the CLI draws progress bars from the events, the
//! desktop app forwards them to its window.

pub mod allocator;
mod answer;
mod asking;
mod config;
mod contents;
mod context;
pub mod conversation;
mod discovery;
mod disk_full;
mod embedder_advice;
mod embedder_change;
mod events;
pub mod health;
pub mod history;
mod ingestion;
mod jobs;
mod keys;
mod library;
mod library_embedder;
mod line_log;
mod literals;
pub mod memory;
mod models;
mod notices;
mod pages_read;
mod quotes;
mod remedy;
mod retrieval;
mod shared_library;
pub mod watch;

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::sync::OnceCell;

use quire_embed::Embedder;
pub use quire_embed::ForwardPass;
pub use quire_index::quiet_caught_panics;
use quire_index::KnowledgeBase;
use quire_llm::Llm;

pub use answer::{language_of, rest_of_decline, Language, RawAnswer};
pub use asking::{check_question, EmptyLibrary, QuestionTooLong, MAX_QUESTION_CHARS};
pub use config::{
    collection_dir, collections, EngineConfig, DEFAULT_COLLECTION, DEFAULT_FOCUS_TOKENS, DEFAULT_MAX_ANSWER_TOKENS,
    DEFAULT_TOP_K,
};
pub use conversation::Turn;
pub use discovery::{discover_files, LINK_NOT_FOLLOWED};
pub use embedder_advice::EmbedderAdvice;
pub use embedder_change::{change_waiting, EmbedderChange};
pub use events::{Answer, AnswerTiming, Cancel, Cancelled, Citation, Declined, Event, Source};
pub use ingestion::{FileOutcome, FileStage, IngestReport, IngestTimings, QueuedFile};
pub use jobs::{Job, JobState};
pub use keys::import_key_backup;
pub use memory::MemoryBudget;
pub use models::{missing_models, MissingModel, ModelUse};
pub use notices::take as take_notices;
pub use quire_index::{Damaged, DocumentRecord, SearchHit, SearchMode};
pub use quire_ingest::isolate::{serve_if_worker, Isolation};
pub use quire_ingest::{is_supported, quiet_parser_panics, UnreadablePage, NEEDS_OCR};
pub use quire_llm::decoder::Placement;
pub use quire_llm::ModelFootprint;
pub use quire_vault::{api_token, write_private, KeyAccess, KeyInfo, KeyStore, Secret, Vault, VaultError};
pub use quotes::find_quote;
pub use remedy::{remedy, Remedied, Remedy};
pub use retrieval::{Rerank, RERANK_CANDIDATES};
pub use shared_library::{
    attach_store, shared_store_at, StoreCredentials, StoreLink, StorePlace, ACCESS_KEY_ID_VAR, SECRET_ACCESS_KEY_VAR,
    STORE_LINK,
};

/// One open collection with its models. Its methods live beside what they do: `library`
/// (ingestion and documents), `retrieval`, `asking`, `keys`, `models`.
pub struct Engine {
    config: EngineConfig,
    embedder: Arc<Embedder>,
    kb: KnowledgeBase,
    /// Where the library lives when it is shared (`store.json`, read at open).
    store_link: Option<StoreLink>,
    llm: OnceCell<Llm>,
    jobs: std::sync::Mutex<jobs::JobQueue>,
    /// Scanned pages read and not yet stored with their document (shared with the thread that
    /// reads files).
    pages_read: std::sync::Arc<std::sync::Mutex<pages_read::PagesRead>>,
    /// Vectors of documents removed since this engine opened, by chunk hash: a file moved in
    /// two steps (removed, then seen at its new place) keeps its vectors.
    removed_vectors: std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>,
    /// Resident memory just before the answer model loaded: the base of the memory prediction.
    rss_before_llm: std::sync::atomic::AtomicU64,
    reranker: std::sync::RwLock<Option<Arc<dyn Rerank>>>,
    /// What the last prompt showed the answer model, for a follow-up over the same passages to
    /// add to (the decoder keeps the last prompt's work).
    last_context: std::sync::Mutex<Option<context::Context>>,
    /// Sentence meanings the focus embedded for earlier questions.
    kept_meanings: std::sync::Mutex<asking::KeptMeanings>,
    /// Whether the library would be searched better by another embedder, until its list changes.
    embedder_advice: embedder_advice::AdviceCache,
    vault: std::sync::Mutex<Vault>,
    /// Held by ingestion and by resealing, which must not interleave.
    writing: tokio::sync::Mutex<()>,
    /// Last, so it is dropped after every other field: what they held goes back to the system
    /// then, whoever lets go of the engine last (a lock's, or a cancelled job's).
    _gives_memory_back: GivesMemoryBack,
}

/// Gives the memory freed so far back to the system when dropped (`allocator`).
struct GivesMemoryBack;

impl Drop for GivesMemoryBack {
    fn drop(&mut self) {
        allocator::return_freed_memory();
    }
}

impl Engine {
    /// Unlocks the collection's key (made on first use), loads the embedder and opens the
    /// knowledge base; the answer model loads on first use. Data an interrupted key rotation (or
    /// an older, unencrypted Quire) left is resealed before this returns.
    pub async fn open(mut config: EngineConfig) -> Result<Engine> {
        let models_dir = quire_models::models_dir()?;
        // A new embedder's index made whole since the library last opened takes over now.
        embedder_change::switch_if_whole(&config.data_dir).await?;
        let made_before = KnowledgeBase::made_in(&config.data_dir);
        config.embedder_dir =
            library_embedder::for_library(&config.data_dir, &config.embedder_dir, made_before, &models_dir)?;
        if !models::installed(ModelUse::Embedder, &config.embedder_dir) {
            return Err(MissingModel::at(ModelUse::Embedder, &config.embedder_dir).into());
        }
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create the data folder {}", config.data_dir.display()))?;
        keys::refuse_sealed_data_without_manifest(&config.data_dir).await?;
        let (dir, keys) = (config.data_dir.clone(), config.keys.clone());
        let (vault, protection) = tokio::task::spawn_blocking(move || Vault::unlock(&dir, &keys)).await??;
        let dir = config.embedder_dir.clone();
        let pass = config.embedder_pass;
        let embedder = tokio::task::spawn_blocking(move || Embedder::load_with(&dir, pass)).await??;
        let store_link = StoreLink::read(&config.data_dir)?;
        let store = store_link.as_ref().map(StoreLink::shared_store).transpose()?;
        let kb = KnowledgeBase::open_in(&config.data_dir, store.as_ref(), embedder.dim(), protection.clone()).await?;
        shared_library::refuse_keys_missing(&kb, &protection).await?;
        library_embedder::record(&config.data_dir, &config.embedder_dir, &models_dir)?;
        let jobs = jobs::JobQueue::open(&config.data_dir, protection.clone())?;
        let pages_read = pages_read::PagesRead::open(&config.data_dir, protection)?;
        let engine = Engine {
            config,
            embedder: Arc::new(embedder),
            kb,
            store_link,
            llm: OnceCell::new(),
            jobs: std::sync::Mutex::new(jobs),
            pages_read: std::sync::Arc::new(std::sync::Mutex::new(pages_read)),
            removed_vectors: Default::default(),
            rss_before_llm: std::sync::atomic::AtomicU64::new(0),
            reranker: Default::default(),
            last_context: Default::default(),
            kept_meanings: Default::default(),
            embedder_advice: embedder_advice::AdviceCache::new(),
            vault: std::sync::Mutex::new(vault),
            writing: Default::default(),
            _gives_memory_back: GivesMemoryBack,
        };
        engine.reseal(&mut |_, _| {}, &Cancel::new()).await?;
        engine.reanalyse().await?;
        Ok(engine)
    }

    /// Makes the keyword terms again of the documents an earlier Quire read differently (text in
    /// Chinese, Japanese or Korean, ligatures, full-width forms: `quire_index::terms`), each
    /// committed on its own, then records that the library is read by this version. Once done,
    /// opening costs one small file read.
    async fn reanalyse(&self) -> Result<()> {
        if self.kb.terms_are_current() {
            return Ok(());
        }
        let _writing = self.writing.lock().await;
        let docs = self.kb.documents_to_reanalyse().await?;
        for doc in &docs {
            self.kb.reanalyse(doc).await.with_context(|| format!("cannot index the words of {} again", doc.path))?;
        }
        if !docs.is_empty() {
            self.kb.refresh_indexes().await?;
        }
        self.kb.mark_terms_current()
    }

    /// The conversation history of this collection.
    pub fn history(&self) -> history::History {
        history::History::in_folder(&self.config.data_dir, self.kb.protection())
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Where the library lives when it is shared with other computers (`None`: in its folder).
    pub fn store_link(&self) -> Option<&StoreLink> {
        self.store_link.as_ref()
    }

    /// Refuses what a shared library cannot do yet: what rewrites every computer's tables.
    pub(crate) fn refuse_if_shared(&self, what: &str) -> Result<()> {
        match self.store_link() {
            Some(link) => anyhow::bail!(
                "{what} is not done for a library shared with other computers ({}) yet; nothing was changed",
                link.url
            ),
            None => Ok(()),
        }
    }

    /// The name of the embedder the library's passages were embedded with (its folder's name).
    pub fn embedder_name(&self) -> &str {
        self.embedder.name()
    }

    /// An offer to embed the library again with a model that reads its languages: made where it
    /// is searched with an English-only embedder and most of its passages (`documents`' first,
    /// middle and last) are in other languages. None where the passages cannot be read: the
    /// offer is advice, and a damaged library is said by what reads it for real (a question, the
    /// check), not by the list of documents that shows beside it.
    pub async fn embedder_advice(&self, documents: &[DocumentRecord]) -> Option<EmbedderAdvice> {
        let kb = &self.kb;
        let advice =
            self.embedder_advice.get(self.embedder_name(), documents, |ids| async move { kb.chunk_texts(&ids).await });
        advice.await.unwrap_or(None)
    }

    /// The embedder, for the benchmarks and tests (the front ends ask through the engine).
    #[cfg(feature = "bench")]
    pub fn embedder(&self) -> &Arc<Embedder> {
        &self.embedder
    }

    /// The index, for the benchmarks and tests (the front ends ask through the engine).
    #[cfg(feature = "bench")]
    pub fn knowledge_base(&self) -> &KnowledgeBase {
        &self.kb
    }
}
