//! A collection's health: its tables checked, and mended with what they lost indexed again
//! from the documents on disk. The one way both front ends do it (`quire check` / `quire
//! repair`, the app's Check and Repair).

use std::path::PathBuf;

use anyhow::Result;

use crate::{Cancel, Engine, EngineConfig, Event, IngestReport};
pub use quire_index::{plural, Mend, TableCheck, TableRepair};

/// What a check found: each table's state, and the documents damaged entries belong to.
pub struct LibraryCheck {
    pub tables: Vec<TableCheck>,
    /// The documents that hold entries which did not read back as written: their paths, or
    /// where the list of documents cannot say (damaged itself, or the library locked), their ids.
    pub damaged_documents: Vec<String>,
}

impl LibraryCheck {
    /// Whether every table reads whole.
    pub fn whole(&self) -> bool {
        self.tables.iter().all(|c| c.damage.is_none())
    }

    /// What the check found, a sentence a line.
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.tables.iter().map(TableCheck::describe).collect();
        if !self.damaged_documents.is_empty() {
            lines.push(format!(
                "Damaged {}: {}.",
                quire_index::plural(self.damaged_documents.len(), "document"),
                self.damaged_documents.join(", ")
            ));
        }
        let unsummed: usize = self.tables.iter().map(|c| c.unsummed_rows).sum();
        if unsummed > 0 {
            lines.push(format!(
                "{unsummed} {} written by an older Quire carry no checksum and were checked only as far as they read; \
                 they get one when their documents are indexed again.",
                quire_index::plural(unsummed, "entry")
            ));
        }
        lines
    }
}

/// Reads every table of the collection `config` names whole, checks each entry against the
/// checksum it was written with, and loads its indexes. Needs no open engine: a collection too
/// damaged to open can be checked. The key is used, where it can be had, only to name the
/// damaged documents.
pub async fn check(config: &EngineConfig) -> Result<LibraryCheck> {
    let tables = quire_index::check_tables(&config.data_dir).await?;
    let mut ids: Vec<String> = tables.iter().flat_map(|t| t.damaged_documents.iter().cloned()).collect();
    ids.sort();
    ids.dedup();
    let damaged_documents = if ids.is_empty() { Vec::new() } else { named(config, &ids).await };
    Ok(LibraryCheck { tables, damaged_documents })
}

/// The documents `ids` by their paths, where the key opens them.
async fn named(config: &EngineConfig, ids: &[String]) -> Vec<String> {
    let dir = config.data_dir.clone();
    let keys = config.keys.clone();
    let protection = if quire_vault::Vault::exists(&dir) {
        tokio::task::spawn_blocking(move || quire_vault::Vault::unlock(&dir, &keys).ok().map(|(_, p)| p))
            .await
            .ok()
            .flatten()
    } else {
        Some(quire_index::Protection::Plain)
    };
    let paths = match protection {
        Some(p) => quire_index::paths_of_documents(&config.data_dir, &p, ids).await.unwrap_or_default(),
        None => Default::default(),
    };
    ids.iter()
        .map(|id| paths.get(id).cloned().unwrap_or_else(|| format!("a document whose name cannot be read (id {id})")))
        .collect()
}

/// An error as a person reads it: LanceDB's repeated source locations cut and, where it is
/// damage to the library's files (`quire_index::Damaged`), a line that says so.
pub fn explained(e: &anyhow::Error) -> String {
    quire_index::explained(e)
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
    /// The documents that held damaged entries (named by the check before the repair).
    pub damaged_documents: Vec<String>,
    /// The library checked again after the repair.
    pub checks: LibraryCheck,
}

impl Repaired {
    /// Whether every table reads whole now.
    pub fn whole(&self) -> bool {
        self.checks.whole()
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
    let damaged_documents = check(&config).await?.damaged_documents;
    let tables = quire_index::repair_tables(&config.data_dir).await?;
    let documents_lost = tables.iter().any(|r| r.table == "documents" && r.mend != Mend::Sound);
    let engine = Engine::open(config.clone()).await?;
    let (forgotten, report) = engine.reindex_after_repair(more, documents_lost, on_event, cancel).await?;
    let listing_lost = documents_lost && more.is_empty() && engine.documents().await?.is_empty();
    let checks = check(&config).await?;
    Ok((engine, Repaired { tables, forgotten, report, listing_lost, damaged_documents, checks }))
}
