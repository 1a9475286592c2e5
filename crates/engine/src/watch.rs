//! Following watched folders: the OS's file events (notify), debounced so a burst (an editor's
//! save, a folder copied in) arrives as one set of changed paths, with renames paired by file id.
//! What changed is handed to `Engine::sync_paths`, which looks at the files as they are now; so
//! the order and kind of the events do not matter, only which paths they touched.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use notify_debouncer_full::notify::event::{AccessKind, AccessMode, EventKind};
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
    follow_links: bool,
    /// Changed paths left out (links out of the watched folders), for `take_errors`.
    skipped: Vec<String>,
}

impl FolderWatcher {
    /// Starts watching nothing; add folders with `watch`.
    pub fn new(debounce: Duration) -> Result<FolderWatcher> {
        let (tx, changes) = mpsc::unbounded_channel();
        let (err_tx, errors) = mpsc::unbounded_channel();
        let debouncer = new_debouncer(debounce, None, move |result: DebounceEventResult| match result {
            Ok(events) => {
                let paths: Vec<PathBuf> =
                    events.into_iter().filter(|e| may_change(&e.event.kind)).flat_map(|e| e.event.paths).collect();
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
        Ok(FolderWatcher { debouncer, changes, errors, folders: Vec::new(), follow_links: false, skipped: Vec::new() })
    }

    /// Whether a link that appears in a watched folder and leads out of every watched folder is
    /// followed (off by default: it is left out and reported by `take_errors`), as
    /// `EngineConfig::follow_links` decides for the folder's first scan.
    pub fn follow_links(&mut self, follow: bool) {
        self.follow_links = follow;
    }

    /// Follows `folder` and everything under it.
    pub fn watch(&mut self, folder: &Path) -> Result<()> {
        let folder = dunce::canonicalize(folder).with_context(|| format!("cannot watch {}", folder.display()))?;
        anyhow::ensure!(folder.is_dir(), "{} is not a folder", folder.display());
        if self.folders.contains(&folder) {
            return Ok(());
        }
        self.debouncer.watch(&folder, RecursiveMode::Recursive).with_context(|| {
            format!("cannot watch {} (too many folders for the OS's watch limit?)", folder.display())
        })?;
        self.folders.push(folder);
        Ok(())
    }

    pub fn unwatch(&mut self, folder: &Path) -> Result<()> {
        let folder = dunce::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
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
            let relevant: Vec<PathBuf> =
                paths.into_iter().filter(|p| !self.is_ignored(p) && !self.leads_out(p)).collect();
            if !relevant.is_empty() {
                return Some(relevant);
            }
        }
    }

    /// Errors the OS reported since the last call (a full event queue, a folder that vanished).
    pub fn take_errors(&mut self) -> Vec<String> {
        let mut out = std::mem::take(&mut self.skipped);
        while let Ok(e) = self.errors.try_recv() {
            out.push(e);
        }
        out
    }
}

impl FolderWatcher {
    /// Whether `path` is a link out of every watched folder that is not to be followed (noted
    /// for `take_errors`).
    fn leads_out(&mut self, path: &Path) -> bool {
        if self.follow_links || !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
            return false;
        }
        let Ok(target) = dunce::canonicalize(path) else { return false };
        if self.folders.iter().any(|f| target.starts_with(f)) {
            return false;
        }
        // Kept until read, within a bound (a front end that never reads them must not grow).
        if self.skipped.len() < 100 {
            self.skipped.push(format!(
                "{}: a link to {}, outside the watched folders; not followed",
                path.display(),
                target.display()
            ));
        }
        true
    }

    /// Paths no change to which can matter: editors' temporary files and anything hidden inside
    /// a watched folder (the folder itself may sit under a hidden one).
    fn is_ignored(&self, path: &Path) -> bool {
        let inside = self.folders.iter().find_map(|f| path.strip_prefix(f).ok()).unwrap_or(path);
        is_ignored(inside)
    }
}

/// Whether an event can mean that a file changed. A file opened or read is not a change: were it
/// one, Quire's own reading of a changed file would report it again, every debounce, for ever.
fn may_change(kind: &EventKind) -> bool {
    !matches!(kind, EventKind::Access(access) if *access != AccessKind::Close(AccessMode::Write))
}

fn is_ignored(relative: &Path) -> bool {
    quire_ingest::is_editor_temporary(relative)
        || relative.components().any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn links_out_of_the_watched_folders_are_left_out_and_reported() {
        let (watched, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(outside.path().join("secret.md"), "not yours").unwrap();
        std::fs::write(watched.path().join("mine.md"), "yours").unwrap();
        let out_link = watched.path().join("out.md");
        let in_link = watched.path().join("in.md");
        std::os::unix::fs::symlink(outside.path().join("secret.md"), &out_link).unwrap();
        std::os::unix::fs::symlink(watched.path().join("mine.md"), &in_link).unwrap();
        let mut watcher = FolderWatcher::new(DEBOUNCE).unwrap();
        watcher.watch(watched.path()).unwrap();
        let out_link = dunce::canonicalize(watched.path()).unwrap().join("out.md");
        assert!(watcher.leads_out(&out_link));
        assert!(!watcher.leads_out(&in_link));
        assert!(!watcher.leads_out(&watched.path().join("mine.md")));
        let errors = watcher.take_errors();
        assert!(
            errors.len() == 1 && errors[0].contains("out.md") && errors[0].contains("outside the watched folders"),
            "{errors:?}"
        );
        watcher.follow_links(true);
        assert!(!watcher.leads_out(&out_link), "followed when asked");
    }

    #[tokio::test]
    async fn reading_a_file_is_not_a_change_writing_it_is() {
        let watched = tempfile::tempdir().unwrap();
        let file = watched.path().join("notes.md");
        std::fs::write(&file, "first").unwrap();
        let debounce = Duration::from_millis(200);
        let mut watcher = FolderWatcher::new(debounce).unwrap();
        watcher.watch(watched.path()).unwrap();
        for _ in 0..3 {
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "first");
        }
        let quiet = tokio::time::timeout(debounce * 5, watcher.next_changes()).await;
        assert!(quiet.is_err(), "reading reported as a change: {quiet:?}");
        std::fs::write(&file, "second").unwrap();
        let changed = tokio::time::timeout(Duration::from_secs(10), watcher.next_changes()).await;
        let changed = changed.expect("a write reported").expect("the watcher running");
        assert!(changed.iter().any(|p| p.ends_with("notes.md")), "{changed:?}");
    }

    #[test]
    fn temporaries_and_hidden_paths_are_ignored() {
        for p in
            ["~$report.docx", ".notes.md.swp", "notes.md~", ".git/index", "x.md.part", ".~lock.a.docx#", "a/#x.md#"]
        {
            assert!(is_ignored(Path::new(p)), "{p}");
        }
        for p in ["notes.md", "sub", "sub/report.docx"] {
            assert!(!is_ignored(Path::new(p)), "{p}");
        }
    }
}
