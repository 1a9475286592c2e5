//! Loading a file in a child process, with a time limit and a memory limit, so that a parser that
//! loops, allocates without bound or crashes on a crafted file costs that file only.
//!
//! The child is the front end's own executable started again with `WORKER_ENV` set to the file's
//! path: the front end calls `serve_if_worker` first thing in `main`, which loads the file,
//! writes the result to stdout as JSON and exits. This is the one place with per-OS process code.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::limits::{page_read, MEMORY_ENV, WORKER_ENV};
use crate::loaders::{load_file, LoadedDocument};
use crate::LoadError;

/// How a file is loaded out of process.
#[derive(Debug, Clone)]
pub struct Isolation {
    /// The executable that calls `serve_if_worker` at start (the CLI's or the app's own).
    pub worker: PathBuf,
    pub timeout: Duration,
    pub memory_mb: u64,
}

impl Isolation {
    /// The running executable as the worker, with limits from `QUIRE_LOADER_TIMEOUT_S` (seconds,
    /// fractions allowed) and `QUIRE_LOADER_MEMORY_MB` when set (defaults: 120 s, 2048 MB).
    pub fn current_exe() -> std::io::Result<Isolation> {
        let env_f64 =
            |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| *v > 0.0);
        Ok(Isolation {
            worker: std::env::current_exe()?,
            timeout: Duration::from_secs_f64(env_f64("QUIRE_LOADER_TIMEOUT_S").unwrap_or(120.0)),
            memory_mb: env_f64(MEMORY_ENV).map(|v| v as u64).unwrap_or(2048),
        })
    }
}

#[derive(Serialize, Deserialize)]
enum WorkerReply {
    Loaded(LoadedDocument),
    Failed { reason: String, lasting: bool },
}

/// In a loader child process: loads the file, prints the result and exits. Elsewhere: returns.
pub fn serve_if_worker() {
    let Some(path) = std::env::var_os(WORKER_ENV) else { return };
    if let Some(mb) = std::env::var(MEMORY_ENV).ok().and_then(|v| v.parse::<u64>().ok()) {
        limit_memory(mb * 1024 * 1024);
    }
    go_with_the_parent();
    crate::quiet_parser_panics();
    // The scanned pages read before, from the parent (`load_isolated`); none when it sent none.
    let before: std::collections::HashMap<u32, String> =
        serde_json::from_reader(std::io::stdin().lock()).unwrap_or_default();
    let reply = match crate::with_pages_read(before, || load_file(Path::new(&path))) {
        Ok(doc) => WorkerReply::Loaded(doc),
        Err(e) => WorkerReply::Failed { reason: e.to_string(), lasting: e.is_lasting() },
    };
    let code = match serde_json::to_writer(std::io::stdout().lock(), &reply) {
        Ok(()) => 0,
        Err(_) => 1,
    };
    std::process::exit(code);
}

/// A worker whose front end is killed (SIGKILL, a crash) must not read on for minutes: on Linux
/// the kernel kills it with its parent; elsewhere it stops at the next page it reports
/// (`parent_is_gone`).
#[cfg(target_os = "linux")]
fn go_with_the_parent() {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and changes only this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let _ = parent_is_gone();
}

#[cfg(not(target_os = "linux"))]
fn go_with_the_parent() {
    // The parent as it is now: `parent_is_gone` compares with it.
    let _ = parent_is_gone();
}

/// True when the process that started this worker has ended (the worker was re-parented).
pub(crate) fn parent_is_gone() -> bool {
    #[cfg(unix)]
    {
        static PARENT: std::sync::OnceLock<libc::pid_t> = std::sync::OnceLock::new();
        // SAFETY: getppid takes nothing and cannot fail.
        let now = unsafe { libc::getppid() };
        *PARENT.get_or_init(|| now) != now
    }
    #[cfg(not(unix))]
    {
        false
    }
}

#[cfg(target_os = "linux")]
fn limit_memory(bytes: u64) {
    // RLIMIT_DATA counts the heap and private anonymous mappings (what a parser allocates), not
    // the executable's mapped code, which for the desktop app is large.
    let limit = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
    // SAFETY: setrlimit reads the struct we pass and changes only this process's limits.
    unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) };
}

#[cfg(all(unix, not(target_os = "linux")))]
fn limit_memory(bytes: u64) {
    // macOS does not enforce RLIMIT_DATA; the address-space limit is the one that holds.
    let limit = libc::rlimit { rlim_cur: bytes + (4 << 30), rlim_max: bytes + (4 << 30) };
    // SAFETY: as above.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) };
}

#[cfg(windows)]
fn limit_memory(bytes: u64) {
    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation, SetInformationJobObject,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_PROCESS_MEMORY,
    };
    use windows_sys::Win32::System::Threading::GetCurrentProcess;
    // Windows has no rlimit: the worker puts itself in a job object of its own whose processes
    // may commit at most `bytes` (jobs nest since Windows 8, so a worker started inside another
    // job, a terminal's say, still gets it). An allocation past it fails like one past
    // RLIMIT_DATA. The job's handle is left open for the worker's short life.
    let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_PROCESS_MEMORY;
    limits.ProcessMemoryLimit = usize::try_from(bytes).unwrap_or(usize::MAX);
    // SAFETY: CreateJobObjectW takes no security attributes and no name (both may be null);
    // SetInformationJobObject reads the struct we pass with its true size; the process handle
    // is GetCurrentProcess's pseudo-handle, valid in this process. Each call's failure leaves
    // the worker as it was (then only the time limit applies).
    unsafe {
        let job = CreateJobObjectW(std::ptr::null(), std::ptr::null());
        if job.is_null() {
            return;
        }
        let set = SetInformationJobObject(
            job,
            JobObjectExtendedLimitInformation,
            (&limits as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
            std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        );
        if set != 0 {
            AssignProcessToJobObject(job, GetCurrentProcess());
        }
    }
}

#[cfg(not(any(unix, windows)))]
fn limit_memory(_bytes: u64) {
    // No limit to set on this OS; the time limit still applies.
}

/// Loads `path` in a child process; the child is killed when it passes the time limit. The
/// scanned pages of `read_before` are taken as read (`pages_read`); `on_page(page, pages, text)`
/// hears of each scanned page read, with its text.
pub fn load_isolated(
    path: &Path,
    isolation: &Isolation,
    read_before: &std::collections::HashMap<u32, String>,
    on_page: &mut dyn FnMut(u32, u32, String),
) -> Result<LoadedDocument, LoadError> {
    let mut child = Command::new(&isolation.worker)
        .env(WORKER_ENV, path)
        .env(MEMORY_ENV, isolation.memory_mb.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| LoadError::Crashed(format!("cannot start the loader {}: {e}", isolation.worker.display())))?;
    // Both pipes are drained on their own threads so a child writing a lot never blocks. A
    // progress line on stderr (a scanned page read) restarts the time limit, which so holds per
    // page of OCR (a long scan is not cut off, a stuck parser still is), and is passed on.
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    };
    // Written on a thread of its own: a child that stops reading must not stop this one.
    let mut stdin = child.stdin.take().expect("piped stdin");
    let before = serde_json::to_vec(read_before).unwrap_or_default();
    std::thread::spawn(move || {
        let _ = std::io::Write::write_all(&mut stdin, &before);
    });
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let (pages_read, progress) = std::sync::mpsc::channel();
    let stderr_pipe = child.stderr.take().expect("piped stderr");
    // Read to the end as bytes: a line that is not UTF-8 (a parser's message) must not stop the
    // draining, or the child would block on a full pipe.
    let stderr = std::thread::spawn(move || {
        let mut kept = String::new();
        for line in std::io::BufReader::new(stderr_pipe).split(b'\n').map_while(Result::ok) {
            let line = String::from_utf8_lossy(&line);
            match page_read(&line) {
                Some(at) => {
                    let _ = pages_read.send(at);
                }
                None => {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
        }
        kept
    });
    let mut deadline = Instant::now() + isolation.timeout;
    let status = loop {
        for (page, pages, text) in progress.try_iter() {
            deadline = Instant::now() + isolation.timeout;
            on_page(page, pages, text);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(LoadError::TimedOut(isolation.timeout.as_secs_f64()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(LoadError::Crashed(e.to_string())),
        }
    };
    let out = stdout.join().unwrap_or_default();
    let err = stderr.join().unwrap_or_default();
    if status.success() {
        return match serde_json::from_slice::<WorkerReply>(&out) {
            Ok(WorkerReply::Loaded(doc)) => Ok(doc),
            Ok(WorkerReply::Failed { reason, lasting }) => Err(LoadError::Worker { reason, lasting }),
            Err(e) => Err(LoadError::Crashed(format!("unreadable reply from the loader ({e})"))),
        };
    }
    if err.contains("memory allocation") || err.contains("out of memory") || err.contains("Cannot allocate") {
        return Err(LoadError::OutOfMemory(format!("the {} MB allowed", isolation.memory_mb)));
    }
    let last_line = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
    Err(LoadError::Crashed(format!("{status}: {last_line}")))
}
