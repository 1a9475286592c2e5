//! Scanned pages OCR has read, kept until their document is stored, so that an ingestion
//! stopped part way through a long scan (the app quit, the process killed) resumes from the
//! page it reached instead of reading every page again. Kept per file content (its hash), each
//! page's text sealed like the queue's lines, in `ocr-pages.jsonl` beside the tables. A cache:
//! lines that do not open under the current key (a key rotation since) are passed over.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Result;
use quire_index::Protection;
use serde::{Deserialize, Serialize};

use crate::line_log::{sealed_json, sealed_line, LineLog};

const FILE_NAME: &str = "ocr-pages.jsonl";
const SEAL_CONTEXT: &str = "ocr page";

#[derive(Serialize, Deserialize)]
struct PageRead {
    /// The file's content hash (`quire_ingest::content_hash`).
    file: String,
    page: u32,
    text: String,
}

pub(crate) struct PagesRead {
    log: LineLog,
    protection: Protection,
    /// By file content hash, each page's text.
    files: HashMap<String, BTreeMap<u32, String>>,
}

impl PagesRead {
    pub(crate) fn open(dir: &Path, protection: Protection) -> Result<PagesRead> {
        let log = LineLog::new(dir.join(FILE_NAME));
        let lock = log.lock()?;
        let text = log.read(&lock, |line| sealed_json::<PageRead>(&protection, SEAL_CONTEXT, line))?;
        let mut files: HashMap<String, BTreeMap<u32, String>> = HashMap::new();
        for line in text.lines() {
            let Ok(plain) = protection.open(SEAL_CONTEXT, line) else { continue };
            if let Ok(p) = serde_json::from_str::<PageRead>(&plain) {
                files.entry(p.file).or_default().insert(p.page, p.text);
            }
        }
        Ok(PagesRead { log, protection, files })
    }

    /// The pages of the file with content hash `file` read before.
    pub(crate) fn of(&self, file: &str) -> HashMap<u32, String> {
        self.files.get(file).map(|pages| pages.iter().map(|(p, t)| (*p, t.clone())).collect()).unwrap_or_default()
    }

    /// Keeps page `page` of the file with content hash `file`, read as `text`.
    pub(crate) fn keep(&mut self, file: &str, page: u32, text: String) -> Result<()> {
        let line = PageRead { file: file.to_owned(), page, text };
        let sealed = sealed_line(&self.protection, SEAL_CONTEXT, &line)?;
        let lock = self.log.lock()?;
        self.log.append(&sealed, &lock)?;
        self.files.entry(line.file).or_default().insert(page, line.text);
        Ok(())
    }

    /// Lets go of the pages of the files with these content hashes (their documents are stored).
    pub(crate) fn forget<'a>(&mut self, files: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let before = self.files.len();
        for file in files {
            self.files.remove(file);
        }
        if self.files.len() == before {
            return Ok(());
        }
        self.rewrite()
    }

    /// Writes the pages kept anew under `protection`'s current key (a key rotation).
    pub(crate) fn reseal(&mut self, protection: Protection) -> Result<()> {
        self.protection = protection;
        self.rewrite()
    }

    /// Lines not sealed under the current key.
    pub(crate) fn lines_under_other_keys(&self) -> Result<usize> {
        self.log.lines_not_sealed_by(self.protection.key_id())
    }

    fn rewrite(&mut self) -> Result<()> {
        let mut text = String::new();
        for (file, pages) in &self.files {
            for (page, page_text) in pages {
                let line = PageRead { file: file.clone(), page: *page, text: page_text.clone() };
                text.push_str(&sealed_line(&self.protection, SEAL_CONTEXT, &line)?);
            }
        }
        let lock = self.log.lock()?;
        self.log.replace(&text, &lock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_kept_across_opens_until_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let mut pages = PagesRead::open(dir.path(), Protection::Plain).unwrap();
        pages.keep("aaa", 1, "Warranty card".into()).unwrap();
        pages.keep("aaa", 2, "Seven years".into()).unwrap();
        pages.keep("bbb", 1, "Another scan".into()).unwrap();
        let mut again = PagesRead::open(dir.path(), Protection::Plain).unwrap();
        assert_eq!(again.of("aaa"), HashMap::from([(1, "Warranty card".into()), (2, "Seven years".into())]));
        again.forget(["aaa"]).unwrap();
        let last = PagesRead::open(dir.path(), Protection::Plain).unwrap();
        assert!(last.of("aaa").is_empty());
        assert_eq!(last.of("bbb"), HashMap::from([(1, "Another scan".into())]));
    }
}
