/// Every command the UI may call; build.rs turns each into a permission (`allow-<name>`).
pub const COMMANDS: &[&str] = &[
    "app_status",
    "add_paths",
    "choose_and_add",
    "cancel_ingest",
    "ask",
    "cancel_answer",
    "memory_budget",
    "open_source",
    "remove_document",
    "switch_collection",
    "set_models",
    "installed_models",
    "add_watched_folder",
    "remove_watched_folder",
    "history",
    "clear_history",
    "show_main_window",
    "show_quick_ask",
    "hide_quick_ask",
    "key_status",
    "lock",
    "unlock",
    "rotate_key",
    "export_key",
    "import_key",
    "set_local_api",
];

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
