//! Ingestion: the files found (`discovery`) queued on disk, then for each one hash → load → chunk →
//! embed → store, the next file read, parsed and chunked on a blocking thread while this one
//! is embedded. A file that fails is reported with its reason and the others go on; a file
//! whose bytes have not changed since it was stored is skipped before it is parsed; a chunk whose
//! text is already stored (in any document: a renamed file, an edited one) keeps its vector.
//! Finished files are written to the knowledge base in batches (a few writes per batch, not per
//! file), and the queue on disk says what an interrupted run left to do.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use serde::Serialize;
use ts_rs::TS;

use quire_index::{ChunkRecord, DocumentRecord};
use quire_ingest::isolate::Isolation;
use quire_ingest::{Chunker, LoadError, LoadedDocument};

use crate::discovery::{canonical, discover_files};
use crate::jobs::{FileStamp, Finished, Job, JobState};
use crate::pages_read::PagesRead;
use crate::{Cancel, Engine, Event};

/// Chunks embedded per step: small enough for steady progress and a prompt cancel, large
/// enough that batching in the embedder still pays.
const EMBED_STEP: usize = 32;
/// A write batch is committed when it holds this many chunks or files, or is this old.
const BATCH_CHUNKS: usize = 1024;
const BATCH_FILES: usize = 256;
const BATCH_AGE: Duration = Duration::from_secs(2);
/// Files at least this large commit the batch before they start.
const LARGE_FILE_BYTES: u64 = 256 * 1024;
/// Old table versions are pruned once this many have piled up during a long ingestion.
const PRUNE_AFTER_VERSIONS: usize = 200;
/// Table versions younger than this are kept: another process (the app beside the CLI) may be
/// reading them.
pub(crate) const KEEP_VERSIONS_FOR: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Serialize, PartialEq, TS)]
pub struct QueuedFile {
    pub path: String,
    #[ts(type = "number")]
    pub bytes: u64,
}

/// Where a file is in its pipeline. While `Reading` a scan, `FileProgress` counts the pages
/// OCR has read (`done` of `total`); otherwise reading and chunking count nothing (0 of 0).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, TS)]
#[serde(rename_all = "snake_case")]
pub enum FileStage {
    Reading,
    Chunking,
    Embedding,
    Storing,
}

#[derive(Debug, Clone, Serialize, PartialEq, TS)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum FileOutcome {
    Indexed {
        pages: u32,
        chunks: u32,
        /// Chunks whose vectors were computed; the others' texts were stored already and their
        /// vectors were reused.
        embedded: u32,
        /// Pages whose text could not be read, each with the reason; the rest of the file is
        /// indexed.
        unreadable_pages: Vec<quire_ingest::UnreadablePage>,
        /// Scanned pages whose text an earlier, stopped ingestion had read: not read again.
        pages_resumed: u32,
    },
    Unchanged,
    /// The file is gone from disk (deleted, or moved out of the folder): its document was removed.
    Removed,
    Failed {
        reason: String,
    },
}

/// Where an ingestion's time went, for benchmarks (seconds of wall time in each stage).
#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestTimings {
    pub total_s: f64,
    /// Reading and chunking: the time the run waited for them. A file read ahead while the
    /// one before it was embedded (`EngineConfig::read_ahead`) may cost no wait at all.
    pub reading_s: f64,
    pub chunking_s: f64,
    pub embedding_s: f64,
    pub storing_s: f64,
    pub indexing_s: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestReport {
    pub files: Vec<(String, FileOutcome)>,
    pub timings: IngestTimings,
}

impl IngestReport {
    pub fn failed(&self) -> Vec<(&str, &str)> {
        self.files
            .iter()
            .filter_map(|(p, o)| match o {
                FileOutcome::Failed { reason } => Some((p.as_str(), reason.as_str())),
                _ => None,
            })
            .collect()
    }

    pub fn count(&self, pred: impl Fn(&FileOutcome) -> bool) -> usize {
        self.files.iter().filter(|(_, o)| pred(o)).count()
    }

    pub fn chunks(&self) -> usize {
        self.files
            .iter()
            .map(|(_, o)| match o {
                FileOutcome::Indexed { chunks, .. } => *chunks as usize,
                _ => 0,
            })
            .sum()
    }

    /// Chunks whose vectors were computed (not reused).
    pub fn embedded(&self) -> usize {
        self.files
            .iter()
            .map(|(_, o)| match o {
                FileOutcome::Indexed { embedded, .. } => *embedded as usize,
                _ => 0,
            })
            .sum()
    }

    pub(crate) fn summary(&self, cancelled: bool) -> Event {
        Event::IngestFinished {
            indexed: self.count(|o| matches!(o, FileOutcome::Indexed { .. })),
            unchanged: self.count(|o| matches!(o, FileOutcome::Unchanged)),
            removed: self.count(|o| matches!(o, FileOutcome::Removed)),
            failed: self.count(|o| matches!(o, FileOutcome::Failed { .. })),
            chunks: self.chunks(),
            cancelled,
        }
    }
}

/// A document's id: derived from its absolute path (a keyed fingerprint), so re-ingesting the
/// same file replaces it.
pub(crate) fn document_id(kb: &quire_index::KnowledgeBase, path: &Path) -> String {
    kb.document_id(&path.to_string_lossy())
}

pub(crate) async fn ingest(
    engine: &Engine,
    paths: &[PathBuf],
    on_event: &mut (dyn FnMut(Event) + Send),
    cancel: &Cancel,
) -> Result<IngestReport> {
    let started = Instant::now();
    let (files, problems) = discover_files(paths, engine.config().follow_links);
    // Two names for one file (a link beside its target) must not make two documents.
    let mut files: Vec<PathBuf> = files.iter().map(|p| canonical(p)).collect();
    files.sort();
    files.dedup();
    let mut report = IngestReport::default();
    let sizes: Vec<u64> = files.iter().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).collect();
    let queued = problems
        .iter()
        .map(|(p, _)| QueuedFile { path: p.display().to_string(), bytes: 0 })
        .chain(files.iter().zip(&sizes).map(|(p, &bytes)| QueuedFile { path: p.display().to_string(), bytes }))
        .collect();
    // Read before the files are queued again (a queued line replaces a file's failure).
    let failed_before = engine.jobs(|q| Ok(q.lasting_failures()))?;
    engine.jobs(|q| q.enqueue(&files))?;
    on_event(Event::IngestStarted { files: queued });
    for (path, reason) in problems {
        engine.jobs(|q| q.finish(&path, JobState::Failed, Some(reason.clone())))?;
        finish(&mut report, on_event, path.display().to_string(), FileOutcome::Failed { reason });
    }

    let kb = &engine.kb;
    let documents = kb.documents().await?;
    let keys = remove_orphans(engine).await?;
    let mut run = Run {
        stored: documents.into_iter().map(|d| (d.path.clone(), d)).collect(),
        stored_hashes: keys.into_iter().map(|k| k.hash).collect(),
        failed_before,
        chunker: std::sync::Arc::new(Chunker::new(engine.embedder.tokenizer())?),
        batch: Vec::new(),
        batch_started: None,
        progress: Progress::new(files.len(), sizes.iter().sum()),
        timings: IngestTimings::default(),
        changed: false,
        versions_since_prune: 0,
        finished: Vec::new(),
        pages_read: engine.pages_read.clone(),
    };
    run.progress.done_files = report.files.len();
    run.progress.total_files += report.files.len();

    // The next file is read, parsed and chunked while this one is embedded (`read_ahead`).
    let isolation = engine.config().loader.clone();
    let read_ahead = engine.config().read_ahead;
    let mut next: Option<Reading> = None;
    for (i, (path, bytes)) in files.iter().zip(&sizes).enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        if *bytes >= LARGE_FILE_BYTES {
            // Commit what is ready before a file that may take minutes to embed.
            flush(engine, &mut run, &mut report, on_event).await?;
        }
        let shown = path.display().to_string();
        on_event(Event::FileStarted { path: shown.clone() });
        let reading = next.take().unwrap_or_else(|| start_reading(&run, path, isolation.clone()));
        if read_ahead {
            next = files.get(i + 1).map(|p| start_reading(&run, p, isolation.clone()));
        }
        let prepared = match prepare(engine, &mut run, path, reading, &shown, on_event, cancel).await {
            Ok(p) => p,
            Err(e) => Prepared::Failed { reason: format!("{e:#}"), lasting: None },
        };
        run.progress.done_bytes += bytes;
        let ended = match prepared {
            Prepared::Done(outcome) => Some((outcome, None)),
            Prepared::Failed { reason, lasting } => Some((FileOutcome::Failed { reason }, lasting)),
            Prepared::Ready(doc) => {
                run.batch_started.get_or_insert_with(Instant::now);
                run.batch.push(*doc);
                None
            }
            Prepared::Cancelled => break,
        };
        if let Some((outcome, lasting)) = ended {
            // Written to the queue with the next commit: a crash before it only means the
            // file is checked again.
            let (state, reason) = job_state(&outcome);
            run.finished.push(Finished { lasting, ..Finished::new(path.clone(), state, reason) });
            run.progress.done_files += 1;
            finish(&mut report, on_event, shown, outcome);
            on_event(run.progress.event());
        }
        let batch_chunks: usize = run.batch.iter().map(|d| d.chunks.len()).sum();
        if batch_chunks >= BATCH_CHUNKS
            || run.batch.len() >= BATCH_FILES
            || run.batch_started.is_some_and(|t| t.elapsed() >= BATCH_AGE)
        {
            flush(engine, &mut run, &mut report, on_event).await?;
        }
    }
    // What was embedded before a cancel is kept: it is work done.
    flush(engine, &mut run, &mut report, on_event).await?;
    engine.jobs(|q| q.finish_all(&std::mem::take(&mut run.finished)))?;
    if cancel.is_cancelled() {
        let finished: HashSet<&str> = report.files.iter().map(|(p, _)| p.as_str()).collect();
        let left: Vec<Finished> = files
            .iter()
            .filter(|p| !finished.contains(p.display().to_string().as_str()))
            .map(|p| Finished::new(p.clone(), JobState::Cancelled, None))
            .collect();
        engine.jobs(|q| q.finish_all(&left))?;
    }

    // Files that were indexed under the given folders and are gone from disk.
    let folders: Vec<PathBuf> = paths.iter().filter(|p| p.is_dir()).map(|p| canonical(p)).collect();
    if !folders.is_empty() && !cancel.is_cancelled() {
        // In a shared library, only what this computer added: the others' files are theirs.
        let here =
            if kb.is_shared() { kb.documents_written_here().await? } else { run.stored.values().cloned().collect() };
        let gone = gone_under(&here, &folders);
        remove_gone(engine, &gone, &mut report, on_event).await?;
        engine.jobs(|q| q.forget_gone(&folders))?;
        run.changed |= !gone.is_empty();
    }

    let indexing = Instant::now();
    if run.changed {
        kb.refresh_indexes().await?;
        kb.optimize(KEEP_VERSIONS_FOR).await?;
    }
    run.timings.indexing_s = indexing.elapsed().as_secs_f64();
    run.timings.total_s = started.elapsed().as_secs_f64();
    report.timings = run.timings;
    on_event(report.summary(cancel.is_cancelled()));
    Ok(report)
}

/// Deletes the chunks a crash left without a document row (see quire-index), keeping their
/// vectors for reuse: the file they came from is processed again in this run. Returns the keys
/// of the chunks that remain.
pub(crate) async fn remove_orphans(engine: &Engine) -> Result<Vec<quire_index::ChunkKey>> {
    let (keys, orphan_vectors) = engine.kb.remove_orphans().await?;
    if !orphan_vectors.is_empty() {
        engine.keep_removed_vectors(orphan_vectors);
    }
    Ok(keys)
}

/// Stored documents at or under `roots` whose files are no longer on disk.
pub(crate) fn gone_under<'a>(
    docs: impl IntoIterator<Item = &'a DocumentRecord>,
    roots: &[PathBuf],
) -> Vec<DocumentRecord> {
    docs.into_iter()
        .filter(|d| roots.iter().any(|r| Path::new(&d.path).starts_with(r)) && !Path::new(&d.path).exists())
        .cloned()
        .collect()
}

/// Removes the documents of files that are gone, reporting each as `Removed`.
pub(crate) async fn remove_gone(
    engine: &Engine,
    gone: &[DocumentRecord],
    report: &mut IngestReport,
    on_event: &mut (dyn FnMut(Event) + Send),
) -> Result<()> {
    let ids: Vec<&str> = gone.iter().map(|d| d.doc_id.as_str()).collect();
    let kb = &engine.kb;
    engine.keep_removed_vectors(kb.vectors_of_documents(&ids).await?);
    kb.remove_documents(&ids).await?;
    for d in gone {
        engine.jobs(|q| q.finish(Path::new(&d.path), JobState::Removed, None))?;
        finish(report, on_event, d.path.clone(), FileOutcome::Removed);
    }
    Ok(())
}

fn finish(report: &mut IngestReport, on_event: &mut (dyn FnMut(Event) + Send), path: String, outcome: FileOutcome) {
    on_event(Event::FileFinished { path: path.clone(), outcome: outcome.clone() });
    report.files.push((path, outcome));
}

fn job_state(outcome: &FileOutcome) -> (JobState, Option<String>) {
    match outcome {
        FileOutcome::Indexed { .. } => (JobState::Indexed, None),
        FileOutcome::Unchanged => (JobState::Unchanged, None),
        FileOutcome::Removed => (JobState::Removed, None),
        FileOutcome::Failed { reason } => (JobState::Failed, Some(reason.clone())),
    }
}

/// The state of one ingestion run.
struct Run {
    /// Stored documents by path, as they were when the run started.
    stored: HashMap<String, DocumentRecord>,
    /// Texts whose vectors are stored (by hash); may include some deleted since (then embedded).
    stored_hashes: HashSet<String>,
    /// Files that failed before for a reason of their own bytes, by path, as the queue said
    /// when the run started.
    failed_before: HashMap<String, Job>,
    chunker: std::sync::Arc<Chunker>,
    /// Files ready to be written, in the order they finished.
    batch: Vec<PendingDocument>,
    batch_started: Option<Instant>,
    progress: Progress,
    timings: IngestTimings,
    changed: bool,
    versions_since_prune: usize,
    /// Files done without a write (unchanged, failed), for the queue.
    finished: Vec<Finished>,
    /// Scanned pages read before, kept as they are read (`pages_read`).
    pages_read: std::sync::Arc<std::sync::Mutex<PagesRead>>,
}

struct PendingDocument {
    record: DocumentRecord,
    chunks: Vec<ChunkRecord>,
    embedded: u32,
    unreadable_pages: Vec<quire_ingest::UnreadablePage>,
    pages_resumed: u32,
}

enum Prepared {
    Done(FileOutcome),
    /// The file cannot be indexed; `lasting` when that comes from its bytes as stamped.
    Failed {
        reason: String,
        lasting: Option<FileStamp>,
    },
    Ready(Box<PendingDocument>),
    Cancelled,
}

/// Batch progress: files done of the total, chunks embedded per second, time left by bytes.
struct Progress {
    started: Instant,
    total_files: usize,
    done_files: usize,
    total_bytes: u64,
    done_bytes: u64,
    embedded: usize,
}

impl Progress {
    fn new(total_files: usize, total_bytes: u64) -> Progress {
        Progress { started: Instant::now(), total_files, done_files: 0, total_bytes, done_bytes: 0, embedded: 0 }
    }

    fn event(&self) -> Event {
        let elapsed = self.started.elapsed().as_secs_f32().max(1e-3);
        let eta_s = (self.done_bytes > 0 && self.done_bytes < self.total_bytes)
            .then(|| elapsed * (self.total_bytes - self.done_bytes) as f32 / self.done_bytes as f32);
        Event::IngestProgress {
            files_done: self.done_files as u32,
            files_total: self.total_files as u32,
            chunks_embedded: self.embedded as u32,
            chunks_per_s: self.embedded as f32 / elapsed,
            eta_s,
        }
    }
}

/// Commits the batch: four writes for all its files, then each file is reported indexed.
async fn flush(
    engine: &Engine,
    run: &mut Run,
    report: &mut IngestReport,
    on_event: &mut (dyn FnMut(Event) + Send),
) -> Result<()> {
    if run.batch.is_empty() {
        return Ok(());
    }
    let t = Instant::now();
    let batch = std::mem::take(&mut run.batch);
    run.batch_started = None;
    let records: Vec<DocumentRecord> = batch.iter().map(|d| d.record.clone()).collect();
    let chunks: Vec<ChunkRecord> = batch.iter().flat_map(|d| d.chunks.iter().cloned()).collect();
    let kb = &engine.kb;
    kb.commit(&records, &chunks).await?;
    // Their scanned pages are stored with them now.
    engine.pages_read(|p| p.forget(records.iter().map(|r| r.content_hash.as_str())))?;
    run.stored_hashes.extend(chunks.iter().map(|c| c.hash.clone()));
    run.changed = true;
    run.versions_since_prune += 4;
    if run.versions_since_prune >= PRUNE_AFTER_VERSIONS {
        kb.prune(KEEP_VERSIONS_FOR).await?;
        run.versions_since_prune = 0;
    }
    run.timings.storing_s += t.elapsed().as_secs_f64();
    let mut done: Vec<Finished> = std::mem::take(&mut run.finished);
    done.extend(records.iter().map(|r| Finished::new(PathBuf::from(&r.path), JobState::Indexed, None)));
    engine.jobs(|q| q.finish_all(&done))?;
    for doc in batch {
        run.progress.done_files += 1;
        let outcome = FileOutcome::Indexed {
            pages: doc.record.pages,
            chunks: doc.record.chunks,
            embedded: doc.embedded,
            unreadable_pages: doc.unreadable_pages,
            pages_resumed: doc.pages_resumed,
        };
        finish(report, on_event, doc.record.path.clone(), outcome);
    }
    on_event(run.progress.event());
    Ok(())
}

/// A file read, parsed and chunked: the part of a file's work that needs only what was stored
/// before the run, so it can run on a blocking thread while the file before it is embedded.
enum Loaded {
    /// Nothing to embed: its size and time are those stored.
    Done(FileOutcome),
    /// The file cannot be indexed; `lasting` when that comes from its bytes as stamped.
    Failed { reason: String, lasting: Option<FileStamp> },
    /// The bytes stored, under a new modification time (to record, so the next scan need not
    /// read the file).
    Touched(DocumentRecord),
    Chunked {
        doc: LoadedDocument,
        chunks: Vec<quire_ingest::Chunk>,
        modified_ms: i64,
        /// Scanned pages taken as an earlier, stopped run had read them.
        pages_resumed: u32,
    },
}

/// What `read_and_chunk` produced, with the time each step took on its thread.
struct ReadAhead {
    loaded: Loaded,
    reading_s: f64,
    chunking_s: f64,
}

/// Reads, parses and chunks `path` unless its stored record says it is unchanged, or it failed
/// before for a reason of its own bytes and is as it was then (`failed_before`). Blocking.
/// `on_page(page, pages)` hears of each scanned page read by OCR.
fn read_and_chunk(
    path: &Path,
    stored: Option<DocumentRecord>,
    failed_before: Option<Job>,
    isolation: Option<Isolation>,
    chunker: &Chunker,
    pages_read: &std::sync::Mutex<PagesRead>,
    on_page: &mut dyn FnMut(u32, u32),
) -> ReadAhead {
    let t = Instant::now();
    let done = |loaded: Loaded, t: Instant| ReadAhead { loaded, reading_s: t.elapsed().as_secs_f64(), chunking_s: 0.0 };
    // A file whose size and modification time are those recorded is unchanged, unless it was
    // modified so close to when it was read that a later edit could share the timestamp.
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return done(Loaded::Failed { reason: LoadError::from(e).to_string(), lasting: None }, t),
    };
    let modified_ms = meta.modified().ok().map(millis).unwrap_or(0);
    let stamp = FileStamp::new(meta.len(), modified_ms);
    let failed = |e: LoadError| Loaded::Failed { reason: e.to_string(), lasting: e.is_lasting().then_some(stamp) };
    let same_as = |bytes: u64, modified: i64, seen_at_ms: i64| {
        modified_ms != 0
            && modified == modified_ms
            && bytes == meta.len()
            && modified_ms + TIMESTAMP_SLACK_MS < seen_at_ms
    };
    if let Some(stored) = &stored {
        if same_as(stored.bytes, stored.modified_ms, stored.ingested_at_ms) {
            return done(Loaded::Done(FileOutcome::Unchanged), t);
        }
    }
    if let Some(job) = failed_before {
        if job.lasting.is_some_and(|f| f.by_these_readers() && same_as(f.bytes, f.modified_ms, job.at_ms)) {
            return done(Loaded::Failed { reason: job.reason.unwrap_or_default(), lasting: job.lasting }, t);
        }
    }
    // Otherwise hash the bytes before parsing: an unchanged file costs a read, not a parse.
    // A file over the size limit is refused before it is read.
    if meta.len() > quire_ingest::MAX_FILE_BYTES {
        return done(failed(LoadError::TooLarge(meta.len())), t);
    }
    // Checked on the opened file, not the path: it may have been swapped for a pipe since.
    let bytes = match quire_ingest::read_file(path) {
        Ok(b) => b,
        Err(e) => return done(failed(e), t),
    };
    let content_hash = quire_ingest::content_hash(&bytes);
    if let Some(stored) = stored.filter(|d| d.content_hash == content_hash) {
        if stored.modified_ms == modified_ms {
            return done(Loaded::Done(FileOutcome::Unchanged), t);
        }
        let mut record = stored;
        record.modified_ms = modified_ms;
        record.ingested_at_ms = millis(SystemTime::now());
        return done(Loaded::Touched(record), t);
    }
    let kept_pages = || pages_read.lock().unwrap_or_else(|p| p.into_inner());
    let mut pages_resumed = 0;
    let loaded =
        quire_ingest::DocKind::from_path(path).ok_or(LoadError::Unsupported).and_then(|kind| match isolation {
            Some(iso) if kind.needs_isolation() => {
                // A scan stopped part way resumes from the pages it had read.
                let before = kept_pages().of(&content_hash);
                quire_ingest::isolate::load_isolated(path, &iso, &before, &mut |page, pages, text| {
                    on_page(page, pages);
                    if before.contains_key(&page) {
                        pages_resumed += 1;
                    } else {
                        // Losing a page kept costs only its OCR again: not worth failing the file.
                        let _ = kept_pages().keep(&content_hash, page, text);
                    }
                })
            }
            _ => quire_ingest::load_bytes(path, kind, &bytes),
        });
    let reading_s = t.elapsed().as_secs_f64();
    // A file that fails for its own bytes will not be read on from its pages: they are let go.
    // (One stopped by its time or memory limit keeps them for the next try.)
    let forget_pages = || {
        let _ = kept_pages().forget([content_hash.as_str()]);
    };
    let doc = match loaded {
        Ok(doc) => doc,
        Err(e) => {
            if e.is_lasting() {
                forget_pages();
            }
            return ReadAhead { loaded: failed(e), reading_s, chunking_s: 0.0 };
        }
    };
    let t = Instant::now();
    let chunks = chunker.chunk(&doc);
    let chunking_s = t.elapsed().as_secs_f64();
    let loaded = if chunks.is_empty() {
        forget_pages();
        Loaded::Failed { reason: "no text to index".into(), lasting: Some(stamp) }
    } else {
        Loaded::Chunked { doc, chunks, modified_ms, pages_resumed }
    };
    ReadAhead { loaded, reading_s, chunking_s }
}

/// A file being read on a blocking thread, and the scanned pages it has read so far.
struct Reading {
    done: tokio::task::JoinHandle<ReadAhead>,
    pages_read: tokio::sync::mpsc::UnboundedReceiver<(u32, u32)>,
}

/// `read_and_chunk` of `path` on a blocking thread, started now.
fn start_reading(run: &Run, path: &Path, isolation: Option<Isolation>) -> Reading {
    let stored = run.stored.get(path.to_string_lossy().as_ref()).cloned();
    let failed_before = run.failed_before.get(path.to_string_lossy().as_ref()).cloned();
    let (path, chunker, kept) = (path.to_path_buf(), run.chunker.clone(), run.pages_read.clone());
    let (page_read, pages_read) = tokio::sync::mpsc::unbounded_channel();
    let done = tokio::task::spawn_blocking(move || {
        read_and_chunk(&path, stored, failed_before, isolation, &chunker, &kept, &mut |page, pages| {
            let _ = page_read.send((page, pages));
        })
    });
    Reading { done, pages_read }
}

/// Embeds and lays out one file `read_and_chunk` has read; `Done` when there is nothing to
/// store (unchanged, failed).
async fn prepare(
    engine: &Engine,
    run: &mut Run,
    path: &Path,
    reading: Reading,
    shown: &str,
    on_event: &mut (dyn FnMut(Event) + Send),
    cancel: &Cancel,
) -> Result<Prepared> {
    let progress = |on_event: &mut (dyn FnMut(Event) + Send), stage: FileStage, done: usize, total: usize| {
        on_event(Event::FileProgress { path: shown.to_string(), stage, done: done as u32, total: total as u32 })
    };
    progress(on_event, FileStage::Reading, 0, 0);
    // Only the wait counts against the run's time: a file read ahead may cost nothing here.
    // The wait is shared between reading and chunking as the file's own times were.
    let t = Instant::now();
    // A scan's pages are reported as OCR reads them (`Reading` with the page and page count).
    let Reading { done: mut read, mut pages_read } = reading;
    let ahead = loop {
        tokio::select! {
            ahead = &mut read => break ahead?,
            Some((page, pages)) = pages_read.recv() => progress(on_event, FileStage::Reading, page as usize, pages as usize),
        }
    };
    let waited = t.elapsed().as_secs_f64();
    let work = (ahead.reading_s + ahead.chunking_s).max(1e-9);
    run.timings.reading_s += waited * ahead.reading_s / work;
    run.timings.chunking_s += waited * ahead.chunking_s / work;
    let path_str = path.to_string_lossy().into_owned();
    let doc_id = document_id(&engine.kb, path);
    let (doc, chunks, modified_ms, pages_resumed) = match ahead.loaded {
        Loaded::Done(outcome) => return Ok(Prepared::Done(outcome)),
        Loaded::Failed { reason, lasting } => return Ok(Prepared::Failed { reason, lasting }),
        Loaded::Touched(record) => {
            engine.kb.update_document(&record).await?;
            return Ok(Prepared::Done(FileOutcome::Unchanged));
        }
        Loaded::Chunked { doc, chunks, modified_ms, pages_resumed } => (doc, chunks, modified_ms, pages_resumed),
    };
    progress(on_event, FileStage::Chunking, 0, 0);
    let hashes: Vec<String> = chunks.iter().map(|c| engine.kb.chunk_hash(&c.text)).collect();

    // Vectors already computed: in this batch, of a document just removed (a move seen as a
    // removal first), or stored (the same text in this or another file).
    let mut known: HashMap<String, Vec<f32>> = HashMap::new();
    for pending in &run.batch {
        for c in &pending.chunks {
            if hashes.contains(&c.hash) {
                known.entry(c.hash.clone()).or_insert_with(|| c.vector.clone());
            }
        }
    }
    for h in &hashes {
        if !known.contains_key(h) {
            if let Some(v) = engine.removed_vector(h) {
                known.insert(h.clone(), v);
            }
        }
    }
    let lookup: Vec<&str> = hashes
        .iter()
        .filter(|h| !known.contains_key(*h) && run.stored_hashes.contains(*h))
        .map(|h| h.as_str())
        .collect();
    if !lookup.is_empty() {
        let t = Instant::now();
        known.extend(engine.kb.vectors_by_hash(&lookup).await?);
        run.timings.storing_s += t.elapsed().as_secs_f64();
    }
    let missing: Vec<usize> = (0..chunks.len()).filter(|&i| !known.contains_key(&hashes[i])).collect();
    let texts: std::sync::Arc<Vec<String>> =
        std::sync::Arc::new(missing.iter().map(|&i| chunks[i].text.clone()).collect());
    let mut computed: Vec<Vec<f32>> = Vec::with_capacity(texts.len());
    while computed.len() < texts.len() {
        progress(on_event, FileStage::Embedding, computed.len(), texts.len());
        if cancel.is_cancelled() {
            return Ok(Prepared::Cancelled);
        }
        let t = Instant::now();
        let (embedder, texts, from) = (engine.embedder.clone(), texts.clone(), computed.len());
        let step = tokio::task::spawn_blocking(move || {
            let batch: Vec<&str> =
                texts[from..(from + EMBED_STEP).min(texts.len())].iter().map(|t| t.as_str()).collect();
            embedder.embed_passages(&batch)
        })
        .await??;
        run.timings.embedding_s += t.elapsed().as_secs_f64();
        run.progress.embedded += step.len();
        computed.extend(step);
        on_event(run.progress.event());
    }
    for (&i, vector) in missing.iter().zip(computed) {
        known.insert(hashes[i].clone(), vector);
    }
    progress(on_event, FileStage::Storing, chunks.len(), chunks.len());
    let records = stored_chunks(&doc_id, &chunks, &hashes, &known);
    let record = DocumentRecord {
        doc_id,
        path: path_str,
        kind: doc.kind.as_str().into(),
        content_hash: doc.content_hash.clone(),
        bytes: doc.byte_len,
        pages: doc.pages.len() as u32,
        chunks: records.len() as u32,
        ingested_at_ms: millis(SystemTime::now()),
        modified_ms,
    };
    Ok(Prepared::Ready(Box::new(PendingDocument {
        record,
        chunks: records,
        embedded: missing.len() as u32,
        unreadable_pages: doc.unreadable_pages,
        pages_resumed,
    })))
}

/// The rows of `doc_id`'s passages, `chunks` with their text hashes and the vectors `known` by hash.
pub(crate) fn stored_chunks(
    doc_id: &str,
    chunks: &[quire_ingest::Chunk],
    hashes: &[String],
    known: &HashMap<String, Vec<f32>>,
) -> Vec<ChunkRecord> {
    chunks
        .iter()
        .zip(hashes)
        .map(|(c, hash)| ChunkRecord {
            doc_id: doc_id.to_owned(),
            hash: hash.clone(),
            seq: c.seq,
            page: c.page,
            start: c.start as u64,
            end: c.end as u64,
            tokens: c.tokens as u32,
            text: c.text.clone(),
            vector: known[hash].clone(),
        })
        .collect()
}

/// Modification times this close to the time a file was read are not trusted to tell an edit.
const TIMESTAMP_SLACK_MS: i64 = 2_000;

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
