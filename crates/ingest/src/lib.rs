//! Turns files into text with page numbers (loaders) and text into token-sized chunks that know
//! where they came from (chunker). No model runs here: the chunker is handed the embedding
//! model's tokenizer, so chunk sizes are counted in the tokens the embedder will see.

mod chunker;
mod loaders;

pub use chunker::{Chunk, Chunker, CHUNK_OVERLAP_TOKENS, CHUNK_TOKENS};
pub use loaders::{
    content_hash, decode_text, is_supported, load_bytes, load_file, DocKind, LoadError,
    LoadedDocument, Page, MAX_FILE_BYTES,
};
