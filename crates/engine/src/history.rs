//! Conversation history of a collection: one sealed JSON line per question and answer, appended
//! as answers complete, so a crash loses at most the answer being written.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::Answer;
use quire_index::Protection;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, TS)]
pub struct Exchange {
    pub question: String,
    pub answer: String,
    pub citations: Vec<CitedPlace>,
    #[ts(type = "number")]
    pub at_ms: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, TS)]
pub struct CitedPlace {
    pub number: usize,
    pub path: String,
    pub page: Option<u32>,
    pub quote: String,
}

impl Exchange {
    pub fn of(answer: &Answer, at_ms: i64) -> Exchange {
        Exchange {
            question: answer.question.clone(),
            answer: answer.text.clone(),
            citations: answer
                .citations
                .iter()
                .map(|c| CitedPlace { number: c.number, path: c.path.clone(), page: c.page, quote: c.quote.clone() })
                .collect(),
            at_ms,
        }
    }
}

pub struct History {
    path: PathBuf,
    protection: Protection,
}

const SEAL_CONTEXT: &str = "conversation history";

impl History {
    pub fn in_folder(dir: &Path, protection: Protection) -> History {
        History { path: dir.join("history.jsonl"), protection }
    }

    /// All exchanges, oldest first. A damaged line (a crash mid-write) is skipped, not fatal.
    pub fn load(&self) -> Result<Vec<Exchange>> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", self.path.display())),
        };
        Ok(text
            .lines()
            .filter_map(|l| self.protection.open(SEAL_CONTEXT, l).ok())
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect())
    }

    pub fn append(&self, exchange: &Exchange) -> Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut line = self.protection.seal(SEAL_CONTEXT, &serde_json::to_string(exchange)?);
        line.push('\n');
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        file.write_all(line.as_bytes())?;
        Ok(())
    }

    /// Rewrites the history under `protection`'s current key (after a key rotation).
    pub fn reseal(&self, protection: Protection) -> Result<()> {
        let exchanges = self.load()?;
        let resealed = History { path: self.path.with_extension("jsonl.tmp"), protection };
        resealed.clear()?;
        for e in &exchanges {
            resealed.append(e)?;
        }
        if exchanges.is_empty() {
            return self.clear();
        }
        std::fs::rename(&resealed.path, &self.path)?;
        Ok(())
    }

    pub fn clear(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_survive_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::in_folder(dir.path(), Protection::Plain);
        assert!(history.load().unwrap().is_empty());
        let e = Exchange {
            question: "q".into(),
            answer: "a".into(),
            citations: vec![CitedPlace { number: 1, path: "/d.pdf".into(), page: Some(3), quote: "x".into() }],
            at_ms: 5,
        };
        history.append(&e).unwrap();
        history.append(&e).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join("history.jsonl")).unwrap();
        f.write_all(b"{\"question\": \"torn").unwrap();
        assert_eq!(history.load().unwrap(), vec![e.clone(), e]);
        history.clear().unwrap();
        assert!(history.load().unwrap().is_empty());
    }
}
