//! Loaders: PDF (text per page through pdf-extract), Markdown and plain text (UTF-8, UTF-16 with
//! a byte-order mark or told by its zero bytes, or Latin-1/Windows-1252), HTML (html2text), DOCX and EPUB (zip + quick-xml,
//! in `office`), scans: images and scanned PDF pages (OCR, in `scans`). Every failure is a `LoadError` that names the reason; nothing here panics on bad
//! input (a panicking PDF parser is caught). Parsers that can run away are bounded further by
//! running them in a child process (`isolate`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use ts_rs::TS;

use crate::limits::MAX_FILE_BYTES;
use crate::office::html_to_text;
use crate::LoadError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DocKind {
    Pdf,
    Markdown,
    Text,
    Html,
    Docx,
    Epub,
    /// A picture of a page (PNG, JPEG, TIFF, WebP), read by OCR.
    Image,
}

impl DocKind {
    pub fn from_path(path: &Path) -> Option<DocKind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "pdf" => Some(DocKind::Pdf),
            "md" | "markdown" => Some(DocKind::Markdown),
            "txt" | "text" => Some(DocKind::Text),
            "html" | "htm" | "xhtml" => Some(DocKind::Html),
            "docx" => Some(DocKind::Docx),
            "epub" => Some(DocKind::Epub),
            "png" | "jpg" | "jpeg" | "tif" | "tiff" | "webp" => Some(DocKind::Image),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DocKind::Pdf => "pdf",
            DocKind::Markdown => "markdown",
            DocKind::Text => "text",
            DocKind::Html => "html",
            DocKind::Docx => "docx",
            DocKind::Epub => "epub",
            DocKind::Image => "image",
        }
    }

    /// Formats whose parsers are complex enough to hang, blow up memory or crash on a crafted
    /// file: these are loaded in a child process when the caller asks for isolation.
    pub fn needs_isolation(self) -> bool {
        matches!(self, DocKind::Pdf | DocKind::Docx | DocKind::Epub | DocKind::Image)
    }
}

pub fn is_supported(path: &Path) -> bool {
    DocKind::from_path(path).is_some() && !is_editor_temporary(path)
}

/// Files editors and office suites leave beside the real one while it is open or being saved:
/// lock files (`~$report.docx`, `.~lock.x#`), swap files (`.swp`), backups (`notes.md~`),
/// partial downloads and save-by-rename temporaries. They are never indexed.
pub fn is_editor_temporary(path: &Path) -> bool {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy()) else { return false };
    let lower = name.to_ascii_lowercase();
    name.starts_with("~$")
        || name.starts_with(".~lock.")
        || name.starts_with('.')
        || (name.starts_with('#') && name.ends_with('#'))
        || name.ends_with('~')
        || [".swp", ".swx", ".swo", ".tmp", ".temp", ".part", ".crdownload", ".partial", ".download"]
            .iter()
            .any(|ext| lower.ends_with(ext))
}

/// One page of a document. Documents without pages (Markdown, text) have a single page with
/// `number: None`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page {
    pub number: Option<u32>,
    pub text: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadedDocument {
    pub path: PathBuf,
    pub kind: DocKind,
    /// sha256 of the file's bytes: the same content is never processed twice.
    pub content_hash: String,
    pub byte_len: u64,
    pub pages: Vec<Page>,
    /// Pages whose text could not be read (left empty; the rest of the document is kept).
    pub unreadable_pages: Vec<UnreadablePage>,
}

/// A page left empty because its text could not be read, and why (in the words of `LoadError`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct UnreadablePage {
    pub page: u32,
    pub reason: String,
}

pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub fn load_file(path: &Path) -> Result<LoadedDocument, LoadError> {
    let kind = DocKind::from_path(path).ok_or(LoadError::Unsupported)?;
    let bytes = read_file(path)?;
    load_bytes(path, kind, &bytes)
}

/// The bytes of the regular file at `path`, at most `MAX_FILE_BYTES`. The file is opened without
/// waiting (a named pipe swapped in since the folder was scanned would block an ordinary open
/// until some program wrote to it) and what was opened is checked, not the path: a pipe, device
/// or socket is refused before a byte is read, and a file that grows past the limit while being
/// read is refused too.
pub fn read_file(path: &Path) -> Result<Vec<u8>, LoadError> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(LoadError::NotRegular(special_file_kind(&meta.file_type())));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(LoadError::TooLarge(bytes.len() as u64));
    }
    Ok(bytes)
}

/// What a file that is neither a regular file nor a folder is, in words.
pub fn special_file_kind(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a named pipe";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "a device";
        }
    }
    if file_type.is_dir() {
        return "a folder";
    }
    "a special file"
}

pub fn load_bytes(path: &Path, kind: DocKind, bytes: &[u8]) -> Result<LoadedDocument, LoadError> {
    if bytes.is_empty() {
        return Err(LoadError::Empty);
    }
    let single = |text: String| (vec![Page { number: None, text }], vec![]);
    let (pages, unreadable_pages) = match kind {
        DocKind::Pdf => load_pdf(bytes)?,
        DocKind::Markdown | DocKind::Text => single(decode_text(bytes)?),
        DocKind::Html => single(html_to_text(&decode_text(bytes)?)?),
        DocKind::Docx => single(crate::office::docx_text(bytes)?),
        DocKind::Epub => single(crate::office::epub_text(bytes)?),
        DocKind::Image => {
            let pages = crate::scans::image_text(bytes)?;
            (pages.into_iter().zip(1..).map(|(text, number)| Page { number: Some(number), text }).collect(), vec![])
        }
    };
    if pages.iter().all(|p| p.text.trim().is_empty()) {
        return Err(match kind {
            DocKind::Pdf => LoadError::NoText,
            DocKind::Image => LoadError::NoTextInImage,
            _ => LoadError::Empty,
        });
    }
    Ok(LoadedDocument {
        path: path.to_path_buf(),
        kind,
        content_hash: content_hash(bytes),
        byte_len: bytes.len() as u64,
        pages,
        unreadable_pages,
    })
}

/// Decodes text in UTF-8, UTF-16 (with a byte-order mark, or without one when its zero bytes
/// say so) or, failing those, Windows-1252 (a superset of Latin-1). Bytes that look like a
/// program or an image are refused.
pub fn decode_text(bytes: &[u8]) -> Result<String, LoadError> {
    if let Some((encoding, bom_len)) = encoding_rs::Encoding::for_bom(bytes) {
        let (text, _) = encoding.decode_without_bom_handling(&bytes[bom_len..]);
        return Ok(text.into_owned());
    }
    if let Some(encoding) = utf16_without_bom(bytes) {
        let (text, malformed) = encoding.decode_without_bom_handling(bytes);
        if !malformed && !looks_binary(text.as_bytes()) {
            return Ok(text.into_owned());
        }
    }
    if looks_binary(bytes) {
        return Err(LoadError::Binary);
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(text.to_owned()),
        Err(_) if mostly_utf8(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Err(_) => Ok(encoding_rs::WINDOWS_1252.decode_without_bom_handling(bytes).0.into_owned()),
    }
}

/// Whether `bytes`, not valid UTF-8, are UTF-8 with a few damaged bytes rather than a legacy
/// encoding: more well-formed multi-byte characters than broken sequences. Latin-1 and
/// Windows-1252 text almost never forms a valid multi-byte sequence, while a Japanese or Arabic
/// file with one damaged byte is thousands of them; read as Windows-1252, all of it would be
/// mojibake for one byte.
fn mostly_utf8(bytes: &[u8]) -> bool {
    let (mut characters, mut broken) = (0usize, 0usize);
    for chunk in bytes.utf8_chunks() {
        characters += chunk.valid().chars().filter(|c| !c.is_ascii()).count();
        broken += usize::from(!chunk.invalid().is_empty());
    }
    characters > broken
}

/// UTF-16 text with no byte-order mark, told by where its zero bytes are: text in Latin, Greek,
/// Cyrillic… scripts has a zero high byte in most code units, so in UTF-16LE most odd bytes are
/// zero and almost no even ones (the reverse in UTF-16BE). A binary file's zeros fall anywhere.
fn utf16_without_bom(bytes: &[u8]) -> Option<&'static encoding_rs::Encoding> {
    let head = &bytes[..bytes.len().min(8192) & !1];
    let units = head.len() / 2;
    if units < 2 {
        return None;
    }
    let zeros_at = |parity: usize| head.iter().skip(parity).step_by(2).filter(|&&b| b == 0).count();
    let (even, odd) = (zeros_at(0), zeros_at(1));
    // At least 40 % of the units with a zero on one side and next to none on the other.
    let told = |zeros: usize, other: usize| zeros * 5 >= units * 2 && other * 50 <= units;
    if told(odd, even) {
        Some(encoding_rs::UTF_16LE)
    } else if told(even, odd) {
        Some(encoding_rs::UTF_16BE)
    } else {
        None
    }
}

/// Text files have no NUL bytes and few control characters; executables and images have many.
fn looks_binary(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(8192)];
    if head.contains(&0) {
        return true;
    }
    let control = head.iter().filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x0c)).count();
    control * 20 > head.len()
}

/// The operands a content stream operator takes that pdf-extract reads by position, and how
/// many of the first must be numbers.
fn operands_needed(operator: &str) -> Option<(usize, usize)> {
    Some(match operator {
        "cm" | "c" | "Tm" | "d1" => (6, 6),
        "v" | "y" | "re" | "K" | "k" => (4, 4),
        "RG" | "rg" => (3, 3),
        "\"" => (3, 2),
        "m" | "l" | "Td" | "TD" | "d0" => (2, 2),
        "Tf" => (2, 0),
        "w" | "Tc" | "Tw" | "Tz" | "TL" | "Ts" | "Tr" | "G" | "g" | "i" | "M" | "J" | "j" => (1, 1),
        "gs" | "Do" | "Tj" | "TJ" | "'" | "CS" | "cs" | "sh" | "ri" => (1, 0),
        _ => return None,
    })
}

/// Drops, from every page's and form's content stream, the operations that lack the operands
/// their operator takes; returns how many streams changed. The rest of each stream is kept as
/// it was (re-encoded), so the text drawn around a damaged figure is still read.
fn mend_content_streams(doc: &mut pdf_extract::Document) -> usize {
    use pdf_extract::content::Content;
    use pdf_extract::Object;
    let whole = |op: &pdf_extract::content::Operation| match operands_needed(&op.operator) {
        Some((count, numbers)) => {
            op.operands.len() >= count
                && op.operands[..numbers].iter().all(|o| matches!(o, Object::Integer(_) | Object::Real(_)))
        }
        None => true,
    };
    let mut mended = 0;
    let streams: Vec<pdf_extract::ObjectId> = doc
        .objects
        .iter()
        .filter_map(|(id, object)| match object {
            Object::Stream(s) => {
                let subtype = s.dict.get(b"Subtype").ok().and_then(|o| o.as_name().ok());
                let is_page_content = s.dict.get(b"Type").is_err() && subtype.is_none();
                (subtype == Some(b"Form".as_slice()) || is_page_content).then_some(*id)
            }
            _ => None,
        })
        .collect();
    for id in streams {
        let Ok(Object::Stream(stream)) = doc.get_object_mut(id) else { continue };
        let Ok(data) = stream.decompressed_content().or_else(|_| Ok::<_, ()>(stream.content.clone())) else {
            continue;
        };
        let Ok(content) = Content::decode(&data) else { continue };
        if content.operations.iter().all(whole) {
            continue;
        }
        let kept: Content<Vec<_>> =
            Content { operations: content.operations.into_iter().filter(|op| whole(op)).collect() };
        if let Ok(encoded) = kept.encode() {
            stream.set_plain_content(encoded);
            mended += 1;
        }
    }
    mended
}

/// Extracts text page by page. pdf-extract panics on some malformed content streams; each page
/// is extracted on its own and a page that fails is left empty and listed with the reason, so
/// one bad page does not cost the whole document. A page with next to no text that draws a scan
/// is read by OCR. When no page could be read, the document fails with the first page's reason
/// (a scan without the OCR model says so).
fn load_pdf(bytes: &[u8]) -> Result<(Vec<Page>, Vec<UnreadablePage>), LoadError> {
    let doc = match std::panic::catch_unwind(|| pdf_extract::Document::load_mem(bytes)) {
        Ok(Ok(doc)) => doc,
        Ok(Err(err)) => return Err(LoadError::Pdf(err.to_string())),
        Err(panic) => return Err(LoadError::Pdf(panic_message(panic))),
    };
    let mut doc = doc;
    if doc.is_encrypted() && doc.decrypt("").is_err() {
        return Err(LoadError::Encrypted);
    }
    let mut pages = Vec::new();
    let mut failed = Vec::new();
    let mut needs_ocr = false;
    let mut mended_streams = false;
    let mut scans_read = 0;
    let page_ids = doc.get_pages();
    let count = page_ids.len() as u32;
    for (number, page_id) in page_ids {
        let extracted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut text = String::new();
            pdf_extract::output_doc_page(&doc, &mut pdf_extract::PlainTextOutput::new(&mut text), number).map(|_| text)
        }));
        let mut text = match extracted {
            Ok(Ok(text)) => Ok(text),
            Ok(Err(err)) => Err(format!("its text could not be extracted ({err})")),
            Err(panic) => {
                // A drawing whose operators lack operands (a damaged figure a PDF includes) stops
                // pdf-extract; without them the page's text reads.
                let said = panic_message(panic);
                if !mended_streams && mend_content_streams(&mut doc) > 0 {
                    mended_streams = true;
                    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let mut text = String::new();
                        pdf_extract::output_doc_page(&doc, &mut pdf_extract::PlainTextOutput::new(&mut text), number)
                            .map(|_| text)
                    })) {
                        Ok(Ok(text)) => Ok(text),
                        _ => Err(format!("its text could not be extracted ({said})")),
                    }
                } else {
                    Err(format!("its text could not be extracted ({said})"))
                }
            }
        };
        if text.as_deref().map_or(true, crate::scans::looks_scanned) {
            match crate::scans::pdf_page_text(&doc, page_id, (number, count)) {
                Ok(Some(read)) => {
                    scans_read += 1;
                    text = Ok(read)
                }
                Ok(None) => {}
                Err(err) => {
                    needs_ocr |= matches!(err, LoadError::NeedsOcr);
                    text = Err(err.to_string());
                }
            }
        }
        let text = text.unwrap_or_else(|reason| {
            failed.push(UnreadablePage { page: number, reason });
            String::new()
        });
        pages.push(Page { number: Some(number), text });
    }
    if pages.is_empty() {
        return Err(LoadError::Pdf("the PDF has no pages".into()));
    }
    if pages.iter().all(|p| p.text.trim().is_empty()) {
        if needs_ocr {
            return Err(LoadError::NeedsOcr);
        }
        if let Some(first) = failed.first() {
            return Err(LoadError::NoPageRead { page: first.page, reason: first.reason.clone() });
        }
        if scans_read > 0 {
            return Err(LoadError::NoTextOnScans);
        }
    }
    Ok((pages, failed))
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "the PDF parser failed".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin1_is_decoded_not_rejected() {
        let bytes = b"caf\xe9 cr\xe8me br\xfbl\xe9e";
        assert_eq!(decode_text(bytes).unwrap(), "café crème brûlée");
    }

    #[test]
    fn utf16_with_bom_is_decoded() {
        let mut bytes = vec![0xff, 0xfe];
        for unit in "héllo".encode_utf16() {
            bytes.extend_from_slice(&unit.to_le_bytes());
        }
        assert_eq!(decode_text(&bytes).unwrap(), "héllo");
    }

    #[test]
    fn utf16_without_bom_is_told_by_its_zero_bytes() {
        let text = "Quire reads UTF-16 too: naïve café, Ελληνικά, кириллица.\r\nSecond line.";
        let le: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        let be: Vec<u8> = text.encode_utf16().flat_map(|u| u.to_be_bytes()).collect();
        assert_eq!(decode_text(&le).unwrap(), text);
        assert_eq!(decode_text(&be).unwrap(), text);
        // Zeros scattered as in a program or an image are still refused.
        let mut binary: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        binary[100] = 0;
        binary[1001] = 0;
        assert!(matches!(decode_text(&binary), Err(LoadError::Binary)));
    }

    #[cfg(unix)]
    #[test]
    fn a_named_pipe_is_refused_at_once_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("notes.md");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path it is given.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(load_file(&fifo).map(|_| ())).unwrap());
        let outcome = rx.recv_timeout(std::time::Duration::from_secs(10)).expect("opening a named pipe must not block");
        assert!(matches!(outcome, Err(LoadError::NotRegular("a named pipe"))), "{outcome:?}");
        assert!(matches!(read_file(Path::new("/dev/zero")), Err(LoadError::NotRegular("a device"))));
    }

    #[test]
    fn binary_and_empty_are_refused() {
        let elf = [0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0];
        assert!(matches!(load_bytes(Path::new("x.md"), DocKind::Markdown, &elf), Err(LoadError::Binary)));
        assert!(matches!(load_bytes(Path::new("x.txt"), DocKind::Text, b""), Err(LoadError::Empty)));
        assert!(matches!(load_bytes(Path::new("x.txt"), DocKind::Text, b" \n\n "), Err(LoadError::Empty)));
    }

    #[test]
    fn garbage_pdf_is_an_error_not_a_panic() {
        let err = load_bytes(Path::new("x.pdf"), DocKind::Pdf, b"%PDF-1.7\n").unwrap_err();
        assert!(matches!(err, LoadError::Pdf(_) | LoadError::NoText), "{err}");
    }

    #[test]
    fn kinds_come_from_extensions() {
        assert_eq!(DocKind::from_path(Path::new("a/B.PDF")), Some(DocKind::Pdf));
        assert_eq!(DocKind::from_path(Path::new("notes.markdown")), Some(DocKind::Markdown));
        assert_eq!(DocKind::from_path(Path::new("photo.JPG")), Some(DocKind::Image));
        assert_eq!(DocKind::from_path(Path::new("drawing.svg")), None);
    }
}
