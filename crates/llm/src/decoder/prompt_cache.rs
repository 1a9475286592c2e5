//! The processed prompt of the last reply, kept for the next prompt that begins the same way:
//! the chat template and system prompt always, and a follow-up over the same passages up to its
//! question (the answer prompt puts the question last). Exact: a token's keys and values do not
//! depend on which pass computed them (see `transformer`), so a kept prefix continued with the
//! new tokens gives the logits the whole prompt run afresh would, bit for bit.
//!
//! One prompt is kept, in the cache its reply decoded into: no more memory than a reply already
//! takes while it runs, held between replies.

use std::sync::Mutex;

use anyhow::Result;

use super::network::{Cache, Network};

#[derive(Default)]
pub(super) struct PromptCache {
    kept: Mutex<Option<Kept>>,
}

struct Kept {
    /// The tokens whose keys and values fill the cache's first positions.
    tokens: Vec<u32>,
    cache: Cache,
}

impl PromptCache {
    /// A cache with room for `capacity` positions that holds the longest start of `tokens` the
    /// kept prompt has processed, and how many tokens that is. The kept prompt is taken: a
    /// reply running beside this one starts afresh.
    pub(super) fn start(&self, target: &Network, tokens: &[u32], capacity: usize) -> Result<(Cache, usize)> {
        let kept = self.kept.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(Kept { tokens: old, mut cache }) = kept else {
            return Ok((target.new_cache(capacity)?, 0));
        };
        let shared = old.iter().zip(tokens).take_while(|(a, b)| a == b).count().min(cache.len());
        cache.truncate(shared);
        Ok((cache.with_room(capacity)?, shared))
    }

    /// Keeps `cache`, whose first positions hold `tokens` (what comes after them is cut off),
    /// for the next prompt.
    pub(super) fn keep(&self, tokens: &[u32], mut cache: Cache) {
        cache.truncate(tokens.len());
        let tokens = tokens[..cache.len()].to_vec();
        *self.kept.lock().unwrap_or_else(|p| p.into_inner()) = Some(Kept { tokens, cache });
    }

    /// How many prompt tokens are kept, and the bytes their cache holds.
    pub(super) fn kept(&self) -> (usize, usize) {
        self.kept
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or((0, 0), |k| (k.tokens.len(), k.cache.bytes()))
    }

    /// Drops the kept prompt (its memory is given back).
    pub(super) fn clear(&self) {
        self.kept.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}
