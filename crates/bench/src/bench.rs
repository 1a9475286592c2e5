//! `quire bench`: the first performance figures, measured on this machine in one run.
//! - embedding throughput in full-size (≈500-token) chunks per second;
//! - search latency (p50/p99) over a 10k-chunk knowledge base, dense (exact and HNSW), BM25, hybrid;
//!   its write rate in batches as the ingestion writes them, and its data folder before and
//!   after optimisation;
//! - decode speed of the answer model.
//!
//! `quire bench ingest <folder>`: the whole ingestion pipeline on a real corpus (a folder of
//! documents, or a BEIR folder whose corpus.jsonl is written out as files): chunks/s, where the
//! time went (the embedder's share), resident memory as the index grows, data folder size before
//! and after optimisation.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use quire_embed::Embedder;
use quire_engine::SearchMode;
use quire_index::{AnnParams, ChunkRecord, DocumentRecord, KnowledgeBase, SearchHit};
use quire_ingest::Chunker;

use crate::bench_inputs::{cpu_name, default_docs, sample_chunks};
use quire_llm::{GenerationRequest, Llm};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: Option<BenchCommand>,
    /// Documents to take chunks and queries from (default: the sample documents in ../shared).
    #[arg(long)]
    docs: Option<PathBuf>,
    /// Chunks in the search benchmark's knowledge base.
    #[arg(long, default_value_t = 10_000)]
    chunks: usize,
    /// Chunks embedded for the throughput figure.
    #[arg(long, default_value_t = 48)]
    embed_chunks: usize,
    /// Search queries timed per mode.
    #[arg(long, default_value_t = 200)]
    queries: usize,
    /// Answer model for the decode figure (name or GGUF path); `none` skips it.
    #[arg(long, default_value = "qwen2.5-coder-1.5b")]
    model: String,
    #[arg(long, default_value_t = 128)]
    decode_tokens: usize,
    #[command(flatten)]
    store: StoreArgs,
}

/// A shared store to keep the benchmark's library in, instead of a temporary folder.
#[derive(Args)]
struct StoreArgs {
    /// `s3://bucket/prefix` (credentials from QUIRE_S3_ACCESS_KEY_ID and
    /// QUIRE_S3_SECRET_ACCESS_KEY) or a folder; each run writes under a prefix of its own.
    #[arg(long)]
    store: Option<String>,
    /// The store's S3 endpoint (a Garage node: http://127.0.0.1:3910).
    #[arg(long)]
    endpoint: Option<String>,
    /// The store's S3 region.
    #[arg(long)]
    region: Option<String>,
}

impl StoreArgs {
    /// The store, under a prefix of this run's own.
    fn place(self) -> Option<quire_engine::StorePlace> {
        let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let run = format!("bench-{}-{}", std::process::id(), at.as_millis());
        let url = match self.store? {
            s3 if s3.starts_with("s3://") => format!("{}/{run}", s3.trim_end_matches('/')),
            folder => {
                let folder = PathBuf::from(folder).join(run);
                std::fs::create_dir_all(&folder).ok()?;
                folder.display().to_string()
            }
        };
        Some(quire_engine::StorePlace { url, endpoint: self.endpoint, region: self.region })
    }
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The ingestion pipeline on a real corpus: chunks/s, the embedder's share of the time,
    /// memory as the index grows, data folder size before and after optimisation.
    Ingest {
        /// A folder of documents, or a BEIR dataset folder (its corpus.jsonl is written out as files).
        corpus: PathBuf,
        /// Take only the first N documents of a BEIR corpus.
        #[arg(long)]
        max_docs: Option<usize>,
        /// Then ingest the same files again the way Quire did before (candle's tensor graph
        /// for the embedder, one file after the other) and print both times side by side.
        #[arg(long)]
        before: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Plain and speculative decoding side by side on RAG answers and free-form chat: tokens/s,
    /// ratio, tokens per target step, acceptance per draft source, identical greedy text.
    Speculative(crate::speculative::SpeculativeArgs),
    /// RAG answers back to back for ten minutes or more, as the app gives them: tokens/s and
    /// first word per answer over time, with the machine's thermal state, clock and temperature.
    Sustained(crate::sustained::SustainedArgs),
    /// Time to first token of RAG answers: a fresh question, a question after another, a
    /// follow-up over the same passages (the last prompt kept), each checked against a fresh run.
    Ttft(crate::ttft::TtftArgs),
    /// The embedder against sentence-transformers on the same chunk texts, same machine, same
    /// run: chunks/s, tokens/s, the ratio and how close the vectors are.
    Embed(crate::embed_bench::EmbedArgs),
    /// OCR against tesseract on the same page images: character error rate and seconds per page.
    Ocr(crate::ocr_bench::OcrArgs),
    /// The CPU decoder's KV cache in f32 and in 8 bits: bytes a token, and decoding's tokens/s
    /// after prompts of 1k, 4k and 16k tokens, alternated rounds.
    Kv(crate::kv_bench::KvArgs),
}

pub async fn run(args: BenchArgs) -> Result<()> {
    match args.what {
        Some(BenchCommand::Ingest { corpus, max_docs, before, store }) => {
            return bench_ingest(&corpus, max_docs, before, store.place()).await;
        }
        Some(BenchCommand::Speculative(args)) => return crate::speculative::run(args).await,
        Some(BenchCommand::Sustained(args)) => return crate::sustained::run(args).await,
        Some(BenchCommand::Ttft(args)) => return crate::ttft::run(args).await,
        Some(BenchCommand::Embed(args)) => return crate::embed_bench::run(args),
        Some(BenchCommand::Ocr(args)) => return crate::ocr_bench::run(args),
        Some(BenchCommand::Kv(args)) => return crate::kv_bench::run(args),
        None => {}
    }
    let docs_dir = match args.docs {
        Some(d) => d,
        None => default_docs()?,
    };
    println!("machine: {} cores, {}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), cpu_name());
    let embedder = Embedder::load(&quire_models::MINILM.location()?)?;
    let chunker = Chunker::new(embedder.tokenizer())?;
    let chunks = sample_chunks(&docs_dir, &chunker)?;

    // 1. Embedding throughput on full-size chunks.
    let mut big: Vec<&str> = chunks.iter().filter(|(_, c)| c.tokens >= 400).map(|(_, c)| c.text.as_str()).collect();
    big.truncate(args.embed_chunks);
    let mean_tokens = big.iter().map(|t| chunker.count_tokens(t)).sum::<usize>() as f64 / big.len() as f64;
    let t = Instant::now();
    embedder.embed_passages(&big)?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "embedding: {} chunks of {:.0} tokens on average in {:.2} s = {:.2} chunks/s ({:.0} tokens/s)",
        big.len(),
        mean_tokens,
        secs,
        big.len() as f64 / secs,
        big.len() as f64 * mean_tokens / secs
    );

    // 2. Search latency at `args.chunks` chunks. Embedding 10k real chunks would take most of an
    // hour here, so the table holds the real chunks' texts and embeddings, repeated with small
    // random perturbations (renormalised) until it has the size asked for.
    let texts: Vec<&str> = chunks.iter().map(|(_, c)| c.text.as_str()).collect();
    let base = embedder.embed_passages(&texts)?;
    let dir = tempfile_dir()?;
    // Sealed under a throwaway key: the figures include encryption, as in real use.
    let store = match args.store.place() {
        Some(place) => {
            println!("the search table kept in {}", place.url);
            Some(quire_engine::shared_store_at(place, "bench")?)
        }
        None => None,
    };
    let protection = quire_index::Protection::sealed(&quire_index::DataKey::random());
    let kb = KnowledgeBase::open_in(&dir, store.as_ref(), embedder.dim(), protection).await?;
    let mut rng = Lcg(42);
    // Documents of 8 chunks written in batches of 1,024 chunks, as the ingestion writes them.
    let per_doc = 8;
    let mut n = 0;
    let mut batch_docs = Vec::new();
    let mut batch_chunks: Vec<ChunkRecord> = Vec::new();
    let writing = Instant::now();
    let mut writes = 0;
    while n < args.chunks {
        let doc_id = format!("bench{}", n / per_doc);
        let batch: Vec<ChunkRecord> = (n..(n + per_doc).min(args.chunks))
            .map(|i| {
                let j = i % base.len();
                let mut v: Vec<f32> = base[j].iter().map(|x| x + 0.02 * rng.normal()).collect();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.iter_mut().for_each(|x| *x /= norm);
                let c = &chunks[j].1;
                ChunkRecord {
                    doc_id: doc_id.clone(),
                    hash: format!("bench{i}"),
                    seq: (i % per_doc) as u32,
                    page: c.page,
                    start: c.start as u64,
                    end: c.end as u64,
                    tokens: c.tokens as u32,
                    text: c.text.clone(),
                    vector: v,
                }
            })
            .collect();
        let record = DocumentRecord {
            doc_id: doc_id.clone(),
            path: format!("/bench/{doc_id}"),
            kind: "text".into(),
            content_hash: doc_id.clone(),
            bytes: 0,
            pages: 1,
            chunks: batch.len() as u32,
            ingested_at_ms: 0,
            modified_ms: 0,
        };
        n += batch.len();
        batch_docs.push(record);
        batch_chunks.extend(batch);
        if batch_chunks.len() >= 1024 || n >= args.chunks {
            kb.commit(&batch_docs, &batch_chunks).await?;
            writes += 1;
            batch_docs.clear();
            batch_chunks.clear();
            if writes % 50 == 0 {
                kb.prune(Duration::from_secs(60)).await?;
            }
        }
    }
    println!(
        "writes: {} chunks in {} batches in {:.1} s = {:.0} chunks/s (vectors given; no embedding)",
        n,
        writes,
        writing.elapsed().as_secs_f64(),
        n as f64 / writing.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    kb.refresh_indexes().await?;
    println!(
        "search table: {} chunks; indexes built in {:.1} s (HNSW: {})",
        kb.chunk_count().await?,
        t.elapsed().as_secs_f64(),
        kb.has_vector_index().await?
    );
    let before = quire_engine::memory::folder_bytes(&dir);
    let t = Instant::now();
    kb.optimize(Duration::ZERO).await?;
    println!(
        "data folder: {:.1} MB before optimisation, {:.1} MB after ({:.1} s to compact and prune)",
        before as f64 / 1e6,
        quire_engine::memory::folder_bytes(&dir) as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    let queries: Vec<String> = chunks
        .iter()
        .map(|(_, c)| c.text.split_whitespace().take(8).collect::<Vec<_>>().join(" "))
        .cycle()
        .take(args.queries)
        .collect();
    let qvecs: Vec<Vec<f32>> = queries.iter().map(|q| embedder.embed_query(q)).collect::<Result<_>>()?;
    search_figures(&kb, &queries, &qvecs).await?;
    drop(kb);
    let _ = std::fs::remove_dir_all(&dir);

    // 3. Decode speed of the answer model.
    if args.model != "none" {
        let path = quire_models::resolve(&args.model)?;
        let t = Instant::now();
        let llm = Llm::load(&path).await?;
        println!("model {} ({}): loaded in {:.1} s", path.display(), llm.describe(), t.elapsed().as_secs_f64());
        let request = GenerationRequest {
            system: "You are a helpful assistant.".into(),
            user: "Explain in detail how a search engine ranks documents for a query.".into(),
            schema: None,
            max_tokens: args.decode_tokens,
            temperature: None,
        };
        let g = llm.generate(&request, |_| {}, || false).await?;
        // Wall clock from the first streamed token to the last, besides the engine's own figure.
        let decode_secs = (g.stats.total_time - g.stats.time_to_first_token).as_secs_f64();
        println!(
            "decode: {} tokens at {:.2} tokens/s wall clock ({:.2} tokens/s as the decoder reports); prompt {} tokens at {:.1} tokens/s; first token after {:.2} s",
            g.stats.completion_tokens,
            g.stats.completion_tokens.saturating_sub(1) as f64 / decode_secs,
            g.stats.decode_tokens_per_sec,
            g.stats.prompt_tokens,
            g.stats.prompt_tokens_per_sec,
            g.stats.time_to_first_token.as_secs_f64()
        );
    }
    Ok(())
}

async fn bench_ingest(
    corpus: &std::path::Path,
    max_docs: Option<usize>,
    before: bool,
    store: Option<quire_engine::StorePlace>,
) -> Result<()> {
    println!("machine: {} cores, {}", std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0), cpu_name());
    let work = tempfile::tempdir().context("cannot make a temporary folder")?;
    let folder = if corpus.join("corpus.jsonl").is_file() {
        let dataset = quire_eval::Dataset::load_corpus(corpus)?;
        let files = work.path().join("corpus");
        std::fs::create_dir_all(&files)?;
        for (i, doc) in dataset.iter().take(max_docs.unwrap_or(usize::MAX)).enumerate() {
            std::fs::write(files.join(format!("{i}.txt")), format!("{}\n\n{}", doc.title, doc.text))?;
        }
        files
    } else {
        corpus.to_path_buf()
    };
    let mut config = quire_engine::EngineConfig::from_home()?;
    config.data_dir = work.path().join("index");
    config.keys = quire_engine::KeyAccess::ephemeral();
    let data_dir = config.data_dir.clone();
    if let Some(place) = store {
        println!("the library kept in {}", place.url);
        quire_engine::attach_store(&data_dir, place, None).await?;
    }
    let (engine, now) = ingest_timed(&folder, config.clone(), "now").await?;
    // Search on the real vectors: the corpus's own queries when it is a BEIR folder.
    let queries: Vec<String> = match quire_eval::Dataset::load(corpus, "test") {
        Ok(d) => d.queries.into_iter().map(|(_, q)| q).take(200).collect(),
        Err(_) => engine
            .search("the", quire_engine::SearchMode::Bm25, 200)
            .await?
            .iter()
            .map(|h| h.text.split_whitespace().take(8).collect::<Vec<_>>().join(" "))
            .collect(),
    };
    let qvecs: Vec<Vec<f32>> = queries.iter().map(|q| engine.embedder().embed_query(q)).collect::<Result<_>>()?;
    println!("search over {} real chunks:", engine.knowledge_base().chunk_count().await?);
    search_figures(engine.knowledge_base(), &queries, &qvecs).await?;
    let size = quire_engine::memory::folder_bytes(&data_dir);
    engine.optimize(Duration::ZERO).await?;
    println!(
        "data folder: {:.1} MB after the ingestion, {:.1} MB after `quire optimize`",
        size as f64 / 1e6,
        quire_engine::memory::folder_bytes(&data_dir) as f64 / 1e6
    );
    drop(engine);
    if before {
        config.data_dir = work.path().join("index-before");
        config.embedder_pass = quire_engine::ForwardPass::Candle;
        config.read_ahead = false;
        let (_, then) = ingest_timed(&folder, config, "before").await?;
        println!("the same files, the same run:");
        for (label, r) in [("before (candle graph, one file after another)", &then), ("now", &now)] {
            println!(
                "  {label:<46} {:>8.1} s  {:>6.2} chunks/s  embedding {:.1}% of the time",
                r.timings.total_s,
                r.embedded() as f64 / r.timings.total_s,
                100.0 * r.timings.embedding_s / r.timings.total_s.max(1e-9)
            );
        }
        println!("  now / before: {:.2}x faster", then.timings.total_s / now.timings.total_s.max(1e-9));
    }
    Ok(())
}

/// One ingestion of `folder` into `config`'s data folder, with progress lines and the time split.
async fn ingest_timed(
    folder: &std::path::Path,
    config: quire_engine::EngineConfig,
    label: &str,
) -> Result<(quire_engine::Engine, quire_engine::IngestReport)> {
    let engine = quire_engine::Engine::open(config).await?;
    let rss = || quire_engine::memory::MemoryReading::now().process_rss_bytes as f64 / 1e6;
    println!(
        "{label}: embedder {:?}, resident memory with it loaded: {:.0} MB",
        engine.embedder().forward_pass(),
        rss()
    );
    let mut next_report = 0.0;
    let report = engine
        .ingest(&[folder.to_path_buf()], &mut |e| {
            if let quire_engine::Event::IngestProgress { files_done, files_total, chunks_embedded, chunks_per_s, .. } = e {
                let share = files_done as f64 / files_total.max(1) as f64;
                if share >= next_report {
                    println!(
                        "  {:>3.0}% of files, {chunks_embedded:>6} chunks embedded, {chunks_per_s:.2} chunks/s, RSS {:.0} MB, peak {:.0} MB",
                        100.0 * share,
                        rss(),
                        quire_engine::memory::peak_rss_bytes().unwrap_or(0) as f64 / 1e6
                    );
                    next_report = share + 0.1;
                }
            }
        }, &quire_engine::Cancel::new())
        .await?;
    let t = &report.timings;
    let share = |s: f64| 100.0 * s / t.total_s.max(1e-9);
    println!(
        "ingested {} files, {} chunks ({} embedded) in {:.1} s = {:.2} chunks/s; {} failed",
        report.count(|o| matches!(o, quire_engine::FileOutcome::Indexed { .. })),
        report.chunks(),
        report.embedded(),
        t.total_s,
        report.embedded() as f64 / t.total_s,
        report.failed().len()
    );
    println!(
        "time: embedding {:.1}%, waiting for reading {:.1}% and chunking {:.1}%, storing {:.1}%, indexing and compaction {:.1}%, other {:.1}%",
        share(t.embedding_s),
        share(t.reading_s),
        share(t.chunking_s),
        share(t.storing_s),
        share(t.indexing_s),
        100.0 - share(t.embedding_s + t.reading_s + t.chunking_s + t.storing_s + t.indexing_s)
    );
    println!("peak RSS: {:.0} MB", quire_engine::memory::peak_rss_bytes().unwrap_or(0) as f64 / 1e6);
    Ok((engine, report))
}

/// Search latency (p50/p99, top 10) in every mode, and the ANN index's recall@10 against an exact
/// scan at several efforts, on the same queries.
async fn search_figures(kb: &KnowledgeBase, queries: &[String], qvecs: &[Vec<f32>]) -> Result<()> {
    let mut recall_hits = 0usize;
    let mut recall_total = 0usize;
    for (label, mode) in [
        ("dense exact", None),
        ("dense hnsw", Some(SearchMode::Dense)),
        ("bm25", Some(SearchMode::Bm25)),
        ("hybrid", Some(SearchMode::Hybrid)),
    ] {
        let mut times = Vec::with_capacity(queries.len());
        for (q, v) in queries.iter().zip(qvecs) {
            let t = Instant::now();
            let hits = match mode {
                None => kb.search_dense(v, 10, true).await?,
                Some(SearchMode::Dense) => kb.search_dense(v, 10, false).await?,
                Some(SearchMode::Bm25) => kb.search_bm25(q, 10).await?,
                Some(SearchMode::Hybrid) => kb.search_hybrid(v, q, 10).await?,
            };
            times.push(t.elapsed());
            if mode == Some(SearchMode::Dense) {
                let exact = kb.search_dense(v, 10, true).await?;
                recall_total += exact.len();
                recall_hits += exact.iter().filter(|e| hits.iter().any(|h| h.chunk_id == e.chunk_id)).count();
            }
        }
        times.sort();
        println!(
            "search {label:<12} p50 {:>7.2} ms  p95 {:>7.2} ms  p99 {:>7.2} ms  ({} queries, top 10)",
            ms(percentile(&times, 0.50)),
            ms(percentile(&times, 0.95)),
            ms(percentile(&times, 0.99)),
            times.len()
        );
    }
    println!("dense hnsw recall@10 vs exact: {:.3}", recall_hits as f64 / recall_total.max(1) as f64);
    if kb.has_vector_index().await? {
        // The index's effort against recall and latency, on the same queries.
        let exact: Vec<Vec<SearchHit>> = {
            let mut out = Vec::new();
            for v in qvecs {
                out.push(kb.search_dense(v, 10, true).await?);
            }
            out
        };
        for (nprobes, refine) in [(20, 4), (20, 10), (20, 20), (40, 10), (40, 20)] {
            let params = AnnParams { nprobes, refine };
            let (mut times, mut hits_found) = (Vec::new(), 0usize);
            for (v, truth) in qvecs.iter().zip(&exact) {
                let t = Instant::now();
                let hits = kb.search_dense_with(v, 10, Some(params)).await?;
                times.push(t.elapsed());
                hits_found += truth.iter().filter(|e| hits.iter().any(|h| h.chunk_id == e.chunk_id)).count();
            }
            times.sort();
            println!(
                "  hnsw nprobes {nprobes:>2} refine {refine:>2}: recall@10 {:.3}, p50 {:.2} ms, p99 {:.2} ms",
                hits_found as f64 / exact.iter().map(|e| e.len()).sum::<usize>().max(1) as f64,
                ms(percentile(&times, 0.50)),
                ms(percentile(&times, 0.99))
            );
        }
    }
    Ok(())
}

fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("quire-bench-{}", std::process::id()));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(dir)
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A tiny deterministic generator: the benchmark's table is the same on every run.
struct Lcg(u64);

impl Lcg {
    fn uniform(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 + 0.5) / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        // Box–Muller.
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f32::consts::PI * u2).cos()
    }
}
