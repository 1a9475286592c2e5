//! Splits pages into chunks of at most `CHUNK_TOKENS` tokens, each starting with up to
//! `CHUNK_OVERLAP_TOKENS` tokens of the text before it, counted with the embedding model's
//! tokenizer. Chunks never cross a page boundary, so every chunk has exactly one page to cite.
//!
//! text-splitter finds the cut points (semantic levels: headings, paragraphs, sentences, words;
//! Markdown-aware for Markdown) for bodies of `CHUNK_TOKENS - CHUNK_OVERLAP_TOKENS` tokens. Its own
//! overlap only reuses whole sections of the level it cut at, so after a paragraph cut there is
//! often none; the overlap is therefore added here, as the longest run of whole words before the
//! body that fits in the overlap budget.

use text_splitter::{ChunkConfig, MarkdownSplitter, TextSplitter};
use tokenizers::Tokenizer;

use crate::loaders::{DocKind, LoadedDocument};

pub const CHUNK_TOKENS: usize = 500;
pub const CHUNK_OVERLAP_TOKENS: usize = 50;

#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// Position of the chunk in its document, from 0.
    pub seq: u32,
    /// 1-based page number for paged documents.
    pub page: Option<u32>,
    /// Byte range of `text` in the page's text: `page.text[start..end] == text`.
    pub start: usize,
    pub end: usize,
    pub text: String,
    pub tokens: usize,
}

pub struct Chunker {
    counter: Tokenizer,
    size: usize,
    overlap: usize,
    text: TextSplitter<Tokenizer>,
    markdown: MarkdownSplitter<Tokenizer>,
}

impl Chunker {
    /// `tokenizer` is the embedding model's; its truncation and padding settings are removed so
    /// that counts are of the whole text.
    pub fn new(tokenizer: &Tokenizer) -> anyhow::Result<Chunker> {
        Self::with_sizes(tokenizer, CHUNK_TOKENS, CHUNK_OVERLAP_TOKENS)
    }

    pub fn with_sizes(tokenizer: &Tokenizer, size: usize, overlap: usize) -> anyhow::Result<Chunker> {
        let mut counter = tokenizer.clone();
        counter.with_truncation(None).map_err(anyhow::Error::msg)?;
        counter.with_padding(None);
        anyhow::ensure!(overlap < size / 2, "the overlap must be under half the chunk size");
        let config = || ChunkConfig::new(size - overlap).with_sizer(counter.clone());
        Ok(Chunker {
            text: TextSplitter::new(config()),
            markdown: MarkdownSplitter::new(config()),
            counter,
            size,
            overlap,
        })
    }

    /// Number of tokens in `text` as the chunker counts them (no special tokens).
    pub fn count_tokens(&self, text: &str) -> usize {
        self.counter.encode_fast(text, false).map(|e| e.len()).unwrap_or(0)
    }

    /// The earliest word start in `floor..body_start` such that the words from there to the body
    /// are at most `overlap` tokens and the whole chunk at most `size` tokens.
    fn overlap_start(&self, text: &str, floor: usize, body_start: usize, end: usize) -> usize {
        let bytes = text.as_bytes();
        // Word starts: a non-space byte after an ASCII space (cuts stay on char boundaries).
        // Never the previous body's own start: a chunk must not contain its neighbour whole.
        let candidates: Vec<usize> = (floor + 1..body_start)
            .filter(|&i| !bytes[i].is_ascii_whitespace() && bytes[i - 1].is_ascii_whitespace())
            .collect();
        // Token counts fall as the start moves right: find the first that fits.
        let first_fit = candidates.partition_point(|&p| self.count_tokens(&text[p..body_start]) > self.overlap);
        candidates[first_fit..]
            .iter()
            .copied()
            .find(|&p| self.count_tokens(&text[p..end]) <= self.size)
            .unwrap_or(body_start)
    }

    pub fn chunk(&self, doc: &LoadedDocument) -> Vec<Chunk> {
        let mut chunks = Vec::new();
        for page in &doc.pages {
            let pieces: Vec<(usize, &str)> = match doc.kind {
                DocKind::Markdown => self.markdown.chunk_indices(&page.text).collect(),
                DocKind::Pdf | DocKind::Text | DocKind::Html | DocKind::Docx | DocKind::Epub => self.text.chunk_indices(&page.text).collect(),
            };
            let mut previous_body_start = None;
            for (body_start, body) in pieces {
                if body.trim().is_empty() {
                    continue;
                }
                let end = body_start + body.len();
                let start = match previous_body_start {
                    Some(floor) => self.overlap_start(&page.text, floor, body_start, end),
                    None => body_start,
                };
                previous_body_start = Some(body_start);
                let text = &page.text[start..end];
                chunks.push(Chunk {
                    seq: chunks.len() as u32,
                    page: page.number,
                    start,
                    end,
                    text: text.to_owned(),
                    tokens: self.count_tokens(text),
                });
            }
        }
        chunks
    }
}
