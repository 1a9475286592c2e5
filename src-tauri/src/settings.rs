//! The app's settings file (`<quire home>/settings.json`): which collection is open, which models
//! answer, and which folders are kept indexed. A missing file means the defaults; a damaged one
//! is kept aside (never overwritten silently) and the defaults are used.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, TS)]
#[serde(default)]
pub struct Settings {
    pub collection: String,
    /// GGUF of the answer (target) model; `None` means the default model.
    pub target_model: Option<String>,
    /// GGUF of a draft model for speculative decoding; `None`: none, the decoder drafts from the
    /// answer's grammar and the passages (measured faster on CPUs, ARCHITECTURE.md).
    pub draft_model: Option<String>,
    /// Folders re-scanned at start (only changed files are re-indexed).
    pub watched_folders: Vec<String>,
    /// Load the answer model at start, so the first answer does not wait for it.
    pub preload_model: bool,
    /// The local OpenAI-compatible API's port on 127.0.0.1; `None`: off (the default).
    pub local_api_port: Option<u16>,
    /// Say "Your documents don't say" when they do not answer, withdrawing an answer none of its
    /// cited passages supports (the default); off, every reply is the model's answer.
    pub decline_unsupported: bool,
    /// The app's language, by tag ("de", "ja"…); `None`: the system's (the default).
    pub language: Option<String>,
    /// Collections whose offer of an embedder that reads their languages was declined ("Not
    /// now"): not offered again (Settings → Search model still changes it).
    pub embedder_offers_declined: Vec<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            collection: DEFAULT_COLLECTION.into(),
            target_model: None,
            draft_model: None,
            watched_folders: Vec::new(),
            preload_model: true,
            local_api_port: None,
            decline_unsupported: true,
            language: None,
            embedder_offers_declined: Vec::new(),
        }
    }
}

pub const DEFAULT_COLLECTION: &str = "default";

impl Settings {
    pub fn file(home: &Path) -> PathBuf {
        home.join("settings.json")
    }

    pub fn load(home: &Path) -> Settings {
        let path = Settings::file(home);
        let Ok(text) = std::fs::read_to_string(&path) else { return Settings::default() };
        match serde_json::from_str(&text) {
            Ok(s) => s,
            Err(e) => {
                let aside = path.with_extension("json.damaged");
                let _ = std::fs::rename(&path, &aside);
                eprintln!(
                    "settings file {} is damaged ({e}); kept as {} and using defaults",
                    path.display(),
                    aside.display()
                );
                Settings::default()
            }
        }
    }

    /// Writes atomically (temporary file, then rename), so a crash never leaves half a file.
    pub fn save(&self, home: &Path) -> Result<()> {
        std::fs::create_dir_all(home)?;
        let path = Settings::file(home);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
    }

    pub fn target_path(&self) -> Result<PathBuf> {
        match &self.target_model {
            Some(p) => Ok(PathBuf::from(p)),
            None => quire_models::QWEN_1_5B.location(),
        }
    }

    /// The draft model picked, if one is.
    pub fn draft_path(&self) -> Option<PathBuf> {
        self.draft_model.as_ref().map(PathBuf::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_damaged_files_are_kept_aside() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(Settings::load(home.path()), Settings::default());
        let mut s = Settings { collection: "taxes".into(), ..Settings::default() };
        s.watched_folders.push("/tmp/docs".into());
        s.save(home.path()).unwrap();
        assert_eq!(Settings::load(home.path()), s);

        std::fs::write(Settings::file(home.path()), "{ not json").unwrap();
        assert_eq!(Settings::load(home.path()), Settings::default());
        let aside = std::fs::read_to_string(home.path().join("settings.json.damaged")).unwrap();
        assert_eq!(aside, "{ not json");
    }
}
