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

mod damage;
mod fusion;
mod integrity;
mod read;
mod repair;
mod schema;
mod sealing;
mod search;
mod shared;
pub mod terms;
mod upkeep;
mod write;

use std::path::PathBuf;

use anyhow::Result;

use lance_index::scalar::inverted::tokenizer::document_tokenizer::LanceTokenizer;
use lancedb::Table;
use serde::Serialize;
use ts_rs::TS;

pub use damage::{explained, is_damaged, plain_damage, Damaged, DAMAGED};
pub use fusion::{fuse, Fusion, DEFAULT_FUSION, RRF_K};
pub use quire_vault::{DataKey, Protection};
pub use read::{documents_version, paths_of_documents};
pub use repair::{check_tables, plural, quiet_caught_panics, repair_tables, Mend, TableCheck, TableRepair};
pub use shared::{writers_in_store, SharedStore, STORE_ANSWERS_WITHIN, WRITERS_LISTED_FOR};

/// Below this many chunks an exact scan is fast (a few ms) and an ANN index would not pay.
pub const HNSW_MIN_ROWS: usize = 5_000;

/// Candidates fetched from each list before hybrid fusion keeps `limit`.
pub fn hybrid_pool(limit: usize) -> usize {
    (limit * 4).max(40)
}

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
    /// This computer's tables (a shared library's, its own there).
    documents: Table,
    chunks: Table,
    /// The other computers' tables of a shared library (`shared`), read beside this one's.
    others: Option<shared::OtherWriters>,
    /// A shared library's keyword index of every writer's passages, on this computer's disk.
    keywords: Option<shared::KeywordMirror>,
    dim: usize,
    /// Swapped when a key rotation starts (new writes under the new key).
    protection: std::sync::RwLock<Protection>,
    /// LanceDB's analysers by language (English, the default, and the others `terms` reads a
    /// text in), applied here before blinding.
    analysers: std::sync::Mutex<std::collections::HashMap<&'static str, Box<dyn LanceTokenizer>>>,
}

impl KnowledgeBase {
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether the library's tables are in a store other computers write too.
    pub fn is_shared(&self) -> bool {
        self.others.is_some()
    }

    /// The tables searched and listed: this computer's first, then (in a shared library) every
    /// other writer's. A document or chunk id found in several is taken from the first.
    pub(crate) async fn readable(&self) -> Result<Vec<shared::WriterTables>> {
        let own = shared::WriterTables {
            writer: self.others.as_ref().map(|o| o.own().to_owned()).unwrap_or_default(),
            documents: self.documents.clone(),
            chunks: self.chunks.clone(),
        };
        let mut all = vec![own];
        if let Some(others) = &self.others {
            all.extend(others.current().await?);
        }
        Ok(all)
    }
}

/// Quotes a string for a LanceDB (SQL) filter.
fn sql_str(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// One stored chunk's identity, for checks and repairs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChunkKey {
    pub chunk_id: String,
    pub doc_id: String,
    pub hash: String,
}

fn doc_id_filter(ids: &[&str]) -> String {
    in_filter("doc_id", ids)
}

/// `column IN ('a', 'b', …)`, each value quoted as SQL.
fn in_filter(column: &str, values: &[impl AsRef<str>]) -> String {
    format!("{column} IN ({})", values.iter().map(|v| sql_str(v.as_ref())).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_strings_are_escaped() {
        assert_eq!(sql_str("it's"), "'it''s'");
    }
}
