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
/// `<page>/<pages>` and a new line.
pub(crate) const PAGE_READ: &str = "quire-loader: page read ";
/// The child's memory limit in MB, passed through the environment.
pub(crate) const MEMORY_ENV: &str = "QUIRE_LOADER_MEMORY_MB";

/// In a loader child: tells the parent page `page` of `pages` was read (its time limit starts
/// again, and the front end can show how far the file is).
pub(crate) fn report_page_read(page: u32, pages: u32) {
    if std::env::var_os(WORKER_ENV).is_some() {
        if crate::isolate::parent_is_gone() {
            std::process::exit(1);
        }
        eprintln!("{PAGE_READ}{page}/{pages}");
    }
}

/// The page and the page count of a child's progress line, if `line` is one.
pub(crate) fn page_read(line: &str) -> Option<(u32, u32)> {
    let (page, pages) = line.strip_prefix(PAGE_READ)?.trim_end().split_once('/')?;
    Some((page.parse().ok()?, pages.parse().ok()?))
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
        assert_eq!(page_read("quire-loader: page read 3/59"), Some((3, 59)));
        assert_eq!(page_read("quire-loader: page read 3 of 59"), None);
        assert_eq!(page_read("thread 'main' panicked at page read 3/59"), None);
    }
}
