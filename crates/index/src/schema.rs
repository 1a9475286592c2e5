//! The tables on disk: their schemas, opening (creating and migrating them, one opener at a
//! time), the inter-process file locks, and rows built from and read into records.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow_array::{
    Array, FixedSizeListArray, Float32Array, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use lancedb::index::scalar::FtsIndexBuilder;
use lancedb::table::NewColumnTransform;
use lancedb::Table;

use crate::integrity::{with_row_sums, ROW_SUM};
use crate::sealing::{hash_context, path_context, text_context};
use crate::shared::{keywords_schema, KeywordMirror, OtherWriters, SharedStore, KEYWORDS};
use crate::{ChunkRecord, DocumentRecord, KnowledgeBase, Protection};

pub(crate) const DOCUMENTS: &str = "documents";
pub(crate) const CHUNKS: &str = "chunks";
/// The chunk columns a search returns (never the vector).
pub(crate) const HIT_COLUMNS: [&str; 8] = ["chunk_id", "doc_id", "seq", "page", "start", "end", "text", "tokens"];

/// The index over `terms`: the words are already analysed (and blinded), so it only splits.
pub(crate) fn terms_index() -> FtsIndexBuilder {
    FtsIndexBuilder::default()
        .base_tokenizer("whitespace".into())
        .max_token_length(None)
        .lower_case(false)
        .stem(false)
        .remove_stop_words(false)
        .ascii_folding(false)
}

pub(crate) fn documents_schema() -> SchemaRef {
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
        Field::new(ROW_SUM, DataType::Utf8, true),
    ]))
}

pub(crate) fn chunks_schema(dim: usize) -> SchemaRef {
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
        Field::new(ROW_SUM, DataType::Utf8, true),
    ]))
}

impl KnowledgeBase {
    /// Opens (or creates) the knowledge base in `dir` for embeddings of `dim` dimensions.
    pub async fn open(dir: &Path, dim: usize, protection: Protection) -> Result<KnowledgeBase> {
        KnowledgeBase::open_in(dir, None, dim, protection).await
    }

    /// Opens (or creates) a knowledge base whose tables are in `dir`, or, for a library shared
    /// with other computers, in `shared` (this computer's tables made there on first use, the
    /// others' read beside them); `dir` keeps the locks and this computer's own records either way.
    pub async fn open_in(
        dir: &Path,
        shared: Option<&SharedStore>,
        dim: usize,
        protection: Protection,
    ) -> Result<KnowledgeBase> {
        crate::damage::at_boundary(async move {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create the data folder {}", dir.display()))?;
            let uri = dir.to_str().context("the data folder's path is not valid UTF-8")?;
            // Other processes (the app, `quire watch`, `quire list`) may open a new collection at
            // the same moment: two creators of one table make a second "create" that overwrites the
            // first (and fails the writes made in between), two migrations add a column twice. The
            // tables are made and brought up to date by one opener at a time.
            let lock = lock_file_async(dir.join("tables.lock")).await?;
            // Every read sees what other processes sharing the collection wrote (the app beside
            // `quire ingest`); on a local disk the check is one small read of the version folder.
            let (db, names) = match shared {
                None => {
                    let db =
                        lancedb::connect(uri).read_consistency_interval(std::time::Duration::ZERO).execute().await?;
                    let names = db.table_names().execute().await?;
                    (db, names)
                }
                Some(store) => {
                    let reached = async {
                        let db = store.connect().await?;
                        let names = db.table_names().execute().await?;
                        anyhow::Ok((db, names))
                    };
                    match tokio::time::timeout(crate::STORE_ANSWERS_WITHIN, reached).await {
                        Ok(reached) => reached.map_err(|e| unreachable_store(shared, e))?,
                        Err(_) => {
                            let waited = crate::STORE_ANSWERS_WITHIN.as_secs();
                            return Err(unreachable_store(shared, anyhow::anyhow!("no answer in {waited} s")));
                        }
                    }
                }
            };
            let name_of = |kind: &str| shared.map_or_else(|| kind.to_owned(), |s| s.table(kind));
            let open_or_create = |kind: &'static str, schema: SchemaRef| {
                let db = db.clone();
                let name = name_of(kind);
                let exists = names.contains(&name);
                async move {
                    if exists {
                        db.open_table(&name).execute().await
                    } else {
                        db.create_empty_table(&name, schema).execute().await
                    }
                }
            };
            // Caught: LanceDB panics on some damaged manifests.
            let opened = |kind: &'static str, schema: SchemaRef| {
                let opening = open_or_create(kind, schema);
                async move {
                    crate::repair::caught(async move { Ok(opening.await?) })
                        .await
                        .map_err(|e| crate::repair::unopened(kind, &e))
                }
            };
            let documents = opened(DOCUMENTS, documents_schema()).await?;
            let chunks = opened(CHUNKS, chunks_schema(dim)).await?;
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
            // Made before rows carried checksums: an empty one is checked only as far as it decodes
            // (`integrity`); rows get theirs as their documents are indexed again.
            add_missing_column(&documents, ROW_SUM, "''").await?;
            add_missing_column(&chunks, ROW_SUM, "''").await?;
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
            let english = crate::sealing::ENGLISH;
            let analysers =
                std::sync::Mutex::new([(english, crate::sealing::analyser(english)?)].into_iter().collect());
            let others = shared.map(|store| OtherWriters::new(db.clone(), &store.writer, dim));
            let keywords = match shared {
                None => None,
                Some(_) => {
                    let local = lancedb::connect(uri).execute().await?;
                    let table = if local.table_names().execute().await?.iter().any(|n| n == KEYWORDS) {
                        local.open_table(KEYWORDS).execute().await?
                    } else {
                        local.create_empty_table(KEYWORDS, keywords_schema()).execute().await?
                    };
                    Some(KeywordMirror::new(table, dir.join("keywords.lock")))
                }
            };
            let kb = KnowledgeBase {
                writes_lock: dir.join("writes.lock"),
                documents,
                chunks,
                others,
                keywords,
                dim,
                protection: std::sync::RwLock::new(protection),
                analysers,
            };
            // A new library's terms are all made by this version's reading of text.
            if !names.iter().any(|n| *n == name_of(CHUNKS)) {
                kb.mark_terms_current()?;
            }
            Ok(kb)
        })
        .await
    }

    /// Whether a knowledge base was made in `dir` (its chunks' table is there). Reads nothing.
    pub fn made_in(dir: &Path) -> bool {
        dir.join(format!("{CHUNKS}.lance")).exists()
    }

    /// Whether the knowledge base in `dir` holds data sealed under some key: a document row
    /// that records its key (not "plain": stored without encryption). Reads only (creates
    /// nothing), for a folder whose key manifest is missing: such a folder must not get a new key.
    pub async fn holds_sealed_data(dir: &Path) -> Result<bool> {
        crate::damage::at_boundary(async move {
            if !dir.join(format!("{DOCUMENTS}.lance")).exists() {
                return Ok(false);
            }
            let table =
                crate::repair::open(dir, DOCUMENTS).await.map_err(|e| crate::repair::unopened(DOCUMENTS, &e))?;
            let has_key_column = table.schema().await?.field_with_name("sealed_by").is_ok();
            Ok(has_key_column
                && table.count_rows(Some("sealed_by IS NOT NULL AND sealed_by NOT IN ('', 'plain')".into())).await? > 0)
        })
        .await
    }

    /// The keys the documents in the data folder `dir` are sealed under (none when plain or
    /// empty), read without any key: for refusing a key backup that cannot open them.
    pub async fn sealing_keys(dir: &Path) -> Result<std::collections::BTreeSet<String>> {
        crate::damage::at_boundary(async move {
            if !dir.join(format!("{DOCUMENTS}.lance")).exists() {
                return Ok(Default::default());
            }
            let table =
                crate::repair::open(dir, DOCUMENTS).await.map_err(|e| crate::repair::unopened(DOCUMENTS, &e))?;
            sealing_keys_of(&table).await
        })
        .await
    }

    pub(crate) fn chunk_batch(&self, chunks: &[ChunkRecord]) -> Result<RecordBatch> {
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
        with_row_sums(
            CHUNKS,
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
        )
    }

    pub(crate) fn document_batch(&self, docs: &[DocumentRecord]) -> Result<RecordBatch> {
        let strs = |f: &dyn Fn(&DocumentRecord) -> String| Arc::new(StringArray::from_iter_values(docs.iter().map(f)));
        let protection = self.protection();
        let p = &protection;
        with_row_sums(
            DOCUMENTS,
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
        )
    }
}

/// The keys the rows of a documents table are sealed under (none when plain or empty).
pub(crate) async fn sealing_keys_of(table: &Table) -> Result<std::collections::BTreeSet<String>> {
    use futures::TryStreamExt;
    use lancedb::query::{ExecutableQuery, QueryBase, Select};
    let mut keys = std::collections::BTreeSet::new();
    if table.schema().await?.field_with_name("sealed_by").is_err() {
        return Ok(keys);
    }
    let batches: Vec<RecordBatch> =
        table.query().select(Select::columns(&["sealed_by"])).execute().await?.try_collect().await?;
    for b in &batches {
        let ids = str_col(b, "sealed_by")?;
        keys.extend((0..b.num_rows()).filter(|&i| ids.is_valid(i)).map(|i| ids.value(i).to_owned()));
    }
    keys.retain(|k| !k.is_empty() && k != "plain");
    Ok(keys)
}

/// A shared library's store that did not answer, said with where it is and what to check.
fn unreachable_store(shared: Option<&SharedStore>, e: anyhow::Error) -> anyhow::Error {
    match shared {
        None => e,
        Some(store) => e.context(format!(
            "the store holding this library ({}) did not answer or refused this computer's access key; check \
             that it is running, that this computer reaches it, and the key (nothing was changed; queued files \
             go on when it answers)",
            store.url
        )),
    }
}

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
pub(crate) async fn lock_file_async(path: PathBuf) -> Result<std::fs::File> {
    tokio::task::spawn_blocking(move || lock_file(&path)).await?
}

/// Adds a column a table made by an older Quire lacks, filled with `value` (an SQL expression).
pub(crate) async fn add_missing_column(table: &Table, name: &str, value: &str) -> Result<()> {
    if table.schema().await?.field_with_name(name).is_err() {
        table
            .add_columns()
            .transform(NewColumnTransform::SqlExpressions(vec![(name.into(), value.into())]))
            .execute()
            .await?;
    }
    Ok(())
}

pub(crate) fn col<'a, T: 'static>(b: &'a RecordBatch, name: &str) -> Result<&'a T> {
    b.column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .with_context(|| format!("column {name} missing or of an unexpected type"))
}

pub(crate) fn str_col<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a StringArray> {
    col::<StringArray>(b, name)
}
