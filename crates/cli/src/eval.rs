//! `quire eval retrieval <dir>`: retrieval quality on a BEIR-format dataset. The corpus goes
//! through the real pipeline (each document written as a text file, ingested into a throwaway
//! knowledge base with the configured embedder), then every judged query is searched in dense,
//! BM25 and hybrid mode; chunk hits collapse to documents (first hit wins) before scoring.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use quire_engine::{Cancel, Engine, EngineConfig, SearchMode};
use quire_eval::metrics::score_query;
use quire_eval::{mean_scores, Dataset};

#[derive(Subcommand)]
pub enum EvalCommand {
    /// nDCG@10, recall@10/100 and MRR@10 of dense, BM25 and hybrid search on a BEIR dataset folder.
    Retrieval(RetrievalArgs),
}

#[derive(Args)]
pub struct RetrievalArgs {
    /// Folder with corpus.jsonl, queries.jsonl and qrels/<split>.tsv.
    dataset: PathBuf,
    #[arg(long, default_value = "test")]
    split: String,
    /// Evaluate only the first N judged queries (all by default).
    #[arg(long)]
    max_queries: Option<usize>,
    /// Embedding model folder (default: the installed default embedder).
    #[arg(long)]
    embedder: Option<PathBuf>,
}

/// Chunk hits asked for per query, so that 100 distinct documents remain after collapsing.
const CHUNK_DEPTH: usize = 200;

pub async fn run(command: EvalCommand) -> Result<()> {
    let EvalCommand::Retrieval(args) = command;
    let dataset = Dataset::load(&args.dataset, &args.split)?;
    let queries: Vec<_> = dataset.queries.iter().take(args.max_queries.unwrap_or(usize::MAX)).collect();
    println!("{}: {} documents, {} judged queries", args.dataset.display(), dataset.corpus.len(), queries.len());

    let work = tempfile::tempdir().context("cannot make a temporary folder")?;
    let files = work.path().join("corpus");
    std::fs::create_dir_all(&files)?;
    // File names are positions, so any document id (even one with '/') maps back safely.
    for (i, doc) in dataset.corpus.iter().enumerate() {
        let text = if doc.title.is_empty() { doc.text.clone() } else { format!("{}\n\n{}", doc.title, doc.text) };
        std::fs::write(files.join(format!("{i}.txt")), text)?;
    }
    let mut config = EngineConfig::from_home()?;
    config.data_dir = work.path().join("index");
    if let Some(e) = args.embedder {
        config.embedder_dir = e;
    }
    let engine = Engine::open(config).await?;
    let started = Instant::now();
    let report = engine.ingest(&[files.clone()], &mut |_| {}, &Cancel::new()).await?;
    println!(
        "ingested {} documents ({} chunks) in {:.0} s; {} failed",
        report.count(|o| matches!(o, quire_engine::FileOutcome::Indexed { .. })),
        report.chunks(),
        started.elapsed().as_secs_f64(),
        report.failed().len()
    );

    let doc_id = |path: &str| -> Option<&str> {
        let stem = std::path::Path::new(path).file_stem()?.to_str()?;
        dataset.corpus.get(stem.parse::<usize>().ok()?).map(|d| d.id.as_str())
    };
    println!("{:<8} {:>8} {:>10} {:>11} {:>8} {:>10}", "mode", "nDCG@10", "recall@10", "recall@100", "MRR@10", "queries/s");
    for (name, mode) in [("dense", SearchMode::Dense), ("bm25", SearchMode::Bm25), ("hybrid", SearchMode::Hybrid)] {
        let started = Instant::now();
        let mut scores = Vec::with_capacity(queries.len());
        for (qid, text) in &queries {
            let hits = engine.search(text, mode, CHUNK_DEPTH).await?;
            let mut seen = HashSet::new();
            let ranking: Vec<&str> = hits.iter().filter_map(|h| doc_id(&h.path)).filter(|d| seen.insert(*d)).collect();
            scores.push(score_query(&ranking, &dataset.qrels[qid.as_str()]));
        }
        let qps = queries.len() as f64 / started.elapsed().as_secs_f64();
        let m = mean_scores(&scores);
        println!(
            "{:<8} {:>8.2} {:>10.2} {:>11.2} {:>8.2} {:>10.1}",
            name,
            100.0 * m.ndcg_at_10,
            100.0 * m.recall_at_10,
            100.0 * m.recall_at_100,
            100.0 * m.mrr_at_10,
            qps
        );
    }
    Ok(())
}
