//! The documents of a collection: ingesting, syncing with what is on disk, resuming what an
//! interrupted ingestion left, removing, and the ingestion queue the engine keeps (`jobs`).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::discovery::canonical;
use crate::{ingestion, jobs, pages_read, Cancel, DocumentRecord, Engine, Event, IngestReport, Job, JobState};

impl Engine {
    pub async fn documents(&self) -> Result<Vec<DocumentRecord>> {
        self.kb.documents().await
    }

    /// Removes a document by its path; returns whether it was in the knowledge base.
    pub async fn remove(&self, path: &Path) -> Result<bool> {
        let doc_id = ingestion::document_id(&self.kb, &canonical(path));
        self.remove_document(&doc_id).await
    }

    /// Removes a document by its id (`DocumentRecord::doc_id`, as the app lists them); returns
    /// whether it was in the knowledge base. The one way documents leave it, whoever asks.
    pub async fn remove_document(&self, doc_id: &str) -> Result<bool> {
        let removed = self
            .kb
            .remove_document(doc_id)
            .await
            .map_err(|e| crate::disk_full::explained_removal(e, &self.config.data_dir))?;
        if !removed {
            if let Some(doc) = self.kb.document(doc_id).await? {
                anyhow::bail!(
                    "{} was added by another computer sharing this library: it is removed there (or goes when its \
                     file does)",
                    doc.path
                );
            }
        }
        Ok(removed)
    }

    /// Works with the ingestion queue on disk.
    pub(crate) fn jobs<T>(&self, f: impl FnOnce(&mut jobs::JobQueue) -> Result<T>) -> Result<T> {
        let mut queue = self.jobs.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut queue)
    }

    /// Works with the scanned pages read and not yet stored.
    pub(crate) fn pages_read<T>(&self, f: impl FnOnce(&mut pages_read::PagesRead) -> Result<T>) -> Result<T> {
        let mut pages = self.pages_read.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut pages)
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
        let gone: Vec<PathBuf> = gone.iter().map(|p| canonical(p)).collect();
        self.jobs(|q| q.forget_gone(&gone))?;
        // Another computer's documents are its own to remove, when its files go.
        let docs = ingestion::gone_under(&self.kb.documents_written_here().await?, &gone);
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
        let ingested = ingestion::ingest(self, paths, on_event, cancel).await;
        // Parsing and embedding's buffers go back to the system with the ingestion.
        crate::allocator::return_freed_memory();
        ingested.map_err(|e| {
            // Room for the files left (their text, its vectors, sealed) and for the compaction
            // that rewrites the index once they are in.
            let left: u64 =
                self.pending_files().iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
            if let Some(link) = self.store_link() {
                return e.context(format!(
                    "the ingestion stopped: the store holding this library ({}) could not be written; the files \
                     not stored stay queued, and `quire ingest` (or the app) goes on once it answers",
                    link.url
                ));
            }
            let index = crate::memory::folder_bytes(&self.config.data_dir);
            crate::disk_full::explained(e, &self.config.data_dir, 2 * left + index)
        })
    }

    /// After `quire_index::repair_tables` brought the tables back to versions that read whole:
    /// documents whose chunks the repair lost (fewer stored than their row counts) are
    /// forgotten, then every listed document that is still on disk, and `more` (files and
    /// folders the person names), is indexed again. When the documents table itself went back
    /// (`documents_lost`), the documents any readable older version lists count as listed.
    /// Unchanged files with all their chunks are skipped; chunks left without a document are
    /// removed by the ingestion, their vectors reused. Returns how many documents were indexed
    /// again for lost chunks or a lost listing, and the ingestion's report.
    pub async fn reindex_after_repair(
        &self,
        more: &[PathBuf],
        documents_lost: bool,
        on_event: &mut (dyn FnMut(Event) + Send),
        cancel: &Cancel,
    ) -> Result<(usize, IngestReport)> {
        let listed = self.kb.documents_written_here().await?;
        let documents = if documents_lost { self.kb.documents_in_any_version().await? } else { listed.clone() };
        let mut forgotten = documents.len() - listed.len().min(documents.len());
        let mut stored: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        for key in self.kb.chunk_keys().await? {
            *stored.entry(key.doc_id).or_default() += 1;
        }
        for doc in &listed {
            if stored.get(&doc.doc_id).copied().unwrap_or(0) != doc.chunks {
                self.kb.remove_document(&doc.doc_id).await?;
                forgotten += 1;
            }
        }
        let mut paths: Vec<PathBuf> = documents.iter().map(|d| PathBuf::from(&d.path)).filter(|p| p.exists()).collect();
        if documents_lost {
            // The ingestion queue's log still names the files it handled since it was last
            // rewritten: another trace of a lost listing.
            paths.extend(self.job_list().into_iter().map(|j| PathBuf::from(j.path)).filter(|p| p.exists()));
        }
        paths.extend(more.iter().cloned());
        paths.sort();
        paths.dedup();
        let report =
            if paths.is_empty() { IngestReport::default() } else { self.ingest(&paths, on_event, cancel).await? };
        // The indexes of a version gone back to, or of a table started afresh.
        self.kb.refresh_indexes().await?;
        Ok((forgotten, report))
    }

    /// The stored document a chunk belongs to.
    pub async fn document_of_chunk(&self, chunk_id: &str) -> Result<Option<DocumentRecord>> {
        match quire_index::parse_chunk_id(chunk_id) {
            Some((doc_id, _)) => self.kb.document(doc_id).await,
            None => Ok(None),
        }
    }
}
