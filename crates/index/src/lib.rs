//! The knowledge base on disk: a LanceDB database with a `documents` table and a `chunks` table
//! (text, place in the source, and the embedding as FixedSizeList<Float32, dim>).
//!
//! Search is dense (cosine over the embeddings: exact below `HNSW_MIN_ROWS` chunks, an
//! IVF_HNSW_SQ index above), BM25 (LanceDB's inverted index over the chunks' `terms`), or
//! hybrid: both lists fused. The caller embeds; this crate never runs a model.
//!
//! Encryption at rest (`Protection`): document paths, file hashes and chunk text are stored
//! sealed; document ids and chunk hashes are keyed fingerprints. For BM25 each chunk's text is
//! analysed here with LanceDB's own English analyser (the one its index would apply: split,
//! lowercase, stem, stop words, ASCII folding) and each term stored blinded (a keyed tag) in
//! `terms`, which the inverted index then takes word for word: the same statistics, so the same
//! ranking, as an index over the plain words, and no word on disk. Vectors stay plain.
//! Rows record the key that sealed them (`sealed_by`), so a key rotation reseals what is left
//! after an interruption.
//!
//! Crash safety rests on one invariant: **a document row exists only when all its chunks are
//! stored.** Writes go chunks first, document rows last (the commit); removals go document rows
//! first, chunks after. A crash in between leaves at worst chunks without a document row: the
//! engine deletes those at the start of its next ingestion (`remove_documents` of their ids,
//! keeping their vectors to reuse) and processes the file again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow_array::{
    Array, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::TryStreamExt;
use lance_index::scalar::inverted::tokenizer::document_tokenizer::LanceTokenizer;
use lance_tokenizer::TokenStream;
use lancedb::index::scalar::{FtsIndexBuilder, FullTextSearchQuery};
use lancedb::index::vector::IvfHnswSqIndexBuilder;
use lancedb::index::Index;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::table::{Duration, NewColumnTransform, OptimizeAction};
use lancedb::{DistanceType, Table};
use serde::Serialize;
use ts_rs::TS;

pub use quire_vault::{DataKey, Protection};

/// Below this many chunks an exact scan is fast (a few ms) and an ANN index would not pay.
pub const HNSW_MIN_ROWS: usize = 5_000;

mod fusion;
pub use fusion::{fuse, Fusion, DEFAULT_FUSION, RRF_K};

/// Candidates fetched from each list before hybrid fusion keeps `limit`.
pub fn hybrid_pool(limit: usize) -> usize {
    (limit * 4).max(40)
}

const DOCUMENTS: &str = "documents";
const CHUNKS: &str = "chunks";

#[derive(Debug, Clone, Serialize, PartialEq, TS)]
pub struct DocumentRecord {
    pub doc_id: String,
    pub path: String,
    pub kind: String,
    pub content_hash: String,
    #[ts(type = "number")]
    pub bytes: u64,
    pub pages: u32,
    pub chunks: u32,
    #[ts(type = "number")]
    pub ingested_at_ms: i64,
    /// The file's modification time when it was read (ms since the epoch; 0 if unknown).
    #[ts(type = "number")]
    pub modified_ms: i64,
}

#[derive(Debug, Clone)]
pub struct ChunkRecord {
    pub doc_id: String,
    /// sha256 of the chunk's text (hex): the same text is embedded once, whatever file it is in.
    pub hash: String,
    pub seq: u32,
    pub page: Option<u32>,
    pub start: u64,
    pub end: u64,
    pub tokens: u32,
    pub text: String,
    pub vector: Vec<f32>,
}

impl ChunkRecord {
    pub fn id(&self) -> String {
        chunk_id(&self.doc_id, self.seq)
    }
}

pub fn chunk_id(doc_id: &str, seq: u32) -> String {
    format!("{doc_id}:{seq}")
}

/// The document id and sequence number a chunk id was made from.
pub fn parse_chunk_id(id: &str) -> Option<(&str, u32)> {
    let (doc_id, seq) = id.rsplit_once(':')?;
    Some((doc_id, seq.parse().ok()?))
}

/// How hard an approximate (IVF_HNSW_SQ) search works: IVF partitions probed, and how many
/// times `limit` candidates are re-ranked on their exact vectors (which undoes the 8-bit
/// quantization's ranking errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnnParams {
    pub nprobes: usize,
    pub refine: u32,
}

impl Default for AnnParams {
    fn default() -> Self {
        AnnParams { nprobes: 20, refine: 4 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    Dense,
    Bm25,
    Hybrid,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SearchHit {
    pub chunk_id: String,
    pub doc_id: String,
    pub path: String,
    pub seq: u32,
    pub page: Option<u32>,
    pub start: u64,
    pub end: u64,
    pub text: String,
    /// Higher is better; the scale depends on the mode (cosine, BM25, or fused rank score).
    pub score: f32,
}

pub struct KnowledgeBase {
    /// Held while a document's rows are replaced or removed (`writes.lock` in the folder):
    /// processes sharing the collection each do so in turn.
    writes_lock: PathBuf,
    documents: Table,
    chunks: Table,
    dim: usize,
    /// Swapped when a key rotation starts (new writes under the new key).
    protection: std::sync::RwLock<Protection>,
    /// LanceDB's default English analyser, applied here before blinding.
    analyser: std::sync::Mutex<Box<dyn LanceTokenizer>>,
}

/// The index over `terms`: the words are already analysed (and blinded), so it only splits.
fn terms_index() -> FtsIndexBuilder {
    FtsIndexBuilder::default()
        .base_tokenizer("whitespace".into())
        .max_token_length(None)
        .lower_case(false)
        .stem(false)
        .remove_stop_words(false)
        .ascii_folding(false)
}

fn documents_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("doc_id", DataType::Utf8, false),
        Field::new("path", DataType::Utf8, false),
        Field::new("kind", DataType::Utf8, false),
        Field::new("content_hash", DataType::Utf8, false),
        Field::new("bytes", DataType::UInt64, false),
        Field::new("pages", DataType::UInt32, false),
        Field::new("chunks", DataType::UInt32, false),
        Field::new("ingested_at_ms", DataType::Int64, false),
        Field::new("modified_ms", DataType::Int64, true),
        Field::new("sealed_by", DataType::Utf8, true),
    ]))
}

fn chunks_schema(dim: usize) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("chunk_id", DataType::Utf8, false),
        Field::new("doc_id", DataType::Utf8, false),
        Field::new("seq", DataType::UInt32, false),
        Field::new("page", DataType::UInt32, true),
        Field::new("start", DataType::UInt64, false),
        Field::new("end", DataType::UInt64, false),
        Field::new("tokens", DataType::UInt32, false),
        Field::new("text", DataType::Utf8, false),
        Field::new("chunk_hash", DataType::Utf8, false),
        Field::new("terms", DataType::Utf8, true),
        Field::new(
            "vector",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dim as i32),
            false,
        ),
    ]))
}

/// Quotes a string for a LanceDB (SQL) filter.
fn sql_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

impl KnowledgeBase {
    /// Opens (or creates) the knowledge base in `dir` for embeddings of `dim` dimensions.
    pub async fn open(dir: &Path, dim: usize, protection: Protection) -> Result<KnowledgeBase> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create the data folder {}", dir.display()))?;
        let uri = dir.to_str().context("the data folder's path is not valid UTF-8")?;
        // Other processes (the app, `quire watch`, `quire list`) may open a new collection at
        // the same moment: two creators of one table make a second "create" that overwrites the
        // first (and fails the writes made in between), two migrations add a column twice. The
        // tables are made and brought up to date by one opener at a time.
        let lock = lock_file_async(dir.join("tables.lock")).await?;
        // Every read sees what other processes sharing the collection wrote (the app beside
        // `quire ingest`); on a local disk the check is one small read of the version folder.
        let db = lancedb::connect(uri).read_consistency_interval(std::time::Duration::ZERO).execute().await?;
        let names = db.table_names().execute().await?;
        let open_or_create = |name: &'static str, schema: SchemaRef| {
            let db = db.clone();
            let exists = names.iter().any(|n| n == name);
            async move {
                if exists {
                    db.open_table(name).execute().await
                } else {
                    db.create_empty_table(name, schema).execute().await
                }
            }
        };
        let documents = open_or_create(DOCUMENTS, documents_schema()).await?;
        let chunks = open_or_create(CHUNKS, chunks_schema(dim)).await?;
        let stored_dim = match chunks.schema().await?.field_with_name("vector")?.data_type() {
            DataType::FixedSizeList(_, n) => *n as usize,
            other => anyhow::bail!("the chunks table has an unexpected vector type {other}"),
        };
        // Made before modification times were kept: 0 means "unknown", so such files are hashed
        // once more on the next scan, then recorded.
        add_missing_column(&documents, "modified_ms", "CAST(0 AS BIGINT)").await?;
        // Made before chunk hashes were kept: an empty hash never matches, so old chunks are
        // simply not reused; they are replaced as their files change.
        add_missing_column(&chunks, "chunk_hash", "''").await?;
        // Made before encryption: no blind terms and no sealing key; such documents are
        // resealed (`documents_to_reseal`), and their text's old index is dropped.
        add_missing_column(&chunks, "terms", "''").await?;
        add_missing_column(&documents, "sealed_by", "''").await?;
        for index in chunks.list_indices().await? {
            if index.columns.iter().any(|c| c == "text") {
                chunks.drop_index(&index.name).await?;
            }
        }
        if stored_dim != dim {
            anyhow::bail!(
                "this knowledge base holds {stored_dim}-d embeddings but the embedding model makes {dim}-d ones; \
                 use the model it was built with, or start a new collection (a different QUIRE_HOME)"
            );
        }
        drop(lock);
        let analyser = std::sync::Mutex::new(FtsIndexBuilder::default().build()?);
        Ok(KnowledgeBase {
            writes_lock: dir.join("writes.lock"),
            documents,
            chunks,
            dim,
            protection: std::sync::RwLock::new(protection),
            analyser,
        })
    }

    /// Whether the knowledge base in `dir` holds data sealed under some key: a document row
    /// that records its key (not "plain": stored without encryption). Reads only (creates
    /// nothing), for a folder whose key manifest is missing: such a folder must not get a new key.
    pub async fn holds_sealed_data(dir: &Path) -> Result<bool> {
        if !dir.join(format!("{DOCUMENTS}.lance")).exists() {
            return Ok(false);
        }
        let uri = dir.to_str().context("the data folder's path is not valid UTF-8")?;
        let db = lancedb::connect(uri).execute().await?;
        let table = db.open_table(DOCUMENTS).execute().await?;
        let has_key_column = table.schema().await?.field_with_name("sealed_by").is_ok();
        Ok(has_key_column
            && table.count_rows(Some("sealed_by IS NOT NULL AND sealed_by NOT IN ('', 'plain')".into())).await? > 0)
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn protection(&self) -> Protection {
        self.protection.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Seals what is written from now on under `protection` (a rotation's new key ring).
    pub fn set_protection(&self, protection: Protection) {
        *self.protection.write().unwrap_or_else(|p| p.into_inner()) = protection;
    }

    /// A document's id: a keyed fingerprint of its path (16 hex digits).
    pub fn document_id(&self, path: &str) -> String {
        self.protection().fingerprint(path.as_bytes())[..16].to_owned()
    }

    /// A chunk text's fingerprint, the key its vector is reused by.
    pub fn chunk_hash(&self, text: &str) -> String {
        self.protection().fingerprint(text.as_bytes())
    }

    /// The blinded terms BM25 indexes for `text` (or searches for, given a query), space-separated.
    pub fn blind_terms(&self, text: &str) -> String {
        let mut analyser = self.analyser.lock().unwrap_or_else(|p| p.into_inner());
        let mut stream = analyser.token_stream_for_doc(text);
        let mut out = String::with_capacity(text.len());
        let protection = self.protection();
        while stream.advance() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&protection.blind(&stream.token().text));
        }
        out
    }

    pub async fn document_by_path(&self, path: &str) -> Result<Option<DocumentRecord>> {
        self.document(&self.document_id(path)).await
    }

    pub async fn document(&self, doc_id: &str) -> Result<Option<DocumentRecord>> {
        let filter = format!("doc_id = {}", sql_str(doc_id));
        Ok(self.query_documents(Some(filter)).await?.into_iter().next())
    }

    pub async fn documents(&self) -> Result<Vec<DocumentRecord>> {
        let mut docs = self.query_documents(None).await?;
        docs.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(docs)
    }

    async fn query_documents(&self, filter: Option<String>) -> Result<Vec<DocumentRecord>> {
        let mut q = self.documents.query();
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

    /// Stores a document and its chunks, replacing whatever was stored for the same document id.
    pub async fn replace_document(&self, doc: &DocumentRecord, chunks: &[ChunkRecord]) -> Result<()> {
        self.commit(std::slice::from_ref(doc), chunks).await
    }

    /// Stores documents and their chunks in four writes whatever their number, replacing what
    /// was stored under the same document ids. Ordered for the crash-safety invariant: old
    /// document rows out, old chunks out, new chunks in, new document rows in.
    pub async fn commit(&self, docs: &[DocumentRecord], chunks: &[ChunkRecord]) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        for c in chunks {
            anyhow::ensure!(
                docs.iter().any(|d| d.doc_id == c.doc_id),
                "chunk {} has no document in the commit",
                c.id()
            );
        }
        let ids: Vec<&str> = docs.iter().map(|d| d.doc_id.as_str()).collect();
        let filter = doc_id_filter(&ids);
        // Two processes replacing one document at once would each delete, then each add.
        let _writing = lock_file_async(self.writes_lock.clone()).await?;
        if self.documents.count_rows(Some(filter.clone())).await? > 0 {
            self.documents.delete(&filter).await?;
        }
        if self.chunks.count_rows(Some(filter.clone())).await? > 0 {
            self.chunks.delete(&filter).await?;
        }
        if !chunks.is_empty() {
            self.chunks.add(self.chunk_batch(chunks)?).execute().await?;
        }
        self.documents.add(self.document_batch(docs)?).execute().await?;
        Ok(())
    }

    /// Records a stored document's new modification time (one atomic write; chunks untouched).
    pub async fn update_document(&self, doc: &DocumentRecord) -> Result<()> {
        self.documents
            .update()
            .only_if(format!("doc_id = {}", sql_str(&doc.doc_id)))
            .column("modified_ms", format!("CAST({} AS BIGINT)", doc.modified_ms))
            .column("ingested_at_ms", format!("CAST({} AS BIGINT)", doc.ingested_at_ms))
            .execute()
            .await?;
        Ok(())
    }

    /// Removes a document and its chunks; returns whether it was there.
    pub async fn remove_document(&self, doc_id: &str) -> Result<bool> {
        Ok(self.remove_documents(&[doc_id]).await? > 0)
    }

    /// Removes documents and their chunks (document rows first); returns how many were there.
    pub async fn remove_documents(&self, doc_ids: &[&str]) -> Result<usize> {
        if doc_ids.is_empty() {
            return Ok(0);
        }
        let filter = doc_id_filter(doc_ids);
        let _writing = lock_file_async(self.writes_lock.clone()).await?;
        let existed = self.documents.count_rows(Some(filter.clone())).await?;
        if existed > 0 {
            self.documents.delete(&filter).await?;
        }
        if self.chunks.count_rows(Some(filter.clone())).await? > 0 {
            self.chunks.delete(&filter).await?;
        }
        Ok(existed)
    }

    /// Documents not sealed under the current key: made before encryption, or under a key being
    /// rotated away from. `reseal` each to finish the migration or rotation. With `thorough`,
    /// also the documents any of whose chunk rows is sealed under another key (a scan of every
    /// chunk's text: done while a rotation is under way, not at every start).
    pub async fn documents_to_reseal(&self, thorough: bool) -> Result<Vec<DocumentRecord>> {
        let mut docs = self.query_documents(Some(self.documents_under_other_keys())).await?;
        if thorough {
            let listed: std::collections::HashSet<String> = docs.iter().map(|d| d.doc_id.clone()).collect();
            let mut owners: Vec<String> = self
                .chunk_doc_ids(self.chunks_under_other_keys())
                .await?
                .into_iter()
                .filter(|id| !listed.contains(id))
                .collect();
            owners.sort();
            owners.dedup();
            for group in owners.chunks(500) {
                let ids: Vec<&str> = group.iter().map(String::as_str).collect();
                docs.extend(self.query_documents(Some(doc_id_filter(&ids))).await?);
            }
        }
        Ok(docs)
    }

    /// Rows not sealed under the current key: document rows (by `sealed_by`) and chunk rows (by
    /// their text). A key may be forgotten only when this is zero.
    pub async fn rows_under_other_keys(&self) -> Result<usize> {
        let Some(chunks) = self.chunks_under_other_keys() else { return Ok(0) };
        Ok(self.documents.count_rows(Some(self.documents_under_other_keys())).await?
            + self.chunks.count_rows(Some(chunks)).await?)
    }

    /// The filter for document rows not sealed under the current key.
    fn documents_under_other_keys(&self) -> String {
        format!("sealed_by IS NULL OR sealed_by != {}", sql_str(self.protection().key_id()))
    }

    /// The filter for chunk rows whose text is not sealed under the current key (`None` when
    /// the collection is not sealed).
    fn chunks_under_other_keys(&self) -> Option<String> {
        let prefix = self.protection().current_prefix()?;
        Some(format!("text NOT LIKE {}", sql_str(&format!("{prefix}%"))))
    }

    async fn chunk_doc_ids(&self, filter: Option<String>) -> Result<Vec<String>> {
        let Some(filter) = filter else { return Ok(Vec::new()) };
        let batches: Vec<RecordBatch> = self
            .chunks
            .query()
            .only_if(filter)
            .select(Select::columns(&["doc_id"]))
            .execute()
            .await?
            .try_collect()
            .await?;
        let mut ids = Vec::new();
        for b in &batches {
            let col = str_col(b, "doc_id")?;
            ids.extend((0..b.num_rows()).map(|i| col.value(i).to_owned()));
        }
        Ok(ids)
    }

    /// Deletes the chunks a crash left without a document row (see the crate's docs), holding
    /// the write lock so that another process's commit in progress is not taken for a crash's
    /// leftovers. Returns the keys of the chunks that remain and the removed ones' vectors by
    /// chunk hash (kept by the caller for reuse: the file they came from is processed again).
    pub async fn remove_orphans(&self) -> Result<(Vec<ChunkKey>, HashMap<String, Vec<f32>>)> {
        let _writing = lock_file_async(self.writes_lock.clone()).await?;
        let known: std::collections::HashSet<String> = self.document_ids().await?;
        let (keys, orphans): (Vec<_>, Vec<_>) =
            self.chunk_keys().await?.into_iter().partition(|k| known.contains(&k.doc_id));
        let mut orphan_docs: Vec<&str> = orphans.iter().map(|k| k.doc_id.as_str()).collect();
        orphan_docs.sort();
        orphan_docs.dedup();
        let mut vectors = HashMap::new();
        for group in orphan_docs.chunks(500) {
            vectors.extend(self.vectors_of_documents(group).await?);
            self.chunks.delete(&doc_id_filter(group)).await?;
        }
        Ok((keys, vectors))
    }

    /// The ids of the stored documents (no other column read, nothing opened).
    async fn document_ids(&self) -> Result<std::collections::HashSet<String>> {
        let batches: Vec<RecordBatch> =
            self.documents.query().select(Select::columns(&["doc_id"])).execute().await?.try_collect().await?;
        let mut ids = std::collections::HashSet::new();
        for b in &batches {
            let col = str_col(b, "doc_id")?;
            ids.extend((0..b.num_rows()).map(|i| col.value(i).to_owned()));
        }
        Ok(ids)
    }

    /// Rewrites a document and its chunks under the current key: new id and chunk hashes (keyed
    /// fingerprints), text and path sealed anew, blind terms made again; vectors kept. The new
    /// rows are committed before the old ones go, so an interruption leaves the document
    /// readable (under the old key, or both), and doing it again finishes it.
    pub async fn reseal(&self, doc: &DocumentRecord) -> Result<()> {
        let old_id = doc.doc_id.clone();
        let new_id = self.document_id(&doc.path);
        let mut chunks = self.chunk_records_of(&old_id).await?;
        for c in &mut chunks {
            c.doc_id = new_id.clone();
            c.hash = self.chunk_hash(&c.text);
        }
        let new_doc = DocumentRecord { doc_id: new_id.clone(), ..doc.clone() };
        self.commit(std::slice::from_ref(&new_doc), &chunks).await?;
        if new_id != old_id {
            self.remove_documents(&[&old_id]).await?;
        }
        Ok(())
    }

    /// A document's chunks in full (text opened, vectors included), in order.
    pub async fn chunk_records_of(&self, doc_id: &str) -> Result<Vec<ChunkRecord>> {
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
    }

    /// Every stored chunk's id, document and text hash (no text, no vector).
    pub async fn chunk_keys(&self) -> Result<Vec<ChunkKey>> {
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
    }

    /// Stored vectors for the given chunk hashes (those that are stored; each once).
    pub async fn vectors_by_hash(&self, hashes: &[&str]) -> Result<HashMap<String, Vec<f32>>> {
        let mut found = HashMap::new();
        for group in hashes.chunks(500) {
            let list = group.iter().map(|h| sql_str(h)).collect::<Vec<_>>().join(", ");
            self.collect_vectors(format!("chunk_hash IN ({list})"), &mut found).await?;
        }
        Ok(found)
    }

    /// The vectors of the given documents' chunks, by chunk hash.
    pub async fn vectors_of_documents(&self, doc_ids: &[&str]) -> Result<HashMap<String, Vec<f32>>> {
        let mut found = HashMap::new();
        for group in doc_ids.chunks(500) {
            self.collect_vectors(doc_id_filter(group), &mut found).await?;
        }
        Ok(found)
    }

    async fn collect_vectors(&self, filter: String, found: &mut HashMap<String, Vec<f32>>) -> Result<()> {
        let batches: Vec<RecordBatch> = self
            .chunks
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

    pub async fn chunk_count(&self) -> Result<usize> {
        Ok(self.chunks.count_rows(None).await?)
    }

    /// Brings the search indexes up to date after writes: creates the BM25 index (and, once the
    /// table is large enough, the HNSW index) or folds new rows into the existing ones.
    pub async fn refresh_indexes(&self) -> Result<()> {
        let rows = self.chunks.count_rows(None).await?;
        if rows == 0 {
            return Ok(());
        }
        let indices = self.chunks.list_indices().await?;
        let has = |col: &str| indices.iter().any(|i| i.columns.iter().any(|c| c == col));
        let (has_fts, has_vector) = (has("terms"), has("vector"));
        if has_fts || has_vector {
            self.chunks.optimize(OptimizeAction::Index(Default::default())).await?;
        }
        if !has_fts {
            self.chunks.create_index(&["terms"], Index::FTS(terms_index())).execute().await?;
        }
        if !has_vector && rows >= HNSW_MIN_ROWS {
            let builder = IvfHnswSqIndexBuilder::default().distance_type(DistanceType::Cosine);
            self.chunks.create_index(&["vector"], Index::IvfHnswSq(builder)).execute().await?;
        }
        Ok(())
    }

    /// Compacts small files into large ones and deletes table versions older than `keep`, so
    /// the data folder does not grow with every write. Versions another process may still be
    /// reading are kept by passing a `keep` longer than its reads.
    pub async fn optimize(&self, keep: std::time::Duration) -> Result<()> {
        let older_than = Duration::from_std(keep).unwrap_or(Duration::zero());
        for table in [&self.documents, &self.chunks] {
            table.optimize(OptimizeAction::Compact { options: Default::default(), remap_options: None }).await?;
            table
                .optimize(OptimizeAction::Prune {
                    older_than: Some(older_than),
                    delete_unverified: None,
                    error_if_tagged_old_versions: None,
                })
                .await?;
        }
        Ok(())
    }

    /// Deletes table versions older than `keep` without compacting (cheap; for long ingestions).
    pub async fn prune(&self, keep: std::time::Duration) -> Result<()> {
        let older_than = Duration::from_std(keep).unwrap_or(Duration::zero());
        for table in [&self.documents, &self.chunks] {
            table
                .optimize(OptimizeAction::Prune {
                    older_than: Some(older_than),
                    delete_unverified: None,
                    error_if_tagged_old_versions: None,
                })
                .await?;
        }
        Ok(())
    }

    /// How many versions the chunk table has accumulated (each write makes one).
    pub async fn chunk_table_versions(&self) -> Result<usize> {
        Ok(self.chunks.list_versions().await?.len())
    }

    pub async fn has_vector_index(&self) -> Result<bool> {
        Ok(self.chunks.list_indices().await?.iter().any(|i| i.columns.iter().any(|c| c == "vector")))
    }

    pub async fn search_dense(&self, query: &[f32], limit: usize, exact: bool) -> Result<Vec<SearchHit>> {
        let ann = if exact { None } else { Some(AnnParams::default()) };
        self.search_dense_with(query, limit, ann).await
    }

    /// Dense search with the ANN index's effort given (`None`: exact scan).
    pub async fn search_dense_with(
        &self,
        query: &[f32],
        limit: usize,
        ann: Option<AnnParams>,
    ) -> Result<Vec<SearchHit>> {
        let mut q = self
            .chunks
            .vector_search(query.to_vec())?
            .column("vector")
            .distance_type(DistanceType::Cosine)
            .limit(limit)
            .select(Select::columns(&HIT_COLUMNS));
        match ann {
            None => q = q.bypass_vector_index(),
            // The graph search must return at least limit × refine factor candidates (ef ≥ that k).
            Some(p) => q = q.nprobes(p.nprobes)?.ef(64 + limit * p.refine as usize).refine_factor(p.refine),
        }
        let batches: Vec<RecordBatch> = q.execute().await?.try_collect().await?;
        // Cosine distance is 1 - cosine similarity.
        self.hits(&batches, "_distance", |d| 1.0 - d).await
    }

    pub async fn search_bm25(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        let terms = self.blind_terms(query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let fts = FullTextSearchQuery::new(terms).with_column("terms".into())?;
        let batches: Vec<RecordBatch> = match self
            .chunks
            .query()
            .full_text_search(fts)
            .limit(limit)
            .select(Select::columns(&HIT_COLUMNS))
            .execute()
            .await
        {
            Ok(stream) => stream.try_collect().await?,
            // An empty table has no inverted index yet: no keyword hits.
            Err(_) if self.chunk_count().await? == 0 => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        self.hits(&batches, "_score", |s| s).await
    }

    /// Dense and BM25 results fused with `DEFAULT_FUSION`.
    pub async fn search_hybrid(&self, query_vector: &[f32], query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        let pool = hybrid_pool(limit);
        let dense = self.search_dense(query_vector, pool, false).await?;
        let bm25 = self.search_bm25(query, pool).await?;
        Ok(fuse(&dense, &bm25, DEFAULT_FUSION, limit))
    }

    pub async fn chunks_of(&self, doc_id: &str) -> Result<Vec<SearchHit>> {
        let batches: Vec<RecordBatch> = self
            .chunks
            .query()
            .only_if(format!("doc_id = {}", sql_str(doc_id)))
            .select(Select::columns(&HIT_COLUMNS))
            .execute()
            .await?
            .try_collect()
            .await?;
        let mut hits = self.hits(&batches, "", |s| s).await?;
        hits.sort_by_key(|h| h.seq);
        Ok(hits)
    }

    fn chunk_batch(&self, chunks: &[ChunkRecord]) -> Result<RecordBatch> {
        for c in chunks {
            anyhow::ensure!(
                c.vector.len() == self.dim,
                "chunk {} has a {}-d vector, expected {}",
                c.id(),
                c.vector.len(),
                self.dim
            );
        }
        let protection = self.protection();
        let values = Float32Array::from_iter_values(chunks.iter().flat_map(|c| c.vector.iter().copied()));
        let vectors = FixedSizeListArray::try_new(
            Arc::new(Field::new("item", DataType::Float32, true)),
            self.dim as i32,
            Arc::new(values),
            None,
        )?;
        Ok(RecordBatch::try_new(
            chunks_schema(self.dim),
            vec![
                Arc::new(StringArray::from_iter_values(chunks.iter().map(|c| c.id()))),
                Arc::new(StringArray::from_iter_values(chunks.iter().map(|c| c.doc_id.as_str()))),
                Arc::new(UInt32Array::from_iter_values(chunks.iter().map(|c| c.seq))),
                Arc::new(UInt32Array::from(chunks.iter().map(|c| c.page).collect::<Vec<_>>())),
                Arc::new(UInt64Array::from_iter_values(chunks.iter().map(|c| c.start))),
                Arc::new(UInt64Array::from_iter_values(chunks.iter().map(|c| c.end))),
                Arc::new(UInt32Array::from_iter_values(chunks.iter().map(|c| c.tokens))),
                Arc::new(StringArray::from_iter_values(
                    chunks.iter().map(|c| protection.seal(&text_context(&c.id()), &c.text)),
                )),
                Arc::new(StringArray::from_iter_values(chunks.iter().map(|c| c.hash.as_str()))),
                Arc::new(StringArray::from_iter_values(chunks.iter().map(|c| self.blind_terms(&c.text)))),
                Arc::new(vectors),
            ],
        )?)
    }

    /// The paths of the given documents: only their rows are read and opened, so a search costs
    /// the same in a collection of ten documents or of ten thousand.
    async fn paths_of(&self, doc_ids: &[&str]) -> Result<HashMap<String, String>> {
        if doc_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let batches: Vec<RecordBatch> = self
            .documents
            .query()
            .only_if(doc_id_filter(doc_ids))
            .select(Select::columns(&["doc_id", "path"]))
            .execute()
            .await?
            .try_collect()
            .await?;
        let protection = self.protection();
        let mut out = HashMap::new();
        for b in &batches {
            let (ids, paths) = (str_col(b, "doc_id")?, str_col(b, "path")?);
            for i in 0..b.num_rows() {
                let id = ids.value(i);
                out.insert(id.to_owned(), protection.open(&path_context(id), paths.value(i))?);
            }
        }
        Ok(out)
    }

    /// Turns result batches into hits, with the paths of the documents they come from.
    async fn hits(
        &self,
        batches: &[RecordBatch],
        score_col: &str,
        score: impl Fn(f32) -> f32,
    ) -> Result<Vec<SearchHit>> {
        let mut doc_ids = Vec::new();
        for b in batches {
            let docs = str_col(b, "doc_id")?;
            doc_ids.extend((0..b.num_rows()).map(|i| docs.value(i)));
        }
        doc_ids.sort_unstable();
        doc_ids.dedup();
        let paths = self.paths_of(&doc_ids).await?;
        let protection = self.protection();
        let mut out = Vec::new();
        for b in batches {
            let ids = str_col(b, "chunk_id")?;
            let docs = str_col(b, "doc_id")?;
            let texts = str_col(b, "text")?;
            let seqs = col::<UInt32Array>(b, "seq")?;
            let pages = col::<UInt32Array>(b, "page")?;
            let starts = col::<UInt64Array>(b, "start")?;
            let ends = col::<UInt64Array>(b, "end")?;
            let scores = b.column_by_name(score_col).and_then(|c| c.as_any().downcast_ref::<Float32Array>());
            for i in 0..b.num_rows() {
                let doc_id = docs.value(i).to_string();
                let chunk_id = ids.value(i);
                out.push(SearchHit {
                    text: protection.open(&text_context(chunk_id), texts.value(i))?,
                    chunk_id: chunk_id.into(),
                    path: paths.get(&doc_id).cloned().unwrap_or_default(),
                    doc_id,
                    seq: seqs.value(i),
                    page: (!pages.is_null(i)).then(|| pages.value(i)),
                    start: starts.value(i),
                    end: ends.value(i),
                    score: scores.map(|s| score(s.value(i))).unwrap_or(0.0),
                });
            }
        }
        Ok(out)
    }
}

/// The chunk columns a search returns (never the vector).
const HIT_COLUMNS: [&str; 8] = ["chunk_id", "doc_id", "seq", "page", "start", "end", "text", "tokens"];

/// Opens (creating it if needed) and locks `path` exclusively, waiting for whoever holds it:
/// what processes sharing a collection take before changing a file they all write. The lock
/// goes with the returned file (and with the process, if it dies).
pub fn lock_file(path: &Path) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    file.lock().with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(file)
}

/// `lock_file` from async code: the wait for the lock blocks a thread of its own.
async fn lock_file_async(path: PathBuf) -> Result<std::fs::File> {
    tokio::task::spawn_blocking(move || lock_file(&path)).await?
}

/// Adds a column a table made by an older Quire lacks, filled with `value` (an SQL expression).
async fn add_missing_column(table: &Table, name: &str, value: &str) -> Result<()> {
    if table.schema().await?.field_with_name(name).is_err() {
        table
            .add_columns()
            .transform(NewColumnTransform::SqlExpressions(vec![(name.into(), value.into())]))
            .execute()
            .await?;
    }
    Ok(())
}

/// One stored chunk's identity, for checks and repairs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkKey {
    pub chunk_id: String,
    pub doc_id: String,
    pub hash: String,
}

fn doc_id_filter(ids: &[&str]) -> String {
    format!("doc_id IN ({})", ids.iter().map(|id| sql_str(id)).collect::<Vec<_>>().join(", "))
}

/// Where a sealed value belongs (its associated data): a value moved elsewhere fails to open.
fn path_context(doc_id: &str) -> String {
    format!("document path {doc_id}")
}

fn hash_context(doc_id: &str) -> String {
    format!("document hash {doc_id}")
}

fn text_context(chunk_id: &str) -> String {
    format!("chunk text {chunk_id}")
}

impl KnowledgeBase {
    fn document_batch(&self, docs: &[DocumentRecord]) -> Result<RecordBatch> {
        let strs = |f: &dyn Fn(&DocumentRecord) -> String| Arc::new(StringArray::from_iter_values(docs.iter().map(f)));
        let protection = self.protection();
        let p = &protection;
        Ok(RecordBatch::try_new(
            documents_schema(),
            vec![
                strs(&|d| d.doc_id.clone()),
                strs(&|d| p.seal(&path_context(&d.doc_id), &d.path)),
                strs(&|d| d.kind.clone()),
                strs(&|d| p.seal(&hash_context(&d.doc_id), &d.content_hash)),
                Arc::new(UInt64Array::from_iter_values(docs.iter().map(|d| d.bytes))),
                Arc::new(UInt32Array::from_iter_values(docs.iter().map(|d| d.pages))),
                Arc::new(UInt32Array::from_iter_values(docs.iter().map(|d| d.chunks))),
                Arc::new(Int64Array::from_iter_values(docs.iter().map(|d| d.ingested_at_ms))),
                Arc::new(Int64Array::from_iter_values(docs.iter().map(|d| d.modified_ms))),
                strs(&|_| p.key_id().to_owned()),
            ],
        )?)
    }
}

fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> Result<&'a T> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .with_context(|| format!("column {name} missing or of an unexpected type"))
}

fn str_col<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    col::<StringArray>(b, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_strings_are_escaped() {
        assert_eq!(sql_str("it's"), "'it''s'");
    }
}
