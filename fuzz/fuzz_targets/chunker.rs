//! Any text, loaded as a document and chunked with the embedding model's tokenizer: every chunk
//! is the slice of its page its range says, in order; nothing panics.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use quire_ingest::{Chunker, DocKind};

fn chunker() -> &'static Chunker {
    static CHUNKER: OnceLock<Chunker> = OnceLock::new();
    CHUNKER.get_or_init(|| {
        let dir = quire_models::MINILM.location().expect("models folder");
        let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).expect("the MiniLM tokenizer: run `quire models fetch`");
        Chunker::new(&tokenizer).unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    let kind = if data.first().is_some_and(|b| b & 1 == 1) { DocKind::Markdown } else { DocKind::Text };
    let Ok(doc) = quire_ingest::load_bytes(std::path::Path::new("fuzzed"), kind, data) else { return };
    for (i, chunk) in chunker().chunk(&doc).iter().enumerate() {
        assert_eq!(chunk.seq as usize, i);
        let page = &doc.pages[0].text;
        assert_eq!(page.get(chunk.start..chunk.end), Some(chunk.text.as_str()), "chunk {i}'s range");
        assert!(!chunk.text.trim().is_empty());
    }
});
