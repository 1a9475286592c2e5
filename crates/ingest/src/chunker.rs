//! Splits pages into chunks of at most `CHUNK_TOKENS` tokens, each starting with up to
//! `CHUNK_OVERLAP_TOKENS` tokens of the text before it, counted with the embedding model's
//! tokenizer. Chunks never cross a page boundary, so every chunk has exactly one page to cite.
//!
//! text-splitter finds the cut points (semantic levels: headings, paragraphs, sentences, words;
//! Markdown-aware for Markdown) for bodies of `CHUNK_TOKENS - CHUNK_OVERLAP_TOKENS` tokens. Its own
//! overlap only reuses whole sections of the level it cut at, so after a paragraph cut there is
//! often none; the overlap is therefore added here, as the longest run of whole words before the
//! body that fits in the overlap budget.
//!
//! Chunks are bounded in bytes too (`MAX_CHUNK_BYTES`): the embedder's tokenizer counts a word it
//! cannot split (a 20 MB line with no space, a base64 blob) as one token, which would make the
//! whole line one chunk, and one prompt of millions of tokens for the answer model. So the
//! splitter measures a piece by its tokens or by its bytes, whichever says more, and a run
//! without whitespace longer than a body is cut into body-sized pieces before the splitter
//! sees it (so it never measures a huge word over and over).

use text_splitter::{ChunkConfig, ChunkSizer, MarkdownSplitter, TextSplitter};
use tokenizers::Tokenizer;

use crate::loaders::{DocKind, LoadedDocument};

pub const CHUNK_TOKENS: usize = 500;
pub const CHUNK_OVERLAP_TOKENS: usize = 50;
/// The most bytes a chunk holds (body and overlap), whatever its token count. Ordinary text
/// reaches 500 tokens at 2–4 KB; this only cuts what the tokenizer cannot.
pub const MAX_CHUNK_BYTES: usize = 8192;
/// The most bytes of overlap before a body.
const MAX_OVERLAP_BYTES: usize = 1024;
/// The most bytes of a body (a chunk without its overlap).
const MAX_BODY_BYTES: usize = MAX_CHUNK_BYTES - MAX_OVERLAP_BYTES;

/// A piece's size for the splitter: its tokens, or its bytes scaled so that `MAX_BODY_BYTES`
/// bytes count as a full body, whichever is more.
struct BoundedSizer {
    tokenizer: Tokenizer,
    body_tokens: usize,
}

impl ChunkSizer for BoundedSizer {
    fn size(&self, chunk: &str) -> usize {
        let tokens = self.tokenizer.encode_fast(chunk, false).map(|e| e.len()).unwrap_or(0);
        tokens.max((chunk.len() * self.body_tokens).div_ceil(MAX_BODY_BYTES))
    }
}

/// `text` as the splitter is given it: byte ranges that cover it in order, where a run without
/// whitespace longer than a body is cut into body-sized pieces (at character boundaries).
fn spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let (mut span_start, mut run_start) = (0, None::<usize>);
    let cut_run = |spans: &mut Vec<(usize, usize)>, span_start: &mut usize, run: usize, end: usize| {
        if end - run <= MAX_BODY_BYTES {
            return;
        }
        if run > *span_start {
            spans.push((*span_start, run));
        }
        let mut at = run;
        while at < end {
            let mut next = (at + MAX_BODY_BYTES).min(end);
            while !text.is_char_boundary(next) {
                next -= 1;
            }
            spans.push((at, next));
            at = next;
        }
        *span_start = end;
    };
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), run_start) {
            (false, None) => run_start = Some(i),
            (true, Some(run)) => {
                cut_run(&mut spans, &mut span_start, run, i);
                run_start = None;
            }
            _ => {}
        }
    }
    if let Some(run) = run_start {
        cut_run(&mut spans, &mut span_start, run, text.len());
    }
    if span_start < text.len() {
        spans.push((span_start, text.len()));
    }
    spans
}

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
    text: TextSplitter<BoundedSizer>,
    markdown: MarkdownSplitter<BoundedSizer>,
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
        let body_tokens = size - overlap;
        let config =
            || ChunkConfig::new(body_tokens).with_sizer(BoundedSizer { tokenizer: counter.clone(), body_tokens });
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
    /// are at most `overlap` tokens and `MAX_OVERLAP_BYTES`, and the whole chunk at most `size`
    /// tokens.
    fn overlap_start(&self, text: &str, floor: usize, body_start: usize, end: usize) -> usize {
        let bytes = text.as_bytes();
        let floor = floor.max(body_start.saturating_sub(MAX_OVERLAP_BYTES + 1));
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
            let pieces: Vec<(usize, &str)> = spans(&page.text)
                .into_iter()
                .flat_map(|(from, to)| {
                    let span = &page.text[from..to];
                    let cut: Vec<(usize, &str)> = match doc.kind {
                        DocKind::Markdown => self.markdown.chunk_indices(span).collect(),
                        DocKind::Pdf
                        | DocKind::Text
                        | DocKind::Html
                        | DocKind::Docx
                        | DocKind::Epub
                        | DocKind::Image => self.text.chunk_indices(span).collect(),
                    };
                    cut.into_iter().map(move |(at, piece)| (from + at, piece))
                })
                .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_runs_without_whitespace_are_cut_into_body_sized_spans() {
        let run = "x".repeat(MAX_BODY_BYTES * 2 + 10);
        let text = format!("short words here {run} and more words");
        let cut = spans(&text);
        // They cover the text in order, with no gap.
        assert_eq!(cut.first().unwrap().0, 0);
        assert_eq!(cut.last().unwrap().1, text.len());
        assert!(cut.windows(2).all(|w| w[0].1 == w[1].0), "{cut:?}");
        assert!(cut.iter().all(|(a, b)| b - a <= MAX_BODY_BYTES || !text[*a..*b].contains('x')), "{cut:?}");
        assert_eq!(cut.len(), 5, "before, three pieces of the run, after: {cut:?}");
        // Multi-byte characters are cut whole; ordinary text is one span.
        let wide = "é".repeat(MAX_BODY_BYTES);
        assert!(spans(&wide).iter().all(|&(a, b)| wide.is_char_boundary(a) && wide.is_char_boundary(b)));
        assert_eq!(spans("ordinary text, with words."), vec![(0, 26)]);
    }
}
