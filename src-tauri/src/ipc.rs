//! Types the UI receives that are the shell's own (the engine's types are used as they are).
//! Every type here and every engine type sent to the UI is exported to TypeScript by
//! `bindings::export`; a test fails when ui/src/bindings is out of date.

use serde::Serialize;
use ts_rs::TS;

use quire_engine::DocumentRecord;

/// Events the backend emits to every window, with their payloads.
pub const EVENT_INGEST: &str = "ingest"; // quire_engine::Event
pub const EVENT_STATUS_CHANGED: &str = "status-changed"; // ()
pub const EVENT_FILES_DROPPED: &str = "files-dropped"; // Vec<String>
pub const EVENT_DRAGGING: &str = "dragging"; // bool: files are being dragged over the window
pub const EVENT_RESEAL: &str = "reseal"; // (done, total) documents resealed under a new key
pub const EVENT_FETCH: &str = "fetch"; // String: a line of what fetching the models is doing
pub const EVENT_LANGUAGE: &str = "language"; // String: the app speaks this language from now on

/// How the window says that damaged files are mended, after the engine's "files look damaged";
/// the UI offers its check and repair where an error ends with it (`saysDamaged`).
pub const DAMAGE_REMEDY: &str = "Settings → Library health checks the library and repairs it";

#[derive(Debug, Clone, Serialize, TS)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EngineState {
    Opening,
    Ready,
    Failed {
        reason: String,
    },
    /// The collection's key is not in memory. `reason` in plain words, `detail` the system's
    /// own (may be empty). `needs_passphrase`: unlocking takes one; `new_collection`: there is
    /// no key yet and the passphrase typed now will protect a new one (so it is typed twice);
    /// `key_missing`: the key is gone from the keychain and a backup must be imported.
    Locked {
        reason: String,
        detail: String,
        needs_passphrase: bool,
        new_collection: bool,
        key_missing: bool,
    },
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct ModelChoice {
    pub path: String,
    pub installed: bool,
    #[ts(type = "number")]
    pub file_bytes: u64,
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct AppStatus {
    pub home: String,
    pub collection: String,
    pub collections: Vec<String>,
    pub engine: EngineState,
    pub documents: Vec<DocumentRecord>,
    pub target_model: ModelChoice,
    /// The draft model picked; none by default (the decoder drafts from the answer's grammar and
    /// the passages).
    pub draft_model: Option<ModelChoice>,
    pub model_loaded: bool,
    /// The embedding model the open library is searched with (its name).
    pub embedder: Option<String>,
    /// The embedding models installed, by name: those a library can be embedded again with.
    pub embedders: Vec<String>,
    /// An offer to embed the library again with a model that reads its languages (most of its
    /// passages are in languages its embedder does not read), unless declined.
    pub embedder_advice: Option<quire_engine::EmbedderAdvice>,
    /// Where the loaded answer model runs: "CPU", "CUDA GPU" or "Metal GPU".
    pub model_runs_on: Option<String>,
    /// The answer model is being loaded at start (preloading is on and it is not in memory yet);
    /// with preloading off it loads with the first question.
    pub model_preloading: bool,
    /// What is missing or wrong, in plain words, with what to do about it.
    pub problems: Vec<String>,
    /// Known models the settings use that are not installed (`fetch_models` gets them).
    pub missing_models: Vec<String>,
    /// The OCR model that reads scans, as Settings names it (its name and size), when installed.
    pub ocr_model: Option<String>,
    pub watched_folders: Vec<String>,
    pub ingesting: bool,
    /// The local API's port when it is on.
    pub local_api_port: Option<u16>,
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct IngestSummary {
    pub indexed: usize,
    pub unchanged: usize,
    pub failed: Vec<FailedFile>,
    pub chunks: usize,
    pub cancelled: bool,
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct FailedFile {
    pub path: String,
    pub reason: String,
}

/// A check or a repair of the library's files: one line per table (and what was indexed again).
#[derive(Debug, Clone, Serialize, TS)]
pub struct LibraryHealth {
    pub lines: Vec<String>,
    /// Whether every table reads whole (after the repair, for a repair).
    pub whole: bool,
    /// Documents indexed again from their files by a repair.
    pub reindexed: usize,
}

/// The local API, when it runs: where, and the bearer token other tools send.
#[derive(Debug, Clone, Serialize, TS)]
pub struct LocalApi {
    pub address: Option<String>,
    pub token: Option<String>,
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct SetModelsResult {
    pub warnings: Vec<String>,
}

/// The language the app speaks (`language`, a tag of ui/src/i18n), the one chosen in Settings
/// (`None`: the system's) and the system's own, as the app speaks it.
#[derive(Debug, Clone, Serialize, TS)]
pub struct LanguageChoice {
    pub language: String,
    pub chosen: Option<String>,
    pub system: String,
}
