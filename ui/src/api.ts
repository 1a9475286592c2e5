// The only place the UI talks to the backend: typed wrappers over the Tauri commands and events.
// Types, command names, what each command takes and what it answers are generated from the Rust
// side (src/bindings, see src-tauri/src/bindings.rs): a wrapper cannot name a command that does
// not exist, send it arguments it does not read, or expect another answer than it gives.
import { Channel, invoke, type InvokeArgs } from "@tauri-apps/api/core";
import { listen, type UnlistenFn } from "@tauri-apps/api/event";
import type { Answer } from "./bindings/Answer";
import type { AppStatus } from "./bindings/AppStatus";
import type { Event as EngineEvent } from "./bindings/Event";
import type { Exchange } from "./bindings/Exchange";
import type { IngestSummary } from "./bindings/IngestSummary";
import type { KeyInfo } from "./bindings/KeyInfo";
import type { LibraryHealth } from "./bindings/LibraryHealth";
import type { InstalledModel } from "./bindings/InstalledModel";
import type { MemoryBudget } from "./bindings/MemoryBudget";
import type { Settings } from "./bindings/Settings";
import type { Turn } from "./bindings/Turn";
import { COMMANDS, type Args, type Replies } from "./bindings/commands";
import { EVENT_DRAGGING, EVENT_FETCH, EVENT_FILES_DROPPED, EVENT_INGEST, EVENT_LANGUAGE, EVENT_RESEAL, EVENT_STATUS_CHANGED } from "./bindings/events";
import { DAMAGE_REMEDY } from "./bindings/said";

export type Command = (typeof COMMANDS)[number];
export type { Answer, AppStatus, EngineEvent, Exchange, IngestSummary, InstalledModel, KeyInfo, LibraryHealth, MemoryBudget, Settings, Turn };

/// Whether an error says the library's files are damaged (the app ends such errors with its
/// way out, `DAMAGE_REMEDY`): the window then offers its own check and repair.
export function saysDamaged(message: string): boolean {
  return message.includes(DAMAGE_REMEDY);
}

/// A command's arguments, or none for a command that takes none.
type Sent<C extends Command> = Args[C] extends null ? [] : [Args[C]];

function call<C extends Command>(command: C, ...args: Sent<C>): Promise<Replies[C]> {
  return invoke<Replies[C]>(command, args[0] as InvokeArgs | undefined);
}

export const api = {
  status: () => call("app_status"),
  addPaths: (paths: string[]) => call("add_paths", { paths }),
  chooseAndAdd: (folders: boolean) => call("choose_and_add", { folders }),
  cancelIngest: () => call("cancel_ingest"),
  /// `earlier`: the conversation's turns so far (oldest first), empty for a new conversation.
  ask(question: string, earlier: Turn[], onEvent: (e: EngineEvent) => void): Promise<Answer> {
    const channel = new Channel<EngineEvent>();
    channel.onmessage = onEvent;
    return call("ask", { question, earlier, onEvent: channel });
  },
  cancelAnswer: () => call("cancel_answer"),
  memoryBudget: () => call("memory_budget"),
  /// Says how the document was opened (at the page, or why not).
  openSource: (chunkId: string, page: number | null) => call("open_source", { chunkId, page }),
  removeDocument: (docId: string) => call("remove_document", { docId }),
  /// Reads the library's files whole: what is damaged, if anything.
  checkLibrary: () => call("check_library"),
  /// Mends damaged files and indexes again what they lost (progress as ingestion events).
  repairLibrary: () => call("repair_library"),
  /// Embeds every passage again with another embedding model, then opens the library on it
  /// (progress as ingestion events).
  changeEmbedder: (embedder: string) => call("change_embedder", { embedder }),
  /// "Not now" to the offer of an embedder that reads the library's languages (not made again).
  declineEmbedderOffer: () => call("decline_embedder_offer"),
  switchCollection: (name: string) => call("switch_collection", { name }),
  setModels: (target: string | null, draft: string | null) => call("set_models", { target, draft }),
  installedModels: () => call("installed_models"),
  /// Downloads the missing models the settings use; returns their names.
  fetchModels: () => call("fetch_models"),
  addWatchedFolder: (path: string) => call("add_watched_folder", { path }),
  /// The system's folder picker; null when it was dismissed.
  chooseWatchedFolder: () => call("choose_watched_folder"),
  removeWatchedFolder: (path: string) => call("remove_watched_folder", { path }),
  history: () => call("history"),
  clearHistory: () => call("clear_history"),
  showMainWindow: () => call("show_main_window"),
  showQuickAsk: () => call("show_quick_ask"),
  hideQuickAsk: () => call("hide_quick_ask"),
  keyStatus: () => call("key_status"),
  lock: () => call("lock"),
  unlock: (passphrase: string | null) => call("unlock", { passphrase }),
  rotateKey: () => call("rotate_key"),
  exportKey: (backupPassphrase: string) => call("export_key", { backupPassphrase }),
  /// `newPassphrase`: for a passphrase-protected library whose passphrase was forgotten, the one
  /// the restored key is sealed under from now on.
  importKey: (backupPassphrase: string, newPassphrase: string | null) => call("import_key", { backupPassphrase, newPassphrase }),
  setLocalApi: (port: number | null) => call("set_local_api", { port }),
  /// The language the app speaks, the one chosen in Settings and the system's.
  language: () => call("language"),
  /// `language`: a tag of src/i18n, or null for the system's.
  setLanguage: (language: string | null) => call("set_language", { language }),
};

export const events = {
  onIngest: (f: (e: EngineEvent) => void): Promise<UnlistenFn> => listen<EngineEvent>(EVENT_INGEST, (e) => f(e.payload)),
  onStatusChanged: (f: () => void): Promise<UnlistenFn> => listen(EVENT_STATUS_CHANGED, () => f()),
  onFilesDropped: (f: (paths: string[]) => void): Promise<UnlistenFn> =>
    listen<string[]>(EVENT_FILES_DROPPED, (e) => f(e.payload)),
  onDragging: (f: (dragging: boolean) => void): Promise<UnlistenFn> => listen<boolean>(EVENT_DRAGGING, (e) => f(e.payload)),
  onFetch: (f: (line: string) => void): Promise<UnlistenFn> => listen<string>(EVENT_FETCH, (e) => f(e.payload)),
  /// The app speaks another language from now on (chosen in Settings).
  onLanguage: (f: (language: string) => void): Promise<UnlistenFn> => listen<string>(EVENT_LANGUAGE, (e) => f(e.payload)),
  onReseal: (f: (done: number, total: number) => void): Promise<UnlistenFn> =>
    listen<[number, number]>(EVENT_RESEAL, (e) => f(e.payload[0], e.payload[1])),
};

/// Errors from commands arrive as strings (one sentence saying what to do).
export function errorText(e: unknown): string {
  return typeof e === "string" ? e : e instanceof Error ? e.message : JSON.stringify(e);
}
