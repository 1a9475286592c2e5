//! What differs per operating system, in one place: opening a cited document with the person's
//! own viewer, at the cited page where the viewer can be told one (`linux.rs`; elsewhere the
//! system opener, `other.rs`). (The allocator's set-up is the engine's: `quire_engine::allocator`.)

use std::path::Path;

use anyhow::{Context, Result};

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as os;
#[cfg(not(target_os = "linux"))]
mod other;
#[cfg(not(target_os = "linux"))]
use other as os;

/// How a document was opened: by which program, and whether it was sent to the page.
pub struct Opened {
    pub program: String,
    pub at_page: bool,
}

/// Opens a document of the collection with the program the system associates with it, at
/// `page` where that program takes one. Only a regular file of a kind Quire indexes, still at
/// the place it was indexed from (not swapped for a link to somewhere else since), so the opener
/// never runs a program or a script.
pub fn open_document(path: &Path, page: Option<u32>) -> Result<Opened> {
    anyhow::ensure!(path.is_absolute(), "{} is not an absolute path", path.display());
    let meta = std::fs::symlink_metadata(path).with_context(|| {
        format!("{} is no longer there: it was moved or deleted since it was indexed", path.display())
    })?;
    anyhow::ensure!(meta.is_file(), "{} is no longer a regular file; it is not opened", path.display());
    anyhow::ensure!(
        quire_engine::is_supported(path),
        "{} is not a document kind Quire indexes; it is not opened",
        path.display()
    );
    os::open(path, page)
}
