//! Conversation history of a collection: one sealed JSON line per question and answer, appended
//! as answers complete, so a crash loses at most the answer being written. The app and the CLI
//! may both add to it (`LineLog`).

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::line_log::{sealed_json, sealed_line, LineLog};
use crate::{Answer, Citation, Declined, Source};
use quire_index::Protection;

/// One question and its answer as kept: with the passages the answer was written from, so an
/// old answer's citations still open its own passages, after a restart too. Lines written before
/// the passages were kept read back with none (`serde(default)`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, TS)]
pub struct Exchange {
    pub question: String,
    pub answer: String,
    /// Set when the answer was a decline (lines written before declines read back as answers).
    #[serde(default)]
    pub declined: Option<Declined>,
    pub citations: Vec<Citation>,
    /// Every passage retrieved for the answer, cited or not, numbered as the model saw them.
    #[serde(default)]
    pub sources: Vec<Source>,
    #[ts(type = "number")]
    pub at_ms: i64,
}

impl Exchange {
    pub fn of(answer: &Answer, at_ms: i64) -> Exchange {
        Exchange {
            question: answer.question.clone(),
            answer: answer.text.clone(),
            declined: answer.declined.clone(),
            citations: answer.citations.clone(),
            sources: answer.sources.clone(),
            at_ms,
        }
    }
}

pub struct History {
    log: LineLog,
    protection: Protection,
}

const SEAL_CONTEXT: &str = "conversation history";

impl History {
    pub fn in_folder(dir: &Path, protection: Protection) -> History {
        History { log: LineLog::new(dir.join("history.jsonl")), protection }
    }

    /// All exchanges, oldest first. A damaged line (a crash mid-write, bytes flipped on disk)
    /// is set aside, not fatal.
    pub fn load(&self) -> Result<Vec<Exchange>> {
        let text = self.read(&self.log.lock()?)?;
        Ok(self.exchanges(&text))
    }

    fn read(&self, lock: &crate::line_log::Locked) -> Result<String> {
        self.log.read(lock, |line| sealed_json::<Exchange>(&self.protection, SEAL_CONTEXT, line))
    }

    fn exchanges(&self, text: &str) -> Vec<Exchange> {
        text.lines()
            .filter_map(|l| self.protection.open(SEAL_CONTEXT, l).ok())
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect()
    }

    pub fn append(&self, exchange: &Exchange) -> Result<()> {
        let line = sealed_line(&self.protection, SEAL_CONTEXT, exchange)?;
        self.log.append(&line, &self.log.lock()?)
    }

    /// Rewrites the history under `protection`'s current key (after a key rotation).
    pub fn reseal(&self, protection: Protection) -> Result<()> {
        let lock = self.log.lock()?;
        let mut text = String::new();
        for e in self.exchanges(&self.read(&lock)?) {
            text.push_str(&sealed_line(&protection, SEAL_CONTEXT, &e)?);
        }
        self.log.replace(&text, &lock)
    }

    /// Lines of the history not sealed under the current key.
    pub(crate) fn lines_under_other_keys(&self) -> Result<usize> {
        self.log.lines_not_sealed_by(self.protection.key_id())
    }

    pub fn clear(&self) -> Result<()> {
        self.log.replace("", &self.log.lock()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn appends_survive_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::in_folder(dir.path(), Protection::Plain);
        assert!(history.load().unwrap().is_empty());
        let e = Exchange {
            question: "q".into(),
            answer: "a".into(),
            declined: None,
            citations: vec![Citation {
                number: 1,
                chunk_id: "c1".into(),
                path: "/d.pdf".into(),
                page: Some(3),
                quote: "x".into(),
                quote_range: Some((4, 5)),
                passage: "The x marks it.".into(),
            }],
            sources: vec![Source {
                number: 1,
                chunk_id: "c1".into(),
                path: "/d.pdf".into(),
                page: Some(3),
                start: 0,
                end: 15,
                text: "The x marks it.".into(),
                score: 0.5,
            }],
            at_ms: 5,
        };
        history.append(&e).unwrap();
        history.append(&e).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join("history.jsonl")).unwrap();
        f.write_all(b"{\"question\": \"torn").unwrap();
        assert_eq!(history.load().unwrap(), vec![e.clone(), e.clone()]);
        history.append(&e).unwrap();
        assert_eq!(history.load().unwrap(), vec![e.clone(), e.clone(), e]);
        history.clear().unwrap();
        assert!(history.load().unwrap().is_empty());
    }

    /// A line damaged on disk in the middle of a sealed history (a flipped letter, bytes that
    /// are not text) is set aside, the rest loads, and a key rotation's reseal keeps the rest and
    /// the damaged lines both (the first locked every command out).
    #[test]
    fn damaged_lines_in_the_middle_are_set_aside_and_survive_a_rotation() {
        use quire_vault::{DataKey, KeyRing};
        let dir = tempfile::tempdir().unwrap();
        let (old, new) = (DataKey::random(), DataKey::random());
        let history = History::in_folder(dir.path(), Protection::sealed(&old));
        let exchange = |i: i64| Exchange {
            question: format!("question {i}"),
            answer: "a".into(),
            // A decline is kept as such.
            declined: (i == 2).then(|| Declined { about: "FASTA options.".into(), unsupported_answer: None }),
            citations: vec![],
            sources: vec![],
            at_ms: i,
        };
        for i in 0..6 {
            history.append(&exchange(i)).unwrap();
        }
        let path = dir.path().join("history.jsonl");
        let mut lines: Vec<Vec<u8>> =
            std::fs::read(&path).unwrap().split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        let flip = lines[1].len() - 5;
        lines[1][flip] = if lines[1][flip] == b'A' { b'B' } else { b'A' };
        lines[3][20] = 0xff;
        std::fs::write(&path, lines.join(&b'\n')).unwrap();
        let (damaged1, damaged3) = (lines[1].clone(), lines[3].clone());

        let kept: Vec<i64> = history.load().unwrap().iter().map(|e| e.at_ms).collect();
        assert_eq!(kept, vec![0, 2, 4, 5]);
        let aside = std::fs::read(dir.path().join("history.jsonl.damaged")).unwrap();
        assert_eq!(aside, [damaged1, damaged3].join(&b'\n').into_iter().chain([b'\n']).collect::<Vec<u8>>());
        assert!(crate::notices::take()
            .iter()
            .any(|n| n.starts_with("2 damaged lines of history.jsonl were set aside")));

        let rotating =
            History::in_folder(dir.path(), Protection::Sealed(std::sync::Arc::new(KeyRing::new(&new, &[old]))));
        rotating.reseal(Protection::sealed(&new)).unwrap();
        assert_eq!(rotating.lines_under_other_keys().unwrap(), 0);
        let after = History::in_folder(dir.path(), Protection::sealed(&new)).load().unwrap();
        assert_eq!(after.iter().map(|e| e.at_ms).collect::<Vec<_>>(), vec![0, 2, 4, 5]);
        let declined: Vec<i64> = after.iter().filter(|e| e.declined.is_some()).map(|e| e.at_ms).collect();
        assert_eq!(declined, [2]);
    }

    /// A line written before exchanges kept their passages still reads back, with none.
    #[test]
    fn exchanges_written_before_passages_were_kept_still_load() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("history.jsonl"),
            "{\"question\":\"q\",\"answer\":\"a\",\"citations\":[{\"number\":2,\"path\":\"/d.pdf\",\"page\":null,\"quote\":\"x\"}],\"at_ms\":7}\n",
        )
        .unwrap();
        let past = History::in_folder(dir.path(), Protection::Plain).load().unwrap();
        assert_eq!(past.len(), 1);
        assert_eq!((past[0].citations[0].number, past[0].citations[0].passage.as_str()), (2, ""));
        assert!(past[0].sources.is_empty());
    }
}
