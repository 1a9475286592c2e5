//! DOCX and EPUB: both are zip archives of XML. The zip crate reads the archive's directory;
//! entries are inflated here with flate2 under a size cap, so a crafted archive (a zip bomb, an
//! entry that claims one size and inflates to another) is refused instead of filling memory.
//! quick-xml streams the XML without recursion, so deep nesting costs no stack.
//!
//! (The zip crate's own inflater is a cargo feature; turning it on would rebuild candle, which
//! shares the crate, for no gain over flate2, which the tree already has.)

use std::io::{Cursor, Read};

use quick_xml::events::Event;
use quick_xml::Reader;
use zip::{CompressionMethod, ZipArchive};

use crate::limits::{MAX_ARCHIVE_TEXT_BYTES, MAX_ENTRY_BYTES};
use crate::LoadError;

struct Archive<'a> {
    kind: &'static str,
    zip: ZipArchive<Cursor<&'a [u8]>>,
    inflated: u64,
}

impl<'a> Archive<'a> {
    fn open(kind: &'static str, bytes: &'a [u8]) -> Result<Archive<'a>, LoadError> {
        if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
            // An OLE compound file: what Office writes for a password-protected document.
            return Err(LoadError::ArchiveEncrypted { kind });
        }
        let zip = ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| LoadError::Archive { kind, reason: format!("not a zip archive ({e})") })?;
        Ok(Archive { kind, zip, inflated: 0 })
    }

    fn has(&self, name: &str) -> bool {
        self.zip.index_for_name(name).is_some()
    }

    /// An entry's bytes, inflated, or an error once it passes the caps.
    fn read(&mut self, name: &str) -> Result<Vec<u8>, LoadError> {
        let kind = self.kind;
        let broken = |reason: String| LoadError::Archive { kind, reason };
        let index = self.zip.index_for_name(name).ok_or_else(|| broken(format!("{name} is missing")))?;
        let entry = self.zip.by_index_raw(index).map_err(|e| broken(format!("{name}: {e}")))?;
        if entry.encrypted() {
            return Err(LoadError::ArchiveEncrypted { kind });
        }
        let limit = MAX_ENTRY_BYTES.min(MAX_ARCHIVE_TEXT_BYTES - self.inflated);
        let method = entry.compression();
        let mut out = Vec::new();
        let read = if method == CompressionMethod::STORE {
            entry.take(limit + 1).read_to_end(&mut out)
        } else if method == CompressionMethod::DEFLATE {
            flate2::read::DeflateDecoder::new(entry).take(limit + 1).read_to_end(&mut out)
        } else {
            return Err(broken(format!("{name} uses a compression method Quire does not read ({method:?})")));
        };
        read.map_err(|e| match e.kind() {
            std::io::ErrorKind::OutOfMemory => LoadError::OutOfMemory(crate::limits::allowance()),
            _ => broken(format!("{name}: {e}")),
        })?;
        if out.len() as u64 > limit {
            return Err(LoadError::ExpandsTooFar { part: name.to_string(), limit });
        }
        self.inflated += out.len() as u64;
        Ok(out)
    }

    fn read_text(&mut self, name: &str) -> Result<String, LoadError> {
        Ok(String::from_utf8_lossy(&self.read(name)?).into_owned())
    }
}

fn xml_error(kind: &'static str, part: &str, e: impl std::fmt::Display) -> LoadError {
    LoadError::Archive { kind, reason: format!("{part} is not well-formed XML ({e})") }
}

/// The text of a Word document: paragraphs (`w:p`) as lines, runs' text (`w:t`), tabs and
/// breaks; tables come out cell by cell. Headers, footers and comments are left out.
pub fn docx_text(bytes: &[u8]) -> Result<String, LoadError> {
    const PART: &str = "word/document.xml";
    let mut archive = Archive::open("DOCX", bytes)?;
    if !archive.has(PART) {
        return Err(LoadError::Archive { kind: "DOCX", reason: format!("{PART} is missing (is it a Word document?)") });
    }
    let xml = archive.read_text(PART)?;
    let mut reader = Reader::from_str(&xml);
    let mut text = String::new();
    let mut in_text_run = false;
    loop {
        match reader.read_event().map_err(|e| xml_error("DOCX", PART, e))? {
            Event::Start(e) if e.local_name().as_ref() == "t" => in_text_run = true,
            Event::End(e) if e.local_name().as_ref() == "t" => in_text_run = false,
            Event::End(e) if e.local_name().as_ref() == "p" => text.push('\n'),
            Event::Empty(e) | Event::Start(e) if matches!(e.local_name().as_ref(), "tab") => text.push('\t'),
            Event::Empty(e) if matches!(e.local_name().as_ref(), "br" | "cr") => text.push('\n'),
            Event::Text(t) if in_text_run => text.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if in_text_run => {
                text.push_str(&resolve_entity(&r.xml10_content(), r.resolve_char_ref().ok().flatten()))
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(text)
}

/// The five XML entities and character references; anything else is kept as written.
fn resolve_entity(name: &str, char_ref: Option<char>) -> String {
    if let Some(c) = char_ref {
        return c.to_string();
    }
    match name {
        "amp" => "&".into(),
        "lt" => "<".into(),
        "gt" => ">".into(),
        "quot" => "\"".into(),
        "apos" => "'".into(),
        other => format!("&{other};"),
    }
}

/// The text of an EPUB book: its chapters in reading order (the package's spine), each
/// converted from XHTML like an HTML page.
pub fn epub_text(bytes: &[u8]) -> Result<String, LoadError> {
    const CONTAINER: &str = "META-INF/container.xml";
    let mut archive = Archive::open("EPUB", bytes)?;
    let container = archive.read_text(CONTAINER)?;
    let package_path = first_attribute(&container, "rootfile", "full-path", CONTAINER)?
        .ok_or_else(|| LoadError::Archive { kind: "EPUB", reason: format!("{CONTAINER} names no package file") })?;
    let package = archive.read_text(&package_path)?;
    let base = package_path.rsplit_once('/').map(|(dir, _)| format!("{dir}/")).unwrap_or_default();

    let (mut manifest, mut spine) = (std::collections::HashMap::new(), Vec::new());
    let mut reader = Reader::from_str(&package);
    loop {
        match reader.read_event().map_err(|e| xml_error("EPUB", &package_path, e))? {
            Event::Start(e) | Event::Empty(e) => {
                let attr = |name: &str| {
                    e.try_get_attribute(name).ok().flatten().and_then(|a| {
                        a.normalized_value(quick_xml::XmlVersion::Implicit1_0).ok().map(|v| v.into_owned())
                    })
                };
                match e.local_name().as_ref() {
                    "item" => {
                        if let (Some(id), Some(href)) = (attr("id"), attr("href")) {
                            manifest.insert(id, href);
                        }
                    }
                    "itemref" => spine.extend(attr("idref")),
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if spine.is_empty() {
        return Err(LoadError::Archive { kind: "EPUB", reason: "the book lists no chapters".into() });
    }
    let mut text = String::new();
    for id in spine {
        let Some(href) = manifest.get(&id) else { continue };
        let href = href.split('#').next().unwrap_or_default();
        let name = format!("{base}{}", percent_decode(href));
        if !archive.has(&name) {
            continue; // a spine entry without its file: skip the chapter, keep the book
        }
        let chapter = html_to_text(&archive.read_text(&name)?)?;
        if !chapter.trim().is_empty() {
            text.push_str(chapter.trim_end());
            text.push_str("\n\n");
        }
    }
    Ok(text)
}

fn first_attribute(xml: &str, element: &str, attribute: &str, part: &str) -> Result<Option<String>, LoadError> {
    let mut reader = Reader::from_str(xml);
    loop {
        match reader.read_event().map_err(|e| xml_error("EPUB", part, e))? {
            Event::Start(e) | Event::Empty(e) if e.local_name().as_ref() == element => {
                let value =
                    e.try_get_attribute(attribute).ok().flatten().and_then(|a| {
                        a.normalized_value(quick_xml::XmlVersion::Implicit1_0).ok().map(|v| v.into_owned())
                    });
                return Ok(value);
            }
            Event::Eof => return Ok(None),
            _ => {}
        }
    }
}

/// `%20`-style escapes in an href (EPUB hrefs are URLs; archive names are not).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The readable text of an HTML page: block structure kept as line breaks, no wrapping (the
/// chunker decides where lines go), links and images reduced to their text.
pub fn html_to_text(html: &str) -> Result<String, LoadError> {
    const NO_WRAP: usize = 100_000;
    html2text::config::with_decorator(html2text::render::TrivialDecorator::new())
        .string_from_read(html.as_bytes(), NO_WRAP)
        .map_err(|e| LoadError::Html(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_escapes_are_decoded() {
        assert_eq!(percent_decode("ch%201.xhtml"), "ch 1.xhtml");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("a%2"), "a%2");
    }

    #[test]
    fn an_ole_file_is_reported_as_encrypted() {
        let ole = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0];
        assert!(matches!(docx_text(&ole), Err(LoadError::ArchiveEncrypted { kind: "DOCX" })));
    }

    #[test]
    fn not_a_zip_is_an_error() {
        assert!(matches!(epub_text(b"hello"), Err(LoadError::Archive { kind: "EPUB", .. })));
    }
}
