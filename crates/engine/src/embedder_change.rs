//! Changing a library's embedder: every passage embedded again with another model (the
//! multilingual one for documents in other languages, say), without losing anything on the way.
//!
//! The new index is built beside the library's, in its folder (`new-embedder/`), from the text the
//! library holds, not from the files: a file moved, deleted or unreadable since keeps its
//! passages, and a scan is not read by OCR again. Each page's text is laid out again from its
//! passages (they never cross a page; their byte ranges say where they sit), cut with the new
//! model's tokenizer and embedded. The library stays as it was, searchable and answering, until
//! the new index holds every document; a stopped run goes on where it stopped (a document staged
//! with the same bytes is not embedded again). The switch, moving the new tables in and the old
//! ones out, happens when the library next opens (`switch_if_whole`, from `Engine::open`), so
//! no open engine reads tables moved under it; a library whose list of documents changed since
//! the new index was made whole is not switched (the next run catches up first).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;
use ts_rs::TS;

use quire_embed::Embedder;
use quire_index::{ChunkRecord, DocumentRecord, KnowledgeBase};
use quire_ingest::{Chunker, DocKind, LoadedDocument, Page};

use crate::models::{installed, MissingModel, ModelUse};
use crate::{library_embedder, Cancel, Engine, Event, FileOutcome, QueuedFile};

/// The new index, inside the library's folder.
const STAGING: &str = "new-embedder";
/// Written in `STAGING` once it holds every document: the documents table's version then.
const WHOLE: &str = "whole";
/// `WHOLE` renamed when the switch starts: from then on the switch is finished, not checked.
const SWITCHING: &str = "switching";
/// Where the replaced tables go during the switch (deleted once it is done).
const REPLACED: &str = "old-embedder";
/// What makes up a library's index, moved together: its two tables, the version of the words'
/// reading they were made with, and the embedder's record.
const SWITCHED: [&str; 4] = ["documents.lance", "chunks.lance", "terms-version", "embedder"];
/// Passages embedded per step (as in ingestion: steady progress, a prompt stop).
const EMBED_STEP: usize = 32;
/// The new index is written when it has this many passages waiting.
const WRITE_CHUNKS: usize = 1024;

/// What a change of embedder did.
#[derive(Debug, Clone, Serialize, PartialEq, TS)]
pub struct EmbedderChange {
    /// The model the library will be searched with.
    pub embedder: String,
    /// Documents embedded again in this run (the others were staged by an earlier one).
    pub documents: usize,
    /// Passages they were cut into, and of those the ones computed (the same text is embedded once).
    pub chunks: usize,
    pub embedded: usize,
    /// The new index holds every document: the library switches to it when it next opens.
    pub whole: bool,
}

impl Engine {
    /// Embeds the library's passages again with the embedder in `target` (a model folder), in a
    /// new index beside the library's; the library switches to it when it next opens, once whole.
    /// Ingestions wait meanwhile; questions are answered from the library as it is. Progress as
    /// ingestion's events, each document a file.
    pub async fn change_embedder(
        &self,
        target: &Path,
        on_event: &mut (dyn FnMut(Event) + Send),
        cancel: &Cancel,
    ) -> Result<EmbedderChange> {
        self.refuse_if_shared("Embedding the library again")?;
        let models = quire_models::models_dir()?;
        let name = library_embedder::name_of(target, &models);
        anyhow::ensure!(
            target != self.config.embedder_dir,
            "the library is already searched with {name}: nothing to change"
        );
        if !installed(ModelUse::Embedder, target) {
            return Err(MissingModel::at(ModelUse::Embedder, target).into());
        }
        let _writing = self.writing.lock().await;
        let dir = target.to_path_buf();
        let pass = self.config.embedder_pass;
        let embedder =
            std::sync::Arc::new(tokio::task::spawn_blocking(move || Embedder::load_with(&dir, pass)).await??);
        let staging = self.config.data_dir.join(STAGING);
        // A staging for another model, or one whole for a list that has changed since, starts again.
        if staging.exists() && library_embedder::recorded(&staging).as_deref() != Some(name.as_str()) {
            std::fs::remove_dir_all(&staging).with_context(|| format!("cannot remove {}", staging.display()))?;
        }
        let needed = room_needed(&self.config.data_dir, self.kb.dim(), embedder.dim())
            .saturating_sub(crate::memory::folder_bytes(&staging));
        crate::disk_full::ensure_room(&self.config.data_dir, needed, "embedding the library again")?;
        let _ = std::fs::remove_file(staging.join(WHOLE));
        std::fs::create_dir_all(&staging).with_context(|| format!("cannot create {}", staging.display()))?;
        let staged = KnowledgeBase::open(&staging, embedder.dim(), self.kb.protection()).await?;
        library_embedder::record(&staging, target, &models)?;
        let chunker = Chunker::new(embedder.tokenizer())?;

        let documents = self.kb.documents().await?;
        let wanted: HashMap<&str, &str> =
            documents.iter().map(|d| (d.doc_id.as_str(), d.content_hash.as_str())).collect();
        // Staged documents the library no longer lists as they were are dropped.
        let before = staged.documents().await?;
        let stale: Vec<&str> = before
            .iter()
            .filter(|d| wanted.get(d.doc_id.as_str()) != Some(&d.content_hash.as_str()))
            .map(|d| d.doc_id.as_str())
            .collect();
        if !stale.is_empty() {
            staged.remove_documents(&stale).await?;
        }
        let done: HashSet<(&str, &str)> = before.iter().map(|d| (d.doc_id.as_str(), d.content_hash.as_str())).collect();
        let todo: Vec<&DocumentRecord> =
            documents.iter().filter(|d| !done.contains(&(d.doc_id.as_str(), d.content_hash.as_str()))).collect();

        on_event(Event::IngestStarted {
            files: todo.iter().map(|d| QueuedFile { path: d.path.clone(), bytes: d.bytes }).collect(),
        });
        let started = Instant::now();
        let mut change = EmbedderChange { embedder: name, documents: 0, chunks: 0, embedded: 0, whole: false };
        let mut vectors: HashMap<String, Vec<f32>> = HashMap::new();
        let (mut pending_docs, mut pending_chunks) = (Vec::new(), Vec::new());
        for doc in &todo {
            if cancel.is_cancelled() {
                break;
            }
            on_event(Event::FileStarted { path: doc.path.clone() });
            let old = self.kb.chunk_records_of(&doc.doc_id).await?;
            let cut = chunker.chunk(&laid_out(doc, &old));
            let hashes: Vec<String> = cut.iter().map(|c| staged.chunk_hash(&c.text)).collect();
            let missing: Vec<usize> = (0..cut.len()).filter(|&i| !vectors.contains_key(&hashes[i])).collect();
            for (n, step) in missing.chunks(EMBED_STEP).enumerate() {
                if cancel.is_cancelled() {
                    break;
                }
                on_event(Event::FileProgress {
                    path: doc.path.clone(),
                    stage: crate::FileStage::Embedding,
                    done: (n * EMBED_STEP) as u32,
                    total: missing.len() as u32,
                });
                let texts: Vec<String> = step.iter().map(|&i| cut[i].text.clone()).collect();
                let embedder = embedder.clone();
                let computed = tokio::task::spawn_blocking(move || {
                    embedder.embed_passages(&texts.iter().map(String::as_str).collect::<Vec<_>>())
                })
                .await??;
                for (&i, v) in step.iter().zip(computed) {
                    vectors.insert(hashes[i].clone(), v);
                }
                change.embedded += step.len();
                on_event(progress(change.documents, todo.len(), change.embedded, started));
            }
            if cancel.is_cancelled() {
                break;
            }
            pending_chunks.extend(crate::ingestion::stored_chunks(&doc.doc_id, &cut, &hashes, &vectors));
            pending_docs.push(DocumentRecord { chunks: cut.len() as u32, ..(*doc).clone() });
            change.documents += 1;
            change.chunks += cut.len();
            on_event(Event::FileFinished {
                path: doc.path.clone(),
                outcome: FileOutcome::Indexed {
                    pages: doc.pages,
                    chunks: cut.len() as u32,
                    embedded: missing.len() as u32,
                    unreadable_pages: Vec::new(),
                    pages_resumed: 0,
                },
            });
            on_event(progress(change.documents, todo.len(), change.embedded, started));
            if pending_chunks.len() >= WRITE_CHUNKS {
                staged.commit(&std::mem::take(&mut pending_docs), &std::mem::take(&mut pending_chunks)).await?;
            }
            // Memory for one document's vectors at a time: texts repeat within a library's
            // documents far more than across them.
            if vectors.len() > 20_000 {
                vectors.clear();
            }
        }
        // What was embedded before a stop is kept: the next run goes on from it.
        staged.commit(&pending_docs, &pending_chunks).await?;
        let cancelled = cancel.is_cancelled();
        if !cancelled {
            staged.refresh_indexes().await?;
            // Whole for the list as it is now: the version the switch finds unchanged.
            let version = quire_index::documents_version(&self.config.data_dir).await?;
            std::fs::write(staging.join(WHOLE), format!("{version}\n"))
                .with_context(|| format!("cannot write {}", staging.join(WHOLE).display()))?;
            change.whole = true;
        }
        on_event(Event::IngestFinished {
            indexed: change.documents,
            unchanged: documents.len() - todo.len(),
            removed: 0,
            failed: 0,
            chunks: change.chunks,
            cancelled,
        });
        Ok(change)
    }
}

fn progress(done: usize, total: usize, embedded: usize, started: Instant) -> Event {
    let elapsed = started.elapsed().as_secs_f32().max(1e-3);
    Event::IngestProgress {
        files_done: done as u32,
        files_total: total as u32,
        chunks_embedded: embedded as u32,
        chunks_per_s: embedded as f32 / elapsed,
        eta_s: (done > 0 && done < total).then(|| elapsed * (total - done) as f32 / done as f32),
    }
}

/// The document `doc` as its stored passages hold it: each page's text laid out again from the
/// passages on it, at their byte ranges. What no passage covers (whitespace the cuts left out)
/// is a space, so every range still points at the same text in the page as read from the file,
/// and the highlighting of a cited passage stays right.
fn laid_out(doc: &DocumentRecord, chunks: &[ChunkRecord]) -> LoadedDocument {
    let paged = chunks.iter().any(|c| c.page.is_some());
    let numbers: Vec<Option<u32>> = if paged {
        let last = chunks.iter().filter_map(|c| c.page).max().unwrap_or(0).max(doc.pages);
        (1..=last).map(Some).collect()
    } else {
        vec![None]
    };
    let pages = numbers
        .into_iter()
        .map(|number| Page { number, text: page_text(chunks.iter().filter(|c| c.page == number)) })
        .collect();
    LoadedDocument {
        path: PathBuf::from(&doc.path),
        kind: DocKind::from_path(Path::new(&doc.path)).unwrap_or(DocKind::Text),
        content_hash: doc.content_hash.clone(),
        byte_len: doc.bytes,
        pages,
        unreadable_pages: Vec::new(),
    }
}

/// One page's text from its passages (`page.text[start..end] == text` for each, overlapping
/// where a passage repeats the end of the one before).
fn page_text<'a>(chunks: impl Iterator<Item = &'a ChunkRecord>) -> String {
    let chunks: Vec<&ChunkRecord> = chunks.collect();
    let placed = chunks.iter().all(|c| c.end >= c.start && (c.end - c.start) as usize == c.text.len());
    if !placed {
        // Ranges that do not fit their text (never written so): the passages in order.
        return chunks.iter().map(|c| c.text.as_str()).collect::<Vec<_>>().join("\n\n");
    }
    let len = chunks.iter().map(|c| c.end as usize).max().unwrap_or(0);
    let mut bytes = vec![b' '; len];
    for c in &chunks {
        bytes[c.start as usize..c.end as usize].copy_from_slice(c.text.as_bytes());
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Moves a whole new index in place of the library's, if one is waiting in `data_dir` and the
/// library's list of documents is as it was when it was made whole (else it is left to be
/// brought up to date by the next change). A switch stopped part way is finished. Returns
/// whether the library now has a new embedder. For `Engine::open`, before anything is opened.
pub(crate) async fn switch_if_whole(data_dir: &Path) -> Result<bool> {
    let staging = data_dir.join(STAGING);
    let (whole, switching) = (staging.join(WHOLE), staging.join(SWITCHING));
    if !switching.exists() {
        let Ok(recorded) = std::fs::read_to_string(&whole) else { return Ok(false) };
        let now = quire_index::documents_version(data_dir).await?;
        if recorded.trim().parse::<u64>().ok() != Some(now) {
            // Documents came or went since: the next change catches up, then switches.
            std::fs::remove_file(&whole).with_context(|| format!("cannot remove {}", whole.display()))?;
            return Ok(false);
        }
        std::fs::rename(&whole, &switching).with_context(|| format!("cannot write in {}", staging.display()))?;
    }
    let replaced = data_dir.join(REPLACED);
    std::fs::create_dir_all(&replaced).with_context(|| format!("cannot create {}", replaced.display()))?;
    for name in SWITCHED {
        let (new, current, old) = (staging.join(name), data_dir.join(name), replaced.join(name));
        if !new.exists() {
            continue; // Moved in before a stop.
        }
        if current.exists() {
            remove(&old)?;
            std::fs::rename(&current, &old).with_context(|| format!("cannot move {}", current.display()))?;
        }
        std::fs::rename(&new, &current).with_context(|| format!("cannot move {}", new.display()))?;
    }
    remove(&staging)?;
    remove(&replaced)?;
    Ok(true)
}

/// Whether a change of embedder was started in `data_dir` and not switched to yet, and for
/// which model (its name as recorded).
pub fn change_waiting(data_dir: &Path) -> Option<String> {
    library_embedder::recorded(&data_dir.join(STAGING))
}

fn remove(path: &Path) -> Result<()> {
    let removed = if path.is_dir() { std::fs::remove_dir_all(path) } else { std::fs::remove_file(path) };
    match removed {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}

/// About the bytes a second index of the library in `data_dir` takes: its tables' size, scaled
/// by the new vectors' width against the old (vectors are most of a table), and a quarter more
/// (another tokenizer cuts the pages into somewhat more passages; LanceDB writes in versions).
fn room_needed(data_dir: &Path, old_dim: usize, new_dim: usize) -> u64 {
    let tables: u64 =
        ["documents.lance", "chunks.lance"].iter().map(|t| crate::memory::folder_bytes(&data_dir.join(t))).sum();
    let wider = (new_dim as f64 / old_dim.max(1) as f64).max(1.0);
    (tables as f64 * wider * 1.25) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_index_needs_the_tables_size_scaled_by_the_vectors_width() {
        let data = tempfile::tempdir().unwrap();
        for (table, bytes) in [("documents.lance", 1_000usize), ("chunks.lance", 7_000)] {
            std::fs::create_dir_all(data.path().join(table).join("data")).unwrap();
            std::fs::write(data.path().join(table).join("data").join("a.lance"), vec![0u8; bytes]).unwrap();
        }
        std::fs::write(data.path().join("queue.json"), vec![0u8; 50_000]).unwrap();
        // 8,000 bytes of tables (the queue is not the index), a quarter more…
        assert_eq!(room_needed(data.path(), 384, 384), 10_000);
        // …twice that for vectors twice as wide, never less for narrower ones.
        assert_eq!(room_needed(data.path(), 384, 768), 20_000);
        assert_eq!(room_needed(data.path(), 768, 384), 10_000);
    }

    fn chunk(page: Option<u32>, start: u64, text: &str) -> ChunkRecord {
        ChunkRecord {
            doc_id: "d".into(),
            hash: String::new(),
            seq: 0,
            page,
            start,
            end: start + text.len() as u64,
            tokens: 0,
            text: text.into(),
            vector: Vec::new(),
        }
    }

    fn record(path: &str, pages: u32) -> DocumentRecord {
        DocumentRecord {
            doc_id: "d".into(),
            path: path.into(),
            kind: "pdf".into(),
            content_hash: "h".into(),
            bytes: 10,
            pages,
            chunks: 0,
            ingested_at_ms: 0,
            modified_ms: 0,
        }
    }

    #[test]
    fn pages_are_laid_out_again_with_every_passage_at_its_range() {
        // Page 1: two passages overlapping on "wide", a gap of whitespace before the first.
        // Page 2 holds nothing (a blank page), page 3 one passage in Japanese.
        let chunks = [
            chunk(Some(1), 2, "The river is wide"),
            chunk(Some(1), 15, "wide and deep."),
            chunk(Some(3), 0, "川は広い。"),
        ];
        let doc = laid_out(&record("/docs/river.pdf", 3), &chunks);
        assert_eq!(doc.kind, DocKind::Pdf);
        assert_eq!(doc.pages.len(), 3);
        assert_eq!(doc.pages[0].text, "  The river is wide and deep.");
        assert_eq!(doc.pages[1].text, "");
        assert_eq!(doc.pages[2].number, Some(3));
        for c in &chunks {
            let page = &doc.pages[c.page.unwrap() as usize - 1].text;
            assert_eq!(&page[c.start as usize..c.end as usize], c.text);
        }
        // A document without pages is one page.
        let plain = laid_out(&record("/docs/notes.md", 1), &[chunk(None, 0, "# Notes"), chunk(None, 9, "more")]);
        assert_eq!(plain.kind, DocKind::Markdown);
        assert_eq!(plain.pages.len(), 1);
        assert_eq!(plain.pages[0].number, None);
        assert_eq!(plain.pages[0].text, "# Notes  more");
    }

    #[test]
    fn ranges_that_do_not_fit_their_text_keep_the_passages_in_order() {
        let mut odd = chunk(None, 0, "first");
        odd.end = 2;
        assert_eq!(page_text([&odd, &chunk(None, 0, "second")].into_iter()), "first\n\nsecond");
    }

    #[tokio::test]
    async fn a_switch_stopped_part_way_is_finished_and_nothing_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let staging = data.join(STAGING);
        std::fs::create_dir_all(staging.join("chunks.lance")).unwrap();
        std::fs::write(staging.join("chunks.lance").join("new"), "new").unwrap();
        std::fs::write(staging.join("embedder"), "multilingual-e5-small\n").unwrap();
        std::fs::write(staging.join(SWITCHING), "").unwrap();
        // The stop came after documents.lance and terms-version had moved in.
        std::fs::create_dir_all(data.join("documents.lance")).unwrap();
        std::fs::write(data.join("terms-version"), "3\n").unwrap();
        std::fs::create_dir_all(data.join("chunks.lance")).unwrap();
        std::fs::write(data.join("chunks.lance").join("old"), "old").unwrap();
        std::fs::write(data.join("embedder"), "all-minilm-l6-v2\n").unwrap();
        std::fs::write(data.join("history.jsonl"), "kept").unwrap();
        assert_eq!(change_waiting(data).as_deref(), Some("multilingual-e5-small"));
        assert!(switch_if_whole(data).await.unwrap());
        assert!(data.join("chunks.lance").join("new").exists());
        assert!(!data.join("chunks.lance").join("old").exists());
        assert_eq!(std::fs::read_to_string(data.join("embedder")).unwrap(), "multilingual-e5-small\n");
        assert!(data.join("documents.lance").exists() && data.join("terms-version").exists());
        assert_eq!(std::fs::read_to_string(data.join("history.jsonl")).unwrap(), "kept");
        assert!(!staging.exists() && !data.join(REPLACED).exists());
        assert_eq!(change_waiting(data), None);
        // Nothing waiting: nothing done.
        assert!(!switch_if_whole(data).await.unwrap());
    }
}
