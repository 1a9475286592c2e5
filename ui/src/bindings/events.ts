// Generated from src-tauri/src/ipc.rs. Do not edit.
export const EVENT_INGEST = "ingest";
export const EVENT_STATUS_CHANGED = "status-changed";
export const EVENT_FILES_DROPPED = "files-dropped";
export const EVENT_DRAGGING = "dragging";
export const EVENT_RESEAL = "reseal";
export const EVENT_FETCH = "fetch";
export const EVENT_LANGUAGE = "language";
