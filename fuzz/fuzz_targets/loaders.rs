//! Any bytes, as any kind of document: a loader returns text or an error, never crashes.
//! (The PDF parser's own panics are caught by the loader and reported as errors, as in the app.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use quire_ingest::DocKind;

const KINDS: [DocKind; 6] = [DocKind::Pdf, DocKind::Markdown, DocKind::Text, DocKind::Html, DocKind::Docx, DocKind::Epub];

fuzz_target!(|data: &[u8]| {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(quire_ingest::quiet_parser_panics);
    let Some((&which, bytes)) = data.split_first() else { return };
    let kind = KINDS[which as usize % KINDS.len()];
    if let Ok(doc) = quire_ingest::load_bytes(std::path::Path::new("fuzzed"), kind, bytes) {
        // Success means some text: empty documents are an error, not an empty success.
        assert!(doc.pages.iter().any(|p| !p.text.trim().is_empty()));
    }
});
