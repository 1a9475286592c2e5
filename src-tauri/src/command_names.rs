/// Every command the UI may call, listed once with what it answers (the `T` of its
/// `Reply<T>`): `for_each_command!(m)` calls `m!(name: T, …)`. Made from it: `COMMANDS` (build.rs
/// turns each name into a permission, `allow-<name>`), the app's invoke handler and the check
/// that each function answers the type listed (main.rs), and the UI's `COMMANDS` and `Replies`
/// (`bindings.rs`). The types are only read where the app's own code is compiled.
macro_rules! for_each_command {
    ($then:ident) => {
        $then!(
            app_status: crate::ipc::AppStatus,
            add_paths: crate::ipc::IngestSummary,
            choose_and_add: Option<crate::ipc::IngestSummary>,
            cancel_ingest: bool,
            ask: quire_engine::Answer,
            cancel_answer: bool,
            memory_budget: quire_engine::MemoryBudget,
            open_source: String,
            remove_document: bool,
            check_library: crate::ipc::LibraryHealth,
            repair_library: crate::ipc::LibraryHealth,
            switch_collection: (),
            set_models: crate::ipc::SetModelsResult,
            installed_models: Vec<quire_engine::memory::InstalledModel>,
            fetch_models: Vec<String>,
            add_watched_folder: crate::ipc::IngestSummary,
            choose_watched_folder: Option<crate::ipc::IngestSummary>,
            remove_watched_folder: crate::settings::Settings,
            history: Vec<quire_engine::history::Exchange>,
            clear_history: (),
            show_main_window: (),
            show_quick_ask: (),
            hide_quick_ask: (),
            key_status: quire_engine::KeyInfo,
            lock: (),
            unlock: (),
            rotate_key: usize,
            export_key: Option<String>,
            import_key: bool,
            set_local_api: crate::ipc::LocalApi
        )
    };
}

macro_rules! command_names {
    ($($name:ident: $reply:ty),*) => {
        &[$(stringify!($name)),*]
    };
}

pub const COMMANDS: &[&str] = for_each_command!(command_names);

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
