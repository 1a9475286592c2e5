//! What the engine's tests share: a collection on the small embedder and the tiny model.

use std::path::Path;

use quire_engine::{EngineConfig, KeyAccess};

/// A collection in `data` answered by the small embedder and the tiny model (SmolLM2), its key
/// sealed under `passphrase` (no keychain needed).
pub fn tiny_config(data: &Path, passphrase: &str) -> EngineConfig {
    EngineConfig::new(
        data.to_path_buf(),
        quire_testkit::model(&quire_models::MINILM),
        quire_models::SMOLLM2.location().unwrap(),
        KeyAccess::passphrase(passphrase),
    )
}
