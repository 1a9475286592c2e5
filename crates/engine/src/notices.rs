//! What the user should be told that is no error: damaged lines of a log set aside, an answer
//! that could not be kept in the history. Collected here as they happen, in whatever part of
//! the engine; the CLI prints them when its command ends, the app shows them.

use std::sync::Mutex;

static NOTICES: Mutex<Vec<String>> = Mutex::new(Vec::new());

pub(crate) fn tell(notice: String) {
    NOTICES.lock().unwrap_or_else(|e| e.into_inner()).push(notice);
}

/// The notices since the last call, oldest first; each is handed out once.
pub fn take() -> Vec<String> {
    std::mem::take(&mut *NOTICES.lock().unwrap_or_else(|e| e.into_inner()))
}
