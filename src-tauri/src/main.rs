//! Quire's desktop app: a thin shell that forwards the UI's commands to the engine and the
//! engine's events to the UI. All of the RAG loop is in the engine crates.

#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

// First: its `for_each_command!` is used by the modules after it.
#[allow(dead_code)] // read by build.rs and the bindings test
#[macro_use]
mod command_names;
mod bindings;
mod commands;
mod ipc;
mod platform;
mod replies;
mod said;
mod settings;
mod state;
mod windows;

use std::time::Duration;

use tauri::webview::PageLoadEvent;
use tauri::{DragDropEvent, Emitter, Manager, WindowEvent};

use crate::state::AppState;

fn main() {
    // Before any thread: a lock's dropped engine gives its memory back (`allocator`).
    quire_engine::allocator::settle();
    // When started as a loader child process, this loads one file and exits (before any window).
    quire_engine::serve_if_worker();
    quire_engine::quiet_parser_panics();
    quire_engine::quiet_caught_panics();
    let home = match quire_models::quire_home() {
        Ok(h) => h,
        Err(e) => {
            eprintln!("Quire cannot start: {e:#}");
            std::process::exit(1);
        }
    };
    tauri::Builder::default()
        .plugin(tauri_plugin_dialog::init())
        .invoke_handler({
            macro_rules! handler {
                ($($name:ident($($arg:ident: $type:ty),*): $reply:ty),*) => {{
                    // Each command takes and answers what the list says (the UI's types are made
                    // from it); build.rs holds the arguments' names to it.
                    $(
                        replies::answers::<$reply, _, _, _>(commands::$name);
                        replies::takes::<($($type,)*), _, _>(commands::$name);
                    )*
                    tauri::generate_handler![$(commands::$name),*]
                }};
            }
            for_each_command!(handler)
        })
        .setup(move |app| {
            let state = AppState::new(home);
            let language = state.language();
            app.manage(state);
            if let Err(e) = windows::install_tray(app.handle(), language) {
                eprintln!("no tray icon: {e:#}");
            }
            if let Err(e) = windows::install_shortcut(app.handle()) {
                eprintln!("no global shortcut ({}): {e:#}; the tray opens quick ask", windows::QUICK_ASK_SHORTCUT);
            }
            let handle = app.handle().clone();
            tauri::async_runtime::spawn(async move { start_engine(handle).await });
            Ok(())
        })
        .on_page_load(|webview, payload| {
            if webview.label() == windows::MAIN && payload.event() == PageLoadEvent::Finished {
                webview.state::<AppState>().main_page_loaded.notify_one();
            }
        })
        .on_window_event(|window, event| match event {
            // The window shows where files may be dropped while they are dragged over it.
            WindowEvent::DragDrop(DragDropEvent::Enter { .. }) => {
                let _ = window.emit(ipc::EVENT_DRAGGING, true);
            }
            WindowEvent::DragDrop(DragDropEvent::Leave) => {
                let _ = window.emit(ipc::EVENT_DRAGGING, false);
            }
            WindowEvent::DragDrop(DragDropEvent::Drop { paths, .. }) => {
                let _ = window.emit(ipc::EVENT_DRAGGING, false);
                let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                let _ = window.emit(ipc::EVENT_FILES_DROPPED, paths);
            }
            // Closing quick ask hides it, so the tray and shortcut can bring it back at once.
            WindowEvent::CloseRequested { api, .. } if window.label() == windows::QUICK_ASK => {
                api.prevent_close();
                let _ = window.hide();
            }
            _ => {}
        })
        .run(tauri::generate_context!())
        .expect("Quire failed to start its window");
}

/// Opens the collection, loads the answer model (so the first answer does not wait for it),
/// finishes what an interrupted ingestion left, brings the watched folders up to date
/// (unchanged files are skipped), then follows them.
async fn start_engine(app: tauri::AppHandle) {
    let state = app.state::<AppState>();
    let opened = state.open_engine().await;
    let _ = app.emit(ipc::EVENT_STATUS_CHANGED, ());
    let settings = state.settings();
    if let Some(port) = settings.local_api_port {
        if let Err(e) = commands::start_local_api(&app, port).await {
            eprintln!("the local API did not start: {e:#}");
        }
    }
    // A collection that opens locked (a passphrase not yet entered) catches up at `unlock`.
    let Ok(engine) = opened else { return };
    if settings.preload_model && engine.config().llm_path.is_file() {
        let _ = tokio::time::timeout(Duration::from_secs(20), state.main_page_loaded.notified()).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Err(e) = engine.prepare_llm().await {
            eprintln!("the answer model did not load: {e:#}");
        }
        let _ = app.emit(ipc::EVENT_STATUS_CHANGED, ());
    }
    catch_up(app.clone(), engine).await;
}

/// What follows each opening of the collection (at start, and at every unlock): an interrupted
/// ingestion resumed, the watched folders re-scanned (what changed while the app was closed or
/// locked) and, from the first opening on, followed.
pub(crate) async fn catch_up(app: tauri::AppHandle, engine: std::sync::Arc<quire_engine::Engine>) {
    let state = app.state::<AppState>();
    let interrupted = !engine.pending_files().is_empty();
    // Not held while following: a lock must be able to drop the engine (its models, its key).
    drop(engine);
    if interrupted {
        if let Err(e) = commands::run_ingestion(&app, &state, commands::IngestWork::Resume).await {
            eprintln!("the interrupted ingestion was not resumed: {e}");
        }
    }
    let folders: Vec<std::path::PathBuf> = state.settings().watched_folders.iter().map(Into::into).collect();
    // Watched before the scan (as `quire watch` does): a file written while the scan runs is
    // caught by one or the other, where watching after it would miss that file until a restart.
    let following = state.watch_control.lock().expect("watch lock").is_some();
    let watching = if following { None } else { watch_folders(&state, &folders) };
    if !folders.is_empty() {
        if let Err(e) = commands::ingest_paths(&app, &state, folders).await {
            eprintln!("watched folders were not re-scanned: {e}");
        }
    }
    if let Some((watcher, control)) = watching {
        follow_watched_folders(app.clone(), watcher, control).await;
    }
}

/// Starts watching the folders and opens the channel Settings adds and removes folders by.
fn watch_folders(
    state: &AppState,
    folders: &[std::path::PathBuf],
) -> Option<(quire_engine::watch::FolderWatcher, tokio::sync::mpsc::UnboundedReceiver<state::WatchChange>)> {
    use quire_engine::watch::{FolderWatcher, DEBOUNCE};
    let mut watcher = match FolderWatcher::new(DEBOUNCE) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("watched folders are re-scanned at start only: {e:#}");
            return None;
        }
    };
    for f in folders {
        if let Err(e) = watcher.watch(f) {
            eprintln!("{e:#}");
        }
    }
    let (tx, control) = tokio::sync::mpsc::unbounded_channel();
    *state.watch_control.lock().expect("watch lock") = Some(tx);
    Some((watcher, control))
}

/// Follows the watched folders until the app quits: each debounced set of changed paths is
/// synced through the same one-at-a-time ingestion as the user's own additions.
async fn follow_watched_folders(
    app: tauri::AppHandle,
    mut watcher: quire_engine::watch::FolderWatcher,
    mut control: tokio::sync::mpsc::UnboundedReceiver<state::WatchChange>,
) {
    use state::WatchChange;
    let state = app.state::<AppState>();
    loop {
        tokio::select! {
            change = control.recv() => match change {
                Some(WatchChange::Add(f)) => if let Err(e) = watcher.watch(&f) { eprintln!("{e:#}") },
                Some(WatchChange::Remove(f)) => if let Err(e) = watcher.unwatch(&f) { eprintln!("{e:#}") },
                None => return,
            },
            changed = watcher.next_changes() => match changed {
                Some(paths) => {
                    for e in watcher.take_errors() {
                        eprintln!("watch: {e}");
                    }
                    if let Err(e) = commands::run_ingestion(&app, &state, commands::IngestWork::Sync(paths)).await {
                        eprintln!("a change in a watched folder was not indexed: {e}");
                    }
                }
                None => return,
            },
        }
    }
}
