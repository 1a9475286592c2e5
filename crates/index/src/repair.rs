//! Damaged tables found and mended, on the data folder alone (no key, no `KnowledgeBase`: a
//! manifest that cannot be read stops `KnowledgeBase::open` itself).
//!
//! A check reads every row and column of both tables at their newest versions, so a damaged
//! data file or manifest shows as an error naming the table, and checks each row against the
//! checksum it was written with (`integrity`), so damage that still decodes (a flipped byte in
//! a sealed text or a vector) shows too, with the documents it belongs to. Rows that fail their
//! checksum are removed (a copy of their files kept aside, the table compacted without them)
//! and their documents indexed again from the files. Otherwise a repair, per damaged table:
//! 1. sets aside newest manifests that cannot be read (moved, never deleted), until a version
//!    opens;
//! 2. if that version cannot be read whole, goes back to the newest older version that can, and
//!    makes it the newest again (LanceDB's restore; ingestion prunes versions older than a
//!    minute, so there is often none);
//! 3. failing both, moves the table's folder aside whole; the next open creates it empty.
//!
//! A check also has each of a table's indexes (`_indices`) load itself whole where LanceDB can
//! (its prewarm) and answer a query; a repair drops an index that fails, and the engine builds
//! it again from the table (an index holds nothing that is not in the table).
//!
//! What a table lost is then indexed again from the documents on disk by the engine
//! (`Engine::repair`): this module only brings each table back to a state that reads whole.
//! Everything moved goes under `damaged/` in the data folder, with the time of the repair.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use futures::TryStreamExt;
use lancedb::index::IndexType;
use lancedb::query::{ExecutableQuery, QueryBase};
use lancedb::Table;
use serde::Serialize;

use crate::damage::{damage_in, is_damaged, plain_damage, Damaged, DAMAGED};
use crate::integrity::{read_checked, RowsRead};
use crate::schema::{CHUNKS, DOCUMENTS};

/// The state of one table as a check found it.
#[derive(Debug, Clone, Serialize)]
pub struct TableCheck {
    pub table: &'static str,
    /// The newest version, when its manifest could be read.
    pub version: Option<u64>,
    /// Rows read (when the whole table could be read).
    pub rows: Option<usize>,
    /// What could not be read, LanceDB's words; `None` when the table reads whole.
    pub damage: Option<String>,
    /// Rows that decode but do not read back as they were written (their checksum differs).
    pub damaged_rows: usize,
    /// The ids of the documents those rows belong to, where the rows still name them.
    pub damaged_documents: Vec<String>,
    /// Rows written before Quire kept checksums (checked only as far as they decode).
    pub unsummed_rows: usize,
}

/// What a repair did to one table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Mend {
    /// It read whole: nothing done.
    Sound,
    /// Newest manifests set aside (`manifests` of them) and/or an older version made the
    /// newest again: the table now reads whole at `version`.
    WentBack { manifests: usize, version: u64 },
    /// No version read whole: the table's folder was moved aside and starts empty.
    SetAside,
    /// `rows` rows did not read back as written: they were removed (their documents are
    /// indexed again) and the files that held them moved aside.
    RowsRemoved { rows: usize },
}

#[derive(Debug, Clone, Serialize)]
pub struct TableRepair {
    pub table: &'static str,
    pub mend: Mend,
    /// Where the damaged files were moved (`None` when nothing was).
    pub moved_to: Option<PathBuf>,
    /// Indexes that could not be read and were dropped, to be built again
    /// (`KnowledgeBase::refresh_indexes`).
    pub indexes_dropped: Vec<String>,
}

impl TableCheck {
    /// One line for a person: `The passages read whole (120).`
    pub fn describe(&self) -> String {
        let what = what_table_holds(self.table);
        match (&self.damage, self.rows) {
            (None, Some(rows)) => format!("{} {} whole ({rows}).", what.capitalised(), what.verb("reads", "read")),
            (damage, _) => format!(
                "{} {} DAMAGED: {}",
                what.capitalised(),
                what.verb("is", "are"),
                damage.as_deref().unwrap_or("unreadable")
            ),
        }
    }
}

impl TableRepair {
    /// One line for a person: what was done to the table and where the damaged files went.
    pub fn describe(&self) -> String {
        let what = what_table_holds(self.table);
        let done = match &self.mend {
            Mend::Sound => format!("{} whole: left as {}", what.verb("reads", "read"), what.verb("it was", "they were")),
            Mend::WentBack { manifests: 0, version: _ } => {
                "went back to the newest earlier state that reads whole".to_string()
            }
            Mend::WentBack { manifests, version: _ } => format!(
                "went back to the newest earlier state that reads whole ({manifests} newer {} could not be read and {} set aside)",
                plural(*manifests, "state"),
                if *manifests == 1 { "was" } else { "were" }
            ),
            Mend::SetAside => "could not be read in any earlier state: started again empty".to_string(),
            Mend::RowsRemoved { rows } => format!(
                "held {rows} {} that did not read back as written: {} removed, and indexed again from the files",
                plural(*rows, "entry"),
                if *rows == 1 { "it was" } else { "they were" }
            ),
        };
        let indexes = (!self.indexes_dropped.is_empty()).then(|| {
            format!("; the search index ({}) could not be read and is built again", self.indexes_dropped.join(", "))
        });
        let aside = self.moved_to.as_ref().map(|p| format!("; the damaged files are kept in {}", p.display()));
        format!("{} {done}{}{}.", what.capitalised(), indexes.unwrap_or_default(), aside.unwrap_or_default())
    }
}

/// What a table holds, in the words the rest of Quire uses, and the verbs that go with it.
struct Held {
    name: &'static str,
    many: bool,
}

fn what_table_holds(table: &str) -> Held {
    if table == CHUNKS {
        Held { name: "the passages", many: true }
    } else {
        Held { name: "the list of documents", many: false }
    }
}

impl Held {
    fn verb(&self, one: &'static str, many: &'static str) -> &'static str {
        if self.many {
            many
        } else {
            one
        }
    }

    fn capitalised(&self) -> String {
        let mut chars = self.name.chars();
        chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
    }
}

/// `noun` for `n` of it: "1 entry", "2 entries".
pub fn plural(n: usize, noun: &str) -> String {
    match (n, noun.strip_suffix('y')) {
        (1, _) => noun.to_string(),
        (_, Some(stem)) => format!("{stem}ies"),
        _ => format!("{noun}s"),
    }
}

/// Reads both tables of the data folder `dir` whole (absent tables are not damage: a new
/// collection). Fails only when the folder itself cannot be opened.
pub async fn check_tables(dir: &Path) -> Result<Vec<TableCheck>> {
    let mut checks = Vec::new();
    for table in [DOCUMENTS, CHUNKS] {
        if !table_dir(dir, table).exists() {
            continue;
        }
        let damaged = |version, damage: String| TableCheck {
            table,
            version,
            rows: None,
            damage: Some(damage),
            damaged_rows: 0,
            damaged_documents: Vec::new(),
            unsummed_rows: 0,
        };
        checks.push(match open(dir, table).await {
            Err(e) => damaged(None, format!("cannot open it: {e:#}")),
            Ok(t) => {
                let version = t.version().await.ok();
                match read_checked_caught(&t, table).await {
                    Ok(read) if !read.damaged.is_empty() => TableCheck {
                        damaged_rows: read.damaged.len(),
                        damaged_documents: read.documents,
                        unsummed_rows: read.unsummed,
                        ..damaged(
                            version,
                            format!(
                                "{} of {} {} did not read back as {} written",
                                read.damaged.len(),
                                read.rows,
                                plural(read.rows, "entry"),
                                if read.damaged.len() == 1 { "it was" } else { "they were" }
                            ),
                        )
                    },
                    Ok(read) => {
                        let damage = unreadable_indexes(&t).await.into_iter().next().map(|(name, e)| {
                            format!(
                                "its search index {name} cannot be read ({e:#}); the entries read whole: {}",
                                read.rows
                            )
                        });
                        TableCheck {
                            table,
                            version,
                            rows: damage.is_none().then_some(read.rows),
                            damage,
                            damaged_rows: 0,
                            damaged_documents: Vec::new(),
                            unsummed_rows: read.unsummed,
                        }
                    }
                    Err(e) => damaged(version, format!("{e:#}")),
                }
            }
        });
    }
    Ok(checks)
}

/// `integrity::read_checked`, its panics caught.
async fn read_checked_caught(table: &Table, name: &'static str) -> Result<RowsRead> {
    let table = table.clone();
    caught(async move { read_checked(&table, name).await }).await
}

/// Mends every damaged table of the data folder `dir` (see the module's comment).
pub async fn repair_tables(dir: &Path) -> Result<Vec<TableRepair>> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let aside = dir.join("damaged").join(stamp.to_string());
    let mut repairs = Vec::new();
    for table in [DOCUMENTS, CHUNKS] {
        if !table_dir(dir, table).exists() {
            continue;
        }
        repairs.push(repair_table(dir, table, &aside.join(format!("{table}.lance"))).await?);
    }
    Ok(repairs)
}

async fn repair_table(dir: &Path, table: &'static str, aside: &Path) -> Result<TableRepair> {
    let mut manifests = 0;
    let opened = loop {
        match open(dir, table).await {
            Ok(t) => break Some(t),
            Err(_) => match newest_manifest(&table_dir(dir, table))? {
                // The newest manifest is the one read at open: set it aside and try the one before.
                Some(newest) => {
                    move_aside(&newest, &aside.join("_versions"))?;
                    // The hint names the version just set aside.
                    let _ = std::fs::remove_file(table_dir(dir, table).join("_versions/latest_version_hint.json"));
                    manifests += 1;
                }
                None => break None,
            },
        }
    };
    let moved_to = (manifests > 0).then(|| aside.to_path_buf());
    if let Some(t) = opened {
        let newest = t.version().await?;
        if let Ok(read) = read_checked_caught(&t, table).await {
            if !read.damaged.is_empty() {
                let rows = read.damaged.len();
                remove_damaged_rows(&t, &table_dir(dir, table), &read.damaged, aside).await?;
                let indexes_dropped = drop_unreadable_indexes(&t, table).await?;
                let mend = Mend::RowsRemoved { rows };
                return Ok(TableRepair { table, mend, moved_to: Some(aside.to_path_buf()), indexes_dropped });
            }
            let mend = if manifests == 0 { Mend::Sound } else { Mend::WentBack { manifests, version: newest } };
            let indexes_dropped = drop_unreadable_indexes(&t, table).await?;
            return Ok(TableRepair { table, mend, moved_to, indexes_dropped });
        }
        let mut older: Vec<u64> = match t.list_versions().await {
            Ok(versions) => versions.iter().map(|v| v.version).filter(|&v| v < newest).collect(),
            Err(_) => Vec::new(),
        };
        older.sort_unstable_by(|a, b| b.cmp(a));
        for version in older {
            if t.checkout(version).await.is_ok() && read_whole(&t).await.is_ok() {
                t.restore()
                    .await
                    .with_context(|| format!("cannot make version {version} of the {table} table the newest"))?;
                let indexes_dropped = drop_unreadable_indexes(&t, table).await?;
                return Ok(TableRepair {
                    table,
                    mend: Mend::WentBack { manifests, version },
                    moved_to,
                    indexes_dropped,
                });
            }
        }
    }
    // Nothing reads whole: the table starts again, empty (`KnowledgeBase::open` creates it).
    move_aside(&table_dir(dir, table), aside)?;
    Ok(TableRepair { table, mend: Mend::SetAside, moved_to: Some(aside.to_path_buf()), indexes_dropped: Vec::new() })
}

/// Removes the rows `row_ids` of `table` (whose folder is `table_dir`), which do not read back as written: a
/// copy of each data file holding one goes under `aside` first; then the table is compacted
/// (every file with a removed row written anew without it) and its older versions pruned, so
/// the damaged files leave the data folder.
async fn remove_damaged_rows(table: &Table, table_dir: &Path, row_ids: &[u64], aside: &Path) -> Result<()> {
    let name = table_dir.file_stem().and_then(|n| n.to_str()).unwrap_or("a");
    // Without stable row ids (LanceDB's default) a row id is its address: fragment << 32 | offset.
    let fragments: std::collections::BTreeSet<u64> = row_ids.iter().map(|id| id >> 32).collect();
    let native = table.as_native().context("a table of a local data folder")?;
    let manifest = native.manifest().await?;
    let data = table_dir.join("data");
    for fragment in manifest.fragments.iter().filter(|f| fragments.contains(&f.id)) {
        for file in &fragment.files {
            let from = data.join(&file.path);
            let to = aside.join("data").join(&file.path);
            std::fs::create_dir_all(aside.join("data"))?;
            std::fs::copy(&from, &to)
                .with_context(|| format!("cannot keep a copy of the damaged {} in {}", from.display(), to.display()))?;
        }
    }
    let ids: Vec<String> = row_ids.iter().map(u64::to_string).collect();
    for group in ids.chunks(500) {
        table
            .delete(&format!("_rowid IN ({})", group.join(", ")))
            .await
            .with_context(|| format!("cannot remove the damaged entries of the {name} table"))?;
    }
    let options = lancedb::table::CompactionOptions { materialize_deletions_threshold: 0.0, ..Default::default() };
    table
        .optimize(lancedb::table::OptimizeAction::Compact { options, remap_options: None })
        .await
        .with_context(|| format!("cannot rewrite the {name} table without its damaged entries"))?;
    table
        .optimize(lancedb::table::OptimizeAction::Prune {
            older_than: Some(lancedb::table::Duration::zero()),
            delete_unverified: Some(true),
            error_if_tagged_old_versions: None,
        })
        .await
        .with_context(|| format!("cannot let go of the damaged files of the {name} table"))?;
    Ok(())
}

/// Each index of `table` that cannot be read, with what went wrong: LanceDB loads the index
/// whole where it can (prewarming), then the index answers a query (vector indexes a nearest
/// neighbour, full-text ones a term). A damaged file's footer or metadata fails either;
/// damage inside a posting list or a vector of an index it cannot load whole may go unseen.
async fn unreadable_indexes(table: &Table) -> Vec<(String, anyhow::Error)> {
    let indexes = match table.list_indices().await {
        Ok(indexes) => indexes,
        Err(e) => return vec![("(the list of indexes)".into(), e.into())],
    };
    let mut unreadable = Vec::new();
    for index in indexes {
        let (t, name, column) = (table.clone(), index.name.clone(), index.columns.first().cloned().unwrap_or_default());
        let kind = index.index_type.clone();
        let probed = caught(async move {
            t.prewarm_index(&name).await?;
            match kind {
                IndexType::FTS => {
                    let probe = lancedb::index::scalar::FullTextSearchQuery::new("quire".into()).with_column(column)?;
                    drain(t.query().full_text_search(probe).limit(1).execute().await?).await
                }
                IndexType::IvfFlat
                | IndexType::IvfSq
                | IndexType::IvfPq
                | IndexType::IvfRq
                | IndexType::IvfHnswPq
                | IndexType::IvfHnswSq
                | IndexType::IvfHnswFlat => {
                    let dim = match t.schema().await?.field_with_name(&column)?.data_type() {
                        arrow_schema::DataType::FixedSizeList(_, d) => *d as usize,
                        other => anyhow::bail!("the indexed column {column} holds {other}, not vectors"),
                    };
                    drain(t.vector_search(vec![0.5f32; dim])?.column(&column).limit(1).execute().await?).await
                }
                _ => Ok(0),
            }
        })
        .await;
        if let Err(e) = probed {
            unreadable.push((index.name, e));
        }
    }
    unreadable
}

/// Drops `table`'s indexes that cannot be read (their files stay where they are, unreferenced):
/// their names.
async fn drop_unreadable_indexes(table: &Table, table_name: &str) -> Result<Vec<String>> {
    let mut dropped = Vec::new();
    for (name, _) in unreadable_indexes(table).await {
        table
            .drop_index(&name)
            .await
            .with_context(|| format!("cannot drop the damaged index {name} of the {table_name} table"))?;
        dropped.push(name);
    }
    Ok(dropped)
}

/// Rows in a query's answer, every batch read.
async fn drain(mut stream: lancedb::arrow::SendableRecordBatchStream) -> Result<usize> {
    let mut rows = 0;
    while let Some(batch) = stream.try_next().await? {
        rows += batch.num_rows();
    }
    Ok(rows)
}

fn table_dir(dir: &Path, table: &str) -> PathBuf {
    dir.join(format!("{table}.lance"))
}

pub(crate) async fn open(dir: &Path, table: &'static str) -> Result<Table> {
    let uri = dir.to_str().context("the data folder's path is not valid UTF-8")?.to_owned();
    caught(async move {
        let db = lancedb::connect(&uri).execute().await?;
        Ok(db.open_table(table).execute().await?)
    })
    .await
}

/// Every row and column of `table`'s checked-out version; the rows read.
async fn read_whole(table: &Table) -> Result<usize> {
    let table = table.clone();
    caught(async move { drain(table.query().execute().await?).await }).await
}

/// A table that would not open, named as a person knows it. Where LanceDB's words say damage
/// ("failed to decode Protobuf message: …", shown by `quire check`), a person is told only
/// that, with the way out; other causes (a folder it may not read) are said as they are.
pub(crate) fn unopened(table: &'static str, e: &anyhow::Error) -> anyhow::Error {
    let what = what_table_holds(table).name;
    if is_damaged(e) || damage_in(e).is_some() {
        Damaged { table: Some(table), detail: format!("{what} cannot be opened; {DAMAGED}") }.into()
    } else {
        anyhow::anyhow!("{what} cannot be opened: {}", plain_damage(&format!("{e:#}")))
    }
}

/// Panics being turned into errors by `caught` right now (their messages are not printed).
static CATCHING: AtomicUsize = AtomicUsize::new(0);

/// Runs `work` on its own task so that a panic in it (LanceDB panics on some damaged
/// manifests: "range end index … out of range") is an error naming it, not the end of the
/// process. Its errors come without LanceDB's repeated source locations (`plain_damage`).
pub(crate) async fn caught<T: Send + 'static>(
    work: impl std::future::Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    CATCHING.fetch_add(1, Ordering::SeqCst);
    let outcome = tokio::spawn(work).await;
    CATCHING.fetch_sub(1, Ordering::SeqCst);
    let failed = match outcome {
        Ok(Ok(done)) => return Ok(done),
        Ok(Err(e)) => e,
        Err(e) if e.is_panic() => {
            let payload = e.into_panic();
            let said = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("no message");
            anyhow::anyhow!("the file could not be read (LanceDB stopped: {said})")
        }
        Err(e) => e.into(),
    };
    match damage_in(&failed) {
        Some(damaged) => Err(damaged.into()),
        None => Err(anyhow::anyhow!("{}", plain_damage(&format!("{failed:#}")))),
    }
}

/// Keeps off the terminal the panics `caught` turns into errors, and those of LanceDB's own
/// reading tasks on damaged files (LanceDB hands their message back in its error: "task 72
/// panicked with message …", which Quire reports with the way out). Other panics go to the hook
/// set before.
pub fn quiet_caught_panics() {
    let before = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if CATCHING.load(Ordering::SeqCst) == 0 && !in_lance(info) {
            before(info);
        }
    }));
}

/// Whether a panic happened in LanceDB's code: its location is in one of LanceDB's crates
/// (`lance-encoding-14.0.2/src/…`, as the cargo registry names them), or, where the panic is
/// in a crate LanceDB called (`bytes` slicing a nonsense length), a frame of the stack is
/// LanceDB's (`lance_encoding::…`). A stripped binary names no frames: its panics print.
fn in_lance(info: &std::panic::PanicHookInfo) -> bool {
    let crate_dir = |part: &str| part == "lance" || part.starts_with("lance-") || part.starts_with("lancedb-");
    if info.location().is_some_and(|l| l.file().split(['/', '\\']).any(crate_dir)) {
        return true;
    }
    std::backtrace::Backtrace::force_capture().to_string().lines().any(|line| {
        let symbol = line.trim_start().split_once(": ").map_or("", |(_, symbol)| symbol);
        symbol.trim_start_matches('<').starts_with("lance")
    })
}

/// The manifest file of the newest version in a table's folder. LanceDB names them by version
/// (`7.manifest`) or, in its newer scheme, by `u64::MAX - version` so the newest sorts first.
fn newest_manifest(table_dir: &Path) -> Result<Option<PathBuf>> {
    let versions = table_dir.join("_versions");
    let Ok(entries) = std::fs::read_dir(&versions) else { return Ok(None) };
    let mut newest: Option<(u64, PathBuf)> = None;
    for entry in entries {
        let path = entry?.path();
        let Some(n) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".manifest")) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        let version = if n > u64::MAX / 2 { u64::MAX - n } else { n };
        if newest.as_ref().is_none_or(|(v, _)| version > *v) {
            newest = Some((version, path));
        }
    }
    Ok(newest.map(|(_, p)| p))
}

/// Moves `path` (a file or a folder) into the folder `into` (or, for a folder, to `into`).
fn move_aside(path: &Path, into: &Path) -> Result<()> {
    let target = if path.is_dir() {
        std::fs::create_dir_all(into.parent().unwrap_or(into))?;
        into.to_path_buf()
    } else {
        std::fs::create_dir_all(into)?;
        into.join(path.file_name().context("a file without a name")?)
    };
    std::fs::rename(path, &target)
        .with_context(|| format!("cannot move the damaged {} to {}", path.display(), target.display()))
}
