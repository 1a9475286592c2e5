//! A file of lines that more than one process appends to (the app beside `quire watch`): the
//! ingestion queue and the conversation history. Changes are made holding an OS file lock
//! beside it (`<name>.lock`), so an append is never lost to another process's rewrite, and a
//! line cut short by a crash stays on its own line (unread) instead of spoiling the next one.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use quire_index::Protection;

pub(crate) struct LineLog {
    path: PathBuf,
}

/// Proof that the log's lock is held; the lock goes when it is dropped.
pub(crate) struct Locked(#[allow(dead_code)] std::fs::File);

impl LineLog {
    pub(crate) fn new(path: PathBuf) -> LineLog {
        LineLog { path }
    }

    /// Waits for, then holds, the log's lock.
    pub(crate) fn lock(&self) -> Result<Locked> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let path = self.path.with_extension("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.lock().with_context(|| format!("cannot lock {}", path.display()))?;
        Ok(Locked(file))
    }

    /// The whole log; empty when there is none yet.
    pub(crate) fn read(&self, _: &Locked) -> Result<String> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => Ok(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", self.path.display())),
        }
    }

    /// Adds `lines` (each ending in a newline) at the end.
    pub(crate) fn append(&self, lines: &str, _: &Locked) -> Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        let torn = ends_without_newline(&mut file).with_context(|| format!("cannot read {}", self.path.display()))?;
        let text = if torn { format!("\n{lines}") } else { lines.to_owned() };
        file.write_all(text.as_bytes()).with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Lines not sealed under the key `key_id` (sealed under another, or plain): what a key
    /// rotation must reseal before it may forget the old key.
    pub(crate) fn lines_not_sealed_by(&self, key_id: &str) -> Result<usize> {
        let text = self.read(&self.lock()?)?;
        Ok(text.lines().filter(|l| !l.trim().is_empty() && Protection::sealed_by(l) != Some(key_id)).count())
    }

    /// Replaces the log with `lines` (a temporary file, synced, renamed over it: all or
    /// nothing), or removes it when `lines` is empty.
    pub(crate) fn replace(&self, lines: &str, _: &Locked) -> Result<()> {
        if lines.is_empty() {
            return match std::fs::remove_file(&self.path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("cannot remove {}", self.path.display()))
                }
                _ => Ok(()),
            };
        }
        let tmp = self.path.with_extension("tmp");
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(lines.as_bytes())?;
            f.sync_all()
        });
        written.with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path).with_context(|| format!("cannot replace {}", self.path.display()))
    }
}

/// `value` as one line of a log: its JSON sealed under `protection` for `context`.
pub(crate) fn sealed_line(protection: &Protection, context: &str, value: &impl serde::Serialize) -> Result<String> {
    Ok(format!("{}\n", protection.seal(context, &serde_json::to_string(value)?)))
}

fn ends_without_newline(file: &mut std::fs::File) -> std::io::Result<bool> {
    if file.metadata()?.len() == 0 {
        return Ok(false);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_appended_after_a_torn_one_stays_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let log = LineLog::new(path.clone());
        let lock = log.lock().unwrap();
        log.append("one\n", &lock).unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"tw").unwrap();
        log.append("three\n", &lock).unwrap();
        assert_eq!(log.read(&lock).unwrap(), "one\ntw\nthree\n");
        log.replace("", &lock).unwrap();
        assert_eq!(log.read(&lock).unwrap(), "");
    }
}
