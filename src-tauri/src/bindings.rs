//! TypeScript bindings for the UI, generated from the Rust types so the two cannot drift.
//! `QUIRE_WRITE_BINDINGS=1 cargo test --release --workspace bindings` rewrites ui/src/bindings.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use ts_rs::TS;

    use crate::ipc::*;

    fn export(dir: &Path) {
        quire_engine::Event::export_all_to(dir).unwrap();
        quire_engine::Answer::export_all_to(dir).unwrap();
        quire_engine::MemoryBudget::export_all_to(dir).unwrap();
        quire_engine::memory::InstalledModel::export_all_to(dir).unwrap();
        quire_engine::history::Exchange::export_all_to(dir).unwrap();
        quire_engine::Turn::export_all_to(dir).unwrap();
        AppStatus::export_all_to(dir).unwrap();
        IngestSummary::export_all_to(dir).unwrap();
        SetModelsResult::export_all_to(dir).unwrap();
        crate::settings::Settings::export_all_to(dir).unwrap();
        quire_engine::KeyInfo::export_all_to(dir).unwrap();
        LocalApi::export_all_to(dir).unwrap();
        let events = format!(
            "// Generated from src-tauri/src/ipc.rs. Do not edit.\n\
             export const EVENT_INGEST = {:?};\n\
             export const EVENT_STATUS_CHANGED = {:?};\n\
             export const EVENT_FILES_DROPPED = {:?};\n\
             export const EVENT_RESEAL = {:?};\n\
             export const COMMANDS = {:?} as const;\n",
            EVENT_INGEST,
            EVENT_STATUS_CHANGED,
            EVENT_FILES_DROPPED,
            EVENT_RESEAL,
            crate::command_names::COMMANDS
        );
        std::fs::write(dir.join("events.ts"), events).unwrap();
    }

    fn files(dir: &Path) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap()))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    #[test]
    fn bindings_are_current() {
        let committed = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ui/src/bindings");
        if std::env::var_os("QUIRE_WRITE_BINDINGS").is_some() {
            let _ = std::fs::remove_dir_all(&committed);
            std::fs::create_dir_all(&committed).unwrap();
            export(&committed);
        }
        let fresh = tempfile::tempdir().unwrap();
        export(fresh.path());
        let (want, have) = (files(fresh.path()), files(&committed));
        assert!(!want.is_empty());
        assert!(
            want == have,
            "ui/src/bindings is out of date with the Rust types: run \
             `QUIRE_WRITE_BINDINGS=1 cargo test --release --workspace bindings` and commit the result"
        );
    }
}
