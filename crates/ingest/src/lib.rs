//! Turns files into text with page numbers (loaders) and text into token-sized chunks that know
//! where they came from (chunker). No model runs here: the chunker is handed the embedding
//! model's tokenizer, so chunk sizes are counted in the tokens the embedder will see.

mod chunker;
mod error;
pub mod isolate;
mod limits;
mod loaders;
mod office;
mod pages_read;
mod scans;

pub use chunker::{Chunk, Chunker, CHUNK_OVERLAP_TOKENS, CHUNK_TOKENS, MAX_CHUNK_BYTES};
pub use error::{LoadError, NEEDS_OCR};
pub use limits::{MAX_ARCHIVE_TEXT_BYTES, MAX_ENTRY_BYTES, MAX_FILE_BYTES, READERS_VERSION};
pub use loaders::{
    content_hash, decode_text, is_editor_temporary, is_supported, load_bytes, load_file, read_file, special_file_kind,
    DocKind, LoadedDocument, Page, UnreadablePage,
};
pub use office::{docx_text, epub_text, html_to_text};
pub use pages_read::with_pages_read;

/// The PDF parser panics on some malformed files; the loaders catch those panics and report them
/// per file (or per page), so the default hook's backtrace would only alarm. A front end calls
/// this once at start; panics anywhere else still print as usual.
pub fn quiet_parser_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_parser = info.location().is_some_and(|l| l.file().contains("pdf-extract") || l.file().contains("lopdf"));
        if !in_parser {
            default(info);
        }
    }));
}
