// Generated from src-tauri/src/ipc.rs. Do not edit.
export const EVENT_INGEST = "ingest";
export const EVENT_STATUS_CHANGED = "status-changed";
export const EVENT_FILES_DROPPED = "files-dropped";
export const EVENT_RESEAL = "reseal";
export const COMMANDS = ["app_status", "add_paths", "choose_and_add", "cancel_ingest", "ask", "cancel_answer", "memory_budget", "open_source", "remove_document", "switch_collection", "set_models", "installed_models", "add_watched_folder", "remove_watched_folder", "history", "clear_history", "show_main_window", "show_quick_ask", "hide_quick_ask", "key_status", "lock", "unlock", "rotate_key", "export_key", "import_key", "set_local_api"] as const;
