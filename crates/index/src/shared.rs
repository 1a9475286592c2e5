//! A library whose tables live in a store several computers share: an S3 bucket (a Garage
//! cluster on a NAS or a few old PCs) or a shared folder. Each computer (a *writer*, named by a
//! random id its collection keeps) writes only its own two tables, `documents-<writer>` and
//! `chunks-<writer>`, and reads everyone's. Garage, like other S3 stores, ignores the
//! conditional write LanceDB commits a version with, so two writers of one table lose each
//! other's commits (ARCHITECTURE.md, "A library beyond one machine"); one writer per table
//! needs no such write.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use arrow_array::{Array, Float32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::TryStreamExt;
use lancedb::index::scalar::FullTextSearchQuery;
use lancedb::index::Index;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::table::OptimizeAction;
use lancedb::Table;

use crate::integrity::ROW_SUM;
use crate::schema::{col, str_col, CHUNKS, DOCUMENTS};
use crate::{in_filter, sql_str};

/// How long the list of other writers is kept before the store is listed again: a document
/// another computer adds is searched here within this delay plus its own commit.
pub const WRITERS_LISTED_FOR: Duration = Duration::from_secs(5);

/// How long opening a shared library waits for its store's first answer before saying it
/// cannot be reached. Lance's own retries (its throttle layer tries a request that ran out of
/// retries again, whatever the cause) take longer than that over a stopped store.
pub const STORE_ANSWERS_WITHIN: Duration = Duration::from_secs(3);

/// Where a shared library's tables are, how to reach them, and which of them this computer writes.
#[derive(Clone)]
pub struct SharedStore {
    /// `s3://bucket/prefix`, or a folder's path.
    pub url: String,
    /// LanceDB's storage options: endpoint, region, credentials, timeouts. Never written anywhere.
    pub options: Vec<(String, String)>,
    /// This computer's writer id: ASCII letters, digits, `_`.
    pub writer: String,
}

impl std::fmt::Debug for SharedStore {
    // The options hold the credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedStore({}, writer {})", self.url, self.writer)
    }
}

impl SharedStore {
    pub(crate) fn table(&self, kind: &str) -> String {
        table_of(kind, &self.writer)
    }

    pub(crate) async fn connect(&self) -> Result<lancedb::Connection> {
        anyhow::ensure!(
            !self.writer.is_empty() && self.writer.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "a writer id is ASCII letters, digits and _ (not \"{}\")",
            self.writer
        );
        Ok(lancedb::connect(&self.url)
            .storage_options(self.options.iter().cloned())
            .read_consistency_interval(Duration::ZERO)
            .execute()
            .await?)
    }
}

fn table_of(kind: &str, writer: &str) -> String {
    format!("{kind}-{writer}")
}

/// One writer's tables, as read.
#[derive(Clone)]
pub(crate) struct WriterTables {
    pub writer: String,
    pub documents: Table,
    pub chunks: Table,
}

/// The other computers writing a shared library, listed again at most every `WRITERS_LISTED_FOR`.
pub(crate) struct OtherWriters {
    db: lancedb::Connection,
    own: String,
    dim: usize,
    seen: tokio::sync::Mutex<(Option<Instant>, Vec<WriterTables>)>,
}

impl OtherWriters {
    pub(crate) fn new(db: lancedb::Connection, own: &str, dim: usize) -> OtherWriters {
        OtherWriters { db, own: own.to_owned(), dim, seen: tokio::sync::Mutex::new((None, Vec::new())) }
    }

    /// This computer's writer id.
    pub(crate) fn own(&self) -> &str {
        &self.own
    }

    /// The other writers' tables (both made), those already opened kept open.
    pub(crate) async fn current(&self) -> Result<Vec<WriterTables>> {
        let mut seen = self.seen.lock().await;
        if seen.0.is_some_and(|at| at.elapsed() < WRITERS_LISTED_FOR) {
            return Ok(seen.1.clone());
        }
        let names = self.db.table_names().execute().await.context("cannot list the shared library's tables")?;
        let mut writers = Vec::new();
        for writer in writers_in(&names) {
            if writer == self.own {
                continue;
            }
            if let Some(open) = seen.1.iter().find(|w| w.writer == writer) {
                writers.push(open.clone());
                continue;
            }
            let open = |kind: &'static str| {
                let (name, db) = (table_of(kind, writer), self.db.clone());
                async move {
                    let opening = db.open_table(&name).execute();
                    crate::repair::caught(async move { Ok(opening.await?) })
                        .await
                        .with_context(|| format!("cannot open the table {name} another computer writes"))
                }
            };
            let (documents, chunks) = (open(DOCUMENTS).await?, open(CHUNKS).await?);
            if let DataType::FixedSizeList(_, n) = chunks.schema().await?.field_with_name("vector")?.data_type() {
                anyhow::ensure!(
                    *n as usize == self.dim,
                    "the computer writing as {writer} embeds this shared library with {n}-d vectors, this one \
                     with {}-d: use the same embedding model on both",
                    self.dim
                );
            }
            writers.push(WriterTables { writer: writer.to_owned(), documents, chunks });
        }
        *seen = (Some(Instant::now()), writers.clone());
        Ok(writers)
    }
}

/// Every writer's passages' blinded terms in one table on this computer's disk (`keywords` in
/// the collection's folder), indexed for BM25: keyword search over a shared library then ranks
/// with the statistics of the whole library, as one table holding every passage would, rather
/// than each writer's table by its own. Kept in step with the writers' tables at each keyword
/// search: a writer's table whose version moved is compared by (chunk id, row checksum), so
/// passages added, removed or read again are brought over, and nothing else is read.
pub(crate) struct KeywordMirror {
    table: Table,
    /// Held while the mirror is brought in step: the app and `quire` on one computer share it.
    lock: std::path::PathBuf,
    /// The version of each writer's chunks table the mirror last matched.
    synced: tokio::sync::Mutex<HashMap<String, u64>>,
}

pub(crate) const KEYWORDS: &str = "keywords";

pub(crate) fn keywords_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("chunk_id", DataType::Utf8, false),
        Field::new(ROW_SUM, DataType::Utf8, true),
        Field::new("writer", DataType::Utf8, false),
        Field::new("terms", DataType::Utf8, true),
    ]))
}

impl KeywordMirror {
    pub(crate) fn new(table: Table, lock: std::path::PathBuf) -> KeywordMirror {
        KeywordMirror { table, lock, synced: Default::default() }
    }

    /// Brings the mirror in line with `writers`' chunks tables.
    async fn sync(&self, writers: &[WriterTables]) -> Result<()> {
        let mut synced = self.synced.lock().await;
        let mut versions = Vec::new();
        for w in writers {
            versions.push(w.chunks.version().await?);
        }
        if writers.iter().zip(&versions).all(|(w, v)| synced.get(&w.writer) == Some(v)) {
            return Ok(());
        }
        let _lock = crate::schema::lock_file_async(self.lock.clone()).await?;
        let mut changed = false;
        for (w, &version) in writers.iter().zip(&versions) {
            if synced.get(&w.writer) == Some(&version) {
                continue;
            }
            let of_writer = format!("writer = {}", sql_str(&w.writer));
            let there = row_keys(&w.chunks, None).await?;
            let here = row_keys(&self.table, Some(of_writer.clone())).await?;
            let gone: Vec<&(String, String)> = here.difference(&there).collect();
            for group in gone.chunks(500) {
                let ids: Vec<&str> = group.iter().map(|(id, _)| id.as_str()).collect();
                self.table.delete(&format!("{of_writer} AND {}", in_filter("chunk_id", &ids))).await?;
            }
            let new: Vec<&str> = there.difference(&here).map(|(id, _)| id.as_str()).collect();
            for group in new.chunks(500) {
                let batches: Vec<RecordBatch> = w
                    .chunks
                    .query()
                    .only_if(in_filter("chunk_id", group))
                    .select(Select::columns(&["chunk_id", ROW_SUM, "terms"]))
                    .execute()
                    .await?
                    .try_collect()
                    .await?;
                for b in batches.iter().filter(|b| b.num_rows() > 0) {
                    let writer = StringArray::from(vec![w.writer.as_str(); b.num_rows()]);
                    let column = |name: &str| b.column_by_name(name).cloned().with_context(|| format!("no {name}"));
                    let batch = RecordBatch::try_new(
                        keywords_schema(),
                        vec![column("chunk_id")?, column(ROW_SUM)?, Arc::new(writer), column("terms")?],
                    )?;
                    self.table.add(batch).execute().await?;
                }
            }
            changed |= !gone.is_empty() || !new.is_empty();
            synced.insert(w.writer.clone(), version);
        }
        if changed {
            let has_index = self.table.list_indices().await?.iter().any(|i| i.columns.iter().any(|c| c == "terms"));
            if has_index {
                self.table.optimize(OptimizeAction::Index(Default::default())).await?;
            } else {
                self.table.create_index(&["terms"], Index::FTS(crate::schema::terms_index())).execute().await?;
            }
        }
        Ok(())
    }

    /// The `limit` best passages for `fts` over every writer's passages: (writer, chunk id, score).
    pub(crate) async fn search(
        &self,
        writers: &[WriterTables],
        fts: FullTextSearchQuery,
        limit: usize,
    ) -> Result<Vec<(String, String, f32)>> {
        self.sync(writers).await?;
        if self.table.count_rows(None).await? == 0 {
            return Ok(Vec::new());
        }
        let batches: Vec<RecordBatch> = self
            .table
            .query()
            .full_text_search(fts)
            .limit(limit)
            .select(Select::columns(&["chunk_id", "writer"]))
            .execute()
            .await?
            .try_collect()
            .await?;
        let mut found = Vec::new();
        for b in &batches {
            let (ids, writers) = (str_col(b, "chunk_id")?, str_col(b, "writer")?);
            let scores = col::<Float32Array>(b, "_score")?;
            for i in 0..b.num_rows() {
                found.push((writers.value(i).to_owned(), ids.value(i).to_owned(), scores.value(i)));
            }
        }
        Ok(found)
    }
}

/// A table's rows as (chunk id, row checksum): what changes when a passage is added, removed or
/// stored again.
async fn row_keys(table: &Table, filter: Option<String>) -> Result<HashSet<(String, String)>> {
    let mut q = table.query().select(Select::columns(&["chunk_id", ROW_SUM]));
    if let Some(f) = filter {
        q = q.only_if(f);
    }
    let batches: Vec<RecordBatch> = q.execute().await?.try_collect().await?;
    let mut keys = HashSet::new();
    for b in &batches {
        let ids = str_col(b, "chunk_id")?;
        let sums = b.column_by_name(ROW_SUM).and_then(|c| c.as_any().downcast_ref::<StringArray>());
        for i in 0..b.num_rows() {
            let sum = sums.filter(|s| s.is_valid(i)).map(|s| s.value(i)).unwrap_or("");
            keys.insert((ids.value(i).to_owned(), sum.to_owned()));
        }
    }
    Ok(keys)
}

/// The writers of the shared library in `store` (those whose two tables are made), this
/// computer's among them once it has written; reads nothing but the store's list of tables.
pub async fn writers_in_store(store: &SharedStore) -> Result<Vec<String>> {
    let names = store.connect().await?.table_names().execute().await?;
    Ok(writers_in(&names).into_iter().map(str::to_owned).collect())
}

impl crate::KnowledgeBase {
    /// The keys the other computers' documents are sealed under (none in a library of one's own).
    pub async fn keys_of_other_writers(&self) -> Result<std::collections::BTreeSet<String>> {
        let mut keys = std::collections::BTreeSet::new();
        if let Some(others) = &self.others {
            for writer in others.current().await? {
                keys.extend(crate::schema::sealing_keys_of(&writer.documents).await?);
            }
        }
        Ok(keys)
    }
}

/// The writers whose two tables are both among `names` (a writer's first ingestion makes them).
fn writers_in(names: &[String]) -> Vec<&str> {
    let prefix = format!("{CHUNKS}-");
    let mut writers: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix(&prefix))
        .filter(|w| names.iter().any(|n| *n == table_of(DOCUMENTS, w)))
        .collect();
    writers.sort_unstable();
    writers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_is_listed_once_both_its_tables_are_made() {
        let names: Vec<String> =
            ["chunks-a1", "documents-a1", "chunks-b2", "documents-c3", "chunks", "documents", "notes-a1"]
                .into_iter()
                .map(String::from)
                .collect();
        assert_eq!(writers_in(&names), vec!["a1"]);
    }
}
