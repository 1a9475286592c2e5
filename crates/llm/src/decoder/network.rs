//! The forward pass the speculative loop drives, wherever it runs: Quire's CPU kernels
//! (`transformer`, the fastest on a CPU) or candle's tensors on a GPU (`device`). Grammar
//! drafts, prompt lookup, the draft model, adaptive K and the thermal back-off sit above this
//! and do not know which.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::OnceLock;

use anyhow::{bail, Result};
use candle_core::quantized::gguf_file::Content;
use candle_core::{DType, Device};

use super::device::{DeviceCache, DeviceTransformer};
use super::transformer::{Config, KvCache, Transformer};

/// Where the decoder's network runs.
#[derive(Debug, Clone)]
pub enum Placement {
    /// Quire's own CPU kernels.
    Kernels,
    /// candle on this device (a GPU; candle's CPU device in tests).
    Candle(Device),
}

impl Placement {
    /// A GPU where this build has its backend and the machine has one (Metal on Apple silicon,
    /// CUDA where a GPU and its driver answer), else the CPU kernels. `QUIRE_DEVICE=cpu` keeps
    /// the CPU kernels where there is a GPU; `QUIRE_DEVICE=candle-cpu` runs the GPU code on
    /// candle's CPU device (how CI checks it without a GPU).
    /// Chosen once a process: opening a GPU makes a context on it.
    pub fn best() -> Placement {
        static BEST: OnceLock<Placement> = OnceLock::new();
        BEST.get_or_init(Placement::pick).clone()
    }

    fn pick() -> Placement {
        match std::env::var("QUIRE_DEVICE").as_deref() {
            Ok("cpu") => return Placement::Kernels,
            Ok("candle-cpu") => return Placement::Candle(Device::Cpu),
            _ => {}
        }
        #[cfg(feature = "metal")]
        if let Ok(device) = Device::new_metal(0) {
            return Placement::Candle(device);
        }
        #[cfg(feature = "cuda")]
        if let Ok(device) = Device::new_cuda(0) {
            return Placement::Candle(device);
        }
        Placement::Kernels
    }

    /// What candle's KV cache holds keys and values as here: f32 on candle's CPU device (the
    /// reference the GPU code is tested against), f16 on GPUs (half the memory and bandwidth).
    /// Quire's own CPU kernels keep theirs as `KvPrecision` says.
    pub fn kv_dtype(&self) -> DType {
        match self {
            Placement::Kernels | Placement::Candle(Device::Cpu) => DType::F32,
            Placement::Candle(_) => DType::F16,
        }
    }

    /// Bytes one position's key (or value) of one KV head takes in the decoder's cache here:
    /// on the CPU as `KvPrecision::in_use` keeps it, on GPUs in `kv_dtype`.
    pub fn kv_row_bytes(&self, head_dim: usize) -> usize {
        match self {
            Placement::Kernels => super::transformer::KvPrecision::in_use().row_bytes(head_dim),
            Placement::Candle(_) => head_dim * self.kv_dtype().size_in_bytes(),
        }
    }

    /// Whether the networks sit in a GPU's own memory (CUDA), not in the computer's memory the
    /// process uses (the CPU, candle's CPU device, and Apple silicon, whose GPU shares it).
    pub fn own_memory(&self) -> bool {
        matches!(self, Placement::Candle(Device::Cuda(_)))
    }

    /// The GPU's own memory, free and total bytes, where the networks sit in it; `None` where
    /// they are in the computer's memory, or the GPU does not answer.
    pub fn gpu_memory(&self) -> Option<(u64, u64)> {
        match self {
            #[cfg(feature = "cuda")]
            Placement::Candle(Device::Cuda(device)) => {
                let (free, total) = device.cuda_stream().context().mem_get_info().ok()?;
                Some((free as u64, total as u64))
            }
            _ => None,
        }
    }

    /// For people: "CPU", "CUDA GPU", "Metal GPU", or "CPU through candle (the GPU code)".
    pub fn name(&self) -> &'static str {
        match self {
            Placement::Kernels => "CPU",
            Placement::Candle(Device::Cuda(_)) => "CUDA GPU",
            Placement::Candle(Device::Metal(_)) => "Metal GPU",
            Placement::Candle(Device::Cpu) => "CPU through candle (the GPU code)",
        }
    }
}

pub enum Network {
    Cpu(Transformer),
    Device(DeviceTransformer),
}

/// A reply's keys and values, of the network that made it.
#[derive(Clone)]
pub enum Cache {
    Cpu(KvCache),
    Device(DeviceCache),
}

impl Network {
    pub fn load(
        path: &Path,
        content: &Content,
        reader: &mut BufReader<File>,
        placement: &Placement,
    ) -> Result<Network> {
        Ok(match placement {
            Placement::Kernels => Network::Cpu(Transformer::from_gguf(path, content, reader)?),
            Placement::Candle(device) => Network::Device(DeviceTransformer::from_gguf(path, content, reader, device)?),
        })
    }

    /// Where this network runs.
    pub fn placement(&self) -> Placement {
        match self {
            Network::Cpu(_) => Placement::Kernels,
            Network::Device(t) => Placement::Candle(t.device().clone()),
        }
    }

    pub fn config(&self) -> &Config {
        match self {
            Network::Cpu(t) => &t.config,
            Network::Device(t) => &t.config,
        }
    }

    /// The most tokens one verify pass may hold (drafts and the token before them) and still
    /// give each the logits it gets alone; `None`: any number.
    pub fn widest_verify(&self) -> Option<usize> {
        match self {
            Network::Cpu(_) => None,
            Network::Device(t) => t.widest_verify(),
        }
    }

    pub fn new_cache(&self, capacity: usize) -> Result<Cache> {
        Ok(match self {
            Network::Cpu(t) => Cache::Cpu(t.new_cache(capacity)),
            Network::Device(t) => Cache::Device(t.new_cache(capacity)?),
        })
    }

    /// Runs `tokens` after the cache's positions, appends their keys and values, and returns
    /// the logits of the tokens from index `logits_from` on (`vocab` floats each).
    pub fn forward(&self, tokens: &[u32], cache: &mut Cache, logits_from: usize) -> Result<Vec<f32>> {
        match (self, cache) {
            // On a thread of the pool, whose matmuls it then shares with the other threads by
            // work stealing: from any other thread each of a token's ~250 parallel steps was
            // handed to the pool and waited for (two wake-ups a step; 2–5 % of plain decoding).
            (Network::Cpu(t), Cache::Cpu(c)) => rayon::scope(|_| t.forward(tokens, c, logits_from)),
            (Network::Device(t), Cache::Device(c)) => t.forward(tokens, c, logits_from),
            _ => bail!("a cache of another network was handed to this one"),
        }
    }

    /// Whether this network verifies a tree of drafts in one pass (`forward_tree`): Quire's
    /// CPU kernels do; candle's path verifies chains.
    pub fn verifies_trees(&self) -> bool {
        matches!(self, Network::Cpu(_))
    }

    /// Runs a tree of tokens in one pass (`Transformer::forward_tree`): token i > 0 follows
    /// `parents[i - 1]`. A network that does not verify trees runs chains only.
    pub fn forward_tree(
        &self,
        tokens: &[u32],
        parents: &[usize],
        cache: &mut Cache,
        logits_from: usize,
    ) -> Result<Vec<f32>> {
        match (self, cache) {
            (Network::Cpu(t), Cache::Cpu(c)) => rayon::scope(|_| t.forward_tree(tokens, parents, c, logits_from)),
            (network, cache) if parents.iter().enumerate().all(|(i, &p)| p == i) => {
                network.forward(tokens, cache, logits_from)
            }
            _ => bail!("this network verifies chains of drafts, not trees"),
        }
    }
}

impl Cache {
    /// Keeps the accepted branch of a tree's pass (`KvCache::keep_branch`): the positions
    /// `slots` moved to `from, from + 1, …` and the rest of the pass forgotten.
    pub fn keep_branch(&mut self, from: usize, slots: &[usize]) -> Result<()> {
        match self {
            Cache::Cpu(c) => c.keep_branch(from, slots),
            _ if slots.iter().enumerate().all(|(j, &s)| s == from + j) => self.truncate(from + slots.len()),
            _ => bail!("this network's cache keeps chains of drafts, not branches of trees"),
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        match self {
            Cache::Cpu(c) => c.len(),
            Cache::Device(c) => c.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        match self {
            Cache::Cpu(c) => c.capacity(),
            Cache::Device(c) => c.capacity,
        }
    }

    /// Forgets every position from `len` on.
    pub fn truncate(&mut self, len: usize) {
        match self {
            Cache::Cpu(c) => c.truncate(len),
            Cache::Device(c) => c.len = c.len.min(len),
        }
    }

    /// This cache with room for `capacity` positions, its positions kept.
    pub fn with_room(self, capacity: usize) -> Result<Cache> {
        Ok(match self {
            Cache::Cpu(c) => Cache::Cpu(c.with_room(capacity)),
            Cache::Device(c) => Cache::Device(c.with_room(capacity)?),
        })
    }

    /// Bytes of memory (device memory, for a device's cache) the cache holds.
    pub fn bytes(&self) -> usize {
        match self {
            Cache::Cpu(c) => c.bytes(),
            Cache::Device(c) => c.bytes(),
        }
    }
}
