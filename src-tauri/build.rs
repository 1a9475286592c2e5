// Declares the app's own commands so the capability files can grant them one by one: a command
// that no capability allows is refused at the IPC boundary. Holds the command functions'
// argument names to the command list, which the UI's argument types are made from.
fn main() {
    check_argument_names();
    tauri_build::try_build(
        tauri_build::Attributes::new()
            .app_manifest(tauri_build::AppManifest::new().commands(quire_app_commands::COMMANDS)),
    )
    .expect("failed to run the Tauri build script");
}

mod quire_app_commands {
    include!("src/command_names.rs");
}

/// The UI sends a command's arguments by name, and the types it sends them with are made from
/// the command list (`src/command_names.rs`): an argument renamed in `src/commands.rs` alone
/// would leave the UI sending one the command no longer reads. The compiler holds the types to
/// the list (main.rs); this holds the names, in order.
fn check_argument_names() {
    const SOURCE: &str = "src/commands.rs";
    println!("cargo:rerun-if-changed={SOURCE}");
    let text = std::fs::read_to_string(SOURCE).unwrap_or_else(|e| panic!("cannot read {SOURCE}: {e}"));
    let file = syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {SOURCE}: {e}"));
    let mut found = std::collections::BTreeMap::new();
    for item in file.items {
        let syn::Item::Fn(function) = item else { continue };
        let is_command = function
            .attrs
            .iter()
            .any(|a| a.path().segments.iter().map(|s| s.ident.to_string()).eq(["tauri", "command"]));
        if !is_command {
            continue;
        }
        let names: Vec<String> = function
            .sig
            .inputs
            .iter()
            .filter_map(|input| match input {
                syn::FnArg::Typed(arg) if !handed_by_tauri(&arg.ty) => match &*arg.pat {
                    syn::Pat::Ident(p) => Some(p.ident.to_string()),
                    _ => panic!("{SOURCE}: `{}` takes an argument that is not a plain name", function.sig.ident),
                },
                _ => None,
            })
            .collect();
        found.insert(function.sig.ident.to_string(), names);
    }
    let listed = quire_app_commands::ARGUMENTS;
    for (command, names) in listed {
        let Some(have) = found.get(*command) else {
            panic!("src/command_names.rs lists `{command}`, but {SOURCE} has no #[tauri::command] fn of that name")
        };
        assert!(
            have == names,
            "the arguments of `{command}` in {SOURCE} are {have:?}, but src/command_names.rs lists {names:?}: \
             change both (the UI's argument types are made from the list), then run \
             `QUIRE_WRITE_BINDINGS=1 cargo test --release --workspace --bin quire-app bindings`"
        );
    }
    for command in found.keys() {
        assert!(
            listed.iter().any(|(c, _)| c == command),
            "{SOURCE} has the command `{command}`, which src/command_names.rs does not list"
        );
    }
}

/// The arguments Tauri hands a command itself, not sent by the UI.
fn handed_by_tauri(ty: &syn::Type) -> bool {
    let syn::Type::Path(path) = ty else { return false };
    path.path
        .segments
        .last()
        .is_some_and(|s| ["State", "AppHandle", "Window", "WebviewWindow"].contains(&s.ident.to_string().as_str()))
}
