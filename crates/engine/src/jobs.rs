//! The ingestion queue on disk: one JSON line per change of a file's state (queued, indexed,
//! unchanged, removed, failed with its reason), appended as it happens, in the collection's
//! folder. After a crash or a quit the files still `queued` are the work left to do; the
//! knowledge base itself says what was done (a file's document row is its commit).
//!
//! Each line is sealed under the collection's key (the paths are private too).
//! A torn last line (power lost mid-write) is ignored. When the log has grown past a few
//! thousand lines it is rewritten (to a temporary file, then renamed over) with one line per file
//! that still matters: queued or failed. Processes sharing the collection append and rewrite
//! one at a time (`LineLog`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use quire_index::Protection;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::line_log::{sealed_json, sealed_line, LineLog, Locked};

const FILE_NAME: &str = "ingest-queue.jsonl";
const REWRITE_AFTER_LINES: usize = 5_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Queued,
    Indexed,
    Unchanged,
    Removed,
    Failed,
    /// Stopped by the user: not resumed on its own.
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
pub struct Job {
    pub path: String,
    pub state: JobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[ts(type = "number")]
    pub at_ms: i64,
    /// For a failure that came from the file's own bytes: the file as it was then. While its size
    /// and time stay these, it is not read again (a photo with no text is not OCR'd at every
    /// start, a damaged PDF not parsed up to its time limit again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lasting: Option<FileStamp>,
}

/// A file's size and modification time, and the loaders that read it then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
pub struct FileStamp {
    #[ts(type = "number")]
    pub bytes: u64,
    #[ts(type = "number")]
    pub modified_ms: i64,
    /// `quire_ingest::READERS_VERSION` when it was read (0 in stamps made before it was kept).
    #[serde(default)]
    pub readers: u32,
}

impl FileStamp {
    pub fn new(bytes: u64, modified_ms: i64) -> FileStamp {
        FileStamp { bytes, modified_ms, readers: quire_ingest::READERS_VERSION }
    }

    /// Whether the loaders that read the file then are today's: a failure found by older ones
    /// is not trusted (a scan they could not decode may be readable now).
    pub fn by_these_readers(&self) -> bool {
        self.readers == quire_ingest::READERS_VERSION
    }
}

/// A file's end in a run, to be written to the queue.
#[derive(Debug, Clone)]
pub struct Finished {
    pub path: PathBuf,
    pub state: JobState,
    pub reason: Option<String>,
    pub lasting: Option<FileStamp>,
}

impl Finished {
    pub fn new(path: PathBuf, state: JobState, reason: Option<String>) -> Finished {
        Finished { path, state, reason, lasting: None }
    }
}

/// The associated data each line is sealed with.
const SEAL_CONTEXT: &str = "ingestion queue";

pub struct JobQueue {
    log: LineLog,
    protection: Protection,
    jobs: BTreeMap<String, Job>,
    lines: usize,
}

impl JobQueue {
    pub fn open(dir: &Path, protection: Protection) -> Result<JobQueue> {
        let mut queue =
            JobQueue { log: LineLog::new(dir.join(FILE_NAME)), protection, jobs: BTreeMap::new(), lines: 0 };
        let lock = queue.log.lock()?;
        queue.read(&lock)?;
        queue.rewrite_if_long(&lock)?;
        Ok(queue)
    }

    /// Replaces what is known with what the log on disk says (the last line of a file wins):
    /// other processes may have added to it.
    fn read(&mut self, lock: &Locked) -> Result<()> {
        self.jobs.clear();
        self.lines = 0;
        let protection = &self.protection;
        let text = self.log.read(lock, |line| sealed_json::<Job>(protection, SEAL_CONTEXT, line))?;
        for line in text.lines() {
            self.lines += 1;
            let line = self.protection.open(SEAL_CONTEXT, line).unwrap_or_default();
            if let Ok(job) = serde_json::from_str::<Job>(&line) {
                self.jobs.insert(job.path.clone(), job);
            }
        }
        Ok(())
    }

    /// Files queued and not finished: the work an interrupted ingestion left.
    pub fn pending(&self) -> Vec<PathBuf> {
        self.with_state(JobState::Queued).map(|j| PathBuf::from(&j.path)).collect()
    }

    /// The files that failed (only the tests read them here: a report says what failed).
    #[cfg(test)]
    pub fn failed(&self) -> Vec<Job> {
        self.with_state(JobState::Failed).cloned().collect()
    }

    /// The files whose last run failed for a reason of their own bytes, by path.
    pub fn lasting_failures(&self) -> std::collections::HashMap<String, Job> {
        self.with_state(JobState::Failed).filter(|j| j.lasting.is_some()).map(|j| (j.path.clone(), j.clone())).collect()
    }

    pub fn all(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    fn with_state(&self, state: JobState) -> impl Iterator<Item = &Job> {
        self.jobs.values().filter(move |j| j.state == state)
    }

    pub fn enqueue(&mut self, paths: &[PathBuf]) -> Result<()> {
        let jobs: Vec<Job> = paths.iter().map(|p| job(p, JobState::Queued, None)).collect();
        self.append(jobs)
    }

    pub fn finish(&mut self, path: &Path, state: JobState, reason: Option<String>) -> Result<()> {
        self.append(vec![job(path, state, reason)])
    }

    /// Lets go of the failed and cancelled files at or under `roots` that are no longer on disk
    /// (a watched folder's files deleted): they are not documents, so no removal names them,
    /// and they would stay listed as failed for good. Returns how many.
    pub fn forget_gone(&mut self, roots: &[PathBuf]) -> Result<usize> {
        let gone: Vec<Finished> = self
            .jobs
            .values()
            .filter(|j| matches!(j.state, JobState::Failed | JobState::Cancelled))
            .filter(|j| roots.iter().any(|r| Path::new(&j.path).starts_with(r)) && !Path::new(&j.path).exists())
            .map(|j| Finished::new(PathBuf::from(&j.path), JobState::Removed, None))
            .collect();
        self.finish_all(&gone)?;
        Ok(gone.len())
    }

    pub fn finish_all(&mut self, done: &[Finished]) -> Result<()> {
        self.append(
            done.iter().map(|f| Job { lasting: f.lasting, ..job(&f.path, f.state, f.reason.clone()) }).collect(),
        )
    }

    fn append(&mut self, jobs: Vec<Job>) -> Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        let text = self.sealed_lines(&jobs)?;
        let lock = self.log.lock()?;
        self.log.append(&text, &lock).context("cannot add to the ingestion queue")?;
        self.lines += jobs.len();
        for j in jobs {
            self.jobs.insert(j.path.clone(), j);
        }
        self.rewrite_if_long(&lock)
    }

    fn rewrite_if_long(&mut self, lock: &Locked) -> Result<()> {
        if self.lines > REWRITE_AFTER_LINES.max(4 * self.jobs.len()) {
            self.read(lock)?;
            self.rewrite(lock)?;
        }
        Ok(())
    }

    fn sealed_lines<'a>(&self, jobs: impl IntoIterator<Item = &'a Job>) -> Result<String> {
        let mut text = String::new();
        for j in jobs {
            text.push_str(&sealed_line(&self.protection, SEAL_CONTEXT, j)?);
        }
        Ok(text)
    }

    /// Rewrites the log under `protection`'s current key (after a key rotation).
    pub fn reseal(&mut self, protection: Protection) -> Result<()> {
        let lock = self.log.lock()?;
        // The rotation's key ring opens lines under the old keys and the new one alike.
        self.protection = protection;
        self.read(&lock)?;
        self.rewrite(&lock)
    }

    /// Lines of the log not sealed under the current key.
    pub(crate) fn lines_under_other_keys(&self) -> Result<usize> {
        self.log.lines_not_sealed_by(self.protection.key_id())
    }

    /// One line per file that still matters; right after `read`.
    fn rewrite(&mut self, lock: &Locked) -> Result<()> {
        self.jobs.retain(|_, j| matches!(j.state, JobState::Queued | JobState::Failed));
        let text = self.sealed_lines(self.jobs.values())?;
        self.log.replace(&text, lock).context("cannot rewrite the ingestion queue")?;
        self.lines = self.jobs.len();
        Ok(())
    }
}

fn job(path: &Path, state: JobState, reason: Option<String>) -> Job {
    Job {
        path: path.to_string_lossy().into_owned(),
        state,
        reason,
        at_ms: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0),
        lasting: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn failures_of_files_gone_from_a_folder_are_let_go() {
        let dir = tempfile::tempdir().unwrap();
        let docs = tempfile::tempdir().unwrap();
        let (kept, deleted, elsewhere) =
            (docs.path().join("kept.pdf"), docs.path().join("deleted.pdf"), PathBuf::from("/elsewhere/x.pdf"));
        std::fs::write(&kept, b"x").unwrap();
        let mut q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        for p in [&kept, &deleted, &elsewhere] {
            q.finish(p, JobState::Failed, Some("damaged".into())).unwrap();
        }
        assert_eq!(q.forget_gone(&[docs.path().to_path_buf()]).unwrap(), 1);
        let failed: Vec<String> = q.failed().into_iter().map(|j| j.path).collect();
        assert_eq!(failed.len(), 2);
        assert!(!failed.contains(&deleted.to_string_lossy().into_owned()), "{failed:?}");
        // Read again from the log: the same.
        let q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        assert_eq!(q.failed().len(), 2);
    }

    #[test]
    fn a_failure_stamped_by_older_loaders_is_not_trusted() {
        // A line written before the loaders' version was kept, then one written now.
        let old: Job = serde_json::from_str(
            r#"{"path":"/scan.pdf","state":"failed","reason":"JPEG 2000","at_ms":9,"lasting":{"bytes":10,"modified_ms":5}}"#,
        )
        .unwrap();
        assert!(!old.lasting.unwrap().by_these_readers());
        let now = FileStamp::new(10, 5);
        assert!(now.by_these_readers());
        let kept: Job =
            serde_json::from_str(&serde_json::to_string(&Job { lasting: Some(now), ..old.clone() }).unwrap()).unwrap();
        assert_eq!(kept.lasting, Some(now));
    }

    #[test]
    fn pending_survives_reopening_and_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        q.enqueue(&["/a".into(), "/b".into(), "/c".into()]).unwrap();
        q.finish(Path::new("/a"), JobState::Indexed, None).unwrap();
        q.finish(Path::new("/c"), JobState::Failed, Some("the file is empty".into())).unwrap();
        // Power lost in the middle of the next line.
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join(FILE_NAME)).unwrap();
        f.write_all(br#"{"path":"/b","sta"#).unwrap();

        let q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        assert_eq!(q.pending(), vec![PathBuf::from("/b")]);
        assert_eq!(q.failed().len(), 1);
        assert_eq!(q.failed()[0].reason.as_deref(), Some("the file is empty"));
    }

    /// A byte that is not text at the end of the queue (the probe's `printf '\\xff' >>`) and a
    /// line of another shape in the middle are set aside; every job stays known.
    #[test]
    fn damaged_lines_do_not_stop_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        q.enqueue(&["/a".into(), "/b".into()]).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join(FILE_NAME)).unwrap();
        f.write_all(b"{\"not\":\"a job\"}\n").unwrap();
        q.finish(Path::new("/a"), JobState::Indexed, None).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join(FILE_NAME)).unwrap();
        f.write_all(b"\xff").unwrap();

        let mut q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        assert_eq!(q.pending(), vec![PathBuf::from("/b")]);
        let aside = std::fs::read(dir.path().join(format!("{FILE_NAME}.damaged"))).unwrap();
        assert_eq!(aside, b"{\"not\":\"a job\"}\n\xff\n");
        q.enqueue(&["/c".into()]).unwrap();
        let q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        assert_eq!(q.pending(), vec![PathBuf::from("/b"), PathBuf::from("/c")]);
    }

    #[test]
    fn a_line_written_after_a_torn_one_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        q.enqueue(&["/a".into()]).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(dir.path().join(FILE_NAME)).unwrap();
        f.write_all(br#"{"path":"/a","sta"#).unwrap();
        let mut q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        q.enqueue(&["/b".into()]).unwrap();
        let q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        assert_eq!(q.pending(), vec![PathBuf::from("/a"), PathBuf::from("/b")]);
    }

    #[test]
    fn a_rewrite_keeps_what_another_process_queued() {
        // Three rounds: the race it guards against is not lost every time.
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            // Two queues on one folder, as the app and `quire watch` have; each thread a process.
            let writers: Vec<_> = (0..2)
                .map(|w| {
                    let dir = dir.path().to_owned();
                    std::thread::spawn(move || {
                        let mut q = JobQueue::open(&dir, Protection::Plain).unwrap();
                        // A folder of 100 files scanned again and again: the log grows and is
                        // rewritten, by both. Every file but the first is done each time.
                        for _ in 0..REWRITE_AFTER_LINES / 100 {
                            for i in 0..100 {
                                let path = PathBuf::from(format!("/w{w}/f{i}"));
                                q.enqueue(std::slice::from_ref(&path)).unwrap();
                                if i > 0 {
                                    q.finish(&path, JobState::Indexed, None).unwrap();
                                }
                            }
                        }
                    })
                })
                .collect();
            for w in writers {
                w.join().unwrap();
            }
            let q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
            assert_eq!(q.pending(), vec![PathBuf::from("/w0/f0"), PathBuf::from("/w1/f0")]);
            let lines = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap().lines().count();
            assert!(lines < 2 * REWRITE_AFTER_LINES, "{lines} lines: the log was rewritten");
            assert!(!dir.path().join(FILE_NAME).with_extension("tmp").exists());
        }
    }

    #[test]
    fn a_long_log_is_rewritten_with_what_still_matters() {
        let dir = tempfile::tempdir().unwrap();
        let mut q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        let paths: Vec<PathBuf> = (0..REWRITE_AFTER_LINES).map(|i| PathBuf::from(format!("/f{i}"))).collect();
        // The same files scanned over and over (a folder re-scanned at every start).
        for _ in 0..3 {
            q.enqueue(&paths).unwrap();
            q.finish_all(
                &paths[1..].iter().map(|p| Finished::new(p.clone(), JobState::Unchanged, None)).collect::<Vec<_>>(),
            )
            .unwrap();
        }
        let lines = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap().lines().count();
        assert!(lines <= 4 * REWRITE_AFTER_LINES, "{lines} lines: the log is rewritten as it grows");
        let q = JobQueue::open(dir.path(), Protection::Plain).unwrap();
        assert_eq!(q.pending(), vec![PathBuf::from("/f0")]);
    }
}
