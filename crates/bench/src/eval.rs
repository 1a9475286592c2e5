//! `quire eval`: quality you can measure.
//! - `retrieval <dir>`: a BEIR-format dataset's corpus goes through the real pipeline (each
//!   document written as a text file, ingested into a throwaway knowledge base), then every judged
//!   query is searched dense and BM25, and the two lists are fused with each fusion variant;
//!   chunk hits collapse to documents (first hit wins) before scoring.
//! - `answers <file>`: questions with gold documents and pages (JSONL) asked through the whole
//!   pipeline; reports parse rate, citation checks, gold-page citations, verbatim quotes and
//!   timings, after a page-level retrieval table for the same questions.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use quire_engine::{language_of, Cancel, Engine, EngineConfig, FileOutcome, SearchHit, SearchMode};
use quire_eval::answers::{by_group, by_kind, judge, load_answer_set, report, AnswerCase, AnswerOutcome, CitedPassage};
use quire_eval::metrics::score_query;
use quire_eval::{mean_scores, Dataset, QueryScores};
use quire_index::{fuse, hybrid_pool, Fusion, DEFAULT_FUSION};

#[derive(Subcommand)]
pub enum EvalCommand {
    /// nDCG@10, recall@10/100 and MRR@10 of dense, BM25 and hybrid search on a BEIR dataset folder.
    Retrieval(RetrievalArgs),
    /// Ask a JSONL set of questions with gold documents/pages; report parse, citation and quote checks.
    Answers(AnswersArgs),
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
    /// Keep the ingested corpus in this folder and reuse it on the next run (default: a
    /// temporary folder, removed at the end).
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

#[derive(Args)]
pub struct AnswersArgs {
    /// JSONL file: {"question", "answer", "document", "pages", "evidence"} per line.
    questions: PathBuf,
    /// Folder the documents are named relative to; it is ingested into a throwaway knowledge
    /// base. Without it the questions go to your default collection.
    #[arg(long)]
    docs: Option<PathBuf>,
    /// Passages retrieved per question (default: the engine's).
    #[arg(long)]
    top_k: Option<usize>,
    /// Show the model only the sentences of each passage that bear on the question, this
    /// many tokens per passage on average; 0 shows whole passages.
    #[arg(long, default_value_t = quire_engine::DEFAULT_FOCUS_TOKENS)]
    focus_tokens: usize,
    /// Ask only the first N questions (the retrieval table covers all).
    #[arg(long)]
    limit: Option<usize>,
    /// Answer model GGUF (default: the installed default answer model).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Write the whole report (summary and every answer) as JSON to this file.
    #[arg(long)]
    report: Option<PathBuf>,
}

/// Chunk hits kept per list, so that 100 distinct documents remain after collapsing.
const CHUNK_DEPTH: usize = 200;

pub async fn run(command: EvalCommand) -> Result<()> {
    match command {
        EvalCommand::Retrieval(args) => retrieval(args).await,
        EvalCommand::Answers(args) => answers(args).await,
    }
}

/// Dense and BM25 candidates for one query, and the time each search took.
struct Candidates {
    dense: Vec<SearchHit>,
    bm25: Vec<SearchHit>,
    dense_time: Duration,
    bm25_time: Duration,
}

async fn candidates(engine: &Engine, query: &str, pool: usize) -> Result<Candidates> {
    let t = Instant::now();
    let dense = engine.search(query, SearchMode::Dense, pool).await?;
    let dense_time = t.elapsed();
    let t = Instant::now();
    let bm25 = engine.search(query, SearchMode::Bm25, pool).await?;
    Ok(Candidates { dense, bm25, dense_time, bm25_time: t.elapsed() })
}

/// The rankings compared: dense, BM25, then each fusion variant (the default one first).
fn rankings(c: &Candidates, depth: usize) -> Vec<(String, Vec<SearchHit>)> {
    let mut out = vec![
        ("dense".to_string(), c.dense.iter().take(depth).cloned().collect()),
        ("bm25".to_string(), c.bm25.iter().take(depth).cloned().collect()),
    ];
    let mut fusions = vec![DEFAULT_FUSION];
    fusions.extend(Fusion::candidates().into_iter().filter(|f| *f != DEFAULT_FUSION));
    for (i, f) in fusions.into_iter().enumerate() {
        let name = if i == 0 { format!("hybrid ({})", f.label()) } else { format!("  {}", f.label()) };
        out.push((name, fuse(&c.dense, &c.bm25, f, depth)));
    }
    out
}

async fn retrieval(args: RetrievalArgs) -> Result<()> {
    let dataset = Dataset::load(&args.dataset, &args.split)?;
    let queries: Vec<_> = dataset.queries.iter().take(args.max_queries.unwrap_or(usize::MAX)).collect();
    println!("{}: {} documents, {} judged queries", args.dataset.display(), dataset.corpus.len(), queries.len());

    let temp;
    let work = match &args.work_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
            dir.clone()
        }
        None => {
            temp = tempfile::tempdir().context("cannot make a temporary folder")?;
            temp.path().to_path_buf()
        }
    };
    let files = work.join("corpus");
    std::fs::create_dir_all(&files)?;
    // File names are positions, so any document id (even one with '/') maps back safely.
    // Unchanged files are left alone so that a kept work folder is not re-read.
    for (i, doc) in dataset.corpus.iter().enumerate() {
        let text = if doc.title.is_empty() { doc.text.clone() } else { format!("{}\n\n{}", doc.title, doc.text) };
        let path = files.join(format!("{i}.txt"));
        if std::fs::read(&path).ok().as_deref() != Some(text.as_bytes()) {
            std::fs::write(&path, text)?;
        }
    }
    let mut config = EngineConfig::from_home()?;
    config.data_dir = work.join("index");
    if args.work_dir.is_none() {
        config.keys = quire_engine::KeyAccess::ephemeral(); // a throwaway collection
    }
    if let Some(e) = args.embedder {
        config.embedder_dir = e;
    }
    let engine = Engine::open(config).await?;
    let started = Instant::now();
    let report = engine.ingest(std::slice::from_ref(&files), &mut |_| {}, &Cancel::new()).await?;
    println!(
        "ingested {} documents ({} chunks) in {:.0} s; {} unchanged; {} failed",
        report.count(|o| matches!(o, FileOutcome::Indexed { .. })),
        report.chunks(),
        started.elapsed().as_secs_f64(),
        report.count(|o| matches!(o, FileOutcome::Unchanged)),
        report.failed().len()
    );

    let doc_id = |path: &str| -> Option<&str> {
        let stem = Path::new(path).file_stem()?.to_str()?;
        dataset.corpus.get(stem.parse::<usize>().ok()?).map(|d| d.id.as_str())
    };
    let mut scores: Vec<(String, Vec<QueryScores>)> = Vec::new();
    let (mut dense_time, mut bm25_time) = (Duration::ZERO, Duration::ZERO);
    for (qid, text) in &queries {
        let c = candidates(&engine, text, hybrid_pool(CHUNK_DEPTH)).await?;
        dense_time += c.dense_time;
        bm25_time += c.bm25_time;
        for (i, (name, hits)) in rankings(&c, CHUNK_DEPTH).into_iter().enumerate() {
            let mut seen = HashSet::new();
            let ranking: Vec<&str> = hits.iter().filter_map(|h| doc_id(&h.path)).filter(|d| seen.insert(*d)).collect();
            if scores.len() <= i {
                scores.push((name, Vec::new()));
            }
            scores[i].1.push(score_query(&ranking, &dataset.qrels[qid.as_str()]));
        }
    }
    let qps = |t: Duration| queries.len() as f64 / t.as_secs_f64().max(1e-9);
    println!(
        "{:<26} {:>8} {:>10} {:>11} {:>8} {:>10}",
        "mode", "nDCG@10", "recall@10", "recall@100", "MRR@10", "queries/s"
    );
    for (i, (name, per_query)) in scores.iter().enumerate() {
        let m = mean_scores(per_query);
        let speed = match i {
            0 => format!("{:.1}", qps(dense_time)),
            1 => format!("{:.1}", qps(bm25_time)),
            2 => format!("{:.1}", qps(dense_time + bm25_time)),
            _ => String::new(),
        };
        println!(
            "{:<26} {:>8.2} {:>10.2} {:>11.2} {:>8.2} {:>10}",
            name,
            100.0 * m.ndcg_at_10,
            100.0 * m.recall_at_10,
            100.0 * m.recall_at_100,
            100.0 * m.mrr_at_10,
            speed
        );
    }
    Ok(())
}

async fn answers(args: AnswersArgs) -> Result<()> {
    let cases = load_answer_set(&args.questions)?;
    let mut config = EngineConfig::from_home()?;
    if let Some(m) = &args.model {
        config.llm_path = m.clone();
    }
    if let Some(k) = args.top_k {
        anyhow::ensure!(k > 0, "--top-k must be at least 1");
        config.top_k = k;
    }
    config.focus_tokens = (args.focus_tokens > 0).then_some(args.focus_tokens);
    let temp = tempfile::tempdir().context("cannot make a temporary folder")?;
    let top_k = config.top_k;
    println!(
        "{}: {} questions; answer model {}; {} passages per question",
        args.questions.display(),
        cases.len(),
        config.llm_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        top_k
    );
    let engine = open_with_documents(config, &cases, args.docs.as_deref(), temp.path()).await?;
    check_gold_passages(&engine, &cases).await?;

    // Retrieval at page level: a passage is relevant when it lies on a gold page. A question
    // the documents do not answer has no gold passage (its document is only the nearest one).
    let answerable: Vec<&AnswerCase> = cases.iter().filter(|c| !c.unanswerable).collect();
    println!("\nretrieval ({} answerable questions; a hit is a passage on a gold page)", answerable.len());
    println!("{:<26} {:>7} {:>7} {:>7} {:>7} {:>8}", "mode", "hit@1", "hit@3", "hit@5", "hit@10", "MRR@10");
    let mut table: Vec<(String, Vec<[f64; 5]>)> = Vec::new();
    for case in answerable {
        let c = candidates(&engine, &case.question, hybrid_pool(10)).await?;
        let mut ranked = rankings(&c, 10);
        // The order the passages shown are taken from: the default fusion, the question's
        // literal symbols first, tables of contents and indexes last.
        ranked.insert(2, ("shown (literals, contents)".to_string(), engine.ranked(&case.question, 10).await?));
        for (i, (name, hits)) in ranked.into_iter().enumerate() {
            let gold: Vec<bool> = hits.iter().map(|h| case.is_gold_page(&h.path, h.page)).collect();
            let hit_at = |k: usize| if gold.iter().take(k).any(|g| *g) { 1.0 } else { 0.0 };
            let mrr = gold.iter().position(|g| *g).map(|p| 1.0 / (p + 1) as f64).unwrap_or(0.0);
            if table.len() <= i {
                table.push((name, Vec::new()));
            }
            table[i].1.push([hit_at(1), hit_at(3), hit_at(5), hit_at(10), mrr]);
        }
    }
    // Per mode, the mean of each column over the questions.
    let table: Vec<(String, [f64; 5])> = table
        .into_iter()
        .map(|(name, rows)| {
            let mut mean = [0.0; 5];
            for (j, m) in mean.iter_mut().enumerate() {
                *m = rows.iter().map(|r| r[j]).sum::<f64>() / rows.len() as f64;
            }
            (name, mean)
        })
        .collect();
    for (name, m) in &table {
        println!(
            "{:<26} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>8.1}",
            name,
            100.0 * m[0],
            100.0 * m[1],
            100.0 * m[2],
            100.0 * m[3],
            100.0 * m[4]
        );
    }

    // Answers through the whole pipeline.
    let asked: Vec<&AnswerCase> = cases.iter().take(args.limit.unwrap_or(usize::MAX)).collect();
    if !asked.is_empty() {
        // As the app does when it loads the model: the first question is timed like the rest.
        engine.prepare_llm().await?;
    }
    println!("\nanswers ({} questions)", asked.len());
    let mut rows = Vec::new();
    let mut details = Vec::new();
    for (i, case) in asked.iter().enumerate() {
        let outcome = ask_one(&engine, case).await;
        let verdict = judge(case, &outcome);
        let mark = |ok: bool, label: &str| if ok { label.to_string() } else { format!("-{label}") };
        let marks = if case.unanswerable {
            format!("{} unanswerable {}", mark(verdict.parsed, "parse"), mark(verdict.declined, "declined"))
        } else {
            format!(
                "{} {} {} {}{}{}",
                mark(verdict.parsed, "parse"),
                mark(outcome.gold_retrieved, "retrieved"),
                mark(verdict.cites_gold_page, "page"),
                mark(verdict.quotes_verbatim, "quote"),
                if case.facts.is_empty() { String::new() } else { format!(" {}", mark(verdict.right_fact, "fact")) },
                if verdict.declined { " DECLINED" } else { "" }
            )
        };
        println!(
            "[{:>2}/{}] {marks} {:>5.1} s {:>5.1} tok/s  {} → {}",
            i + 1,
            asked.len(),
            outcome.time_to_first_token_s,
            outcome.decode_tokens_per_s,
            case.question,
            outcome.answer.as_deref().or(outcome.error.as_deref()).unwrap_or_default().replace('\n', " ")
        );
        for c in outcome.citations.iter().filter(|c| !c.quote_found) {
            println!("        quote not in the cited passage ({}, page {:?}): {:?}", c.path, c.page, c.quote);
        }
        if verdict.unsupported_citation || verdict.label_quote {
            let quotes: Vec<&str> = outcome.citations.iter().map(|c| c.quote.as_str()).collect();
            println!("        a quote does not hold the answer's key terms: {quotes:?}");
        }
        if let Some(withdrawn) = &outcome.withdrawn {
            println!("        withdrawn, no cited passage supports it: {withdrawn:?}");
        }
        details.push(serde_json::json!({ "case": case, "outcome": outcome, "verdict": verdict }));
        rows.push((*case, outcome, verdict));
    }
    let summary = report(&rows);
    let pct = |x: f64| format!("{:.1} %", 100.0 * x);
    println!(
        "\nquestions                          {} ({} answerable, {} not answered by the documents)",
        summary.questions, summary.answerable, summary.unanswerable
    );
    println!("answers that parse                 {}", pct(summary.parsed));
    println!("declined when unanswerable         {}", pct(summary.declined_when_unanswerable));
    println!("answered when answerable           {}", pct(summary.answered_when_answerable));
    println!("of the answers given:");
    println!("  citations all among retrieved    {}", pct(summary.citations_retrieved));
    println!("  quotes found word for word       {}", pct(summary.quotes_verbatim));
    println!("  a citation not supporting        {}", pct(summary.unsupported_citations));
    println!("  a quote only a number or label   {}", pct(summary.label_quotes));
    println!("of the answerable questions:");
    println!("  cite the gold document           {}", pct(summary.cites_gold_document));
    println!("  cite a gold page                 {}", pct(summary.cites_gold_page));
    println!("  gold page among retrieved        {}", pct(summary.gold_retrieved));
    println!("  gold answer's words in answer    {}", pct(summary.mean_gold_words));
    if summary.with_facts > 0 {
        println!("of the {} questions naming facts:", summary.with_facts);
        println!("  the right fact                   {}", pct(summary.right_fact));
        println!("  the right fact on a gold page    {}", pct(summary.right_fact_and_gold_page));
    }
    let kinds = by_kind(&rows);
    // A set asked in several languages: each language's figures too.
    let languages = by_group(&rows, |case| language_of(&case.question).map(|l| l.english_name().to_string()));
    let languages = if languages.len() > 1 { languages } else { Vec::new() };
    for (groups, heading) in [(&kinds, "by kind"), (&languages, "by the question's language")] {
        if groups.is_empty() {
            continue;
        }
        println!("{heading} (answerable: every fact on a gold page; unanswerable: declined)");
        for g in groups.iter() {
            let in_language = g.in_question_language.map(|share| format!("  in its language {:>6}", pct(share)));
            println!(
                "  {:<32} {:>3} questions  right {:>6}  declined {:>6}{}",
                g.group,
                g.questions,
                pct(g.right),
                pct(g.declined),
                in_language.unwrap_or_default()
            );
        }
    }
    if summary.language_told > 0 {
        println!(
            "in the question's language         {} of {} replies whose language tells",
            pct(summary.in_question_language),
            summary.language_told
        );
    }
    println!("mean time to first token           {:.1} s", summary.mean_time_to_first_token_s);
    println!("mean first word from the question  {:.1} s", summary.mean_first_word_s);
    println!("mean decode speed                  {:.1} tokens/s", summary.mean_decode_tokens_per_s);
    if let Some(path) = &args.report {
        let retrieval: Vec<_> = table
            .iter()
            .map(|(name, m)| {
                serde_json::json!({ "mode": name.trim(), "hit_at_1": m[0], "hit_at_3": m[1], "hit_at_5": m[2], "hit_at_10": m[3], "mrr_at_10": m[4] })
            })
            .collect();
        let json = serde_json::json!({ "top_k": top_k, "summary": summary, "kinds": kinds, "languages": languages, "retrieval": retrieval, "answers": details });
        std::fs::write(path, serde_json::to_string_pretty(&json)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Every question's gold document must be in the knowledge base, and its evidence on a gold
/// page, else the scores would measure the dataset rather than Quire.
async fn check_gold_passages(engine: &Engine, cases: &[AnswerCase]) -> Result<()> {
    let documents = engine.documents().await?;
    let mut chunks_of: HashMap<String, Vec<SearchHit>> = HashMap::new();
    let mut problems = Vec::new();
    for case in cases {
        let Some(doc) = documents.iter().find(|d| case.is_gold_document(&d.path)) else {
            problems.push(format!("\"{}\": {} is not in the knowledge base", case.question, case.document));
            continue;
        };
        let Some(evidence) = &case.evidence else { continue };
        if !chunks_of.contains_key(&doc.doc_id) {
            chunks_of.insert(doc.doc_id.clone(), engine.knowledge_base().chunks_of(&doc.doc_id).await?);
        }
        let on_gold_page = chunks_of[&doc.doc_id]
            .iter()
            .any(|c| case.is_gold_page(&doc.path, c.page) && quire_engine::find_quote(&c.text, evidence).is_some());
        if !on_gold_page {
            problems.push(format!(
                "\"{}\": \"{evidence}\" is not on page(s) {:?} of {}",
                case.question, case.pages, case.document
            ));
        }
    }
    if !problems.is_empty() {
        bail!("the question set does not match the documents:\n  {}", problems.join("\n  "));
    }
    Ok(())
}

/// An engine for a question set: with `docs`, a knowledge base in `work` holding only the
/// documents the questions name (a documents folder may hold bad files too); without, the
/// configured one.
pub(crate) async fn open_with_documents(
    mut config: EngineConfig,
    cases: &[AnswerCase],
    docs: Option<&Path>,
    work: &Path,
) -> Result<Engine> {
    let Some(docs) = docs else { return Engine::open(config).await };
    anyhow::ensure!(docs.is_dir(), "{} is not a folder of documents", docs.display());
    let root = docs.canonicalize()?;
    config.data_dir = work.join("index");
    config.keys = quire_engine::KeyAccess::ephemeral(); // `work` is a temporary folder
    let engine = Engine::open(config).await?;
    let started = Instant::now();
    let mut files: Vec<PathBuf> = cases.iter().map(|c| root.join(&c.document)).collect();
    files.sort();
    files.dedup();
    let missing: Vec<String> = files.iter().filter(|f| !f.is_file()).map(|f| f.display().to_string()).collect();
    if !missing.is_empty() {
        bail!("the questions name documents that are not in {}:\n  {}", root.display(), missing.join("\n  "));
    }
    let report = engine.ingest(&files, &mut |_| {}, &Cancel::new()).await?;
    if let Some((path, why)) = report.failed().first() {
        bail!("cannot ingest {path}: {why}");
    }
    println!(
        "ingested {} documents ({} chunks) in {:.0} s",
        files.len(),
        report.chunks(),
        started.elapsed().as_secs_f64()
    );
    Ok(engine)
}

/// `raw` cut at each token's end, with the probability the token was chosen with.
fn token_pieces(raw: &str, tokens: &[quire_llm::TokenProbability]) -> Vec<(String, f32)> {
    let mut start = 0;
    let mut pieces = Vec::with_capacity(tokens.len());
    for token in tokens {
        let end = token.end.min(raw.len());
        pieces.push((raw.get(start..end).unwrap_or_default().to_string(), token.probability));
        start = end.max(start);
    }
    pieces
}

async fn ask_one(engine: &Engine, case: &AnswerCase) -> AnswerOutcome {
    match engine.ask(&case.question, &mut |_| {}, &Cancel::new()).await {
        Ok(answer) => {
            let retrieved: HashSet<&str> = answer.sources.iter().map(|s| s.chunk_id.as_str()).collect();
            AnswerOutcome {
                answer: Some(answer.text.clone()),
                raw: Some(answer.raw.clone()),
                error: None,
                declined: answer.declined.is_some(),
                withdrawn: answer.declined.as_ref().and_then(|d| d.unsupported_answer.clone()),
                citations: answer
                    .citations
                    .iter()
                    .map(|c| CitedPassage {
                        path: c.path.clone(),
                        quote: c.quote.clone(),
                        passage: c.passage.clone(),
                        page: c.page,
                        retrieved: retrieved.contains(c.chunk_id.as_str()),
                        quote_found: c.quote_range.is_some(),
                    })
                    .collect(),
                gold_retrieved: answer.sources.iter().any(|s| case.is_gold_page(&s.path, s.page)),
                time_to_first_token_s: answer.stats.time_to_first_token.as_secs_f64(),
                first_word_s: answer.timing.first_word.as_secs_f64(),
                decode_tokens_per_s: answer.stats.decode_tokens_per_sec as f64,
                confidence: answer.confidence,
                shown: answer.sources.iter().map(|s| s.text.clone()).collect(),
                tokens: token_pieces(&answer.raw, &answer.token_probabilities),
                in_question_language: in_question_language(&answer),
            }
        }
        Err(e) => AnswerOutcome {
            answer: None,
            raw: None,
            error: Some(format!("{e:#}")),
            declined: false,
            withdrawn: None,
            citations: Vec::new(),
            gold_retrieved: false,
            time_to_first_token_s: 0.0,
            first_word_s: 0.0,
            decode_tokens_per_s: 0.0,
            confidence: None,
            shown: Vec::new(),
            tokens: Vec::new(),
            in_question_language: None,
        },
    }
}

/// Whether `answer`'s reply is in its question's language: the answer, or a decline's own
/// first sentence (what the documents say nearby is quoted in theirs). None when either's
/// language cannot be told.
fn in_question_language(answer: &quire_engine::Answer) -> Option<bool> {
    let reply = match &answer.declined {
        Some(declined) => answer.text.strip_suffix(declined.about.as_str()).unwrap_or(&answer.text),
        None => &answer.text,
    };
    let asked = quire_engine::language_of(&answer.question)?;
    Some(quire_engine::language_of(reply)? == asked)
}
