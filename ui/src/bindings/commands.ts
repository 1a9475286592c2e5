// Generated from src-tauri/src/command_names.rs. Do not edit.
import type { Channel } from "@tauri-apps/api/core";
import type { Answer } from "./Answer";
import type { AppStatus } from "./AppStatus";
import type { Event } from "./Event";
import type { Exchange } from "./Exchange";
import type { IngestSummary } from "./IngestSummary";
import type { InstalledModel } from "./InstalledModel";
import type { KeyInfo } from "./KeyInfo";
import type { LibraryHealth } from "./LibraryHealth";
import type { LocalApi } from "./LocalApi";
import type { MemoryBudget } from "./MemoryBudget";
import type { SetModelsResult } from "./SetModelsResult";
import type { Settings } from "./Settings";
import type { Turn } from "./Turn";

export const COMMANDS = ["app_status", "add_paths", "choose_and_add", "cancel_ingest", "ask", "cancel_answer", "memory_budget", "open_source", "remove_document", "check_library", "repair_library", "switch_collection", "set_models", "installed_models", "fetch_models", "add_watched_folder", "choose_watched_folder", "remove_watched_folder", "history", "clear_history", "show_main_window", "show_quick_ask", "hide_quick_ask", "key_status", "lock", "unlock", "rotate_key", "export_key", "import_key", "set_local_api"] as const;

/** What each command takes: its arguments by name (null: none). */
export type Args = {
  app_status: null;
  add_paths: { paths: Array<string> };
  choose_and_add: { folders: boolean };
  cancel_ingest: null;
  ask: { question: string; earlier: Array<Turn>; onEvent: Channel<Event> };
  cancel_answer: null;
  memory_budget: null;
  open_source: { chunkId: string; page: number | null };
  remove_document: { docId: string };
  check_library: null;
  repair_library: null;
  switch_collection: { name: string };
  set_models: { target: string | null; draft: string | null };
  installed_models: null;
  fetch_models: null;
  add_watched_folder: { path: string };
  choose_watched_folder: null;
  remove_watched_folder: { path: string };
  history: null;
  clear_history: null;
  show_main_window: null;
  show_quick_ask: null;
  hide_quick_ask: null;
  key_status: null;
  lock: null;
  unlock: { passphrase: string | null };
  rotate_key: null;
  export_key: { backupPassphrase: string };
  import_key: { backupPassphrase: string; newPassphrase: string | null };
  set_local_api: { port: number | null };
};

/** What each command answers (a failure is a string saying what to do). */
export type Replies = {
  app_status: AppStatus;
  add_paths: IngestSummary;
  choose_and_add: IngestSummary | null;
  cancel_ingest: boolean;
  ask: Answer;
  cancel_answer: boolean;
  memory_budget: MemoryBudget;
  open_source: string;
  remove_document: boolean;
  check_library: LibraryHealth;
  repair_library: LibraryHealth;
  switch_collection: null;
  set_models: SetModelsResult;
  installed_models: Array<InstalledModel>;
  fetch_models: Array<string>;
  add_watched_folder: IngestSummary;
  choose_watched_folder: IngestSummary | null;
  remove_watched_folder: Settings;
  history: Array<Exchange>;
  clear_history: null;
  show_main_window: null;
  show_quick_ask: null;
  hide_quick_ask: null;
  key_status: KeyInfo;
  lock: null;
  unlock: null;
  rotate_key: number;
  export_key: string | null;
  import_key: boolean;
  set_local_api: LocalApi;
};
