//! Buffers reused between a line's layers, each thread its own. Every layer writes the whole
//! of its output, so a reused buffer needs no clearing, where a fresh one costs zeroing and,
//! when large, page faults: the two were 15 % of a line's time.

use std::cell::RefCell;

thread_local! {
    static BUFFERS: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// Values kept per thread at most (64 MB: a wide line's stem needs ~30).
const KEPT_VALUES: usize = 16 << 20;

/// A buffer of `len` values, their contents left from earlier use: the caller writes each.
/// Every buffer's whole capacity is written when it is made (kept by `give`).
pub fn take(len: usize) -> Vec<f32> {
    let found = BUFFERS.with(|b| {
        let mut buffers = b.borrow_mut();
        // The smallest that is long enough, else the longest (made anew).
        let fits = (0..buffers.len()).filter(|&i| buffers[i].len() >= len).min_by_key(|&i| buffers[i].len());
        let pick = fits.or_else(|| (0..buffers.len()).max_by_key(|&i| buffers[i].len()));
        pick.map(|i| buffers.swap_remove(i))
    });
    let mut buffer = found.unwrap_or_default();
    if buffer.len() < len {
        buffer = Vec::with_capacity(len);
        buffer.resize(buffer.capacity(), 0.0);
    }
    buffer.truncate(len);
    buffer
}

/// A buffer from `take` back for the next one.
pub fn give(mut buffer: Vec<f32>) {
    // SAFETY: the buffer came from `take`, which wrote its whole capacity when it made it;
    // shortening it since left those values in place (f32s need no dropping).
    unsafe { buffer.set_len(buffer.capacity()) };
    BUFFERS.with(|b| {
        let mut buffers = b.borrow_mut();
        let kept: usize = buffers.iter().map(Vec::capacity).sum();
        if buffers.len() < 12 && kept + buffer.capacity() <= KEPT_VALUES {
            buffers.push(buffer);
        }
    });
}
