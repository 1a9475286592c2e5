//! What the window says where something goes wrong: the engine's errors in the window's words,
//! with the window's own ways out (Settings, Download, the lock screen), and the lock screen's
//! and the banner's sentences. Every command and the app's state say errors through here.

use crate::ipc::DAMAGE_REMEDY;

/// An error as the window says it: the engine's words, with the window's own way out where
/// the engine leaves the remedy to the front end (`Remedy`, a missing model).
pub fn said(e: &anyhow::Error) -> String {
    use quire_engine::Remedy;
    if let Some(missing) = e.downcast_ref::<quire_engine::MissingModel>() {
        return missing_model_said(missing);
    }
    let text = quire_engine::health::explained(e);
    match quire_engine::remedy(e) {
        Some(Remedy::AddDocuments) => {
            "Your library is empty: add files or a folder first (Add files, Add folder, or drop them on the main window).".into()
        }
        Some(Remedy::CheckAndRepair) => format!("{text}: {DAMAGE_REMEDY}"),
        Some(Remedy::ImportKeyBackup) => {
            format!("{text} (Import key backup… on the lock screen, or Settings → Privacy → Import key)")
        }
        Some(Remedy::ResumeIngestion) => format!("{text} by adding the files again (those already in are skipped)"),
        None => text,
    }
}

pub fn say(e: anyhow::Error) -> String {
    said(&e)
}

/// What the lock screen says where a new collection gets a passphrase instead of a keychain.
pub const CHOOSE_PASSPHRASE: &str = "This computer has no keychain Quire can keep your library's key in, so the \
     key will be sealed under a passphrase you choose now. Without it the library cannot be opened: keep it \
     safe. Once your first documents are in, Quire offers to save a key backup.";

/// A missing model as the window says it: what is missing, and the way to get it there (the
/// banner's Download button for a known model, Settings for a file picked by hand).
pub fn missing_model_said(missing: &quire_engine::MissingModel) -> String {
    let what = missing.to_string();
    let mut said = what[..1].to_uppercase() + &what[1..];
    said.push_str(match missing.known {
        Some(_) => ": Download fetches it.",
        None => ": pick another file under Settings → Models.",
    });
    said
}

/// What the window says while the OCR model is missing: everything else works, scans are not read.
pub const OCR_MISSING: &str =
    "Scanned documents (pictures of pages) are not read until the OCR model is installed: Download fetches it.";
