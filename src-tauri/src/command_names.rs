/// Every command the UI may call, listed once with the arguments the UI sends (by name, in the
/// function's order, without what Tauri hands the function itself: `State`, `AppHandle`) and what
/// it answers (the `T` of its `Reply<T>`): `for_each_command!(m)` calls `m!(name(arg: A, …): T,
/// …)`. Made from it: `COMMANDS` (build.rs turns each name into a permission, `allow-<name>`),
/// `ARGUMENTS` (build.rs holds each function's argument names to it), the app's invoke handler
/// and the check that each function takes and answers the types listed (main.rs), and the UI's
/// `COMMANDS`, `Args` and `Replies` (`bindings.rs`). The types are only read where the app's own
/// code is compiled.
macro_rules! for_each_command {
    ($then:ident) => {
        $then!(
            app_status(): crate::ipc::AppStatus,
            add_paths(paths: Vec<String>): crate::ipc::IngestSummary,
            choose_and_add(folders: bool): Option<crate::ipc::IngestSummary>,
            cancel_ingest(): bool,
            ask(question: String, earlier: Vec<quire_engine::Turn>, on_event: tauri::ipc::Channel<quire_engine::Event>): quire_engine::Answer,
            cancel_answer(): bool,
            memory_budget(): quire_engine::MemoryBudget,
            open_source(chunk_id: String, page: Option<u32>): String,
            remove_document(doc_id: String): bool,
            check_library(): crate::ipc::LibraryHealth,
            repair_library(): crate::ipc::LibraryHealth,
            change_embedder(embedder: String): crate::ipc::IngestSummary,
            decline_embedder_offer(): (),
            switch_collection(name: String): (),
            set_models(target: Option<String>, draft: Option<String>): crate::ipc::SetModelsResult,
            installed_models(): Vec<quire_engine::memory::InstalledModel>,
            fetch_models(): Vec<String>,
            add_watched_folder(path: String): crate::ipc::IngestSummary,
            choose_watched_folder(): Option<crate::ipc::IngestSummary>,
            remove_watched_folder(path: String): crate::settings::Settings,
            history(): Vec<quire_engine::history::Exchange>,
            clear_history(): (),
            show_main_window(): (),
            show_quick_ask(): (),
            hide_quick_ask(): (),
            key_status(): quire_engine::KeyInfo,
            lock(): (),
            unlock(passphrase: Option<String>): (),
            rotate_key(): usize,
            export_key(backup_passphrase: String): Option<String>,
            import_key(backup_passphrase: String, new_passphrase: Option<String>): bool,
            set_local_api(port: Option<u16>): crate::ipc::LocalApi,
            language(): crate::ipc::LanguageChoice,
            set_language(language: Option<String>): crate::ipc::LanguageChoice
        )
    };
}

macro_rules! command_names {
    ($($name:ident($($arg:ident: $type:ty),*): $reply:ty),*) => {
        &[$(stringify!($name)),*]
    };
}

pub const COMMANDS: &[&str] = for_each_command!(command_names);

macro_rules! command_arguments {
    ($($name:ident($($arg:ident: $type:ty),*): $reply:ty),*) => {
        &[$((stringify!($name), &[$(stringify!($arg)),*])),*]
    };
}

/// Each command's arguments by name, as listed.
pub const ARGUMENTS: &[(&str, &[&str])] = for_each_command!(command_arguments);

#[cfg(test)]
mod tests {
    /// Every command is granted by some capability file, and every granted `allow-…` names a
    /// command: a command added without a grant would be refused, a grant without a command
    /// would be a hole left open for later.
    #[test]
    fn capabilities_grant_exactly_the_commands() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("capabilities");
        let mut granted = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let caps: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
            for p in caps["permissions"].as_array().unwrap() {
                let p = p.as_str().unwrap();
                assert!(
                    !p.contains("shell") && !p.contains("fs:") && !p.contains("http"),
                    "no shell, file system or HTTP plugin: {p}"
                );
                if let Some(name) = p.strip_prefix("allow-") {
                    granted.push(name.replace('-', "_"));
                }
            }
        }
        granted.sort();
        let mut commands: Vec<String> = super::COMMANDS.iter().map(|c| c.to_string()).collect();
        commands.sort();
        assert_eq!(granted, commands);
    }
}
