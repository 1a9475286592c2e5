//! What the shell holds between commands: the settings, the open collection's engine, and the
//! cancel flags of the running ingestion and answer. No RAG logic: that is all in the engine.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use quire_engine::{collection_dir, Cancel, Engine, EngineConfig, KeyAccess, Secret, VaultError};
use tokio::sync::RwLock;

use crate::settings::Settings;

pub enum EngineSlot {
    Opening,
    Ready(Arc<Engine>),
    Failed(String),
    /// The key is not in memory: locked by the user, or it needs a passphrase or a backup.
    Locked(Lock),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Lock {
    ByUser,
    /// A collection sealed under a passphrase (why it is locked).
    NeedsPassphrase(String),
    /// A new collection where no keychain works: the passphrase chosen now will protect it
    /// (the keychain's error).
    ChoosePassphrase {
        no_keychain: String,
    },
    KeyMissing(String),
}

pub struct AppState {
    pub home: PathBuf,
    pub settings: Mutex<Settings>,
    pub engine: RwLock<EngineSlot>,
    /// Ingestions run one at a time; later ones wait their turn.
    pub ingest_turn: tokio::sync::Mutex<()>,
    pub ingest_cancel: Mutex<Option<Cancel>>,
    /// Held while models are fetched: one fetch at a time.
    pub fetch_turn: tokio::sync::Mutex<()>,
    pub answer_cancel: Mutex<Option<Cancel>>,
    /// Set when the main window's page has loaded; the answer model loads after it, so the
    /// window comes up first and the memory measured before the load has settled.
    pub main_page_loaded: tokio::sync::Notify,
    /// Tells the folder-watching task which folders to follow (set once that task runs).
    pub watch_control: Mutex<Option<tokio::sync::mpsc::UnboundedSender<WatchChange>>>,
    /// The passphrase the user entered to unlock a passphrase-protected collection; dropped
    /// (and wiped) when the app is locked.
    pub passphrase: Mutex<Option<Secret>>,
    /// Stops the local API server, when it runs.
    pub api_stop: Mutex<Option<Cancel>>,
}

/// A change to the set of watched folders, sent to the task that follows them.
pub enum WatchChange {
    Add(PathBuf),
    Remove(PathBuf),
}

impl AppState {
    pub fn new(home: PathBuf) -> AppState {
        let settings = Settings::load(&home);
        AppState {
            home,
            settings: Mutex::new(settings),
            engine: RwLock::new(EngineSlot::Opening),
            ingest_turn: tokio::sync::Mutex::new(()),
            ingest_cancel: Mutex::new(None),
            fetch_turn: Default::default(),
            answer_cancel: Mutex::new(None),
            main_page_loaded: tokio::sync::Notify::new(),
            watch_control: Mutex::new(None),
            passphrase: Mutex::new(None),
            api_stop: Mutex::new(None),
        }
    }

    /// Starts or stops following a folder (no-op before the watching task runs; it starts
    /// with the folders in the settings).
    pub fn watch(&self, change: WatchChange) {
        if let Some(tx) = &*self.watch_control.lock().expect("watch lock") {
            let _ = tx.send(change);
        }
    }

    pub fn settings(&self) -> Settings {
        self.settings.lock().expect("settings lock").clone()
    }

    /// The language the app speaks now: the one chosen in Settings, else the system's.
    pub fn language(&self) -> &'static str {
        quire_words::app_language(self.settings().language.as_deref())
    }

    /// `key` of the catalogue in the language the app speaks now.
    pub fn word(&self, key: &str) -> String {
        quire_words::Words::new(self.language()).word(key)
    }

    pub fn update_settings(&self, change: impl FnOnce(&mut Settings)) -> Result<Settings> {
        let mut settings = self.settings.lock().expect("settings lock");
        let mut next = settings.clone();
        change(&mut next);
        next.save(&self.home)?;
        *settings = next.clone();
        Ok(next)
    }

    pub fn engine_config(&self) -> Result<EngineConfig> {
        let settings = self.settings();
        Ok(EngineConfig {
            draft_path: settings.draft_path(),
            loader: Some(quire_engine::Isolation::current_exe()?),
            declines: settings.decline_unsupported,
            ..EngineConfig::new(
                collection_dir(&self.home, &settings.collection)?,
                EngineConfig::new_library_embedder()?,
                settings.target_path()?,
                self.key_access(),
            )
        })
    }

    /// The passphrase typed in the app, else `QUIRE_PASSPHRASE`; else the keychain.
    pub fn key_access(&self) -> KeyAccess {
        let typed = self.passphrase.lock().expect("passphrase lock").clone();
        let mut access = KeyAccess::from_env();
        if typed.is_some() {
            access.passphrase = typed;
        }
        access
    }

    /// (Re)opens the engine for the current settings; on failure the reason is kept for the UI.
    pub async fn open_engine(&self) -> Result<Arc<Engine>> {
        *self.engine.write().await = EngineSlot::Opening;
        let mut new_collection = false;
        let opened = match self.engine_config() {
            Ok(config) => {
                new_collection = !quire_engine::Vault::exists(&config.data_dir);
                Engine::open(config).await.map(Arc::new)
            }
            Err(e) => Err(e),
        };
        let mut slot = self.engine.write().await;
        match opened {
            Ok(engine) => {
                *slot = EngineSlot::Ready(engine.clone());
                Ok(engine)
            }
            Err(e) => {
                let reason = crate::said::said(&e);
                *slot = match e.downcast_ref::<VaultError>() {
                    Some(VaultError::NoKeychain { .. }) if new_collection => {
                        EngineSlot::Locked(Lock::ChoosePassphrase { no_keychain: reason })
                    }
                    Some(VaultError::PassphraseNeeded) => EngineSlot::Locked(Lock::NeedsPassphrase(
                        "This library is protected by a passphrase: enter it to open the library.".into(),
                    )),
                    Some(VaultError::WrongPassphrase | VaultError::NoKeychain { .. }) => {
                        EngineSlot::Locked(Lock::NeedsPassphrase(reason))
                    }
                    Some(VaultError::KeyMissing { .. }) => EngineSlot::Locked(Lock::KeyMissing(reason)),
                    _ => EngineSlot::Failed(reason),
                };
                Err(e)
            }
        }
    }

    /// Drops the open collection, and with it its keys (wiped from memory once the last
    /// command using it ends), and the typed passphrase. Running work is cancelled.
    pub async fn lock(&self) {
        cancel_job(&self.ingest_cancel);
        cancel_job(&self.answer_cancel);
        *self.passphrase.lock().expect("passphrase lock") = None;
        let mut slot = self.engine.write().await;
        let by_passphrase =
            matches!(&*slot, EngineSlot::Ready(e) if e.key_info().store == quire_engine::KeyStore::Passphrase);
        let open = std::mem::replace(
            &mut *slot,
            EngineSlot::Locked(if by_passphrase {
                Lock::NeedsPassphrase("Enter the library's passphrase to open it.".into())
            } else {
                Lock::ByUser
            }),
        );
        drop(slot);
        let_go(open).await;
    }

    /// Closes the collection for work on its files, a repair or a change of embedder (refused
    /// while locked: both index again, which needs the key). A running answer is cancelled; the
    /// slot says the collection is opening until it is opened again (`repaired`, `open_engine`).
    pub async fn close_to_reopen(&self) -> Result<()> {
        let mut slot = self.engine.write().await;
        anyhow::ensure!(!matches!(&*slot, EngineSlot::Locked(_)), "Quire is locked: unlock it first");
        cancel_job(&self.answer_cancel);
        let open = std::mem::replace(&mut *slot, EngineSlot::Opening);
        drop(slot);
        let_go(open).await;
        Ok(())
    }

    /// The engine a repair opened on the mended collection, in use from now on.
    pub async fn repaired(&self, engine: Engine) -> Arc<Engine> {
        let engine = Arc::new(engine);
        *self.engine.write().await = EngineSlot::Ready(engine.clone());
        engine
    }

    /// The open engine, or a sentence saying why there is none.
    pub async fn engine(&self) -> Result<Arc<Engine>> {
        match &*self.engine.read().await {
            EngineSlot::Ready(e) => Ok(e.clone()),
            EngineSlot::Opening => anyhow::bail!("Quire is still opening the library; try again in a moment"),
            EngineSlot::Failed(why) => Err(anyhow::anyhow!("{why}")).context("the library could not be opened"),
            EngineSlot::Locked(_) => anyhow::bail!("Quire is locked: unlock it first"),
        }
    }
}

/// Lets go of the engine a slot held: it goes (its models, its key, and the memory they held,
/// back to the system: `Engine`'s drop) with its last holder. Work still holding it (a cancelled
/// ingestion ending its file, the model still loading) lets go within moments: waited for (up
/// to 10 s), so the engine opened next (an unlock, a repair) is not the second one in memory.
async fn let_go(slot: EngineSlot) {
    let EngineSlot::Ready(engine) = slot else { return };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Arc::strong_count(&engine) > 1 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    if Arc::strong_count(&engine) > 1 {
        eprintln!("the collection closes when the work still using it ends");
    }
}

/// Starts a cancellable job: replaces the slot's flag and returns it.
pub fn start_job(slot: &Mutex<Option<Cancel>>) -> Cancel {
    let cancel = Cancel::new();
    *slot.lock().expect("cancel lock") = Some(cancel.clone());
    cancel
}

pub fn cancel_job(slot: &Mutex<Option<Cancel>>) -> bool {
    match slot.lock().expect("cancel lock").take() {
        Some(c) => {
            c.cancel();
            true
        }
        None => false,
    }
}
