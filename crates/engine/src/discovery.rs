//! Which files a person's paths name: folders expanded into the supported files inside them,
//! links followed only where they stay inside the folder given, and every path that cannot be
//! read named with its reason.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Ends the reason a link out of an added folder was left out; a front end that can follow
/// such links says how after it.
pub const LINK_NOT_FOLLOWED: &str = "outside the folder; not followed";

/// The absolute, link-free path a document is known by (absolute only, for a file that is gone).
pub(crate) fn canonical(path: &Path) -> PathBuf {
    dunce::canonicalize(path).or_else(|_| std::path::absolute(path)).unwrap_or_else(|_| path.to_path_buf())
}

/// Expands folders into the supported files inside them (recursively, skipping hidden entries,
/// editors' temporary files, and links to folders, so link loops cannot trap the walk). A link
/// inside a folder that leads out of it is not followed unless `follow_links` is set (a link to
/// `/etc/shadow` or to someone else's notes is not the folder the user gave). Paths that do not
/// exist, broken or looping links, links out of their folder, unreadable folders and special
/// files (devices, pipes, sockets) come back as failures, with the reason.
pub fn discover_files(paths: &[PathBuf], follow_links: bool) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let mut files = Vec::new();
    let mut missing = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => {
                let root = canonical(path);
                walk(path, &root, follow_links, &mut files, &mut missing, &mut Default::default())
            }
            Ok(m) if m.is_file() => files.push(path.clone()),
            // A device, pipe or socket (/dev/zero, a FIFO): reading it could never end.
            Ok(m) => missing.push((path.clone(), not_regular(&m.file_type()))),
            Err(e) => missing.push((path.clone(), format!("cannot read: {e}"))),
        }
    }
    files.sort();
    files.dedup();
    (files, missing)
}

fn not_regular(file_type: &std::fs::FileType) -> String {
    format!("not a regular file or folder ({}); not read", quire_ingest::special_file_kind(file_type))
}

/// Adds the supported files under `dir` to `files`. Links are followed when they stay inside
/// `root`, or when `follow_links` says so; a link out of it, to a file or a folder, is reported
/// otherwise. `visited` holds the folders already walked (by their real path), so a link back
/// to one of them ends there.
fn walk(
    dir: &Path,
    root: &Path,
    follow_links: bool,
    files: &mut Vec<PathBuf>,
    errors: &mut Vec<(PathBuf, String)>,
    visited: &mut HashSet<PathBuf>,
) {
    if !visited.insert(canonical(dir)) {
        return;
    }
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => return errors.push((dir.to_path_buf(), format!("cannot read the folder: {e}"))),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(file_type) = entry.file_type() else { continue };
        if file_type.is_dir() {
            walk(&path, root, follow_links, files, errors, visited);
            continue;
        }
        if file_type.is_file() {
            if quire_ingest::is_supported(&path) {
                files.push(path);
            }
            continue;
        }
        if !file_type.is_symlink() {
            if quire_ingest::is_supported(&path) {
                errors.push((path, not_regular(&file_type)));
            }
            continue;
        }
        // A link: to a file (of a supported kind) or to a folder, whatever its own name.
        let target = match dunce::canonicalize(&path) {
            Ok(target) => target,
            Err(e) => {
                if quire_ingest::is_supported(&path) {
                    errors.push((path, format!("a link that leads nowhere or to itself: {e}")));
                }
                continue;
            }
        };
        let metadata = std::fs::metadata(&target);
        let is_dir = metadata.as_ref().is_ok_and(|m| m.is_dir());
        if !is_dir && !quire_ingest::is_supported(&path) {
            continue;
        }
        if !follow_links && !target.starts_with(root) {
            let what = if is_dir { "a link to the folder" } else { "a link to" };
            errors.push((path, format!("{what} {}, {LINK_NOT_FOLLOWED}", target.display())));
            continue;
        }
        match metadata {
            Ok(m) if m.is_file() => files.push(path),
            Ok(m) if m.is_dir() => walk(&path, root, follow_links, files, errors, visited),
            Ok(m) => errors.push((path, not_regular(&m.file_type()))),
            Err(e) => errors.push((path, format!("a link that leads nowhere or to itself: {e}"))),
        }
    }
}
