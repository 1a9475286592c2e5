//! Why a file could not be read, in words a person can act on.

use crate::limits::MAX_FILE_BYTES;

/// The words of `LoadError::NeedsOcr`, which front ends recognise to offer the OCR models.
pub const NEEDS_OCR: &str =
    "this is a scan (pictures of pages): reading it needs the OCR model, which is not installed";

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("unsupported file type (Quire reads .pdf, .md, .markdown, .txt, .text, .html, .htm, .docx, .epub, and scans as .png, .jpg, .jpeg, .tif, .tiff, .webp)")]
    Unsupported,
    #[error("cannot read the file: {0}")]
    Io(#[from] std::io::Error),
    #[error("the file is empty")]
    Empty,
    #[error("the file is {0} bytes, over the {MAX_FILE_BYTES}-byte limit")]
    TooLarge(u64),
    #[error("this is a binary file, not text")]
    Binary,
    #[error("not a regular file ({0}); not read")]
    NotRegular(&'static str),
    /// In plain words first; the reader's own words after, for whoever looks further.
    #[error("the PDF is damaged or incomplete and cannot be read (the PDF reader says: {0})")]
    Pdf(String),
    #[error("the PDF is encrypted with a password")]
    Encrypted,
    #[error("the PDF has no text Quire can read: no text layer, and no scanned page images (pages drawn as shapes are not rendered)")]
    NoText,
    /// A scan, and the OCR models are not installed.
    #[error("{NEEDS_OCR}")]
    NeedsOcr,
    #[error("OCR failed on the scan: {0}")]
    Ocr(String),
    #[error("the image cannot be read: {0}")]
    Image(String),
    #[error("the {kind} file is damaged or not a real {kind} file (the reader says: {reason})")]
    Archive { kind: &'static str, reason: String },
    #[error("the {kind} file is password-protected or encrypted")]
    ArchiveEncrypted { kind: &'static str },
    #[error("{part} inside the file expands to more than {limit} bytes (a zip bomb?)")]
    ExpandsTooFar { part: String, limit: u64 },
    #[error("not readable HTML: {0}")]
    Html(String),
    #[error("reading took longer than {0} s: the file was skipped (a parser stuck on it?)")]
    TimedOut(f64),
    #[error("reading it needed more than {0}: the file was skipped")]
    OutOfMemory(String),
    #[error("the reader crashed on this file: {0}")]
    Crashed(String),
    /// A failure reported by a loader child process, in its words.
    #[error("{0}")]
    Worker(String),
}
