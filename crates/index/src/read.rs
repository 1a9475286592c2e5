//! Reading stored documents and chunks back: records, chunk identities, vectors to reuse.

use std::collections::HashMap;

use anyhow::{Context, Result};
use arrow_array::{Array, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, UInt32Array, UInt64Array};
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase, Select};

use crate::schema::{col, str_col, DOCUMENTS};
use crate::sealing::{hash_context, path_context, text_context};
use crate::{doc_id_filter, in_filter, sql_str, ChunkKey, ChunkRecord, DocumentRecord, KnowledgeBase};

impl KnowledgeBase {
    pub async fn document_by_path(&self, path: &str) -> Result<Option<DocumentRecord>> {
        crate::damage::at_boundary(async move { self.document(&self.document_id(path)).await }).await
    }

    /// A document of the library (in a shared one, whichever computer added it).
    pub async fn document(&self, doc_id: &str) -> Result<Option<DocumentRecord>> {
        crate::damage::at_boundary(async move {
            let filter = format!("doc_id = {}", sql_str(doc_id));
            Ok(self.documents_everywhere(Some(filter)).await?.into_iter().next())
        })
        .await
    }

    /// Every document of the library, by path: in a shared library, those every computer added.
    pub async fn documents(&self) -> Result<Vec<DocumentRecord>> {
        crate::damage::at_boundary(async move {
            let mut docs = self.documents_everywhere(None).await?;
            docs.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(docs)
        })
        .await
    }

    /// The documents this computer added (all of them, unless the library is shared): the ones
    /// it may remove, reseal or index again.
    pub async fn documents_written_here(&self) -> Result<Vec<DocumentRecord>> {
        crate::damage::at_boundary(async move {
            let mut docs = self.query_documents(None).await?;
            docs.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(docs)
        })
        .await
    }

    /// This computer's documents matching `filter`.
    pub(crate) async fn query_documents(&self, filter: Option<String>) -> Result<Vec<DocumentRecord>> {
        self.documents_in(&self.documents, filter).await
    }

    /// Every writer's documents matching `filter`, each id once (the first writer's).
    async fn documents_everywhere(&self, filter: Option<String>) -> Result<Vec<DocumentRecord>> {
        let mut docs = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for tables in self.readable().await? {
            for doc in self.documents_in(&tables.documents, filter.clone()).await? {
                if seen.insert(doc.doc_id.clone()) {
                    docs.push(doc);
                }
            }
        }
        Ok(docs)
    }

    /// Every document some readable version of the documents table lists (each from the newest
    /// version that has it): what a repair that went back to an older version, or started the
    /// table afresh, no longer lists. Versions that cannot be read (or opened with this key) are
    /// passed over.
    pub async fn documents_in_any_version(&self) -> Result<Vec<DocumentRecord>> {
        crate::damage::at_boundary(async move {
            let dir = self.writes_lock.parent().context("the data folder")?;
            let mut versions: Vec<u64> = self.documents.list_versions().await?.iter().map(|v| v.version).collect();
            versions.sort_unstable_by(|a, b| b.cmp(a));
            let mut found: HashMap<String, DocumentRecord> = HashMap::new();
            // A handle of its own: checking out a version of the shared one would move every reader.
            let table = crate::repair::open(dir, DOCUMENTS).await?;
            for version in versions {
                if table.checkout(version).await.is_err() {
                    continue;
                }
                if let Ok(docs) = self.documents_in(&table, None).await {
                    for doc in docs {
                        found.entry(doc.doc_id.clone()).or_insert(doc);
                    }
                }
            }
            let mut docs: Vec<DocumentRecord> = found.into_values().collect();
            docs.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(docs)
        })
        .await
    }

    async fn documents_in(&self, table: &lancedb::Table, filter: Option<String>) -> Result<Vec<DocumentRecord>> {
        let mut q = table.query();
        if let Some(f) = filter {
            q = q.only_if(f);
        }
        let batches: Vec<RecordBatch> = q.execute().await?.try_collect().await?;
        let mut out = Vec::new();
        let protection = self.protection();
        for b in &batches {
            let s = |name: &str| str_col(b, name);
            let (ids, paths, kinds, hashes) = (s("doc_id")?, s("path")?, s("kind")?, s("content_hash")?);
            let bytes = col::<UInt64Array>(b, "bytes")?;
            let pages = col::<UInt32Array>(b, "pages")?;
            let chunks = col::<UInt32Array>(b, "chunks")?;
            let at = col::<Int64Array>(b, "ingested_at_ms")?;
            let modified = col::<Int64Array>(b, "modified_ms")?;
            for i in 0..b.num_rows() {
                let doc_id = ids.value(i);
                out.push(DocumentRecord {
                    doc_id: doc_id.into(),
                    path: protection.open(&path_context(doc_id), paths.value(i))?,
                    kind: kinds.value(i).into(),
                    content_hash: protection.open(&hash_context(doc_id), hashes.value(i))?,
                    bytes: bytes.value(i),
                    pages: pages.value(i),
                    chunks: chunks.value(i),
                    ingested_at_ms: at.value(i),
                    modified_ms: if modified.is_null(i) { 0 } else { modified.value(i) },
                });
            }
        }
        Ok(out)
    }

    /// A document's chunks in full (text opened, vectors included), in order.
    pub async fn chunk_records_of(&self, doc_id: &str) -> Result<Vec<ChunkRecord>> {
        crate::damage::at_boundary(async move {
            let batches: Vec<RecordBatch> = self
                .chunks
                .query()
                .only_if(format!("doc_id = {}", sql_str(doc_id)))
                .select(Select::columns(&[
                    "chunk_id",
                    "doc_id",
                    "seq",
                    "page",
                    "start",
                    "end",
                    "tokens",
                    "text",
                    "chunk_hash",
                    "vector",
                ]))
                .execute()
                .await?
                .try_collect()
                .await?;
            let mut out = Vec::new();
            let protection = self.protection();
            for b in &batches {
                let (ids, texts, hashes) = (str_col(b, "chunk_id")?, str_col(b, "text")?, str_col(b, "chunk_hash")?);
                let seqs = col::<UInt32Array>(b, "seq")?;
                let pages = col::<UInt32Array>(b, "page")?;
                let starts = col::<UInt64Array>(b, "start")?;
                let ends = col::<UInt64Array>(b, "end")?;
                let tokens = col::<UInt32Array>(b, "tokens")?;
                let vectors = col::<FixedSizeListArray>(b, "vector")?;
                for i in 0..b.num_rows() {
                    let values = vectors.value(i);
                    let values = values.as_any().downcast_ref::<Float32Array>().context("vector values are not f32")?;
                    out.push(ChunkRecord {
                        doc_id: doc_id.to_owned(),
                        hash: hashes.value(i).into(),
                        seq: seqs.value(i),
                        page: (!pages.is_null(i)).then(|| pages.value(i)),
                        start: starts.value(i),
                        end: ends.value(i),
                        tokens: tokens.value(i),
                        text: protection.open(&text_context(ids.value(i)), texts.value(i))?,
                        vector: values.values().to_vec(),
                    });
                }
            }
            out.sort_by_key(|c| c.seq);
            Ok(out)
        })
        .await
    }

    /// The texts (opened) of the stored chunks among `chunk_ids`, each once, in no order.
    pub async fn chunk_texts(&self, chunk_ids: &[String]) -> Result<Vec<String>> {
        crate::damage::at_boundary(async move {
            let protection = self.protection();
            let mut texts = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for tables in self.readable().await? {
                for group in chunk_ids.chunks(500) {
                    let batches: Vec<RecordBatch> = tables
                        .chunks
                        .query()
                        .only_if(in_filter("chunk_id", group))
                        .select(Select::columns(&["chunk_id", "text"]))
                        .execute()
                        .await?
                        .try_collect()
                        .await?;
                    for b in &batches {
                        let (ids, sealed) = (str_col(b, "chunk_id")?, str_col(b, "text")?);
                        for i in 0..b.num_rows() {
                            if seen.insert(ids.value(i).to_owned()) {
                                texts.push(protection.open(&text_context(ids.value(i)), sealed.value(i))?);
                            }
                        }
                    }
                }
            }
            Ok(texts)
        })
        .await
    }

    /// Every stored chunk's id, document and text hash (no text, no vector).
    pub async fn chunk_keys(&self) -> Result<Vec<ChunkKey>> {
        crate::damage::at_boundary(async move {
            let batches: Vec<RecordBatch> = self
                .chunks
                .query()
                .select(Select::columns(&["chunk_id", "doc_id", "chunk_hash"]))
                .execute()
                .await?
                .try_collect()
                .await?;
            let mut keys = Vec::new();
            for b in &batches {
                let (ids, docs, hashes) = (str_col(b, "chunk_id")?, str_col(b, "doc_id")?, str_col(b, "chunk_hash")?);
                for i in 0..b.num_rows() {
                    keys.push(ChunkKey {
                        chunk_id: ids.value(i).into(),
                        doc_id: docs.value(i).into(),
                        hash: hashes.value(i).into(),
                    });
                }
            }
            Ok(keys)
        })
        .await
    }

    /// Stored vectors for the given chunk hashes (those that are stored; each once). In a
    /// shared library, a text another computer embedded is not embedded again here.
    pub async fn vectors_by_hash(&self, hashes: &[&str]) -> Result<HashMap<String, Vec<f32>>> {
        crate::damage::at_boundary(async move {
            let mut found = HashMap::new();
            for tables in self.readable().await? {
                for group in hashes.chunks(500) {
                    collect_vectors(&tables.chunks, in_filter("chunk_hash", group), &mut found).await?;
                }
            }
            Ok(found)
        })
        .await
    }

    /// The vectors of the given documents' chunks, by chunk hash.
    pub async fn vectors_of_documents(&self, doc_ids: &[&str]) -> Result<HashMap<String, Vec<f32>>> {
        crate::damage::at_boundary(async move {
            let mut found = HashMap::new();
            for group in doc_ids.chunks(500) {
                collect_vectors(&self.chunks, doc_id_filter(group), &mut found).await?;
            }
            Ok(found)
        })
        .await
    }

    /// Chunks in every writer's tables.
    pub async fn chunk_count(&self) -> Result<usize> {
        crate::damage::at_boundary(async move {
            let mut count = 0;
            for tables in self.readable().await? {
                count += tables.chunks.count_rows(None).await?;
            }
            Ok(count)
        })
        .await
    }
}

/// Adds to `found` the vectors of `chunks`' rows matching `filter`, by chunk hash.
async fn collect_vectors(chunks: &lancedb::Table, filter: String, found: &mut HashMap<String, Vec<f32>>) -> Result<()> {
    let batches: Vec<RecordBatch> = chunks
        .query()
        .only_if(filter)
        .select(Select::columns(&["chunk_hash", "vector"]))
        .execute()
        .await?
        .try_collect()
        .await?;
    for b in &batches {
        let hashes = str_col(b, "chunk_hash")?;
        let vectors = col::<FixedSizeListArray>(b, "vector")?;
        for i in 0..b.num_rows() {
            if hashes.value(i).is_empty() {
                continue; // stored before hashes were kept
            }
            let values = vectors.value(i);
            let values = values.as_any().downcast_ref::<Float32Array>().context("vector values are not f32")?;
            found.entry(hashes.value(i).to_string()).or_insert_with(|| values.values().to_vec());
        }
    }
    Ok(())
}

/// The paths of the documents `ids` in the data folder `dir`, opened with `protection`, read
/// without opening the knowledge base (for naming what a check found damaged). Ids whose row is
/// missing or whose path does not open are left out.
pub async fn paths_of_documents(
    dir: &std::path::Path,
    protection: &crate::Protection,
    ids: &[String],
) -> Result<HashMap<String, String>> {
    crate::damage::at_boundary(async move {
        let table = crate::repair::open(dir, DOCUMENTS).await?;
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut paths = HashMap::new();
        for (id, sealed) in sealed_paths(&table, &ids).await? {
            if let Ok(path) = protection.open(&path_context(&id), &sealed) {
                paths.insert(id, path);
            }
        }
        Ok(paths)
    })
    .await
}

/// The stored (sealed) paths of the documents `ids` in `table`: (document id, sealed path).
pub(crate) async fn sealed_paths(table: &lancedb::Table, ids: &[&str]) -> Result<Vec<(String, String)>> {
    let mut found = Vec::new();
    for group in ids.chunks(500) {
        let batches: Vec<RecordBatch> = table
            .query()
            .only_if(doc_id_filter(group))
            .select(Select::columns(&["doc_id", "path"]))
            .execute()
            .await?
            .try_collect()
            .await?;
        for b in &batches {
            let (doc_ids, stored) = (str_col(b, "doc_id")?, str_col(b, "path")?);
            found.extend((0..b.num_rows()).map(|i| (doc_ids.value(i).to_owned(), stored.value(i).to_owned())));
        }
    }
    Ok(found)
}

/// The version of the documents table in the data folder `dir`, read without opening the
/// knowledge base: every write to the list of documents (an ingestion, a removal) makes a new
/// one, so an unchanged version says the list is as it was.
pub async fn documents_version(dir: &std::path::Path) -> Result<u64> {
    crate::damage::at_boundary(async move { Ok(crate::repair::open(dir, DOCUMENTS).await?.version().await?) }).await
}
