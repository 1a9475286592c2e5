// Generated from src-tauri/src/ipc.rs. Do not edit.
export const DAMAGE_REMEDY = "Settings → Library health checks the library and repairs it";
