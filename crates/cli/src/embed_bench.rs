//! `quire bench embed`: Quire's embedder and sentence-transformers (the library people would
//! otherwise use) side by side on the same machine, in the same run, on the same chunk texts
//! (and Quire's candle tensor graph, the path it had before):
//! full-size chunks of the sample documents, as ingestion makes them. Prints each one's
//! chunks/s and tokens/s, the ratio, and how close the vectors are (cosine per chunk).
//! The reference runs `tools/embed_reference.py` in its own virtual environment
//! (`tools/setup-embed-reference.sh`); without it, only Quire's figures are printed.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;

use quire_embed::{Embedder, ForwardPass};
use quire_ingest::Chunker;

#[derive(Args)]
pub struct EmbedArgs {
    /// Documents to take chunks from (default: the sample documents in ../shared).
    #[arg(long)]
    docs: Option<PathBuf>,
    /// Full-size chunks (400 embedder tokens or more) embedded by each side.
    #[arg(long, default_value_t = 64)]
    chunks: usize,
    /// Python of the reference's virtual environment (default: where
    /// `tools/setup-embed-reference.sh` makes it).
    #[arg(long)]
    reference_python: Option<PathBuf>,
}

#[derive(Deserialize)]
struct Reference {
    chunks_per_s: f64,
    tokens_per_s: f64,
    torch: String,
    sentence_transformers: String,
    vectors: Vec<Vec<f32>>,
}

pub fn run(args: EmbedArgs) -> Result<()> {
    let docs = match &args.docs {
        Some(d) => d.clone(),
        None => crate::bench::default_docs()?,
    };
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("machine: {threads} cores, {}; {}", crate::bench::cpu_name(), cpu_flags());
    let model_dir = quire_models::MINILM.location()?;
    let embedder = Embedder::load_with(&model_dir, ForwardPass::Fused)?;
    let chunker = Chunker::new(embedder.tokenizer())?;
    let chunks = crate::bench::sample_chunks(&docs, &chunker)?;
    let texts: Vec<&str> =
        chunks.iter().filter(|(_, c)| c.tokens >= 400).map(|(_, c)| c.text.as_str()).take(args.chunks).collect();
    anyhow::ensure!(texts.len() >= 16, "only {} full-size chunks under {}", texts.len(), docs.display());
    let tokens: usize = texts.iter().map(|t| chunker.count_tokens(t)).sum();
    println!(
        "{} chunks of {:.0} embedder tokens on average, model {}",
        texts.len(),
        tokens as f64 / texts.len() as f64,
        embedder.name()
    );

    // One batch first, untimed, as the reference does (first-touch of the weights).
    embedder.embed_passages(&texts[..16])?;
    let t = Instant::now();
    let ours = embedder.embed_passages(&texts)?;
    let secs = t.elapsed().as_secs_f64();
    let (our_chunks, our_tokens) = (texts.len() as f64 / secs, tokens as f64 / secs);
    println!("  Quire                  {our_chunks:>7.2} chunks/s {our_tokens:>8.0} tokens/s   ({secs:.2} s)");
    // The candle tensor graph Quire embedded with before (QUIRE_EMBEDDER=candle), for the gain.
    let before = Embedder::load_with(&model_dir, ForwardPass::Candle)?;
    before.embed_passages(&texts[..16])?;
    let t = Instant::now();
    before.embed_passages(&texts)?;
    let before_secs = t.elapsed().as_secs_f64();
    println!(
        "  Quire, candle graph    {:>7.2} chunks/s {:>8.0} tokens/s   ({before_secs:.2} s; the fused pass is {:.2}x)",
        texts.len() as f64 / before_secs,
        tokens as f64 / before_secs,
        before_secs / secs
    );
    drop(before);

    let python = args.reference_python.unwrap_or_else(default_python);
    if !python.is_file() {
        println!("(no sentence-transformers to compare with: run `bash tools/setup-embed-reference.sh`, or pass --reference-python)");
        return Ok(());
    }
    let work = tempfile::tempdir().context("cannot make a temporary folder")?;
    let input = work.path().join("texts.jsonl");
    let lines: Vec<String> = texts.iter().map(|t| serde_json::to_string(t)).collect::<Result<_, _>>()?;
    std::fs::write(&input, lines.join("\n"))?;
    let output = work.path().join("reference.json");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/embed_reference.py");
    let status = std::process::Command::new(&python)
        .arg(&script)
        .arg(&model_dir)
        .arg(&input)
        .arg(&output)
        .args(["--threads", &threads.to_string()])
        .status()
        .with_context(|| format!("cannot run {}", python.display()))?;
    anyhow::ensure!(status.success(), "the reference script failed ({status})");
    let reference: Reference =
        serde_json::from_slice(&std::fs::read(&output)?).context("the reference wrote no figures")?;
    println!(
        "  sentence-transformers  {:>7.2} chunks/s {:>8.0} tokens/s   (sentence-transformers {}, torch {}, {threads} threads)",
        reference.chunks_per_s, reference.tokens_per_s, reference.sentence_transformers, reference.torch
    );
    println!("  ratio Quire / sentence-transformers  {:.2}", our_chunks / reference.chunks_per_s);
    anyhow::ensure!(
        reference.vectors.len() == ours.len(),
        "the reference returned {} vectors for {}",
        reference.vectors.len(),
        ours.len()
    );
    let cosines: Vec<f32> =
        ours.iter().zip(&reference.vectors).map(|(a, b)| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()).collect();
    let lowest = cosines.iter().copied().fold(f32::INFINITY, f32::min);
    let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
    println!("  vectors: cosine to the reference's, lowest {lowest:.5}, mean {mean:.5}");
    Ok(())
}

/// Where `tools/setup-embed-reference.sh` makes the reference's Python.
fn default_python() -> PathBuf {
    let venv = std::env::var_os("QUIRE_ST_VENV").map(PathBuf::from).unwrap_or_else(|| {
        std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(".cache/quire/st-venv")
    });
    venv.join("bin/python")
}

/// The CPU features that decide which kernels run, as the benchmark's record needs them.
fn cpu_flags() -> String {
    let wanted = ["avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8"];
    let flags = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("flags")).map(|l| l.to_owned()))
        .unwrap_or_default();
    let have: Vec<&str> = wanted.iter().copied().filter(|f| flags.split_whitespace().any(|x| x == *f)).collect();
    format!("flags {}", have.join(" "))
}
