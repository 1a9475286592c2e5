//! What reading one file may cost: its size, what an archive may inflate to, and the memory a
//! loader child process is allowed (passed to it through the environment).

/// Files above this size are refused before they are read (the ingestion must stay bounded).
pub const MAX_FILE_BYTES: u64 = 128 * 1024 * 1024;
/// The most one archive entry may inflate to.
pub const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;
/// The most all the entries read from one archive may inflate to together.
pub const MAX_ARCHIVE_TEXT_BYTES: u64 = 256 * 1024 * 1024;
/// Set (to the file's path) in the environment of a loader child process.
pub(crate) const WORKER_ENV: &str = "QUIRE_LOADER_WORKER";
/// The child's memory limit in MB, passed through the environment.
pub(crate) const MEMORY_ENV: &str = "QUIRE_LOADER_MEMORY_MB";

/// What a loader may allocate, in words: the child's allowance, or the machine's memory.
pub(crate) fn allowance() -> String {
    match std::env::var(MEMORY_ENV).ok().filter(|_| std::env::var_os(WORKER_ENV).is_some()) {
        Some(mb) => format!("the {mb} MB allowed"),
        None => "the memory available".into(),
    }
}
