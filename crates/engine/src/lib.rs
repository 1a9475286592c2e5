//! The RAG loop: ingestion (load → chunk → embed → store) and answering (embed the question →
//! hybrid search → constrained generation → cited passages), reporting progress as `Event`s.
//! The engine does not know who listens: the CLI draws progress bars from the events, the
//! desktop app forwards them to its window.

pub mod answer;
pub mod context;
pub mod conversation;
pub mod history;
mod ingestion;
pub mod jobs;
mod line_log;
pub mod memory;
pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use serde::Serialize;
use tokio::sync::OnceCell;
use ts_rs::TS;

use quire_embed::Embedder;
pub use quire_embed::ForwardPass;
use quire_index::KnowledgeBase;
use quire_llm::decoder::SpeculationStats;
use quire_llm::{GenerationRequest, GenerationStats, Llm, Progress};

pub use answer::RawAnswer;
pub use conversation::Turn;
pub use ingestion::{discover_files, FileOutcome, FileStage, IngestReport, IngestTimings, QueuedFile};
pub use jobs::{Job, JobState};
pub use memory::MemoryBudget;
pub use quire_index::{DocumentRecord, SearchHit, SearchMode};
pub use quire_ingest::isolate::Isolation;
pub use quire_llm::ModelFootprint;
pub use quire_vault::{api_token, write_private, KeyAccess, KeyInfo, KeyStore, Secret, Vault, VaultError};

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Folder the knowledge base is stored in.
    pub data_dir: PathBuf,
    /// Folder of the BERT embedding model.
    pub embedder_dir: PathBuf,
    /// GGUF file of the answer model.
    pub llm_path: PathBuf,
    /// GGUF file of the draft model for speculative decoding (same tokenizer as the answer
    /// model); `None` drafts from the grammar and the retrieved passages only.
    pub draft_path: Option<PathBuf>,
    /// Passages retrieved and shown to the model for each question.
    pub top_k: usize,
    /// Show the model only the sentences of each passage that bear on the question, this many
    /// answer-model tokens per passage on average (`context`); `None` shows whole passages.
    /// `DEFAULT_FOCUS_TOKENS` in the app and the CLI.
    pub focus_tokens: Option<usize>,
    pub max_answer_tokens: usize,
    /// Load PDF, DOCX and EPUB files in a child process with these limits (`None`: in this
    /// process, where a parser that loops or exhausts memory takes the process with it).
    pub loader: Option<Isolation>,
    /// Where the collection's encryption key comes from (`KeyAccess::from_env`: the OS
    /// keychain, or `QUIRE_PASSPHRASE`).
    pub keys: KeyAccess,
    /// Follow links inside an ingested folder that lead out of it (off: such links are skipped
    /// and reported).
    pub follow_links: bool,
    /// The embedder's forward pass (`ForwardPass::from_env`: int8 where the CPU has VNNI).
    pub embedder_pass: ForwardPass,
    /// Read, parse and chunk the next file while this one is embedded (off: one file after
    /// the other, as before; kept for `quire bench ingest --before`).
    pub read_ahead: bool,
}

/// Passages shown to the model per question. Three, not five: on the sample documents' question
/// set a gold page is among the top 3 for 95.5 % of questions (97.7 % at 5), and each passage
/// costs ~25 s of prompt processing on a 2-core CPU (BENCHMARKS.md, answer evaluation).
pub const DEFAULT_TOP_K: usize = 3;
/// Answer-model tokens shown of each passage on average (`EngineConfig::focus_tokens`). On the
/// 44-question answer evaluation, against whole passages: gold-page citations 88.6 % (84.1),
/// gold answers' words 76.7 % (76.0), parse and quotes 100 %, the prompt about half as long
/// (BENCHMARKS.md).
pub const DEFAULT_FOCUS_TOKENS: usize = 200;

/// The collection the CLI uses and the app opens first.
pub const DEFAULT_COLLECTION: &str = "default";

/// The folder a collection is stored in: the default one in `<home>/index`, others in
/// `<home>/collections/<name>`. Names are letters, digits, spaces, `-` and `_` (no paths).
pub fn collection_dir(home: &Path, name: &str) -> Result<PathBuf> {
    let valid = !name.trim().is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ');
    anyhow::ensure!(valid, "\"{name}\" is not a collection name: use letters, digits, spaces, - and _ (at most 64)");
    Ok(if name == DEFAULT_COLLECTION { home.join("index") } else { home.join("collections").join(name) })
}

/// The collections that exist under `home` (the default one always).
pub fn collections(home: &Path) -> Vec<String> {
    let mut names = vec![DEFAULT_COLLECTION.to_string()];
    if let Ok(entries) = std::fs::read_dir(home.join("collections")) {
        let mut others: Vec<String> = entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != DEFAULT_COLLECTION)
            .collect();
        others.sort();
        names.extend(others);
    }
    names
}

impl EngineConfig {
    /// A collection in `data_dir` with these models and keys, everything else as the app and
    /// the CLI have it, except that files are loaded in this process (`loader: None`).
    pub fn new(data_dir: PathBuf, embedder_dir: PathBuf, llm_path: PathBuf, keys: KeyAccess) -> EngineConfig {
        EngineConfig {
            data_dir,
            embedder_dir,
            llm_path,
            draft_path: None,
            top_k: DEFAULT_TOP_K,
            focus_tokens: Some(DEFAULT_FOCUS_TOKENS),
            max_answer_tokens: 512,
            loader: None,
            keys,
            follow_links: false,
            embedder_pass: ForwardPass::from_env(),
            read_ahead: true,
        }
    }

    /// The default models and the knowledge base under Quire's home folder.
    pub fn from_home() -> Result<EngineConfig> {
        Ok(EngineConfig {
            loader: Some(Isolation::current_exe()?),
            ..EngineConfig::new(
                collection_dir(&quire_models::quire_home()?, DEFAULT_COLLECTION)?,
                quire_models::MINILM.location()?,
                quire_models::QWEN_1_5B.location()?,
                KeyAccess::from_env(),
            )
        })
    }
}

/// What the engine reports while it works.
#[derive(Debug, Clone, Serialize, TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// Every file of the batch, in the order they will be processed.
    IngestStarted {
        files: Vec<QueuedFile>,
    },
    FileStarted {
        path: String,
    },
    /// Where a file is in its pipeline; `done`/`total` count chunks while embedding.
    FileProgress {
        path: String,
        stage: FileStage,
        done: u32,
        total: u32,
    },
    FileFinished {
        path: String,
        outcome: FileOutcome,
    },
    /// The batch as a whole: files finished, chunks embedded so far and per second, seconds left
    /// (estimated from the bytes read so far).
    IngestProgress {
        files_done: u32,
        files_total: u32,
        chunks_embedded: u32,
        chunks_per_s: f32,
        eta_s: Option<f32>,
    },
    IngestFinished {
        indexed: usize,
        unchanged: usize,
        removed: usize,
        failed: usize,
        chunks: usize,
        cancelled: bool,
    },
    Retrieved {
        sources: Vec<Source>,
    },
    /// The answer model has read `done` of the prompt's `total` tokens (the question and the
    /// retrieved passages): on a CPU most of the wait before the first word. Comes between
    /// `Retrieved` and the first `AnswerDelta`, where the model runs on Quire's decoder.
    PromptProgress {
        done: u32,
        total: u32,
    },
    AnswerDelta {
        text: String,
    },
    AnswerFinished,
}

/// A flag the caller sets to stop a running ingestion or answer at the next safe point: between
/// files or embedding batches, or before the next token.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Cancel {
        Cancel::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// The error an answer ends with when it was cancelled.
#[derive(Debug, thiserror::Error)]
#[error("cancelled")]
pub struct Cancelled;

/// A retrieved passage as shown to the model and to people.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, TS)]
pub struct Source {
    /// 1-based number the model cites it by.
    pub number: usize,
    pub chunk_id: String,
    pub path: String,
    pub page: Option<u32>,
    #[ts(type = "number")]
    pub start: u64,
    #[ts(type = "number")]
    pub end: u64,
    pub text: String,
    pub score: f32,
}

/// A cited passage; kept in the history too, where lines written before chunk, quote range and
/// passage were kept read back with them empty (`serde(default)`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, TS)]
pub struct Citation {
    pub number: usize,
    #[serde(default)]
    pub chunk_id: String,
    pub path: String,
    pub page: Option<u32>,
    pub quote: String,
    /// Byte range of the quote inside the cited passage, when it is there word for word.
    #[serde(default)]
    pub quote_range: Option<(usize, usize)>,
    #[serde(default)]
    pub passage: String,
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct Answer {
    pub question: String,
    pub text: String,
    pub citations: Vec<Citation>,
    pub sources: Vec<Source>,
    pub raw: String,
    pub stats: GenerationStats,
    /// How speculative decoding went (Quire's decoder only).
    pub speculation: Option<SpeculationStats>,
}

pub struct Engine {
    config: EngineConfig,
    embedder: Arc<Embedder>,
    kb: KnowledgeBase,
    llm: OnceCell<Llm>,
    jobs: std::sync::Mutex<jobs::JobQueue>,
    /// Vectors of documents removed since this engine opened, by chunk hash: a file moved in
    /// two steps (removed, then seen at its new place) keeps its vectors.
    removed_vectors: std::sync::Mutex<std::collections::HashMap<String, Vec<f32>>>,
    /// Resident memory just before the answer model loaded: the base of the memory prediction.
    rss_before_llm: std::sync::atomic::AtomicU64,
    reranker: std::sync::RwLock<Option<Arc<dyn Rerank>>>,
    /// What the last prompt showed the answer model, for a follow-up over the same passages to
    /// add to (the decoder keeps the last prompt's work).
    last_context: std::sync::Mutex<Option<context::Context>>,
    vault: std::sync::Mutex<Vault>,
    /// Held by ingestion and by resealing, which must not interleave.
    writing: tokio::sync::Mutex<()>,
}

/// A second pass over the passages hybrid search found (a cross-encoder, say). It gets the
/// question and `RERANK_CANDIDATES` candidates, best first, and returns them in its own order;
/// the first `top_k` are shown to the model. None is installed by default: this is the hook.
pub trait Rerank: Send + Sync {
    fn rerank(&self, question: &str, candidates: Vec<SearchHit>) -> Result<Vec<SearchHit>>;
}

/// Candidates a reranker sees per question.
pub const RERANK_CANDIDATES: usize = 20;

impl Engine {
    /// Unlocks the collection's key (made on first use), loads the embedder and opens the
    /// knowledge base; the answer model loads on first use. Data an interrupted key rotation (or
    /// an older, unencrypted Quire) left is resealed before this returns.
    pub async fn open(config: EngineConfig) -> Result<Engine> {
        if !config.embedder_dir.join("model.safetensors").is_file() {
            return Err(missing_model(&config.embedder_dir));
        }
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("cannot create the data folder {}", config.data_dir.display()))?;
        refuse_sealed_data_without_manifest(&config.data_dir).await?;
        let (dir, keys) = (config.data_dir.clone(), config.keys.clone());
        let (vault, protection) = tokio::task::spawn_blocking(move || Vault::unlock(&dir, &keys)).await??;
        let dir = config.embedder_dir.clone();
        let pass = config.embedder_pass;
        let embedder = tokio::task::spawn_blocking(move || Embedder::load_with(&dir, pass)).await??;
        let kb = KnowledgeBase::open(&config.data_dir, embedder.dim(), protection.clone()).await?;
        let jobs = jobs::JobQueue::open(&config.data_dir, protection)?;
        let engine = Engine {
            config,
            embedder: Arc::new(embedder),
            kb,
            llm: OnceCell::new(),
            jobs: std::sync::Mutex::new(jobs),
            removed_vectors: Default::default(),
            rss_before_llm: std::sync::atomic::AtomicU64::new(0),
            reranker: Default::default(),
            last_context: Default::default(),
            vault: std::sync::Mutex::new(vault),
            writing: Default::default(),
        };
        engine.reseal(&mut |_, _| {}, &Cancel::new()).await?;
        Ok(engine)
    }

    /// The conversation history of this collection.
    pub fn history(&self) -> history::History {
        history::History::in_folder(&self.config.data_dir, self.kb.protection())
    }

    /// Where this collection's key is kept, and whether a rotation is under way.
    pub fn key_info(&self) -> KeyInfo {
        self.vault.lock().unwrap_or_else(|p| p.into_inner()).info()
    }

    /// Reseals what is not sealed under the current key (documents, the ingestion queue, the
    /// history), then forgets the keys rotated away from, once the tables and logs show that
    /// nothing is sealed under them any more (checked, not assumed: a rotation killed between a
    /// document's new rows and the removal of its old chunks leaves chunk rows under the old
    /// key, which are removed here first). Each document is committed on its own: an
    /// interruption loses nothing, and the next call (or the next `open`) goes on.
    /// `progress` gets (documents done, documents to do). Returns how many were resealed.
    pub async fn reseal(&self, progress: &mut (dyn FnMut(usize, usize) + Send), cancel: &Cancel) -> Result<usize> {
        /// Passes over the tables before giving up (another process still writing under the
        /// old key); the rotation then goes on at the next start.
        const PASSES: usize = 3;
        let _writing = self.writing.lock().await;
        let rotating = !self.key_info().rotating_from.is_empty();
        let mut resealed = 0;
        for _ in 0..PASSES {
            let docs = self.kb.documents_to_reseal(rotating).await?;
            if docs.is_empty() && !rotating {
                return Ok(resealed);
            }
            for (i, doc) in docs.iter().enumerate() {
                progress(i, docs.len());
                if cancel.is_cancelled() {
                    return Ok(resealed + i);
                }
                self.kb.reseal(doc).await.with_context(|| format!("cannot reseal {}", doc.path))?;
            }
            progress(docs.len(), docs.len());
            resealed += docs.len();
            // Chunks a crash left without their document: under the old key they would stop
            // every search that finds them once the key is gone.
            ingestion::remove_orphans(self).await?;
            let protection = self.kb.protection();
            self.jobs(|q| q.reseal(protection.clone()))?;
            self.history().reseal(protection)?;
            // Old table versions still hold what was sealed under the old key (or stored plain):
            // compacted away and deleted.
            self.kb.refresh_indexes().await?;
            self.kb.optimize(std::time::Duration::ZERO).await?;
            let left = self.kb.rows_under_other_keys().await?
                + self.jobs(|q| q.lines_under_other_keys())?
                + self.history().lines_under_other_keys()?;
            if left == 0 {
                self.vault.lock().unwrap_or_else(|p| p.into_inner()).finish_rotation()?;
                return Ok(resealed);
            }
        }
        anyhow::bail!(
            "the key rotation could not finish: data is still being written under the old key (another Quire \
             process?); the old key is kept and the rotation goes on at the next start"
        )
    }

    /// Replaces the collection's key: a new key is made and stored where the old one is, new
    /// writes use it at once, and everything is resealed under it (`reseal`). Interrupted, the
    /// rotation goes on at the next `reseal` or `open`; the old key is kept until it is done.
    pub async fn rotate_key(&self, progress: &mut (dyn FnMut(usize, usize) + Send), cancel: &Cancel) -> Result<usize> {
        {
            let _writing = self.writing.lock().await;
            let keys = self.config.keys.clone();
            let protection = self.vault.lock().unwrap_or_else(|p| p.into_inner()).rotate(&keys)?;
            self.kb.set_protection(protection);
        }
        self.reseal(progress, cancel).await
    }

    /// Writes a backup of this collection's keys, sealed under `backup_passphrase`, to `file`
    /// (JSON, to keep somewhere safe: with it, `Vault::import` restores a lost keychain entry
    /// or passphrase manifest), and records that the current key has one.
    pub fn export_key(&self, backup_passphrase: &Secret, file: &Path) -> Result<()> {
        let mut vault = self.vault.lock().unwrap_or_else(|p| p.into_inner());
        let backup = vault.export(&self.config.keys, backup_passphrase)?;
        write_private(file, backup.as_bytes()).with_context(|| format!("cannot write {}", file.display()))?;
        vault.mark_backed_up()?;
        Ok(())
    }

    /// Installs (or, with `None`, removes) the reranker `retrieve` applies.
    pub fn set_reranker(&self, reranker: Option<Arc<dyn Rerank>>) {
        *self.reranker.write().unwrap_or_else(|e| e.into_inner()) = reranker;
    }

    /// The passages shown to the model for `question`: hybrid search, then the reranker if one
    /// is installed, `top_k` of them.
    pub async fn retrieve(&self, question: &str) -> Result<Vec<SearchHit>> {
        let reranker = self.reranker.read().unwrap_or_else(|e| e.into_inner()).clone();
        let Some(reranker) = reranker else {
            return self.search(question, SearchMode::Hybrid, self.config.top_k).await;
        };
        let candidates = self.search(question, SearchMode::Hybrid, RERANK_CANDIDATES.max(self.config.top_k)).await?;
        let q = question.to_owned();
        let mut ranked = tokio::task::spawn_blocking(move || reranker.rerank(&q, candidates))
            .await?
            .context("the reranker failed")?;
        ranked.truncate(self.config.top_k);
        Ok(ranked)
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn embedder(&self) -> &Arc<Embedder> {
        &self.embedder
    }

    pub fn knowledge_base(&self) -> &KnowledgeBase {
        &self.kb
    }

    pub async fn documents(&self) -> Result<Vec<DocumentRecord>> {
        self.kb.documents().await
    }

    /// Removes a document by its path; returns whether it was in the knowledge base.
    pub async fn remove(&self, path: &Path) -> Result<bool> {
        let doc_id = ingestion::document_id(&self.kb, &ingestion::canonical(path));
        self.kb.remove_document(&doc_id).await
    }

    /// Works with the ingestion queue on disk.
    pub(crate) fn jobs<T>(&self, f: impl FnOnce(&mut jobs::JobQueue) -> Result<T>) -> Result<T> {
        let mut queue = self.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut queue)
    }

    /// Keeps removed documents' vectors for reuse, within a bound (about 30 MB of 384-d vectors).
    pub(crate) fn keep_removed_vectors(&self, vectors: std::collections::HashMap<String, Vec<f32>>) {
        const KEEP_AT_MOST: usize = 20_000;
        let mut kept = self.removed_vectors.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() + vectors.len() > KEEP_AT_MOST {
            kept.clear();
        }
        kept.extend(vectors);
    }

    pub(crate) fn removed_vector(&self, hash: &str) -> Option<Vec<f32>> {
        self.removed_vectors.lock().unwrap_or_else(|p| p.into_inner()).get(hash).cloned()
    }

    /// The queue's view of every file it has seen: queued (work an interrupted ingestion left),
    /// indexed, unchanged, removed, failed (with the reason) or cancelled.
    pub fn job_list(&self) -> Vec<Job> {
        self.jobs(|q| Ok(q.all().cloned().collect())).unwrap_or_default()
    }

    /// Files an earlier ingestion queued and did not finish (it was killed, or the machine stopped).
    pub fn pending_files(&self) -> Vec<PathBuf> {
        self.jobs(|q| Ok(q.pending())).unwrap_or_default()
    }

    /// Finishes what an interrupted ingestion left: the queued files, from where it stopped
    /// (files already stored are not embedded again).
    pub async fn resume(&self, on_event: &mut (dyn FnMut(Event) + Send), cancel: &Cancel) -> Result<IngestReport> {
        let pending = self.pending_files();
        let (present, gone): (Vec<PathBuf>, Vec<PathBuf>) = pending.into_iter().partition(|p| p.exists());
        for p in &gone {
            self.jobs(|q| q.finish(p, JobState::Failed, Some("the file is gone".into())))?;
        }
        if present.is_empty() {
            return Ok(IngestReport::default());
        }
        self.ingest(&present, on_event, cancel).await
    }

    /// Brings the knowledge base in line with the files and folders at `paths` as they are on
    /// disk now: those that exist are ingested (unchanged files skipped), documents at or under
    /// those that are gone are removed. What the folder watcher calls with the paths it saw change.
    pub async fn sync_paths(
        &self,
        paths: &[PathBuf],
        on_event: &mut (dyn FnMut(Event) + Send),
        cancel: &Cancel,
    ) -> Result<IngestReport> {
        let (present, gone): (Vec<PathBuf>, Vec<PathBuf>) = paths.iter().cloned().partition(|p| p.exists());
        let present: Vec<PathBuf> =
            present.into_iter().filter(|p| p.is_dir() || quire_ingest::is_supported(p)).collect();
        let mut report =
            if present.is_empty() { IngestReport::default() } else { self.ingest(&present, on_event, cancel).await? };
        // Removals after additions: a renamed file's chunks are still there to be reused.
        let gone: Vec<PathBuf> = gone.iter().map(|p| ingestion::canonical(p)).collect();
        let docs = ingestion::gone_under(&self.kb.documents().await?, &gone);
        if !docs.is_empty() {
            ingestion::remove_gone(self, &docs, &mut report, on_event).await?;
            self.kb.refresh_indexes().await?;
            if present.is_empty() {
                on_event(report.summary(false));
            }
        }
        Ok(report)
    }

    /// Compacts the knowledge base's files and deletes old table versions (all of them with
    /// `keep` zero); what `quire optimize` runs.
    pub async fn optimize(&self, keep: std::time::Duration) -> Result<()> {
        self.kb.refresh_indexes().await?;
        self.kb.optimize(keep).await
    }

    /// Indexes files and folders; stops between files or embedding batches when `cancel` is set.
    pub async fn ingest(
        &self,
        paths: &[PathBuf],
        on_event: &mut (dyn FnMut(Event) + Send),
        cancel: &Cancel,
    ) -> Result<IngestReport> {
        let _writing = self.writing.lock().await;
        ingestion::ingest(self, paths, on_event, cancel).await
    }

    /// The stored document a chunk belongs to.
    pub async fn document_of_chunk(&self, chunk_id: &str) -> Result<Option<DocumentRecord>> {
        match quire_index::parse_chunk_id(chunk_id) {
            Some((doc_id, _)) => self.kb.document(doc_id).await,
            None => Ok(None),
        }
    }

    /// Whether the answer model is in memory (it loads on first use of `llm`).
    pub fn llm_loaded(&self) -> bool {
        self.llm.initialized()
    }

    /// The memory budget now: the configured answer model and its draft model (loaded with
    /// it), or, without one configured, `draft` as a model not loaded.
    pub fn memory_budget(&self, draft: Option<&Path>, context_tokens: u32) -> Result<MemoryBudget> {
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
        memory::budget(base, &self.config.embedder_dir, &llms, context_tokens, &self.config.data_dir, reading)
    }

    pub async fn search(&self, query: &str, mode: SearchMode, limit: usize) -> Result<Vec<SearchHit>> {
        match mode {
            SearchMode::Dense => self.kb.search_dense(&self.embed_query(query).await?, limit, false).await,
            SearchMode::Bm25 => self.kb.search_bm25(query, limit).await,
            SearchMode::Hybrid => self.kb.search_hybrid(&self.embed_query(query).await?, query, limit).await,
        }
    }

    async fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let embedder = self.embedder.clone();
        let q = query.to_owned();
        tokio::task::spawn_blocking(move || embedder.embed_query(&q)).await?
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

    /// Answers a question from the knowledge base, streaming the answer text through `on_event`.
    /// Ends with the `Cancelled` error when `cancel` is set before the answer is complete.
    pub async fn ask(
        &self,
        question: &str,
        on_event: &mut (dyn FnMut(Event) + Send),
        cancel: &Cancel,
    ) -> Result<Answer> {
        self.ask_following(&[], question, on_event, cancel).await
    }

    /// `ask` for a question asked after `earlier` turns of a conversation (oldest first): a
    /// question that leans on the one before is searched together with it, and the model is
    /// shown the latest turns (`conversation`).
    pub async fn ask_following(
        &self,
        earlier: &[Turn],
        question: &str,
        on_event: &mut (dyn FnMut(Event) + Send),
        cancel: &Cancel,
    ) -> Result<Answer> {
        let question = question.trim();
        anyhow::ensure!(!question.is_empty(), "the question is empty");
        let hits = self.in_earlier_order(self.retrieve(&conversation::search_text(earlier, question)).await?);
        anyhow::ensure!(
            !hits.is_empty(),
            "the knowledge base is empty: add documents first (`quire ingest <folder or files>`)"
        );
        let sources: Vec<Source> = hits
            .iter()
            .enumerate()
            .map(|(i, h)| Source {
                number: i + 1,
                chunk_id: h.chunk_id.clone(),
                path: h.path.clone(),
                page: h.page,
                start: h.start,
                end: h.end,
                text: h.text.clone(),
                score: h.score,
            })
            .collect();
        on_event(Event::Retrieved { sources: sources.clone() });

        let llm = self.llm().await?;
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let request = self.answer_request_following(earlier, question, &hits);
        let mut text_stream = answer::AnswerTextStream::default();
        let generated = llm
            .generate_detailed(
                &request,
                |progress| match progress {
                    Progress::Prompt { done, total } => {
                        on_event(Event::PromptProgress { done: done as u32, total: total as u32 })
                    }
                    Progress::Text(piece) => {
                        let text = text_stream.push(piece);
                        if !text.is_empty() {
                            on_event(Event::AnswerDelta { text });
                        }
                    }
                },
                || cancel.is_cancelled(),
            )
            .await;
        if cancel.is_cancelled() {
            return Err(Cancelled.into());
        }
        let (generation, speculation) = generated?;
        on_event(Event::AnswerFinished);

        let raw: RawAnswer = serde_json::from_str(&generation.text).with_context(|| {
            format!(
                "the model's answer is not complete JSON (finish reason: {}); \
                 raise the answer length limit or ask a narrower question",
                generation.stats.finish_reason
            )
        })?;
        let citations = raw
            .citations
            .iter()
            .map(|c| {
                // The schema allows only 1..=sources.len(); a number outside it is a bug upstream.
                let source = sources
                    .get(c.chunk.wrapping_sub(1))
                    .with_context(|| format!("the answer cites source {} which was not retrieved", c.chunk))?;
                // The quote decides which passage is cited: small models copy a passage well
                // but often write the wrong number beside it. A quote that is not in the source
                // it names but is word for word in another retrieved one cites that one.
                let (source, quote_range) = match find_quote(&source.text, &c.quote) {
                    Some(range) => (source, Some(range)),
                    None => sources
                        .iter()
                        .find_map(|s| find_quote(&s.text, &c.quote).map(|r| (s, Some(r))))
                        .unwrap_or((source, None)),
                };
                // A right answer with an unrelated quote: cite the sentence that says it.
                let terms = |text: &str| self.kb.blind_terms(text);
                let (source, quote, quote_range) =
                    match answer::better_support(question, &raw.answer, &c.quote, &hits, terms) {
                        Some((i, sentence)) => {
                            let range = find_quote(&sources[i].text, &sentence);
                            (&sources[i], sentence, range)
                        }
                        None => (source, c.quote.clone(), quote_range),
                    };
                Ok(Citation {
                    number: source.number,
                    chunk_id: source.chunk_id.clone(),
                    path: source.path.clone(),
                    page: source.page,
                    quote,
                    quote_range,
                    passage: source.text.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Answer {
            question: question.into(),
            text: raw.answer,
            citations,
            sources,
            raw: generation.text,
            stats: generation.stats,
            speculation,
        })
    }

    /// `hits` numbered as the last prompt numbered them, when they are its passages (a
    /// follow-up), so that prompt can be carried on; else as they are.
    pub fn in_earlier_order(&self, hits: Vec<SearchHit>) -> Vec<SearchHit> {
        let last = self.last_context.lock().unwrap_or_else(|p| p.into_inner());
        match last.as_ref() {
            Some(context)
                if context
                    .same_passages(&answer::fit_passages(&hits, answer::PASSAGE_TOKENS, |t| self.count_tokens(t))) =>
            {
                let place = |h: &SearchHit| context.passages().iter().position(|p| p.chunk_id == h.chunk_id);
                let mut hits = hits;
                hits.sort_by_key(place);
                hits
            }
            _ => hits,
        }
    }

    /// What the answer model is asked for `question` over the retrieved `hits` (numbered in
    /// this order): the prompt with each passage cut to `answer::PASSAGE_TOKENS` and, with
    /// `focus_tokens` set, only its sentences that bear on the question (`context`), carried on
    /// from the last prompt when the passages are its own; and the schema that holds citations
    /// to the sentences shown.
    pub fn answer_request(&self, question: &str, hits: &[SearchHit]) -> GenerationRequest {
        self.answer_request_following(&[], question, hits)
    }

    /// `answer_request` for a question asked after `earlier` turns: the sentences shown are
    /// chosen for what the question is searched with, and the prompt shows the latest turns.
    pub fn answer_request_following(&self, earlier: &[Turn], question: &str, hits: &[SearchHit]) -> GenerationRequest {
        let shown = answer::fit_passages(hits, answer::PASSAGE_TOKENS, |text| self.count_tokens(text));
        let mut last = self.last_context.lock().unwrap_or_else(|p| p.into_inner());
        let reading = EngineReading(self);
        let searched = conversation::search_text(earlier, question);
        let carried = last.as_ref().and_then(|c| c.follow_up(&searched, &shown, &reading));
        let context =
            carried.unwrap_or_else(|| context::Context::focus(&searched, shown, self.config.focus_tokens, &reading));
        let request = GenerationRequest {
            system: answer::SYSTEM_PROMPT.into(),
            user: context.prompt(&conversation::earlier_text(earlier), question),
            schema: Some(answer::answer_schema(&context.quotes())),
            max_tokens: self.config.max_answer_tokens,
            temperature: None,
        };
        *last = Some(context);
        request
    }

    /// Answer-model tokens in `text`: counted with its tokenizer once it is loaded, else
    /// estimated at 3 bytes a token.
    fn count_tokens(&self, text: &str) -> usize {
        self.llm.get().and_then(|llm| llm.count_tokens(text)).unwrap_or(text.len().div_ceil(3))
    }
}

/// What the relevant-sentence context reads text with: the index's analyser, the answer
/// model's tokenizer and the embedder.
struct EngineReading<'a>(&'a Engine);

impl context::Reading for EngineReading<'_> {
    fn terms(&self, text: &str) -> String {
        self.0.kb.blind_terms(text)
    }

    fn tokens(&self, text: &str) -> usize {
        self.0.count_tokens(text)
    }

    fn meanings(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        // Without meanings the terms alone choose: a failed embedding costs focus, not the answer.
        self.0.embedder.embed_passages(texts).unwrap_or_default()
    }
}

/// Where `quote` appears in `passage`, word for word but blind to what PDF text does to words
/// without changing them: whitespace (line breaks, doubled spaces, or none: "global: global"
/// where the model writes "global:global"), a word hyphenated at a line break ("homoge- neous"),
/// typographic quotes and dashes against ASCII ones, and ligatures ("ﬁ"). Returns a byte range
/// in `passage`.
pub fn find_quote(passage: &str, quote: &str) -> Option<(usize, usize)> {
    let (wanted, _) = squeeze(quote, false);
    if wanted.is_empty() {
        return None;
    }
    // First with line-break hyphens dropped ("homogeneous"), then kept ("well-known").
    [true, false].into_iter().find_map(|drop_hyphens| {
        let (kept, spans) = squeeze(passage, drop_hyphens);
        let at = kept.find(&wanted)?;
        let first = kept[..at].chars().count();
        let last = first + wanted.chars().count() - 1;
        Some((spans[first].0, spans[last].1))
    })
}

/// `text` folded for comparison: without whitespace (and, if asked, without hyphens that end a
/// line inside a word), typography made plain; with each output character's byte range in `text`.
fn squeeze(text: &str, drop_break_hyphens: bool) -> (String, Vec<(usize, usize)>) {
    let mut kept = String::with_capacity(text.len());
    let mut spans = Vec::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            continue;
        }
        if drop_break_hyphens && c == '-' {
            let before = text[..i].chars().next_back();
            let after = &text[i + 1..];
            let breaks = after.starts_with(char::is_whitespace);
            let next = after.trim_start().chars().next();
            if breaks && before.is_some_and(char::is_alphabetic) && next.is_some_and(char::is_lowercase) {
                continue;
            }
        }
        let span = (i, i + c.len_utf8());
        for plain in plain_typography(c).chars() {
            kept.push(plain);
            spans.push(span);
        }
    }
    (kept, spans)
}

/// The plain spelling of a typographic character (the character itself if it has none).
fn plain_typography(c: char) -> std::borrow::Cow<'static, str> {
    let plain = match c {
        '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{2032}' => "'",
        '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{2033}' => "\"",
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2212}' => "-",
        '\u{2026}' => "...",
        '\u{fb00}' => "ff",
        '\u{fb01}' => "fi",
        '\u{fb02}' => "fl",
        '\u{fb03}' => "ffi",
        '\u{fb04}' => "ffl",
        _ => return std::borrow::Cow::Owned(c.to_string()),
    };
    std::borrow::Cow::Borrowed(plain)
}

/// A collection whose key manifest (`vault.json`) is gone but whose tables or logs hold sealed
/// data must not get a new key: the new manifest would name a new collection, and the user's key
/// backup (of the old one) would then be refused. Nothing is written; the error says how to
/// restore the manifest.
async fn refuse_sealed_data_without_manifest(dir: &Path) -> Result<()> {
    if dir.join(quire_vault::store::MANIFEST).exists() {
        return Ok(());
    }
    let sealed_log = ["ingest-queue.jsonl", "history.jsonl"].iter().any(|name| {
        std::fs::read_to_string(dir.join(name))
            .is_ok_and(|t| t.lines().any(|l| quire_vault::Protection::sealed_by(l).is_some()))
    });
    if sealed_log || KnowledgeBase::holds_sealed_data(dir).await? {
        anyhow::bail!(
            "the key manifest of this collection ({}) is missing, but the collection holds encrypted documents; \
             nothing was changed. Restore it from your key backup: `quire key import BACKUP-FILE` (or Settings → \
             Privacy → Import key), then open it again",
            dir.join(quire_vault::store::MANIFEST).display()
        );
    }
    Ok(())
}

fn missing_model(path: &Path) -> anyhow::Error {
    let known = quire_models::KNOWN_MODELS.iter().find(|m| m.location().map(|l| l == path).unwrap_or(false));
    match known {
        Some(m) => quire_models::missing_model_error(m),
        None => anyhow::anyhow!(
            "no model at {}: check the path, or run `quire models fetch` for the defaults",
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_match_across_line_breaks() {
        let passage = "The ssearch36 program\nperforms a rigorous  Smith-Waterman search.";
        let (s, e) = find_quote(passage, "rigorous Smith-Waterman search").unwrap();
        assert_eq!(&passage[s..e], "rigorous  Smith-Waterman search");
        assert_eq!(find_quote(passage, "program performs"), Some((14, 30)));
        assert_eq!(find_quote(passage, "not there"), None);
        assert_eq!(find_quote(passage, "   "), None);
    }

    #[test]
    fn quotes_match_whatever_the_pdf_did_to_spaces_and_hyphens() {
        let passage = "global: global (ggsearch36) only supports homoge- neous linear systems; a well-\nknown case.";
        let (s, e) = find_quote(passage, "global:global (ggsearch36)").unwrap();
        assert_eq!(&passage[s..e], "global: global (ggsearch36)");
        let (s, e) = find_quote(passage, "supports homogeneous linear").unwrap();
        assert_eq!(&passage[s..e], "supports homoge- neous linear");
        // A quote that keeps the hyphen matches too; a real hyphen before a space is kept.
        assert!(find_quote(passage, "homoge- neous").is_some());
        assert!(find_quote(passage, "a well-known case").is_some());
        // Words still have to be the passage's, in its order.
        assert_eq!(find_quote(passage, "global (ggsearch36) global:"), None);
        assert_eq!(find_quote(passage, "homogeneous nonlinear"), None);
        // Multi-byte characters map back to whole characters.
        let (s, e) = find_quote("Köppe’s   method", "Köppe’s method").unwrap();
        assert_eq!((s, e), (0, "Köppe’s   method".len()));
        // Typography: curly quotes, dashes and ligatures against their plain spelling.
        let passage = "the “classic” interactive mode, 2 – 5X slower, a ﬁle’s end";
        let (s, e) = find_quote(passage, "the \"classic\" interactive mode, 2-5X").unwrap();
        assert_eq!(&passage[s..e], "the “classic” interactive mode, 2 – 5X");
        let (s, e) = find_quote(passage, "a file's end").unwrap();
        assert_eq!(&passage[s..e], "a ﬁle’s end");
        assert_eq!(find_quote(passage, "a fine end"), None);
    }
}
