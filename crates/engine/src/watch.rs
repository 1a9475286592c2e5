//! Following watched folders: the OS's file events (notify), debounced so a burst (an editor's
//! save, a folder copied in) arrives as one set of changed paths, with renames paired by file id.
//! What changed is handed to `Engine::sync_paths`, which looks at the files as they are now; so
//! the order and kind of the events do not matter, only which paths they touched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use notify_debouncer_full::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{new_debouncer, DebounceEventResult, Debouncer, RecommendedCache};
use tokio::sync::mpsc;

/// How long a path must be quiet before its change is reported.
pub const DEBOUNCE: Duration = Duration::from_millis(500);

pub struct FolderWatcher {
    debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
    changes: mpsc::UnboundedReceiver<Vec<PathBuf>>,
    errors: mpsc::UnboundedReceiver<String>,
    folders: Vec<PathBuf>,
}

impl FolderWatcher {
    /// Starts watching nothing; add folders with `watch`.
    pub fn new(debounce: Duration) -> Result<FolderWatcher> {
        let (tx, changes) = mpsc::unbounded_channel();
        let (err_tx, errors) = mpsc::unbounded_channel();
        let debouncer = new_debouncer(debounce, None, move |result: DebounceEventResult| match result {
            Ok(events) => {
                let paths: Vec<PathBuf> = events.into_iter().flat_map(|e| e.event.paths).collect();
                if !paths.is_empty() {
                    let _ = tx.send(paths);
                }
            }
            Err(errors) => {
                for e in errors {
                    let _ = err_tx.send(e.to_string());
                }
            }
        })
        .context("cannot start watching folders")?;
        Ok(FolderWatcher { debouncer, changes, errors, folders: Vec::new() })
    }

    /// Follows `folder` and everything under it.
    pub fn watch(&mut self, folder: &Path) -> Result<()> {
        let folder = std::fs::canonicalize(folder).with_context(|| format!("cannot watch {}", folder.display()))?;
        anyhow::ensure!(folder.is_dir(), "{} is not a folder", folder.display());
        if self.folders.contains(&folder) {
            return Ok(());
        }
        self.debouncer
            .watch(&folder, RecursiveMode::Recursive)
            .with_context(|| format!("cannot watch {} (too many folders for the OS's watch limit?)", folder.display()))?;
        self.folders.push(folder);
        Ok(())
    }

    pub fn unwatch(&mut self, folder: &Path) -> Result<()> {
        let folder = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
        if let Some(i) = self.folders.iter().position(|f| *f == folder) {
            self.folders.remove(i);
            self.debouncer.unwatch(&folder)?;
        }
        Ok(())
    }

    pub fn folders(&self) -> &[PathBuf] {
        &self.folders
    }

    /// The next set of changed paths (every set already waiting is merged in), without hidden
    /// files and editors' temporaries. `None` once the watcher has stopped.
    pub async fn next_changes(&mut self) -> Option<Vec<PathBuf>> {
        loop {
            let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
            paths.extend(self.changes.recv().await?);
            while let Ok(more) = self.changes.try_recv() {
                paths.extend(more);
            }
            let relevant: Vec<PathBuf> = paths.into_iter().filter(|p| !self.is_ignored(p)).collect();
            if !relevant.is_empty() {
                return Some(relevant);
            }
        }
    }

    /// Errors the OS reported since the last call (a full event queue, a folder that vanished).
    pub fn take_errors(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(e) = self.errors.try_recv() {
            out.push(e);
        }
        out
    }
}

impl FolderWatcher {
    /// Paths no change to which can matter: editors' temporary files and anything hidden inside
    /// a watched folder (the folder itself may sit under a hidden one).
    fn is_ignored(&self, path: &Path) -> bool {
        let inside = self.folders.iter().find_map(|f| path.strip_prefix(f).ok()).unwrap_or(path);
        is_ignored(inside)
    }
}

fn is_ignored(relative: &Path) -> bool {
    quire_ingest::is_editor_temporary(relative)
        || relative.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporaries_and_hidden_paths_are_ignored() {
        for p in ["~$report.docx", ".notes.md.swp", "notes.md~", ".git/index", "x.md.part", ".~lock.a.docx#", "a/#x.md#"] {
            assert!(is_ignored(Path::new(p)), "{p}");
        }
        for p in ["notes.md", "sub", "sub/report.docx"] {
            assert!(!is_ignored(Path::new(p)), "{p}");
        }
    }
}
