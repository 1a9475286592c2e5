//! Where a collection lives and what an engine is opened with: the models, the passages shown
//! per question, the loader's isolation, the key's source.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::{ForwardPass, Isolation, KeyAccess};

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Folder the knowledge base is stored in.
    pub data_dir: PathBuf,
    /// Folder of the BERT embedding model.
    pub embedder_dir: PathBuf,
    /// GGUF file of the answer model.
    pub llm_path: PathBuf,
    /// GGUF file of the draft model for speculative decoding (same tokenizer as the answer
    /// model); `None` drafts from the grammar and the retrieved passages only.
    pub draft_path: Option<PathBuf>,
    /// Passages retrieved and shown to the model for each question.
    pub top_k: usize,
    /// Show the model only the sentences of each passage that bear on the question, this many
    /// answer-model tokens per passage on average (`context`); `None` shows whole passages.
    /// `DEFAULT_FOCUS_TOKENS` in the app and the CLI.
    pub focus_tokens: Option<usize>,
    pub max_answer_tokens: usize,
    /// Load PDF, DOCX and EPUB files in a child process with these limits (`None`: in this
    /// process, where a parser that loops or exhausts memory takes the process with it).
    pub loader: Option<Isolation>,
    /// Where the collection's encryption key comes from (`KeyAccess::from_env`: the OS
    /// keychain, or `QUIRE_PASSPHRASE`).
    pub keys: KeyAccess,
    /// Follow links inside an ingested folder that lead out of it (off: such links are skipped
    /// and reported).
    pub follow_links: bool,
    /// The embedder's forward pass (`ForwardPass::from_env`: int8 where the CPU has VNNI).
    pub embedder_pass: ForwardPass,
    /// Read, parse and chunk the next file while this one is embedded (off: one file after
    /// the other, as before; kept for `quire bench ingest --before`).
    pub read_ahead: bool,
    /// Decline when the documents do not answer (`answer`: the model may say so, and an answer
    /// that none of the passages it cites supports is withdrawn). Off: every reply is an answer
    /// with citations, as the model wrote it (the settings file's `decline_unsupported`).
    pub declines: bool,
}

/// Passages shown to the model per question. Three, not five: on the sample documents' question
/// set a gold page is among the top 3 for 95.5 % of questions (97.7 % at 5), and each passage
/// costs ~25 s of prompt processing on a 2-core CPU (BENCHMARKS.md, answer evaluation).
pub const DEFAULT_TOP_K: usize = 3;
/// Answer-model tokens shown of each passage on average (`EngineConfig::focus_tokens`). On the
/// 44-question answer evaluation, against whole passages: gold-page citations 88.6 % (84.1),
/// gold answers' words 76.7 % (76.0), parse and quotes 100 %, the prompt about half as long
/// (BENCHMARKS.md).
pub const DEFAULT_FOCUS_TOKENS: usize = 200;

/// The longest answer, in answer-model tokens, the app and the CLI allow.
pub const DEFAULT_MAX_ANSWER_TOKENS: usize = 512;

/// The collection the CLI uses and the app opens first.
pub const DEFAULT_COLLECTION: &str = "default";

/// The folder a collection is stored in: the default one in `<home>/index`, others in
/// `<home>/collections/<name>`. Names are letters, digits, spaces, `-` and `_` (no paths), and
/// a folder name on every OS: no space at either end and none of Windows' device names (`CON`,
/// `NUL`, `COM1`…), so a collection made on one machine opens on another.
pub fn collection_dir(home: &Path, name: &str) -> Result<PathBuf> {
    let valid = !name.trim().is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ');
    anyhow::ensure!(valid, "\"{name}\" is not a library name: use letters, digits, spaces, - and _ (at most 64)");
    anyhow::ensure!(name.trim() == name, "\"{name}\" is not a library name: it may not begin or end with a space");
    anyhow::ensure!(
        !is_windows_device_name(name),
        "\"{name}\" is not a library name: Windows keeps that name for a device; choose another"
    );
    Ok(if name == DEFAULT_COLLECTION { home.join("index") } else { home.join("collections").join(name) })
}

/// Names Windows gives to devices in every folder (`CON`, `PRN`, `AUX`, `NUL`, `COM1`–`COM9`,
/// `LPT1`–`LPT9`, in any case): no file or folder can have them there.
fn is_windows_device_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    matches!(upper.as_str(), "CON" | "PRN" | "AUX" | "NUL")
        || (upper.len() == 4
            && (upper.starts_with("COM") || upper.starts_with("LPT"))
            && matches!(upper.as_bytes()[3], b'1'..=b'9'))
}

/// The collections that exist under `home` (the default one always).
pub fn collections(home: &Path) -> Vec<String> {
    let mut names = vec![DEFAULT_COLLECTION.to_string()];
    if let Ok(entries) = std::fs::read_dir(home.join("collections")) {
        let mut others: Vec<String> = entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != DEFAULT_COLLECTION)
            .collect();
        others.sort();
        names.extend(others);
    }
    names
}

impl EngineConfig {
    /// A collection in `data_dir` with these models and keys, everything else as the app and
    /// the CLI have it, except that files are loaded in this process (`loader: None`).
    pub fn new(data_dir: PathBuf, embedder_dir: PathBuf, llm_path: PathBuf, keys: KeyAccess) -> EngineConfig {
        EngineConfig {
            data_dir,
            embedder_dir,
            llm_path,
            draft_path: None,
            top_k: DEFAULT_TOP_K,
            focus_tokens: Some(DEFAULT_FOCUS_TOKENS),
            max_answer_tokens: DEFAULT_MAX_ANSWER_TOKENS,
            loader: None,
            keys,
            follow_links: false,
            embedder_pass: ForwardPass::from_env(),
            read_ahead: true,
            declines: true,
        }
    }

    /// Answer-model tokens one question's context may hold, what the memory budget sizes the KV
    /// cache for: `top_k` passages of at most ~800 tokens each (500 embedder tokens of ordinary
    /// text), the instructions, the question and the earlier turns (~300), and the answer.
    pub fn context_tokens(&self) -> u32 {
        (self.top_k * 800 + 300 + self.max_answer_tokens) as u32
    }

    /// The embedder a new library is made with: the known model `QUIRE_EMBEDDER_MODEL` names
    /// (`multilingual-e5-small` for documents in other languages than English), else
    /// all-MiniLM-L6-v2. A library made already keeps its own (`library_embedder`).
    pub fn new_library_embedder() -> Result<PathBuf> {
        match std::env::var("QUIRE_EMBEDDER_MODEL") {
            Ok(name) if !name.trim().is_empty() => quire_models::find(name.trim())
                .with_context(|| "QUIRE_EMBEDDER_MODEL does not name a known model")?
                .location(),
            _ => quire_models::MINILM.location(),
        }
    }

    /// The default models and the knowledge base under Quire's home folder.
    pub fn from_home() -> Result<EngineConfig> {
        Ok(EngineConfig {
            loader: Some(Isolation::current_exe()?),
            ..EngineConfig::new(
                collection_dir(&quire_models::quire_home()?, DEFAULT_COLLECTION)?,
                EngineConfig::new_library_embedder()?,
                quire_models::QWEN_1_5B.location()?,
                KeyAccess::from_env(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_are_folder_names_on_every_os() {
        let home = Path::new("/q");
        assert_eq!(collection_dir(home, "default").unwrap(), home.join("index"));
        assert_eq!(collection_dir(home, "Work notes_2").unwrap(), home.join("collections").join("Work notes_2"));
        assert!(collection_dir(home, "Console").is_ok(), "only the bare device names are kept");
        assert!(collection_dir(home, "COM0").is_ok());
        for bad in ["../etc", "a/b", r"a\b", "C:", "", "   ", "x".repeat(65).as_str()] {
            assert!(collection_dir(home, bad).is_err(), "{bad:?} accepted");
        }
        for windows_device in ["con", "NUL", "Aux", "prn", "COM1", "lpt9"] {
            let e = collection_dir(home, windows_device).unwrap_err().to_string();
            assert!(e.contains("Windows keeps that name"), "{windows_device}: {e}");
        }
        for spaced in [" notes", "notes "] {
            let e = collection_dir(home, spaced).unwrap_err().to_string();
            assert!(e.contains("begin or end with a space"), "{spaced:?}: {e}");
        }
    }
}
