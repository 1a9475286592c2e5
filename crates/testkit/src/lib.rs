//! Helpers for tests: the sample documents (`../shared/sample-docs` beside the repository, or
//! `QUIRE_SAMPLE_DOCS`) and the installed models. Tests never write into the shared folder: they
//! copy what they need into a temporary folder first.

use std::path::{Path, PathBuf};

/// The shared sample documents. Panics with instructions when they are not there.
/// Found from the test's working folder (cargo runs tests in their package's folder), walking up
/// to the folder that holds `shared/`, not from a path baked in at compile time: the build is
/// shared between checkouts in different places.
pub fn sample_docs() -> PathBuf {
    if let Some(dir) = std::env::var_os("QUIRE_SAMPLE_DOCS") {
        return PathBuf::from(dir);
    }
    let cwd = std::env::current_dir().expect("current folder");
    let found = cwd.ancestors().map(|a| a.join("shared/sample-docs")).find(|d| d.is_dir());
    let dir = found.unwrap_or_else(|| {
        panic!("sample documents not found in shared/sample-docs above {}: set QUIRE_SAMPLE_DOCS", cwd.display())
    });
    dir.canonicalize().expect("canonical sample-docs path")
}

/// Copies `names` (files or folders, relative to the sample documents) into a new temporary folder.
pub fn copy_samples(names: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    for name in names {
        copy_tree(&sample_docs().join(name), &tmp.path().join(name));
    }
    tmp
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::copy(from, to).unwrap();
        // The shared files are read-only; copies must be writable so tests can edit or delete them.
        let mut perms = std::fs::metadata(to).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(to, perms).unwrap();
    }
}

/// An installed model's location; panics naming the command that fetches it.
pub fn model(model: &quire_models::KnownModel) -> PathBuf {
    assert!(model.is_installed(), "{}", quire_models::missing_model_error(model));
    model.location().unwrap()
}
