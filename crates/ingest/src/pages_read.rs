//! Scanned pages already read, so that a scan whose ingestion stopped part way (the app quit,
//! the process killed, the machine turned off) is read again from where it stopped, not from
//! its first page: OCR costs seconds a page. The engine keeps each page's text (sealed) as it
//! is read and hands the pages back for the same bytes; a loader child gets them on its stdin
//! and reports each page it reads, with its text, on stderr (`limits::report_page_read`).

use std::cell::RefCell;
use std::collections::HashMap;

thread_local! {
    static READ_BEFORE: RefCell<HashMap<u32, String>> = RefCell::new(HashMap::new());
}

/// Runs `load` on this thread with the pages of `before` taken as read: their text is used and
/// their images are not read again.
pub fn with_pages_read<T>(before: HashMap<u32, String>, load: impl FnOnce() -> T) -> T {
    READ_BEFORE.with(|pages| *pages.borrow_mut() = before);
    let loaded = load();
    READ_BEFORE.with(|pages| pages.borrow_mut().clear());
    loaded
}

/// The text of page `page` when it was read before.
pub(crate) fn read_before(page: u32) -> Option<String> {
    READ_BEFORE.with(|pages| pages.borrow().get(&page).cloned())
}
