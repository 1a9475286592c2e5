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
        LanguageChoice::export_all_to(dir).unwrap();
        let events = format!(
            "// Generated from src-tauri/src/ipc.rs. Do not edit.\n\
             export const EVENT_INGEST = {:?};\n\
             export const EVENT_STATUS_CHANGED = {:?};\n\
             export const EVENT_FILES_DROPPED = {:?};\n\
             export const EVENT_DRAGGING = {:?};\n\
             export const EVENT_RESEAL = {:?};\n\
             export const EVENT_FETCH = {:?};\n\
             export const EVENT_LANGUAGE = {:?};\n",
            EVENT_INGEST,
            EVENT_STATUS_CHANGED,
            EVENT_FILES_DROPPED,
            EVENT_DRAGGING,
            EVENT_RESEAL,
            EVENT_FETCH,
            EVENT_LANGUAGE,
        );
        std::fs::write(dir.join("events.ts"), events).unwrap();
        let said = format!(
            "// Generated from src-tauri/src/ipc.rs. Do not edit.\n\
             export const DAMAGE_REMEDY = {DAMAGE_REMEDY:?};\n"
        );
        std::fs::write(dir.join("said.ts"), said).unwrap();
        std::fs::write(dir.join("commands.ts"), commands()).unwrap();
    }

    /// Collects the TypeScript names of the types it visits that have a file of their own.
    struct Named<'a>(&'a mut std::collections::BTreeSet<String>);

    impl ts_rs::TypeVisitor for Named<'_> {
        fn visit<T: TS + 'static + ?Sized>(&mut self) {
            self.0.extend(ts_rs::Dependency::from_ty::<T>().map(|d| d.ts_name));
        }
    }

    /// How an argument's type is written for the UI. Listed type by type: a command given an
    /// argument of a new type fails to compile until it is added here.
    trait Argument {
        fn ts() -> String;
        /// The generated files (and the Tauri API's types) the type names.
        fn imports(into: &mut std::collections::BTreeSet<String>);
    }

    macro_rules! arguments_as_ts {
        ($($type:ty),*) => {$(
            impl Argument for $type {
                fn ts() -> String {
                    <$type as TS>::name()
                }
                fn imports(into: &mut std::collections::BTreeSet<String>) {
                    <$type as TS>::visit_generics(&mut Named(into));
                }
            }
        )*};
    }

    arguments_as_ts!(String, bool, Option<u16>, Option<u32>, Option<String>, Vec<String>, Vec<quire_engine::Turn>);

    /// A channel the command streams events through (`Channel` of `@tauri-apps/api/core`).
    impl Argument for tauri::ipc::Channel<quire_engine::Event> {
        fn ts() -> String {
            format!("Channel<{}>", <quire_engine::Event as TS>::name())
        }
        fn imports(into: &mut std::collections::BTreeSet<String>) {
            into.insert(<quire_engine::Event as TS>::name());
        }
    }

    /// `on_event` → `onEvent`: Tauri reads a command's arguments under their camelCase names.
    fn camel_case(name: &str) -> String {
        let mut words = name.split('_');
        let first = words.next().unwrap_or_default().to_string();
        words.fold(first, |mut out, w| {
            let mut chars = w.chars();
            if let Some(c) = chars.next() {
                out.extend(c.to_uppercase());
                out.push_str(chars.as_str());
            }
            out
        })
    }

    /// The command list (`command_names.rs`) for the UI: the names, what each takes and what it
    /// answers.
    fn commands() -> String {
        macro_rules! signatures {
            ($($name:ident($($arg:ident: $type:ty),*): $reply:ty),*) => {{
                let mut imports = std::collections::BTreeSet::new();
                let (mut args, mut replies) = (String::new(), String::new());
                $(
                    let named: Vec<String> =
                        vec![$(format!("{}: {}", camel_case(stringify!($arg)), <$type as Argument>::ts())),*];
                    $(<$type as Argument>::imports(&mut imports);)*
                    let taken = if named.is_empty() { "null".to_string() } else { format!("{{ {} }}", named.join("; ")) };
                    args.push_str(&format!("  {}: {};\n", stringify!($name), taken));
                    replies.push_str(&format!("  {}: {};\n", stringify!($name), <$reply as TS>::name()));
                    // The type itself where it has a file of its own, else what it wraps
                    // (`Vec<T>`, `Option<T>`: their generics).
                    match ts_rs::Dependency::from_ty::<$reply>() {
                        Some(d) => { imports.insert(d.ts_name); }
                        None => <$reply as TS>::visit_generics(&mut Named(&mut imports)),
                    }
                )*
                (imports, args, replies)
            }};
        }
        let (imports, args, replies) = for_each_command!(signatures);
        let imports: String = imports.iter().map(|t| format!("import type {{ {t} }} from \"./{t}\";\n")).collect();
        format!(
            "// Generated from src-tauri/src/command_names.rs. Do not edit.\n\
             import type {{ Channel }} from \"@tauri-apps/api/core\";\n{imports}\n\
             export const COMMANDS = {:?} as const;\n\n\
             /** What each command takes: its arguments by name (null: none). */\n\
             export type Args = {{\n{args}}};\n\n\
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
