//! What the benchmarks run on, shared by each of them: the sample documents, the chunks
//! ingestion makes of them, and the CPU's name.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use quire_ingest::Chunker;

/// The sample documents beside the checkout (`../shared/sample-docs`), for benchmarks run
/// without `--docs`.
pub(crate) fn default_docs() -> Result<PathBuf> {
    let candidates = [PathBuf::from("../shared/sample-docs"), PathBuf::from("shared/sample-docs")];
    candidates.into_iter().find(|p| p.is_dir()).context("no sample documents found: pass --docs <folder>")
}

/// The chunks ingestion makes of the documents under `docs`, with the file each came from.
pub(crate) fn sample_chunks(docs: &Path, chunker: &Chunker) -> Result<Vec<(PathBuf, quire_ingest::Chunk)>> {
    let (files, _) = quire_engine::discover_files(&[docs.to_path_buf()], false);
    let mut chunks = Vec::new();
    for f in &files {
        if let Ok(doc) = quire_ingest::load_file(f) {
            chunks.extend(chunker.chunk(&doc).into_iter().map(|c| (f.clone(), c)));
        }
    }
    anyhow::ensure!(!chunks.is_empty(), "no chunks from {}", docs.display());
    Ok(chunks)
}

pub(crate) fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
