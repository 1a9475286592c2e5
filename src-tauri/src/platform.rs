//! What differs per operating system, in one place.

use std::path::Path;

use anyhow::{Context, Result};

/// Opens a document of the collection with the program the system associates with it. Only a
/// regular file of a kind Quire indexes, still at the place it was indexed from (not swapped
/// for a link to somewhere else since), so the opener never runs a program or a script.
pub fn open_document(path: &Path) -> Result<()> {
    anyhow::ensure!(path.is_absolute(), "{} is not an absolute path", path.display());
    let meta = std::fs::symlink_metadata(path).with_context(|| {
        format!("{} is no longer there: it was moved or deleted since it was indexed", path.display())
    })?;
    anyhow::ensure!(meta.is_file(), "{} is no longer a regular file; it is not opened", path.display());
    anyhow::ensure!(
        quire_ingest::is_supported(path),
        "{} is not a document kind Quire indexes; it is not opened",
        path.display()
    );
    open::that_detached(path).with_context(|| format!("the system could not open {}", path.display()))
}
