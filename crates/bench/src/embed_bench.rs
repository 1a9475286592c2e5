//! `quire bench embed`: Quire's embedder and its peers side by side on the same machine, in the
//! same run, on the same chunk texts: sentence-transformers (the library people would otherwise
//! use) and onnxruntime with an int8 MiniLM (the fastest CPU runtime, at its best batch size),
//! each round Quire then each peer; and Quire's f32 pass and candle tensor graph (the paths it
//! had before). Full-size chunks of the sample documents, as ingestion makes them. Prints each
//! one's chunks/s and tokens/s, the median ratio, and how close the vectors are (cosine per
//! chunk). `QUIRE_KERNELS` picks Quire's kernel set, for the figures of CPUs without AVX-512.
//! The peers run `tools/embed_reference.py` in their own virtual environment
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
    /// Rounds of Quire then sentence-transformers, back to back: the machine's speed drifts
    /// within a run, so each round's ratio is printed and the median is the figure.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

#[derive(Deserialize)]
struct Reference {
    chunks_per_s: f64,
    tokens_per_s: f64,
    runtime: String,
    /// onnxruntime's figure (chunks/s) for each configuration it tried.
    #[serde(default)]
    configurations: std::collections::BTreeMap<String, f64>,
    vectors: Vec<Vec<f32>>,
}

/// The peers, each run in every round after Quire: the library people would otherwise use,
/// and the fastest CPU runtime with an int8 model.
const PEERS: [(&str, &str); 2] =
    [("sentence-transformers", "sentence-transformers"), ("onnxruntime int8", "onnxruntime-int8")];

pub fn run(args: EmbedArgs) -> Result<()> {
    let docs = match &args.docs {
        Some(d) => d.clone(),
        None => crate::bench_inputs::default_docs()?,
    };
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("machine: {threads} cores, {}; {}", crate::bench_inputs::cpu_name(), cpu_flags());
    let model_dir = quire_models::MINILM.location()?;
    let embedder = Embedder::load_with(&model_dir, ForwardPass::FusedInt8)?;
    let chunker = Chunker::new(embedder.tokenizer())?;
    let chunks = crate::bench_inputs::sample_chunks(&docs, &chunker)?;
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
    let set = quire_simd::KernelSet::in_use().name();
    let kernel = if ForwardPass::int8_available() {
        format!("int8, {set} kernels")
    } else {
        format!("f32, {set} kernels: no int8 kernels in this set")
    };
    println!(
        "  Quire                  {our_chunks:>7.2} chunks/s {our_tokens:>8.0} tokens/s   ({secs:.2} s; {kernel})"
    );
    // The passes Quire embedded with before, for the gain: the fused pass in f32
    // (QUIRE_EMBEDDER=f32) and candle's tensor graph (QUIRE_EMBEDDER=candle).
    let mut f32_vectors = None;
    for (pass, label) in [(ForwardPass::Fused, "Quire, f32 fused pass"), (ForwardPass::Candle, "Quire, candle graph")] {
        let before = Embedder::load_with(&model_dir, pass)?;
        before.embed_passages(&texts[..16])?;
        let t = Instant::now();
        let vectors = before.embed_passages(&texts)?;
        let before_secs = t.elapsed().as_secs_f64();
        println!(
            "  {label:<22} {:>7.2} chunks/s {:>8.0} tokens/s   ({before_secs:.2} s; Quire's default is {:.2}x)",
            texts.len() as f64 / before_secs,
            tokens as f64 / before_secs,
            before_secs / secs
        );
        if pass == ForwardPass::Fused {
            f32_vectors = Some(vectors);
        }
    }
    if let Some(exact) = &f32_vectors {
        let (lowest, mean) = cosines(&ours, exact);
        println!("  vectors: cosine to the f32 pass's, lowest {lowest:.5}, mean {mean:.5}");
    }

    let python = args.reference_python.unwrap_or_else(default_python);
    if !python.is_file() {
        println!("(no sentence-transformers to compare with: run `bash tools/setup-embed-reference.sh`, or pass --reference-python)");
        return Ok(());
    }
    let work = tempfile::tempdir().context("cannot make a temporary folder")?;
    let input = work.path().join("texts.jsonl");
    let lines: Vec<String> = texts.iter().map(serde_json::to_string).collect::<Result<_, _>>()?;
    std::fs::write(&input, lines.join("\n"))?;
    let output = work.path().join("reference.json");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/embed_reference.py");
    let mut ratios = vec![Vec::new(); PEERS.len()];
    let mut last = Vec::new();
    for round in 1..=args.rounds.max(1) {
        let t = Instant::now();
        embedder.embed_passages(&texts)?;
        let ours_per_s = texts.len() as f64 / t.elapsed().as_secs_f64();
        println!("  round {round}: Quire {ours_per_s:>6.2} chunks/s");
        last.clear();
        for (peer, (name, runtime)) in PEERS.iter().enumerate() {
            let status = std::process::Command::new(&python)
                .envs(peer_isa_limits())
                .arg(&script)
                .arg(&model_dir)
                .arg(&input)
                .arg(&output)
                .args(["--threads", &threads.to_string(), "--runtime", runtime])
                .status()
                .with_context(|| format!("cannot run {}", python.display()))?;
            anyhow::ensure!(
                status.success(),
                "the {name} reference failed ({status}): run `bash tools/setup-embed-reference.sh`"
            );
            let theirs: Reference =
                serde_json::from_slice(&std::fs::read(&output)?).context("the reference wrote no figures")?;
            ratios[peer].push(ours_per_s / theirs.chunks_per_s);
            let tried: Vec<String> = theirs.configurations.iter().map(|(c, v)| format!("{c} {v:.2}")).collect();
            println!(
                "           {name:<22} {:>6.2} chunks/s ({:.0} tokens/s; {}, {threads} threads{}): ratio {:.2}",
                theirs.chunks_per_s,
                theirs.tokens_per_s,
                theirs.runtime,
                if tried.is_empty() { String::new() } else { format!("; tried {}", tried.join(", ")) },
                ours_per_s / theirs.chunks_per_s
            );
            last.push(theirs);
        }
    }
    for ((name, _), ratios) in PEERS.iter().zip(&mut ratios) {
        ratios.sort_by(f64::total_cmp);
        println!("  ratio Quire / {name}, median of {} rounds: {:.2}", ratios.len(), ratios[ratios.len() / 2]);
    }
    for ((name, _), reference) in PEERS.iter().zip(&last) {
        anyhow::ensure!(
            reference.vectors.len() == ours.len(),
            "{name} returned {} vectors for {}",
            reference.vectors.len(),
            ours.len()
        );
        let (lowest, mean) = cosines(&ours, &reference.vectors);
        println!("  vectors: cosine to {name}'s, lowest {lowest:.5}, mean {mean:.5}");
    }
    Ok(())
}

/// Where `QUIRE_KERNELS` makes Quire run a narrower set than the CPU has (the figures of CPUs
/// without AVX-512), PyTorch's kernels are held to the same instructions: its own dispatch,
/// MKL's and oneDNN's. onnxruntime has no such switch: it runs its AVX-512 kernels regardless,
/// which favours it.
fn peer_isa_limits() -> Vec<(&'static str, &'static str)> {
    match quire_simd::KernelSet::in_use() {
        quire_simd::KernelSet::AvxVnni => {
            vec![
                ("ATEN_CPU_CAPABILITY", "avx2"),
                ("MKL_ENABLE_INSTRUCTIONS", "AVX2_E1"),
                ("ONEDNN_MAX_CPU_ISA", "AVX2_VNNI"),
            ]
        }
        quire_simd::KernelSet::Avx2 => {
            vec![("ATEN_CPU_CAPABILITY", "avx2"), ("MKL_ENABLE_INSTRUCTIONS", "AVX2"), ("ONEDNN_MAX_CPU_ISA", "AVX2")]
        }
        _ => Vec::new(),
    }
}

/// The lowest and the mean cosine of each vector of `a` to the same one of `b` (both
/// L2-normalised).
fn cosines(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f32, f32) {
    let each: Vec<f32> = a.iter().zip(b).map(|(x, y)| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>()).collect();
    (each.iter().copied().fold(f32::INFINITY, f32::min), each.iter().sum::<f32>() / each.len().max(1) as f32)
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
