//! What reading one file may cost: its size, what an archive may inflate to, and the memory a
//! loader child process is allowed (passed to it through the environment).

/// What the loaders can read, counted up whenever it grows (a format, an encoding, a kind of
/// page more). A file that failed for its own bytes is stamped with it and is read again by
/// newer loaders, not taken as failing for good. 2: JBIG2, JPEG 2000 and CCITT group 3 scans,
/// scans inside form XObjects, scans turned by the matrix that places them.
pub const READERS_VERSION: u32 = 2;

/// Files above this size are refused before they are read (the ingestion must stay bounded).
pub const MAX_FILE_BYTES: u64 = 128 * 1024 * 1024;
/// The most one archive entry may inflate to.
pub const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;
/// The most all the entries read from one archive may inflate to together.
pub const MAX_ARCHIVE_TEXT_BYTES: u64 = 256 * 1024 * 1024;
/// Set (to the file's path) in the environment of a loader child process.
pub(crate) const WORKER_ENV: &str = "QUIRE_LOADER_WORKER";
/// What a loader child writes to stderr each time it has read a scanned page, before
/// `<page>/<pages> <the page's text as a JSON string>` and a new line.
pub(crate) const PAGE_READ: &str = "quire-loader: page read ";
/// The child's memory limit in MB, passed through the environment.
pub(crate) const MEMORY_ENV: &str = "QUIRE_LOADER_MEMORY_MB";

/// In a loader child: tells the parent page `page` of `pages` was read, and its text (its time
/// limit starts again, the front end can show how far the file is, and the engine keeps the
/// text so that the scan resumes from here if it is stopped).
pub(crate) fn report_page_read(page: u32, pages: u32, text: &str) {
    if std::env::var_os(WORKER_ENV).is_some() {
        if crate::isolate::parent_is_gone() {
            std::process::exit(1);
        }
        let text = serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into());
        eprintln!("{PAGE_READ}{page}/{pages} {text}");
    }
}

/// The page, the page count and the page's text of a child's progress line, if `line` is one.
pub(crate) fn page_read(line: &str) -> Option<(u32, u32, String)> {
    let (at, text) = line.strip_prefix(PAGE_READ)?.trim_end().split_once(' ')?;
    let (page, pages) = at.split_once('/')?;
    Some((page.parse().ok()?, pages.parse().ok()?, serde_json::from_str(text).ok()?))
}

/// What a loader may allocate, in words: the child's allowance, or the machine's memory.
pub(crate) fn allowance() -> String {
    match std::env::var(MEMORY_ENV).ok().filter(|_| std::env::var_os(WORKER_ENV).is_some()) {
        Some(mb) => format!("the {mb} MB allowed"),
        None => "the memory available".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_line_says_its_page_and_nothing_else_does() {
        assert_eq!(
            page_read("quire-loader: page read 3/59 \"Warranty card\\nSeven years\""),
            Some((3, 59, "Warranty card\nSeven years".into()))
        );
        assert_eq!(page_read("quire-loader: page read 3/59"), None);
        assert_eq!(page_read("quire-loader: page read 3 of 59"), None);
        assert_eq!(page_read("thread 'main' panicked at page read 3/59"), None);
    }
}
