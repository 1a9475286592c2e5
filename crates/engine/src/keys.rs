//! The collection's key over its life: where it is kept, rotation and resealing, backups, and
//! the refusal to make a new key for sealed data whose manifest is gone.

use std::path::Path;

use anyhow::{Context, Result};

use quire_index::KnowledgeBase;

use crate::{ingestion, write_private, Cancel, Engine, KeyInfo, Secret};

impl Engine {
    /// Where this collection's key is kept, and whether a rotation is under way.
    pub fn key_info(&self) -> KeyInfo {
        self.vault.lock().unwrap_or_else(|p| p.into_inner()).info()
    }

    /// Reseals what is not sealed under the current key (documents, the ingestion queue, the
    /// history), then forgets the keys rotated away from, once the tables and logs show that
    /// nothing is sealed under them any more (checked, not assumed: a rotation killed between a
    /// document's new rows and the removal of its old chunks leaves chunk rows under the old
    /// key, which are removed here first). Each document is committed on its own: an
    /// interruption loses nothing, and the next call (or the next `open`) goes on.
    /// `progress` gets (documents done, documents to do). Returns how many were resealed.
    pub async fn reseal(&self, progress: &mut (dyn FnMut(usize, usize) + Send), cancel: &Cancel) -> Result<usize> {
        /// Passes over the tables before giving up (another process still writing under the
        /// old key); the rotation then goes on at the next start.
        const PASSES: usize = 3;
        let _writing = self.writing.lock().await;
        let rotating = !self.key_info().rotating_from.is_empty();
        let mut resealed = 0;
        for _ in 0..PASSES {
            let docs = self.kb.documents_to_reseal(rotating).await?;
            if docs.is_empty() && !rotating {
                return Ok(resealed);
            }
            for (i, doc) in docs.iter().enumerate() {
                progress(i, docs.len());
                if cancel.is_cancelled() {
                    return Ok(resealed + i);
                }
                self.kb.reseal(doc).await.with_context(|| format!("cannot reseal {}", doc.path))?;
            }
            progress(docs.len(), docs.len());
            resealed += docs.len();
            // Chunks a crash left without their document: under the old key they would stop
            // every search that finds them once the key is gone.
            ingestion::remove_orphans(self).await?;
            let protection = self.kb.protection();
            self.jobs(|q| q.reseal(protection.clone()))?;
            self.pages_read(|p| p.reseal(protection.clone()))?;
            self.history().reseal(protection)?;
            // Old table versions still hold what was sealed under the old key (or stored plain):
            // compacted away and deleted.
            self.kb.refresh_indexes().await?;
            self.kb.optimize(std::time::Duration::ZERO).await?;
            let left = self.kb.rows_under_other_keys().await?
                + self.jobs(|q| q.lines_under_other_keys())?
                + self.pages_read(|p| p.lines_under_other_keys())?
                + self.history().lines_under_other_keys()?;
            if left == 0 {
                self.vault.lock().unwrap_or_else(|p| p.into_inner()).finish_rotation()?;
                return Ok(resealed);
            }
        }
        anyhow::bail!(
            "the key rotation could not finish: data is still being written under the old key (another Quire \
             process?); the old key is kept and the rotation goes on at the next start"
        )
    }

    /// Replaces the collection's key: a new key is made and stored where the old one is, new
    /// writes use it at once, and everything is resealed under it (`reseal`). Interrupted, the
    /// rotation goes on at the next `reseal` or `open`; the old key is kept until it is done.
    pub async fn rotate_key(&self, progress: &mut (dyn FnMut(usize, usize) + Send), cancel: &Cancel) -> Result<usize> {
        // The other computers' rows stay under the old key, which they alone could reseal.
        self.refuse_if_shared("A key rotation")?;
        {
            let _writing = self.writing.lock().await;
            let keys = self.config.keys.clone();
            let protection = self.vault.lock().unwrap_or_else(|p| p.into_inner()).rotate(&keys)?;
            self.kb.set_protection(protection);
        }
        self.reseal(progress, cancel).await
    }

    /// Writes a backup of this collection's keys, sealed under `backup_passphrase`, to `file`
    /// (JSON, to keep somewhere safe: with it, `Vault::import` restores a lost keychain entry
    /// or passphrase manifest), and records that the current key has one.
    pub fn export_key(&self, backup_passphrase: &Secret, file: &Path) -> Result<()> {
        let mut vault = self.vault.lock().unwrap_or_else(|p| p.into_inner());
        let backup = vault.export(&self.config.keys, backup_passphrase)?;
        write_private(file, backup.as_bytes()).with_context(|| format!("cannot write {}", file.display()))?;
        vault.mark_backed_up()?;
        Ok(())
    }
}

/// Restores a collection's keys from a backup (`Vault::import`), refusing up front, with nothing
/// changed, a backup that lacks a key the collection's documents or logs are sealed under (a
/// backup made before a key rotation): imported, it would leave every command failing.
pub async fn import_key_backup(
    dir: &Path,
    backup_json: &str,
    backup_passphrase: &quire_vault::Secret,
    access: &quire_vault::KeyAccess,
) -> Result<quire_vault::KeyInfo> {
    let held = quire_vault::store::backup_key_ids(backup_json)?;
    let mut needed = KnowledgeBase::sealing_keys(dir).await?;
    needed.extend(keys_sealing_the_logs(dir));
    let missing: Vec<&String> = needed.iter().filter(|k| !held.contains(k)).collect();
    if !missing.is_empty() {
        let list = |keys: &mut dyn Iterator<Item = &String>| keys.map(String::as_str).collect::<Vec<_>>().join(", ");
        anyhow::bail!(
            "this backup holds key {}, but the library is sealed under key {}, which the backup does not \
             hold (it was made before a key rotation); nothing was changed. Use a backup made after the last rotation",
            list(&mut held.iter()),
            list(&mut missing.into_iter())
        );
    }
    Ok(quire_vault::Vault::import(dir, backup_json, backup_passphrase, access)?)
}

/// A collection whose key manifest (`vault.json`) is gone but whose tables or logs hold sealed
/// data must not get a new key: the new manifest would name a new collection, and the user's key
/// backup (of the old one) would then be refused. Nothing is written; the error says how to
/// restore the manifest.
pub(crate) async fn refuse_sealed_data_without_manifest(dir: &Path) -> Result<()> {
    if dir.join(quire_vault::store::MANIFEST).exists() {
        return Ok(());
    }
    if !keys_sealing_the_logs(dir).is_empty() || KnowledgeBase::holds_sealed_data(dir).await? {
        return Err(crate::Remedied {
            problem: format!(
                "the key manifest of this library ({}) is missing, but the library holds encrypted \
                 documents; nothing was changed. Restore it from your key backup, then open it again",
                dir.join(quire_vault::store::MANIFEST).display()
            ),
            remedy: crate::Remedy::ImportKeyBackup,
        }
        .into());
    }
    Ok(())
}

/// The keys the lines of the collection's logs (the ingestion queue, the history) are sealed
/// under, read without any key; a damaged line's bytes do not hide the others.
fn keys_sealing_the_logs(dir: &Path) -> std::collections::BTreeSet<String> {
    let mut keys = std::collections::BTreeSet::new();
    for name in ["ingest-queue.jsonl", "history.jsonl"] {
        if let Ok(bytes) = std::fs::read(dir.join(name)) {
            let text = String::from_utf8_lossy(&bytes);
            keys.extend(text.lines().filter_map(quire_vault::Protection::sealed_by).map(str::to_owned));
        }
    }
    keys
}
