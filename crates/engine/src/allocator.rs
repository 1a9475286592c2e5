//! The process's memory allocator, for a program that drops an engine and opens another (the
//! app's lock and unlock). With glibc's defaults each thread that allocates while another holds
//! the lock gets a heap of its own (up to 8 per core), and a heap keeps the pages of what was
//! freed inside it: measured (`tests/memory.rs`, SmolLM2, four cycles), open 450 → 514 MB and
//! closed 203 → 252 MB, growing cycle after cycle. With two heaps the figures stay put (open
//! 440–474 MB, closed 153–163 MB) at no measured cost to prompt processing (BENCHMARKS.md); a
//! fixed mmap threshold did as well for memory but cost 6 % of the prompt's speed. Other
//! systems' allocators give large blocks back when they are freed: nothing to set there.

/// Sets the allocator up as above; call first thing in `main`, before any thread starts.
pub fn settle() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` sets a tuning value of glibc's malloc; it has no preconditions.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// Gives the memory freed so far back to the system (glibc keeps freed memory at the top of
/// its heaps otherwise): after an engine is dropped, a model loaded, an ingestion done.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory of glibc's heaps; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// How many heaps (arenas) the allocator has made so far, where it can say (glibc): at most
/// two once `settle` ran first.
pub fn heap_count() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let mut buf: *mut libc::c_char = std::ptr::null_mut();
        let mut len: libc::size_t = 0;
        // SAFETY: `open_memstream` makes a stream that writes into a buffer it allocates;
        // `malloc_info` writes its XML report there; after `fclose`, `buf` holds `len` bytes that
        // are ours to read and free.
        let report = unsafe {
            let stream = libc::open_memstream(&mut buf, &mut len);
            if stream.is_null() {
                return None;
            }
            let written = libc::malloc_info(0, stream);
            libc::fclose(stream);
            let report = (!buf.is_null()).then(|| std::slice::from_raw_parts(buf as *const u8, len).to_vec());
            libc::free(buf.cast());
            if written != 0 {
                return None;
            }
            report?
        };
        Some(String::from_utf8_lossy(&report).matches("<heap nr=").count())
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}
