//! A collection's health: its tables checked, and mended with what they lost indexed again
//! from the documents on disk. The one way both front ends do it (`quire check` / `quire
//! repair`, the app's Check and Repair).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::{Cancel, Engine, EngineConfig, Event, IngestReport};
pub use quire_index::{Mend, TableCheck, TableRepair};

/// Reads every table of the collection in `data_dir` whole (and loads its indexes): one
/// `TableCheck` per table. Needs no key and no open engine: a collection too damaged to open
/// can be checked.
pub async fn check(data_dir: &Path) -> Result<Vec<TableCheck>> {
    quire_index::check_tables(data_dir).await
}

/// An error as a person reads it: LanceDB's repeated source locations cut and, where it looks
/// like damaged files, how to find and mend them.
pub fn explained(e: &anyhow::Error) -> String {
    quire_index::explained(&format!("{e:#}"))
}

/// What a repair did.
pub struct Repaired {
    pub tables: Vec<TableRepair>,
    /// Documents that lost their chunks or their listing and were indexed again.
    pub forgotten: usize,
    /// The ingestion that indexed them (and `more`) again.
    pub report: IngestReport,
    /// The list of documents was lost and nothing named them again: the person has to give
    /// the folders (`more`).
    pub listing_lost: bool,
    /// The tables checked again after the repair.
    pub checks: Vec<TableCheck>,
}

impl Repaired {
    /// Whether every table reads whole now.
    pub fn whole(&self) -> bool {
        self.checks.iter().all(|c| c.damage.is_none())
    }
}

/// Mends the collection `config` names: each damaged table goes back to the newest version
/// that reads whole (or starts empty), damaged indexes are dropped, and the collection is
/// opened and what it lost indexed again from the files still on disk and from `more`.
/// No engine may hold the collection open meanwhile (the caller closes its own). Returns the
/// engine, open on the mended collection.
pub async fn repair(
    config: EngineConfig,
    more: &[PathBuf],
    on_event: &mut (dyn FnMut(Event) + Send),
    cancel: &Cancel,
) -> Result<(Engine, Repaired)> {
    let dir = config.data_dir.clone();
    let tables = quire_index::repair_tables(&dir).await?;
    let documents_lost = tables.iter().any(|r| r.table == "documents" && r.mend != Mend::Sound);
    let engine = Engine::open(config).await?;
    let (forgotten, report) = engine.reindex_after_repair(more, documents_lost, on_event, cancel).await?;
    let listing_lost = documents_lost && more.is_empty() && engine.documents().await?.is_empty();
    let checks = check(&dir).await?;
    Ok((engine, Repaired { tables, forgotten, report, listing_lost, checks }))
}
