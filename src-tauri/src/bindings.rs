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
        LibraryHealth::export_all_to(dir).unwrap();
        let events = format!(
            "// Generated from src-tauri/src/ipc.rs. Do not edit.\n\
             export const EVENT_INGEST = {:?};\n\
             export const EVENT_STATUS_CHANGED = {:?};\n\
             export const EVENT_FILES_DROPPED = {:?};\n\
             export const EVENT_DRAGGING = {:?};\n\
             export const EVENT_RESEAL = {:?};\n\
             export const EVENT_FETCH = {:?};\n",
            EVENT_INGEST, EVENT_STATUS_CHANGED, EVENT_FILES_DROPPED, EVENT_DRAGGING, EVENT_RESEAL, EVENT_FETCH,
        );
        std::fs::write(dir.join("events.ts"), events).unwrap();
        std::fs::write(dir.join("commands.ts"), commands()).unwrap();
    }

    /// Collects the TypeScript names of the types it visits that have a file of their own.
    struct Named<'a>(&'a mut std::collections::BTreeSet<String>);

    impl ts_rs::TypeVisitor for Named<'_> {
        fn visit<T: TS + 'static + ?Sized>(&mut self) {
            self.0.extend(ts_rs::Dependency::from_ty::<T>().map(|d| d.ts_name));
        }
    }

    /// The command list (`command_names.rs`) for the UI: the names, and what each answers.
    fn commands() -> String {
        macro_rules! replies {
            ($($name:ident: $reply:ty),*) => {{
                let mut imports = std::collections::BTreeSet::new();
                let mut replies = String::new();
                $(
                    replies.push_str(&format!("  {}: {};\n", stringify!($name), <$reply as TS>::name()));
                    // The type itself where it has a file of its own, else what it wraps
                    // (`Vec<T>`, `Option<T>`: their generics).
                    match ts_rs::Dependency::from_ty::<$reply>() {
                        Some(d) => { imports.insert(d.ts_name); }
                        None => <$reply as TS>::visit_generics(&mut Named(&mut imports)),
                    }
                )*
                (imports, replies)
            }};
        }
        let (imports, replies) = for_each_command!(replies);
        let imports: String = imports.iter().map(|t| format!("import type {{ {t} }} from \"./{t}\";\n")).collect();
        format!(
            "// Generated from src-tauri/src/command_names.rs. Do not edit.\n{imports}\n\
             export const COMMANDS = {:?} as const;\n\n\
             /** What each command answers (a failure is a string saying what to do). */\n\
             export type Replies = {{\n{replies}}};\n",
            crate::command_names::COMMANDS
        )
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
