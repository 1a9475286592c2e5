// Declares the app's own commands so the capability files can grant them one by one: a command
// that no capability allows is refused at the IPC boundary.
fn main() {
    tauri_build::try_build(
        tauri_build::Attributes::new()
            .app_manifest(tauri_build::AppManifest::new().commands(quire_app_commands::COMMANDS)),
    )
    .expect("failed to run the Tauri build script");
}

mod quire_app_commands {
    include!("src/command_names.rs");
}
