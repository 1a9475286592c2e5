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
    /// Every page failed; the first one's reason.
    #[error("no page of the PDF could be read (page {page}: {reason})")]
    NoPageRead { page: u32, reason: String },
    /// A scan, and the OCR models are not installed.
    #[error("{NEEDS_OCR}")]
    NeedsOcr,
    #[error("OCR failed on the scan: {0}")]
    Ocr(String),
    /// OCR read the image and found no text on it (a photo, a drawing).
    #[error("no text was found on the image (a photo or a drawing?)")]
    NoTextInImage,
    /// Every page is a scan and OCR found no text on any (blank pages, pictures, or images
    /// whose data is damaged and decodes to noise).
    #[error("OCR read the scanned pages and found no text on them (blank pages, pictures, or damaged images?)")]
    NoTextOnScans,
    #[error("the image is {width}×{height} pixels, over the {limit} million Quire reads: scale it down to read it")]
    ImageTooLarge { width: u32, height: u32, limit: u64 },
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
    /// A failure reported by a loader child process, in its words, and whether it is lasting.
    #[error("{reason}")]
    Worker { reason: String, lasting: bool },
}

impl LoadError {
    /// Whether the failure comes from the file's own bytes, so reading the same bytes again
    /// fails the same way: not a missing model, a timeout, memory, a crash of the reader or an
    /// error reading the disk, which another time may not repeat.
    pub fn is_lasting(&self) -> bool {
        match self {
            LoadError::Unsupported
            | LoadError::Empty
            | LoadError::TooLarge(_)
            | LoadError::Binary
            | LoadError::Pdf(_)
            | LoadError::Encrypted
            | LoadError::NoText
            | LoadError::NoPageRead { .. }
            | LoadError::NoTextInImage
            | LoadError::NoTextOnScans
            | LoadError::ImageTooLarge { .. }
            | LoadError::Image(_)
            | LoadError::Archive { .. }
            | LoadError::ArchiveEncrypted { .. }
            | LoadError::ExpandsTooFar { .. }
            | LoadError::Html(_) => true,
            LoadError::Worker { lasting, .. } => *lasting,
            LoadError::Io(_)
            | LoadError::NotRegular(_)
            | LoadError::NeedsOcr
            | LoadError::Ocr(_)
            | LoadError::TimedOut(_)
            | LoadError::OutOfMemory(_)
            | LoadError::Crashed(_) => false,
        }
    }
}
