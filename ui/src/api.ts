// The only place the UI talks to the backend: typed wrappers over the Tauri commands and events.
// Types and command names are generated from the Rust side (src/bindings, see src-tauri/src/bindings.rs).
import { Channel, invoke } from "@tauri-apps/api/core";
import { listen, type UnlistenFn } from "@tauri-apps/api/event";
import type { Answer } from "./bindings/Answer";
import type { AppStatus } from "./bindings/AppStatus";
import type { Event as EngineEvent } from "./bindings/Event";
import type { Exchange } from "./bindings/Exchange";
import type { IngestSummary } from "./bindings/IngestSummary";
import type { KeyInfo } from "./bindings/KeyInfo";
import type { LocalApi } from "./bindings/LocalApi";
import type { InstalledModel } from "./bindings/InstalledModel";
import type { MemoryBudget } from "./bindings/MemoryBudget";
import type { SetModelsResult } from "./bindings/SetModelsResult";
import type { Settings } from "./bindings/Settings";
import type { Turn } from "./bindings/Turn";
import { COMMANDS, EVENT_FILES_DROPPED, EVENT_INGEST, EVENT_RESEAL, EVENT_STATUS_CHANGED } from "./bindings/events";

export type Command = (typeof COMMANDS)[number];
export type { Answer, AppStatus, EngineEvent, Exchange, IngestSummary, InstalledModel, KeyInfo, MemoryBudget, Settings, Turn };

function call<T>(command: Command, args?: Record<string, unknown>): Promise<T> {
  return invoke<T>(command, args);
}

export const api = {
  status: () => call<AppStatus>("app_status"),
  addPaths: (paths: string[]) => call<IngestSummary>("add_paths", { paths }),
  chooseAndAdd: (folders: boolean) => call<IngestSummary | null>("choose_and_add", { folders }),
  cancelIngest: () => call<boolean>("cancel_ingest"),
  /// `earlier`: the conversation's turns so far (oldest first), empty for a new conversation.
  ask(question: string, earlier: Turn[], onEvent: (e: EngineEvent) => void): Promise<Answer> {
    const channel = new Channel<EngineEvent>();
    channel.onmessage = onEvent;
    return call<Answer>("ask", { question, earlier, onEvent: channel });
  },
  cancelAnswer: () => call<boolean>("cancel_answer"),
  memoryBudget: () => call<MemoryBudget>("memory_budget"),
  openSource: (chunkId: string) => call<void>("open_source", { chunkId }),
  removeDocument: (docId: string) => call<boolean>("remove_document", { docId }),
  switchCollection: (name: string) => call<void>("switch_collection", { name }),
  setModels: (target: string | null, draft: string | null) => call<SetModelsResult>("set_models", { target, draft }),
  installedModels: () => call<InstalledModel[]>("installed_models"),
  addWatchedFolder: (path: string) => call<IngestSummary>("add_watched_folder", { path }),
  removeWatchedFolder: (path: string) => call<Settings>("remove_watched_folder", { path }),
  history: () => call<Exchange[]>("history"),
  clearHistory: () => call<void>("clear_history"),
  showMainWindow: () => call<void>("show_main_window"),
  showQuickAsk: () => call<void>("show_quick_ask"),
  hideQuickAsk: () => call<void>("hide_quick_ask"),
  keyStatus: () => call<KeyInfo>("key_status"),
  lock: () => call<void>("lock"),
  unlock: (passphrase: string | null) => call<void>("unlock", { passphrase }),
  rotateKey: () => call<number>("rotate_key"),
  exportKey: (backupPassphrase: string) => call<string | null>("export_key", { backupPassphrase }),
  importKey: (backupPassphrase: string) => call<boolean>("import_key", { backupPassphrase }),
  setLocalApi: (port: number | null) => call<LocalApi>("set_local_api", { port }),
};

export const events = {
  onIngest: (f: (e: EngineEvent) => void): Promise<UnlistenFn> => listen<EngineEvent>(EVENT_INGEST, (e) => f(e.payload)),
  onStatusChanged: (f: () => void): Promise<UnlistenFn> => listen(EVENT_STATUS_CHANGED, () => f()),
  onFilesDropped: (f: (paths: string[]) => void): Promise<UnlistenFn> =>
    listen<string[]>(EVENT_FILES_DROPPED, (e) => f(e.payload)),
  onReseal: (f: (done: number, total: number) => void): Promise<UnlistenFn> =>
    listen<[number, number]>(EVENT_RESEAL, (e) => f(e.payload[0], e.payload[1])),
};

/// Errors from commands arrive as strings (one sentence saying what to do).
export function errorText(e: unknown): string {
  return typeof e === "string" ? e : e instanceof Error ? e.message : JSON.stringify(e);
}
