//! Where a collection's keys are kept: `vault.json` in the collection folder names the
//! collection, its current key and any keys being rotated away from, and for each key where it
//! lives: the OS keychain, or wrapped under the collection's passphrase (in the manifest
//! itself), or nowhere (a throwaway collection's key, held in memory only). The manifest holds
//! no secret in the clear.

use std::path::{Path, PathBuf};

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::OsRng;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::passphrase::{self, Secret, WrappedKey};
use crate::{keychain, DataKey, KeyRing, Protection, VaultError};

pub const MANIFEST: &str = "vault.json";
const BACKUP_FORMAT: &str = "quire-key-backup";

/// How to get a collection's key, and where a new collection keeps it.
#[derive(Debug, Clone, Default)]
pub struct KeyAccess {
    /// Opens passphrase-protected collections; a new collection given one is protected by it
    /// instead of the keychain.
    pub passphrase: Option<Secret>,
    /// A throwaway collection (evaluations, benchmarks): a new key held in memory only.
    pub ephemeral: bool,
}

impl KeyAccess {
    /// The keychain, or the passphrase in `QUIRE_PASSPHRASE` when it is set.
    pub fn from_env() -> KeyAccess {
        let passphrase = std::env::var("QUIRE_PASSPHRASE").ok().filter(|p| !p.is_empty()).map(Secret::new);
        KeyAccess { passphrase, ephemeral: false }
    }

    pub fn ephemeral() -> KeyAccess {
        KeyAccess { passphrase: None, ephemeral: true }
    }

    pub fn passphrase(passphrase: &str) -> KeyAccess {
        KeyAccess { passphrase: Some(Secret::new(passphrase)), ephemeral: false }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Manifest {
    version: u32,
    collection: String,
    current: String,
    keys: Vec<StoredKey>,
    /// The key the last backup was made of (`Vault::mark_backed_up`): a rotation since then
    /// needs a new backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backed_up: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "store", rename_all = "snake_case")]
enum StoredKey {
    Keychain { id: String },
    Passphrase { id: String, wrapped: WrappedKey },
    Memory { id: String },
}

impl StoredKey {
    fn id(&self) -> &str {
        match self {
            StoredKey::Keychain { id } | StoredKey::Passphrase { id, .. } | StoredKey::Memory { id } => id,
        }
    }
}

/// Where a collection's current key is kept (shown in the app's privacy settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum KeyStore {
    Keychain,
    Passphrase,
    Memory,
}

/// What the app and `quire key status` show about a collection's keys.
#[derive(Debug, Clone, Serialize, TS)]
pub struct KeyInfo {
    pub collection: String,
    pub key_id: String,
    pub store: KeyStore,
    /// Keys still to be rotated away from (their data is being resealed).
    pub rotating_from: Vec<String>,
    /// Whether a backup of the current key was saved (by this process or another one).
    pub backed_up: bool,
}

/// A collection's key manifest, opened.
pub struct Vault {
    path: PathBuf,
    manifest: Manifest,
}

fn random_id() -> String {
    let mut bytes = [0u8; 8];
    OsRng.fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn purpose(collection: &str) -> String {
    format!("quire collection {collection}")
}

impl Vault {
    /// Opens the keys of the collection in `dir`, making and storing a new key the first time.
    /// Returns the vault and the protection to read and write the collection with.
    pub fn unlock(dir: &Path, access: &KeyAccess) -> Result<(Vault, Protection), VaultError> {
        let path = dir.join(MANIFEST);
        let manifest = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str::<Manifest>(&text).map_err(|e| {
                VaultError::Other(format!("{} is damaged ({e}); restore it from a backup", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let collection = random_id();
                let key = DataKey::random();
                let stored = store_key(&collection, &key, access)?;
                let manifest = Manifest {
                    version: 1,
                    collection: collection.clone(),
                    current: key.id(),
                    keys: vec![stored],
                    backed_up: None,
                };
                let vault = Vault { path, manifest };
                // Another process opening the same new collection may have made its key first
                // (the app and `quire list` during `quire watch`): the first manifest wins, and
                // this process uses it.
                if !vault.save_new()? {
                    if matches!(vault.manifest.keys[0], StoredKey::Keychain { .. }) {
                        keychain::delete(&collection, &key.id())?;
                    }
                    return Vault::unlock(dir, access);
                }
                return Ok((vault, Protection::sealed(&key)));
            }
            Err(e) => return Err(VaultError::Other(format!("cannot read {}: {e}", path.display()))),
        };
        let vault = Vault { path, manifest };
        let protection = vault.protection(access)?;
        Ok((vault, protection))
    }

    fn protection(&self, access: &KeyAccess) -> Result<Protection, VaultError> {
        let m = &self.manifest;
        let current = self.load_key(&m.current, access)?;
        let previous = m
            .keys
            .iter()
            .filter(|k| k.id() != m.current)
            .map(|k| self.load_key(k.id(), access))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Protection::Sealed(std::sync::Arc::new(KeyRing::new(&current, &previous))))
    }

    fn load_key(&self, id: &str, access: &KeyAccess) -> Result<DataKey, VaultError> {
        let collection = &self.manifest.collection;
        let stored = self.manifest.keys.iter().find(|k| k.id() == id);
        match stored {
            Some(StoredKey::Keychain { id }) => keychain::load(collection, id)?.ok_or_else(|| VaultError::KeyMissing {
                key_id: id.clone(),
                entry: format!("Quire / {}", keychain::entry_name(collection, id)),
            }),
            Some(StoredKey::Passphrase { wrapped, .. }) => {
                let pass = access.passphrase.as_ref().ok_or(VaultError::PassphraseNeeded)?;
                passphrase::unwrap(wrapped, pass, &purpose(collection))
            }
            Some(StoredKey::Memory { .. }) => Err(VaultError::Other(
                "this was a throwaway library whose key was never stored; delete its folder".into(),
            )),
            None => Err(VaultError::UnknownKey(id.to_owned())),
        }
    }

    pub fn info(&self) -> KeyInfo {
        let m = &self.manifest;
        let store = match m.keys.iter().find(|k| k.id() == m.current) {
            Some(StoredKey::Passphrase { .. }) => KeyStore::Passphrase,
            Some(StoredKey::Memory { .. }) => KeyStore::Memory,
            _ => KeyStore::Keychain,
        };
        // Read again: `quire key export` may have made the backup while the app runs.
        let on_disk = std::fs::read_to_string(&self.path).ok().and_then(|t| serde_json::from_str::<Manifest>(&t).ok());
        let backed_up = on_disk.map_or(m.backed_up.clone(), |d| d.backed_up);
        KeyInfo {
            collection: m.collection.clone(),
            key_id: m.current.clone(),
            store,
            rotating_from: m.keys.iter().map(|k| k.id().to_owned()).filter(|id| *id != m.current).collect(),
            backed_up: backed_up.as_deref() == Some(m.current.as_str()),
        }
    }

    /// Whether `dir` holds a collection's key manifest (else opening it makes a new key).
    pub fn exists(dir: &Path) -> bool {
        dir.join(MANIFEST).exists()
    }

    /// Records that a backup of the current key was saved (`export`'s text, written away).
    pub fn mark_backed_up(&mut self) -> Result<(), VaultError> {
        self.manifest.backed_up = Some(self.manifest.current.clone());
        self.save()
    }

    /// Starts a key rotation: a new current key, stored where the current one is; the old keys
    /// stay (in the manifest and the keychain) until `finish_rotation`, so data sealed under
    /// them still opens while it is resealed, and an interrupted rotation resumes.
    pub fn rotate(&mut self, access: &KeyAccess) -> Result<Protection, VaultError> {
        self.protection(access)?; // the old keys must open before anything changes
        let key = DataKey::random();
        let access = match self.info().store {
            KeyStore::Passphrase => KeyAccess { passphrase: access.passphrase.clone(), ephemeral: false },
            KeyStore::Memory => KeyAccess::ephemeral(),
            KeyStore::Keychain => KeyAccess::default(),
        };
        let stored = store_key(&self.manifest.collection, &key, &access)?;
        self.manifest.keys.insert(0, stored);
        self.manifest.current = key.id();
        self.save()?;
        self.protection(&access)
    }

    /// Forgets the keys rotated away from, once nothing is sealed under them any more.
    pub fn finish_rotation(&mut self) -> Result<(), VaultError> {
        let current = self.manifest.current.clone();
        let old: Vec<StoredKey> = self.manifest.keys.iter().filter(|k| k.id() != current).cloned().collect();
        if old.is_empty() {
            return Ok(());
        }
        self.manifest.keys.retain(|k| k.id() == current);
        self.save()?;
        for k in old {
            if let StoredKey::Keychain { id } = k {
                keychain::delete(&self.manifest.collection, &id)?;
            }
        }
        Ok(())
    }

    /// A backup of every key of the collection, sealed under `backup_passphrase` (JSON).
    pub fn export(&self, access: &KeyAccess, backup_passphrase: &Secret) -> Result<String, VaultError> {
        let m = &self.manifest;
        let mut keys = Vec::new();
        for stored in &m.keys {
            let key = self.load_key(stored.id(), access)?;
            keys.push(BackupKey {
                id: stored.id().to_owned(),
                wrapped: passphrase::wrap(&key, backup_passphrase, &backup_purpose(&m.collection))?,
            });
        }
        let backup = Backup {
            format: BACKUP_FORMAT.into(),
            version: 1,
            collection: m.collection.clone(),
            current: m.current.clone(),
            keys,
        };
        Ok(serde_json::to_string_pretty(&backup).expect("serialisable"))
    }

    /// Puts the keys of a backup back where this machine keeps keys (the keychain, or under
    /// `access`'s passphrase), and the manifest too if it was lost. The backup must be of this
    /// collection.
    pub fn import(
        dir: &Path,
        backup_json: &str,
        backup_passphrase: &Secret,
        access: &KeyAccess,
    ) -> Result<KeyInfo, VaultError> {
        let backup: Backup = serde_json::from_str(backup_json)
            .ok()
            .filter(|b: &Backup| b.format == BACKUP_FORMAT)
            .ok_or_else(|| VaultError::Other("this is not a Quire key backup".into()))?;
        let path = dir.join(MANIFEST);
        let existing: Option<Manifest> =
            std::fs::read_to_string(&path).ok().and_then(|t| serde_json::from_str(&t).ok());
        if let Some(m) = &existing {
            if m.collection != backup.collection {
                return Err(VaultError::Other(format!(
                    "this backup is of library {}, not of this one ({}); nothing was changed",
                    backup.collection, m.collection
                )));
            }
        }
        let mut restored = Vec::new();
        for k in &backup.keys {
            let key = passphrase::unwrap(&k.wrapped, backup_passphrase, &backup_purpose(&backup.collection))?;
            if key.id() != k.id {
                return Err(VaultError::Other("the backup is damaged (a key does not match its id)".into()));
            }
            restored.push(key);
        }
        let mut manifest = existing.unwrap_or(Manifest {
            version: 1,
            collection: backup.collection.clone(),
            current: backup.current.clone(),
            keys: Vec::new(),
            backed_up: None,
        });
        // The user holds a backup of the current key: the one being imported.
        if manifest.current == backup.current {
            manifest.backed_up = Some(backup.current.clone());
        }
        for key in &restored {
            let stored = store_key(&manifest.collection, key, access)?;
            manifest.keys.retain(|k| k.id() != stored.id());
            manifest.keys.push(stored);
        }
        if !manifest.keys.iter().any(|k| k.id() == manifest.current) {
            return Err(VaultError::Other(format!(
                "the backup does not hold the library's current key {}; use a newer backup",
                manifest.current
            )));
        }
        let vault = Vault { path, manifest };
        vault.save()?;
        Ok(vault.info())
    }

    /// Writes a new collection's manifest unless one is there already; false if one was.
    fn save_new(&self) -> Result<bool, VaultError> {
        let tmp = self.write_temporary()?;
        // A hard link fails if the name exists: creating the manifest is atomic and exclusive.
        let linked = std::fs::hard_link(&tmp, &self.path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(self.write_failed(e)),
        }
    }

    /// Writes the manifest atomically (temporary file, synced, renamed over).
    fn save(&self) -> Result<(), VaultError> {
        let tmp = self.write_temporary()?;
        std::fs::rename(&tmp, &self.path).map_err(|e| self.write_failed(e))
    }

    /// Writes the manifest, synced, to a temporary file beside it, unique to this write:
    /// processes, and threads of one process, may write the same collection's manifest at once.
    fn write_temporary(&self) -> Result<PathBuf, VaultError> {
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = self.path.with_extension(format!("json.{}.{write}.tmp", std::process::id()));
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| self.write_failed(e))?;
        }
        write_private(&tmp, serde_json::to_string_pretty(&self.manifest).expect("serialisable").as_bytes()).map_err(
            |e| {
                // A full disk leaves no half-written (or empty) temporary file behind.
                let _ = std::fs::remove_file(&tmp);
                self.write_failed(e)
            },
        )?;
        Ok(tmp)
    }

    fn write_failed(&self, e: std::io::Error) -> VaultError {
        VaultError::Other(format!("cannot write {}: {e}", self.path.display()))
    }
}

/// The local API's bearer token, kept as the data key of a library in `dir` opened with
/// `access` is: sealed under the passphrase in `dir` (`api-token.json`) when `access` has one,
/// else in the OS keychain. A new random token is made and kept the first time.
pub fn api_token(dir: &Path, access: &KeyAccess) -> Result<String, VaultError> {
    let Some(pass) = &access.passphrase else { return keychain::api_token() };
    const PURPOSE: &str = "local API token";
    let path = dir.join("api-token.json");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let wrapped: passphrase::WrappedKey = serde_json::from_str(&text).map_err(|e| {
                VaultError::Other(format!("{} is damaged ({e}); delete it to make a new token", path.display()))
            })?;
            Ok(hex::encode(passphrase::unwrap(&wrapped, pass, PURPOSE)?.bytes()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = DataKey::random();
            let wrapped = passphrase::wrap(&token, pass, PURPOSE)?;
            std::fs::create_dir_all(dir)
                .map_err(|e| VaultError::Other(format!("cannot make {}: {e}", dir.display())))?;
            let text = serde_json::to_string_pretty(&wrapped).expect("serialisable");
            write_private(&path, text.as_bytes())
                .map_err(|e| VaultError::Other(format!("cannot write {}: {e}", path.display())))?;
            Ok(hex::encode(token.bytes()))
        }
        Err(e) => Err(VaultError::Other(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Writes a file only its owner can read (on Unix; elsewhere the folder's permissions apply),
/// synced to disk: key manifests and key backups.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

fn store_key(collection: &str, key: &DataKey, access: &KeyAccess) -> Result<StoredKey, VaultError> {
    let id = key.id();
    if access.ephemeral {
        return Ok(StoredKey::Memory { id });
    }
    if let Some(pass) = &access.passphrase {
        return Ok(StoredKey::Passphrase { wrapped: passphrase::wrap(key, pass, &purpose(collection))?, id });
    }
    keychain::store(collection, key)?;
    // Read it back: some keychains accept a write they cannot serve (a locked or absent store).
    match keychain::load(collection, &id)? {
        Some(k) if k.id() == id => Ok(StoredKey::Keychain { id }),
        _ => Err(VaultError::NoKeychain { reason: "the keychain did not keep the key".into() }),
    }
}

fn backup_purpose(collection: &str) -> String {
    format!("quire key backup {collection}")
}

#[derive(Serialize, Deserialize)]
struct Backup {
    format: String,
    version: u32,
    collection: String,
    current: String,
    keys: Vec<BackupKey>,
}

/// The ids of the keys a backup holds, read without its passphrase (they are not secret).
pub fn backup_key_ids(backup_json: &str) -> Result<Vec<String>, VaultError> {
    let backup: Backup = serde_json::from_str(backup_json)
        .ok()
        .filter(|b: &Backup| b.format == BACKUP_FORMAT)
        .ok_or_else(|| VaultError::Other("this is not a Quire key backup".into()))?;
    Ok(backup.keys.into_iter().map(|k| k.id).collect())
}

#[derive(Serialize, Deserialize)]
struct BackupKey {
    id: String,
    wrapped: WrappedKey,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collections_opened_at_once_by_two_processes_share_one_key() {
        // The window is short (between writing the candidate manifest and linking it): a few rounds.
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let access = KeyAccess::passphrase("p");
            let opened: Vec<String> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|_| s.spawn(|| Vault::unlock(dir.path(), &access).unwrap().1.key_id().to_owned()))
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            assert!(opened.iter().all(|id| *id == opened[0]), "{opened:?}");
            let (_, again) = Vault::unlock(dir.path(), &access).unwrap();
            assert_eq!(again.key_id(), opened[0]);
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(left, ["vault.json"], "no temporary file left behind");
        }
    }

    #[test]
    fn passphrase_collections_reopen_rotate_and_restore_from_a_backup() {
        let dir = tempfile::tempdir().unwrap();
        let access = KeyAccess::passphrase("pass one");
        let (mut vault, p1) = Vault::unlock(dir.path(), &access).unwrap();
        let sealed = p1.seal("c", "secret words");
        assert_eq!(vault.info().store, KeyStore::Passphrase);

        // Reopen: the same key; without or with a wrong passphrase: clear errors.
        let (_, again) = Vault::unlock(dir.path(), &access).unwrap();
        assert_eq!(again.open("c", &sealed).unwrap(), "secret words");
        assert!(matches!(Vault::unlock(dir.path(), &KeyAccess::default()), Err(VaultError::PassphraseNeeded)));
        assert!(matches!(Vault::unlock(dir.path(), &KeyAccess::passphrase("nope")), Err(VaultError::WrongPassphrase)));

        // Rotate: new data sealed under the new key, old data still opens until finished.
        // A backup is recorded, on disk for other processes too, until the key it holds is
        // rotated away.
        assert!(!vault.info().backed_up, "nothing was backed up yet");
        let backup = vault.export(&access, &Secret::new("backup pass")).unwrap();
        vault.mark_backed_up().unwrap();
        assert!(vault.info().backed_up);
        assert!(Vault::unlock(dir.path(), &access).unwrap().0.info().backed_up, "kept in the manifest");
        let p2 = vault.rotate(&access).unwrap();
        assert!(!vault.info().backed_up, "the new key has no backup");
        assert_ne!(p2.key_id(), p1.key_id());
        assert_eq!(vault.info().rotating_from, vec![p1.key_id().to_owned()]);
        let (_, reopened) = Vault::unlock(dir.path(), &access).unwrap();
        assert_eq!(reopened.open("c", &sealed).unwrap(), "secret words");
        vault.finish_rotation().unwrap();
        let (_, after) = Vault::unlock(dir.path(), &access).unwrap();
        assert!(matches!(after.open("c", &sealed), Err(VaultError::UnknownKey(_))));

        // The manifest lost: the old backup brings back a collection whose current key it holds.
        let fresh = tempfile::tempdir().unwrap();
        let info = Vault::import(fresh.path(), &backup, &Secret::new("backup pass"), &access).unwrap();
        assert_eq!(info.key_id, p1.key_id());
        assert!(info.backed_up, "restored from a backup of its current key");
        let (_, restored) = Vault::unlock(fresh.path(), &access).unwrap();
        assert_eq!(restored.open("c", &sealed).unwrap(), "secret words");
        // A wrong backup passphrase or another collection's backup: refused, nothing changed.
        assert!(matches!(
            Vault::import(fresh.path(), &backup, &Secret::new("bad"), &access),
            Err(VaultError::WrongPassphrase)
        ));
        let other = tempfile::tempdir().unwrap();
        let (other_vault, _) = Vault::unlock(other.path(), &access).unwrap();
        let other_backup = other_vault.export(&access, &Secret::new("b")).unwrap();
        assert!(Vault::import(fresh.path(), &other_backup, &Secret::new("b"), &access).is_err());
        assert!(Vault::import(fresh.path(), "{}", &Secret::new("b"), &access).is_err());
    }
}
