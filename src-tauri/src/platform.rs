//! What differs per operating system, in one place.

use std::path::Path;

use anyhow::{Context, Result};

/// Opens a document with the program the system associates with it.
pub fn open_document(path: &Path) -> Result<()> {
    anyhow::ensure!(path.is_file(), "{} is no longer there: it was moved or deleted since it was indexed", path.display());
    open::that_detached(path).with_context(|| format!("the system could not open {}", path.display()))
}
