//! Ingestion: find the files, then for each one load → chunk → embed → store. A file that fails
//! is reported with its reason and the others go on; a file whose content has not changed since
//! it was stored is skipped.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;
use serde::Serialize;
use sha2::{Digest, Sha256};
use ts_rs::TS;

use quire_index::{ChunkRecord, DocumentRecord};
use quire_ingest::{Chunker, LoadedDocument};

use crate::{Cancel, Engine, Event};

/// Chunks embedded per step: small enough for steady progress and a prompt cancel, large
/// enough that batching in the embedder still pays.
const EMBED_STEP: usize = 32;

#[derive(Debug, Clone, Serialize, PartialEq, TS)]
pub struct QueuedFile {
    pub path: String,
    #[ts(type = "number")]
    pub bytes: u64,
}

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
        /// PDF pages whose text could not be extracted; the rest of the file is indexed.
        unreadable_pages: Vec<u32>,
    },
    Unchanged,
    Failed { reason: String },
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestReport {
    pub files: Vec<(String, FileOutcome)>,
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
}

/// The absolute, link-free path a document is known by (absolute only, for a file that is gone).
pub(crate) fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_path_buf())
}

/// A document's id: derived from its absolute path, so re-ingesting the same file replaces it.
pub(crate) fn document_id(path: &Path) -> String {
    hex::encode(&Sha256::digest(path.to_string_lossy().as_bytes())[..8])
}

/// Expands folders into the supported files inside them (recursively, skipping hidden entries
/// and not following links to folders, so link loops cannot trap the walk). Paths that do not
/// exist come back as failures.
pub fn discover_files(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let mut files = Vec::new();
    let mut missing = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => walk(path, &mut files, &mut missing),
            Ok(_) => files.push(path.clone()),
            Err(e) => missing.push((path.clone(), format!("cannot read: {e}"))),
        }
    }
    files.sort();
    files.dedup();
    (files, missing)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<(PathBuf, String)>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => return errors.push((dir.to_path_buf(), format!("cannot read the folder: {e}"))),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, files, errors),
            Ok(t) if t.is_file() || t.is_symlink() => {
                if quire_ingest::is_supported(&path) && path.is_file() {
                    files.push(path);
                }
            }
            _ => {}
        }
    }
}

pub(crate) async fn ingest(
    engine: &Engine,
    paths: &[PathBuf],
    on_event: &mut (dyn FnMut(Event) + Send),
    cancel: &Cancel,
) -> Result<IngestReport> {
    let (files, missing) = discover_files(paths);
    let mut report = IngestReport::default();
    let queued = missing
        .iter()
        .map(|(p, _)| QueuedFile { path: p.display().to_string(), bytes: 0 })
        .chain(files.iter().map(|p| QueuedFile {
            path: p.display().to_string(),
            bytes: std::fs::metadata(p).map(|m| m.len()).unwrap_or(0),
        }))
        .collect();
    on_event(Event::IngestStarted { files: queued });
    for (path, reason) in missing {
        let path = path.display().to_string();
        let outcome = FileOutcome::Failed { reason };
        on_event(Event::FileFinished { path: path.clone(), outcome: outcome.clone() });
        report.files.push((path, outcome));
    }
    let chunker = Chunker::new(engine.embedder().tokenizer())?;
    let chunker = std::sync::Arc::new(chunker);
    let mut changed = false;
    for path in files {
        if cancel.is_cancelled() {
            break;
        }
        let shown = path.display().to_string();
        on_event(Event::FileStarted { path: shown.clone() });
        let outcome = match ingest_file(engine, &chunker, &path, &shown, on_event, cancel).await {
            Ok(Some(o)) => o,
            Ok(None) => break, // cancelled half-way: nothing of this file was stored
            Err(e) => FileOutcome::Failed { reason: format!("{e:#}") },
        };
        changed |= matches!(outcome, FileOutcome::Indexed { .. });
        on_event(Event::FileFinished { path: shown.clone(), outcome: outcome.clone() });
        report.files.push((shown, outcome));
    }
    if changed {
        engine.knowledge_base().refresh_indexes().await?;
    }
    on_event(Event::IngestFinished {
        indexed: report.count(|o| matches!(o, FileOutcome::Indexed { .. })),
        unchanged: report.count(|o| matches!(o, FileOutcome::Unchanged)),
        failed: report.count(|o| matches!(o, FileOutcome::Failed { .. })),
        chunks: report.chunks(),
        cancelled: cancel.is_cancelled(),
    });
    Ok(report)
}

/// Indexes one file; `None` when cancelled before its chunks were stored.
async fn ingest_file(
    engine: &Engine,
    chunker: &std::sync::Arc<Chunker>,
    path: &Path,
    shown: &str,
    on_event: &mut (dyn FnMut(Event) + Send),
    cancel: &Cancel,
) -> Result<Option<FileOutcome>> {
    let mut progress = |stage: FileStage, done: usize, total: usize| {
        on_event(Event::FileProgress { path: shown.to_string(), stage, done: done as u32, total: total as u32 })
    };
    progress(FileStage::Reading, 0, 0);
    let path = canonical(path);
    let path_str = path.to_string_lossy().into_owned();
    let doc_id = document_id(&path);
    let kb = engine.knowledge_base();

    let load_path = path.clone();
    let doc: LoadedDocument = match tokio::task::spawn_blocking(move || quire_ingest::load_file(&load_path)).await? {
        Ok(doc) => doc,
        Err(e) => return Ok(Some(FileOutcome::Failed { reason: e.to_string() })),
    };
    if let Some(stored) = kb.document_by_path(&path_str).await? {
        if stored.content_hash == doc.content_hash {
            return Ok(Some(FileOutcome::Unchanged));
        }
    }

    progress(FileStage::Chunking, 0, 0);
    let chunker = chunker.clone();
    let (doc, chunks) = tokio::task::spawn_blocking(move || {
        let chunks = chunker.chunk(&doc);
        (doc, chunks)
    })
    .await?;
    if chunks.is_empty() {
        return Ok(Some(FileOutcome::Failed { reason: "no text to index".into() }));
    }
    let texts: std::sync::Arc<Vec<String>> = std::sync::Arc::new(chunks.iter().map(|c| c.text.clone()).collect());
    let mut vectors = Vec::with_capacity(chunks.len());
    while vectors.len() < chunks.len() {
        progress(FileStage::Embedding, vectors.len(), chunks.len());
        if cancel.is_cancelled() {
            return Ok(None);
        }
        let (embedder, texts, from) = (engine.embedder().clone(), texts.clone(), vectors.len());
        let step = tokio::task::spawn_blocking(move || {
            let batch: Vec<&str> = texts[from..(from + EMBED_STEP).min(texts.len())].iter().map(|t| t.as_str()).collect();
            embedder.embed_passages(&batch)
        })
        .await??;
        vectors.extend(step);
    }
    progress(FileStage::Storing, chunks.len(), chunks.len());
    let records: Vec<ChunkRecord> = chunks
        .iter()
        .zip(vectors)
        .map(|(c, vector)| ChunkRecord {
            doc_id: doc_id.clone(),
            seq: c.seq,
            page: c.page,
            start: c.start as u64,
            end: c.end as u64,
            tokens: c.tokens as u32,
            text: c.text.clone(),
            vector,
        })
        .collect();
    let record = DocumentRecord {
        doc_id,
        path: path_str,
        kind: doc.kind.as_str().into(),
        content_hash: doc.content_hash.clone(),
        bytes: doc.byte_len,
        pages: doc.pages.len() as u32,
        chunks: records.len() as u32,
        ingested_at_ms: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0),
    };
    kb.replace_document(&record, &records).await?;
    Ok(Some(FileOutcome::Indexed { pages: record.pages, chunks: record.chunks, unreadable_pages: doc.unreadable_pages }))
}
