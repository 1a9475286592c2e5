//! A file of lines that more than one process appends to (the app beside `quire watch`): the
//! ingestion queue and the conversation history. Changes are made holding an OS file lock
//! beside it (`<name>.lock`), so an append is never lost to another process's rewrite, and a
//! line cut short by a crash stays on its own line (unread) instead of spoiling the next one.
//!
//! A damaged line (bytes flipped on disk, a line cut short) never stops the rest: it is moved
//! out of the log into `<log>.damaged` beside it, kept as it was for whoever wants to look, and
//! counted for the user to be told (`notices`).

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

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

    /// The log's lines, each ending in a newline; empty when there is none yet. Lines that are
    /// not text, and lines `readable` says are damaged, are set aside (`<log>.damaged`) and the
    /// log rewritten without them.
    pub(crate) fn read(&self, lock: &Locked, readable: impl Fn(&str) -> Readable) -> Result<String> {
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", self.path.display())),
        };
        let (mut kept, mut damaged) = (String::with_capacity(bytes.len()), Vec::new());
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.iter().all(u8::is_ascii_whitespace)) {
            match std::str::from_utf8(line).map(&readable) {
                Ok(Readable::Yes) => {
                    kept.push_str(std::str::from_utf8(line).expect("checked above"));
                    kept.push('\n');
                }
                Ok(Readable::Damaged) | Err(_) => damaged.push(line),
            }
        }
        if !damaged.is_empty() {
            match self.set_aside(&damaged, &kept, lock) {
                // A full disk (often what tore the line): they stay in the log, passed over at
                // each read, and are set aside by a read once there is room. Nothing is lost.
                Err(e) if crate::disk_full::is_disk_full(&e) => {}
                written => written?,
            }
        }
        Ok(kept)
    }

    /// Moves `damaged` lines to `<log>.damaged` (added to what is there, synced first), then
    /// makes `kept` the log.
    fn set_aside(&self, damaged: &[&[u8]], kept: &str, lock: &Locked) -> Result<()> {
        let aside = self.damaged_path();
        let mut bytes = Vec::new();
        for line in damaged {
            bytes.extend_from_slice(line);
            bytes.push(b'\n');
        }
        let written = std::fs::OpenOptions::new().create(true).append(true).open(&aside).and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_all()
        });
        written.with_context(|| format!("cannot set damaged lines aside in {}", aside.display()))?;
        self.replace(kept, lock)?;
        crate::notices::tell(SetAside { log: self.path.clone(), kept_in: aside, lines: damaged.len() }.to_string());
        Ok(())
    }

    /// Where the log's damaged lines are kept.
    pub(crate) fn damaged_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_owned();
        name.push(".damaged");
        self.path.with_file_name(name)
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
        let text = self.read(&self.lock()?, |_| Readable::Yes)?;
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

/// What a log's reader makes of one of its lines.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Readable {
    /// Read, or kept for later (sealed under a key this process does not hold).
    Yes,
    /// Cannot be read by anyone: set aside.
    Damaged,
}

/// What the reader of a log of sealed JSON values makes of `line`: read when it opens under
/// `protection` and parses as a `T`; damaged when it cannot be opened by anyone (its seal
/// broken) or does not parse; kept for later when sealed under a key this process lacks.
pub(crate) fn sealed_json<T: serde::de::DeserializeOwned>(
    protection: &Protection,
    context: &str,
    line: &str,
) -> Readable {
    match protection.open(context, line) {
        Ok(plain) if serde_json::from_str::<T>(&plain).is_ok() => Readable::Yes,
        Ok(_) | Err(quire_vault::VaultError::Damaged { .. }) => Readable::Damaged,
        Err(_) => Readable::Yes,
    }
}

/// Damaged lines moved out of a log: which log, where they went, how many.
struct SetAside {
    log: PathBuf,
    kept_in: PathBuf,
    lines: usize,
}

impl std::fmt::Display for SetAside {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.log.file_name().map(Path::new).unwrap_or(&self.log).display();
        let (count, were) = if self.lines == 1 {
            ("a damaged line".to_owned(), "was")
        } else {
            (format!("{} damaged lines", self.lines), "were")
        };
        write!(f, "{count} of {name} {were} set aside in {} (the rest of the log was read)", self.kept_in.display())
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
        assert_eq!(log.read(&lock, |_| Readable::Yes).unwrap(), "one\ntw\nthree\n");
        log.replace("", &lock).unwrap();
        assert_eq!(log.read(&lock, |_| Readable::Yes).unwrap(), "");
    }

    /// Bytes that are not text, and lines the reader finds damaged, go to `<log>.damaged` as they
    /// were; the rest is read and stays; the user is told once.
    #[test]
    fn damaged_lines_are_set_aside_and_the_rest_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, b"one\ntw\xffo\nbad three\n\nfour\n\xfe").unwrap();
        let log = LineLog::new(path.clone());
        let lock = log.lock().unwrap();
        let readable = |l: &str| if l.starts_with("bad") { Readable::Damaged } else { Readable::Yes };
        assert_eq!(log.read(&lock, readable).unwrap(), "one\nfour\n");
        assert_eq!(std::fs::read(&path).unwrap(), b"one\nfour\n");
        let aside = dir.path().join("log.jsonl.damaged");
        assert_eq!(std::fs::read(&aside).unwrap(), b"tw\xffo\nbad three\n\xfe\n");
        let said = format!(
            "3 damaged lines of log.jsonl were set aside in {} (the rest of the log was read)",
            aside.display()
        );
        let told = crate::notices::take();
        assert_eq!(told.iter().filter(|n| **n == said).count(), 1, "{told:?}");
        // Read again: nothing more to set aside, nothing told twice, the damaged kept.
        assert_eq!(log.read(&lock, readable).unwrap(), "one\nfour\n");
        assert!(!crate::notices::take().contains(&said));
        assert_eq!(std::fs::read(&aside).unwrap().len(), 17);
    }
}
