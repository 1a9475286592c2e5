//! macOS and Windows: the system opener (`open`, ShellExecute), which cannot be told a page.

use std::path::Path;

use anyhow::{Context, Result};

use super::Opened;

pub(super) fn open(path: &Path, _page: Option<u32>) -> Result<Opened> {
    open::that_detached(path).with_context(|| format!("the system could not open {}", path.display()))?;
    Ok(Opened { program: "the system's viewer".into(), at_page: false })
}
