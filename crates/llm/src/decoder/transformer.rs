//! A Qwen2 / Llama decoder-only transformer over GGUF weights, in plain Rust loops around the
//! weight-stationary matmul, with a KV cache that can be cut back.
//!
//! Every token's computation (norms, attention over its own prefix, dot products) is the same
//! whether it runs alone or in a batch: logits do not depend on batching, so verifying drafted
//! tokens together gives exactly the logits plain decoding would.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::{Content, Value};
use rayon::prelude::*;

use super::attention::{self, KEY_BLOCK, SCALE_BLOCK};
use super::weights::{self, Matrix};

#[derive(Debug, Clone)]
pub struct Config {
    pub architecture: String,
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub context: usize,
    pub rope_base: f32,
    /// Rotate the two halves of each head (NeoX / Qwen2) rather than neighbouring pairs
    /// (Llama GGUFs, whose q/k rows were permuted for interleaved rotation).
    pub rope_halves: bool,
    pub norm_eps: f32,
}

/// One block's weights, as the network that runs them holds matrices (`M`) and vectors (`V`):
/// plain Rust here, candle tensors in `device`.
pub(super) struct Block<M, V> {
    pub attn_norm: V,
    pub q: M,
    pub k: M,
    pub v: M,
    pub q_bias: Option<V>,
    pub k_bias: Option<V>,
    pub v_bias: Option<V>,
    pub o: M,
    pub ffn_norm: V,
    pub gate: M,
    pub up: M,
    pub down: M,
}

impl<M, V> Block<M, V> {
    /// Block `i`'s tensors of the file `content` describes, read from `reader` by `matrix` and
    /// `vector` (the biases only where the file has them).
    pub(super) fn read<R>(
        content: &Content,
        i: usize,
        reader: &mut R,
        matrix: impl Fn(&str, &mut R) -> Result<M>,
        vector: impl Fn(&str, &mut R) -> Result<V>,
    ) -> Result<Block<M, V>> {
        let name = |n: &str| format!("blk.{i}.{n}");
        let bias = |n: &str, reader: &mut R| -> Result<Option<V>> {
            let n = name(n);
            if content.tensor_infos.contains_key(&n) {
                Ok(Some(vector(&n, reader)?))
            } else {
                Ok(None)
            }
        };
        Ok(Block {
            attn_norm: vector(&name("attn_norm.weight"), reader)?,
            q: matrix(&name("attn_q.weight"), reader)?,
            k: matrix(&name("attn_k.weight"), reader)?,
            v: matrix(&name("attn_v.weight"), reader)?,
            q_bias: bias("attn_q.bias", reader)?,
            k_bias: bias("attn_k.bias", reader)?,
            v_bias: bias("attn_v.bias", reader)?,
            o: matrix(&name("attn_output.weight"), reader)?,
            ffn_norm: vector(&name("ffn_norm.weight"), reader)?,
            gate: matrix(&name("ffn_gate.weight"), reader)?,
            up: matrix(&name("ffn_up.weight"), reader)?,
            down: matrix(&name("ffn_down.weight"), reader)?,
        })
    }

    /// The block's seven matrices.
    pub(super) fn matrices(&self) -> [&M; 7] {
        [&self.q, &self.k, &self.v, &self.o, &self.gate, &self.up, &self.down]
    }

    /// The block's norms and the biases it has.
    pub(super) fn vectors(&self) -> impl Iterator<Item = &V> {
        [Some(&self.attn_norm), Some(&self.ffn_norm), self.q_bias.as_ref(), self.k_bias.as_ref(), self.v_bias.as_ref()]
            .into_iter()
            .flatten()
    }
}

type Layer = Block<Matrix, Vec<f32>>;

pub struct Transformer {
    pub config: Config,
    embedding: Matrix,
    layers: Vec<Layer>,
    final_norm: Vec<f32>,
    /// `None` when the output projection is tied to the embedding.
    output: Option<Matrix>,
    inv_freq: Vec<f32>,
}

/// How the CPU's KV cache holds keys and values: f32, or 8-bit integers with an f32 scale for
/// each `SCALE_BLOCK` dimensions of a position's row (a quarter of the memory and of the bytes
/// attention reads, plus the scales: 36 bytes for 32 values). `QUIRE_KV_CACHE=int8` chooses 8
/// bits; f32 by default, as the 8-bit cache moved the answer evaluation by more than its goal
/// allows (BENCHMARKS.md, "An 8-bit KV cache").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvPrecision {
    F32,
    Int8,
}

impl KvPrecision {
    pub fn in_use() -> KvPrecision {
        static CHOSEN: std::sync::OnceLock<KvPrecision> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| match std::env::var("QUIRE_KV_CACHE").as_deref() {
            Ok("int8") => KvPrecision::Int8,
            _ => KvPrecision::F32,
        })
    }

    /// Bytes one position's key (or value) of one KV head takes.
    pub fn row_bytes(self, head_dim: usize) -> usize {
        match self {
            KvPrecision::F32 => head_dim * 4,
            KvPrecision::Int8 => head_dim + 4 * head_dim.div_ceil(SCALE_BLOCK),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KvPrecision::F32 => "f32",
            KvPrecision::Int8 => "int8",
        }
    }
}

/// Keys or values of every layer, one preallocated buffer per layer, each KV head's region
/// `capacity` positions long; in 8 bits with the scales of each position's blocks of
/// `SCALE_BLOCK` dimensions, `blocks` of them a position, laid out as `attention` reads them.
#[derive(Clone)]
enum Rows {
    F32(Vec<Vec<f32>>),
    Int8 { rows: Vec<Vec<i8>>, scales: Vec<Vec<f32>>, blocks: usize },
}

impl Rows {
    fn new(precision: KvPrecision, layers: usize, heads: usize, capacity: usize, head_dim: usize) -> Rows {
        let size = heads * capacity * head_dim;
        match precision {
            KvPrecision::F32 => Rows::F32((0..layers).map(|_| vec![0f32; size]).collect()),
            KvPrecision::Int8 => {
                let blocks = head_dim.div_ceil(SCALE_BLOCK);
                Rows::Int8 {
                    rows: (0..layers).map(|_| vec![0i8; size]).collect(),
                    scales: (0..layers).map(|_| vec![0f32; heads * capacity * blocks]).collect(),
                    blocks,
                }
            }
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Rows::F32(rows) => rows.iter().map(|r| r.len() * 4).sum(),
            Rows::Int8 { rows, scales, .. } => {
                rows.iter().map(|r| r.len()).sum::<usize>() + scales.iter().map(|s| s.len() * 4).sum::<usize>()
            }
        }
    }

    /// These rows in regions of `capacity` positions (from `old_capacity`), the first `kept`
    /// positions of each head's region copied (every layout keeps a head's first positions at
    /// the start of its region: whole blocks of keys and of their scales, and as many values).
    fn relaid(&self, heads: usize, old_capacity: usize, capacity: usize, head_dim: usize, kept: usize) -> Rows {
        fn relay<T: Copy + Default>(
            old: &[T],
            heads: usize,
            from: usize,
            to: usize,
            width: usize,
            kept: usize,
        ) -> Vec<T> {
            let mut new = vec![T::default(); heads * to * width];
            for h in 0..heads {
                new[h * to * width..(h * to + kept) * width]
                    .copy_from_slice(&old[h * from * width..(h * from + kept) * width]);
            }
            new
        }
        match self {
            Rows::F32(rows) => {
                Rows::F32(rows.iter().map(|r| relay(r, heads, old_capacity, capacity, head_dim, kept)).collect())
            }
            Rows::Int8 { rows, scales, blocks } => Rows::Int8 {
                rows: rows.iter().map(|r| relay(r, heads, old_capacity, capacity, head_dim, kept)).collect(),
                scales: scales.iter().map(|s| relay(s, heads, old_capacity, capacity, *blocks, kept)).collect(),
                blocks: *blocks,
            },
        }
    }

    /// Copies a position's `width` elements in every layer from `from(d)` to `to(d)`, and in 8
    /// bits its `blocks` scales from `scale_from(b)` to `scale_to(b)`.
    fn copy(
        &mut self,
        width: usize,
        from: impl Fn(usize) -> usize,
        to: impl Fn(usize) -> usize,
        scale_from: impl Fn(usize) -> usize,
        scale_to: impl Fn(usize) -> usize,
    ) {
        fn each<T: Copy>(rows: &mut [Vec<T>], n: usize, from: impl Fn(usize) -> usize, to: impl Fn(usize) -> usize) {
            for layer in rows {
                for d in 0..n {
                    layer[to(d)] = layer[from(d)];
                }
            }
        }
        match self {
            Rows::F32(rows) => each(rows, width, from, to),
            Rows::Int8 { rows, scales, blocks } => {
                each(rows, width, from, to);
                each(scales, *blocks, scale_from, scale_to);
            }
        }
    }

    /// Stores `row` in `layer`, its element d at `place(d)` of the buffer; in 8 bits each block
    /// of `SCALE_BLOCK` elements rounded to the nearest multiple of its scale (its largest
    /// magnitude / 127), block b's scale at `scale_place(b)`.
    fn put(&mut self, layer: usize, row: &[f32], place: impl Fn(usize) -> usize, scale_place: impl Fn(usize) -> usize) {
        match self {
            Rows::F32(rows) => {
                for (d, &x) in row.iter().enumerate() {
                    rows[layer][place(d)] = x;
                }
            }
            Rows::Int8 { rows, scales, .. } => {
                for (b, block) in row.chunks(SCALE_BLOCK).enumerate() {
                    let largest = block.iter().fold(0f32, |m, x| m.max(x.abs()));
                    let scale = largest / 127.0;
                    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
                    for (i, &x) in block.iter().enumerate() {
                        rows[layer][place(b * SCALE_BLOCK + i)] = (x * inverse).round().clamp(-127.0, 127.0) as i8;
                    }
                    scales[layer][scale_place(b)] = scale;
                }
            }
        }
    }
}

/// Keys and values of the tokens seen so far (`Rows`). Values are laid out
/// `[kv_head][position][head_dim]`; keys `[kv_head][position / 16][head_dim][16]`, so that
/// attention scores 16 positions at once, a position per lane (`attention::KEY_BLOCK`); the
/// capacity is a whole number of such blocks. Cutting back (rejected draft tokens) only lowers
/// `len`: nothing is freed or reallocated.
#[derive(Clone)]
pub struct KvCache {
    keys: Rows,
    values: Rows,
    heads: usize,
    capacity: usize,
    head_dim: usize,
    len: usize,
}

impl KvCache {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn precision(&self) -> KvPrecision {
        match self.keys {
            Rows::F32(_) => KvPrecision::F32,
            Rows::Int8 { .. } => KvPrecision::Int8,
        }
    }

    /// Forgets every position from `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// This cache with room for `capacity` positions, its `len` positions kept: the same
    /// buffers where they are large enough and not more than twice that (an old long prompt's
    /// cache is not held on to for short ones), else new ones with the positions copied over.
    pub fn with_room(self, capacity: usize) -> KvCache {
        if (capacity..=2 * capacity).contains(&self.capacity) {
            return self;
        }
        let capacity = capacity.max(self.len).next_multiple_of(KEY_BLOCK);
        let kept = self.len.next_multiple_of(KEY_BLOCK);
        let relaid = |rows: &Rows| rows.relaid(self.heads, self.capacity, capacity, self.head_dim, kept);
        KvCache {
            keys: relaid(&self.keys),
            values: relaid(&self.values),
            heads: self.heads,
            capacity,
            head_dim: self.head_dim,
            len: self.len,
        }
    }

    /// Bytes of memory the cache holds.
    pub fn bytes(&self) -> usize {
        self.keys.bytes() + self.values.bytes()
    }

    /// After a tree's verify pass (`Transformer::forward_tree`), keeps the branch that was
    /// accepted: the positions `slots` (in increasing order, the first at or after `from`),
    /// whose keys were rotated for `from, from + 1, …`, moved there in every layer, and the
    /// cache cut back after them. Only the branch's rows move; the rest of the cache stays.
    pub fn keep_branch(&mut self, from: usize, slots: &[usize]) {
        assert!(slots.iter().enumerate().all(|(j, &s)| s >= from + j && s < self.len), "a branch within the pass");
        for (j, &slot) in slots.iter().enumerate() {
            let to = from + j;
            if slot == to {
                continue;
            }
            for head in 0..self.heads {
                let (a, b) = (self.place(head, slot), self.place(head, to));
                let hd = self.head_dim;
                self.keys.copy(hd, |d| a.key(d), |d| b.key(d), |s| a.key_scale(s), |s| b.key_scale(s));
                self.values.copy(hd, |d| a.value(d), |d| b.value(d), |s| a.value_scale(s), |s| b.value_scale(s));
            }
        }
        self.len = from + slots.len();
    }

    /// Where a head's region starts, in either buffer (and a value's place in it).
    fn slot(&self, head: usize, position: usize) -> usize {
        (head * self.capacity + position) * self.head_dim
    }

    /// Stores the key and value of `head` at `position` of `layer`: the key's dimension d at
    /// lane `position % 16` of its key block, its scales likewise (`[block][dim block][16]`);
    /// the value's row and its scales in position order.
    fn put(&mut self, layer: usize, head: usize, position: usize, key: &[f32], value: &[f32]) {
        let at = self.place(head, position);
        self.keys.put(layer, key, |d| at.key(d), |b| at.key_scale(b));
        self.values.put(layer, value, |d| at.value(d), |b| at.value_scale(b));
    }

    /// Where `head`'s key and value at `position` sit in a layer's buffers.
    fn place(&self, head: usize, position: usize) -> Place {
        Place::of(head, position, self.capacity, self.head_dim)
    }
}

/// A position's places in the cache's buffers (`KvCache`'s layout): its key's dimension d at
/// lane `lane` of its key block, the block's scales likewise (`[block][dim block][16]`), its
/// value's row and scales in position order.
struct Place {
    keys_at: usize,
    key_scales_at: usize,
    lane: usize,
    values_at: usize,
    value_scales_at: usize,
}

impl Place {
    /// In buffers of `capacity` positions a head, `head_dim` values a position.
    fn of(head: usize, position: usize, capacity: usize, head_dim: usize) -> Place {
        let blocks = head_dim.div_ceil(SCALE_BLOCK);
        let key_block = position / KEY_BLOCK * KEY_BLOCK;
        Place {
            keys_at: (head * capacity + key_block) * head_dim,
            key_scales_at: (head * capacity + key_block) * blocks,
            lane: position % KEY_BLOCK,
            values_at: (head * capacity + position) * head_dim,
            value_scales_at: (head * capacity + position) * blocks,
        }
    }

    fn key(&self, d: usize) -> usize {
        self.keys_at + d * KEY_BLOCK + self.lane
    }

    fn key_scale(&self, b: usize) -> usize {
        self.key_scales_at + b * KEY_BLOCK + self.lane
    }

    fn value(&self, d: usize) -> usize {
        self.values_at + d
    }

    fn value_scale(&self, b: usize) -> usize {
        self.value_scales_at + b
    }
}

impl Config {
    /// The network's shape from a GGUF file's metadata (`path` names the file in errors);
    /// `vocab` is 0 until the output matrix is read.
    pub fn read(path: &Path, content: &Content) -> Result<Config> {
        let architecture = metadata(content, "general.architecture")?.to_string()?.clone();
        let rope_halves = match architecture.as_str() {
            "qwen2" => true,
            "llama" => false,
            other => bail!("Quire's decoder runs qwen2 and llama models; {} is {other}", path.display()),
        };
        let key = |name: &str| format!("{architecture}.{name}");
        let hidden = metadata_usize(content, &key("embedding_length"))?;
        let heads = metadata_usize(content, &key("attention.head_count"))?;
        Ok(Config {
            layers: metadata_usize(content, &key("block_count"))?,
            hidden,
            heads,
            kv_heads: metadata_usize(content, &key("attention.head_count_kv")).unwrap_or(heads),
            head_dim: hidden / heads,
            vocab: 0,
            context: metadata_usize(content, &key("context_length")).unwrap_or(4096),
            rope_base: content.metadata.get(&key("rope.freq_base")).and_then(|v| v.to_f32().ok()).unwrap_or(10_000.0),
            rope_halves,
            norm_eps: metadata(content, &key("attention.layer_norm_rms_epsilon"))?.to_f32()?,
            architecture,
        })
    }

    /// The rotary embedding's frequency of each pair of a head's dimensions. In f64, then
    /// rounded: libm's f32 functions give other bits on Windows than on Linux, its f64 ones
    /// agree to within an ulp, which rounding to f32 leaves the same.
    pub fn inv_freq(&self) -> Vec<f32> {
        let d = self.head_dim as f64;
        (0..self.head_dim / 2).map(|i| (1.0 / (self.rope_base as f64).powf(2.0 * i as f64 / d)) as f32).collect()
    }
}

/// The rotary embedding's cosines and sines for positions `start..start + m`, `inv_freq.len()`
/// of each per position (in f64, then rounded, as `inv_freq`).
pub(super) fn rope_tables(inv_freq: &[f32], start: usize, m: usize) -> (Vec<f32>, Vec<f32>) {
    rope_tables_at(inv_freq, start..start + m)
}

/// `rope_tables` for each of `positions`, in order.
fn rope_tables_at(inv_freq: &[f32], positions: impl ExactSizeIterator<Item = usize>) -> (Vec<f32>, Vec<f32>) {
    let m = positions.len();
    let mut cos = Vec::with_capacity(m * inv_freq.len());
    let mut sin = Vec::with_capacity(m * inv_freq.len());
    for position in positions {
        let position = position as f32;
        for &f in inv_freq {
            let angle = position * f;
            cos.push((angle as f64).cos() as f32);
            sin.push((angle as f64).sin() as f32);
        }
    }
    (cos, sin)
}

fn metadata<'a>(content: &'a Content, key: &str) -> Result<&'a Value> {
    content.metadata.get(key).with_context(|| format!("the model file has no {key}"))
}

fn metadata_usize(content: &Content, key: &str) -> Result<usize> {
    let value = metadata(content, key)?;
    Ok(value.to_u32().map(|v| v as usize).or_else(|_| value.to_u64().map(|v| v as usize))?)
}

/// A GGUF file's header (metadata, tensor directory) and a reader positioned anywhere in it:
/// read once per file, then handed to the tokenizer and the transformer.
pub fn open_gguf(path: &Path) -> Result<(Content, BufReader<File>)> {
    let file = File::open(path).with_context(|| format!("cannot open the model {}", path.display()))?;
    let mut reader = BufReader::new(file);
    let content =
        Content::read(&mut reader).with_context(|| format!("{} is not a readable GGUF model", path.display()))?;
    Ok((content, reader))
}

impl Transformer {
    pub fn load(path: &Path) -> Result<Transformer> {
        let (content, mut reader) = open_gguf(path)?;
        Transformer::from_gguf(path, &content, &mut reader)
    }

    /// Loads the weights `content` lists from `reader` (`path` names the file in errors).
    pub fn from_gguf(path: &Path, content: &Content, reader: &mut BufReader<File>) -> Result<Transformer> {
        let mut config = Config::read(path, content)?;
        let matrix = |name: &str, reader: &mut BufReader<File>| weights::load(content, reader, name);
        let embedding = matrix("token_embd.weight", reader)?;
        let output = if content.tensor_infos.contains_key("output.weight") {
            Some(matrix("output.weight", reader)?)
        } else {
            None
        };
        let vector = |name: &str, reader: &mut BufReader<File>| weights::load_vector(content, reader, name);
        let layers =
            (0..config.layers).map(|i| Layer::read(content, i, reader, matrix, vector)).collect::<Result<Vec<_>>>()?;
        let final_norm = weights::load_vector(content, reader, "output_norm.weight")?;
        config.vocab = output.as_ref().unwrap_or(&embedding).rows;
        let inv_freq = config.inv_freq();
        Ok(Transformer { config, embedding, layers, final_norm, output, inv_freq })
    }

    /// A cache for `capacity` positions in the precision `KvPrecision::in_use` says.
    pub fn new_cache(&self, capacity: usize) -> KvCache {
        self.new_cache_in(KvPrecision::in_use(), capacity)
    }

    pub fn new_cache_in(&self, precision: KvPrecision, capacity: usize) -> KvCache {
        let capacity = capacity.next_multiple_of(KEY_BLOCK);
        let c = &self.config;
        let rows = || Rows::new(precision, c.layers, c.kv_heads, capacity, c.head_dim);
        KvCache { keys: rows(), values: rows(), heads: c.kv_heads, capacity, head_dim: c.head_dim, len: 0 }
    }

    /// Runs `tokens` at the positions after the cache's, appends their keys and values, and
    /// returns the logits of the tokens from index `logits_from` on (`vocab` floats each).
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, logits_from: usize) -> Result<Vec<f32>> {
        self.run(tokens, None, cache, logits_from)
    }

    /// Runs a tree of tokens in one pass: `tokens[0]` follows the cache, and token i > 0
    /// follows `parents[i - 1]` (< i). Each token sits at the position after its parent's and
    /// attends to the cache and to its own ancestors only, and gets the logits it would get
    /// were its branch alone run as a chain (the same bits: its scores are the same chains over
    /// the same keys, in the same order). The keys and values of token i are cached at the
    /// i-th position after the cache's, those of one branch then kept by `KvCache::keep_branch`.
    pub fn forward_tree(
        &self,
        tokens: &[u32],
        parents: &[usize],
        cache: &mut KvCache,
        logits_from: usize,
    ) -> Result<Vec<f32>> {
        if parents.len() + 1 != tokens.len() || parents.iter().enumerate().any(|(i, &p)| p > i) {
            bail!("a tree's tokens each follow one before them");
        }
        self.run(tokens, Some(parents), cache, logits_from)
    }

    fn run(&self, tokens: &[u32], tree: Option<&[usize]>, cache: &mut KvCache, logits_from: usize) -> Result<Vec<f32>> {
        let c = &self.config;
        let m = tokens.len();
        let start = cache.len;
        if start + m > cache.capacity {
            bail!("the conversation needs {} tokens; this model's cache holds {}", start + m, cache.capacity);
        }
        let visible = tree.map(|parents| Visible::of(parents, start));
        let (hidden, hd) = (c.hidden, c.head_dim);
        let q_dim = c.heads * hd;
        let kv_dim = c.kv_heads * hd;

        let mut x = vec![0f32; m * hidden];
        for (t, &token) in tokens.iter().enumerate() {
            if token as usize >= self.embedding.rows {
                bail!("token {token} is outside the model's vocabulary");
            }
            self.embedding.row(token as usize, &mut x[t * hidden..(t + 1) * hidden]);
        }
        let (cos, sin) = match &visible {
            None => rope_tables(&self.inv_freq, start, m),
            Some(v) => rope_tables_at(&self.inv_freq, v.depths.iter().map(|d| start + d)),
        };

        let mut normed = vec![0f32; m * hidden];
        let mut q = vec![0f32; m * q_dim];
        let mut k = vec![0f32; m * kv_dim];
        let mut v = vec![0f32; m * kv_dim];
        let mut attn = vec![0f32; m * q_dim];
        let mut proj = vec![0f32; m * hidden];
        let ffn = self.layers.first().map(|l| l.gate.rows).unwrap_or(0);
        let mut gate = vec![0f32; m * ffn];

        for (li, layer) in self.layers.iter().enumerate() {
            rms_norm(&x, &layer.attn_norm, c.norm_eps, &mut normed);
            Matrix::matmuls(&mut [(&layer.q, &mut q), (&layer.k, &mut k), (&layer.v, &mut v)], &normed, m);
            add_bias(&mut q, layer.q_bias.as_deref());
            add_bias(&mut k, layer.k_bias.as_deref());
            add_bias(&mut v, layer.v_bias.as_deref());
            for t in 0..m {
                let (ct, st) = (&cos[t * hd / 2..(t + 1) * hd / 2], &sin[t * hd / 2..(t + 1) * hd / 2]);
                for head in q[t * q_dim..(t + 1) * q_dim].chunks_mut(hd) {
                    rotate(head, ct, st, c.rope_halves);
                }
                for head in k[t * kv_dim..(t + 1) * kv_dim].chunks_mut(hd) {
                    rotate(head, ct, st, c.rope_halves);
                }
            }
            // Append this batch's keys and values at their positions (attention then reads
            // them from the cache, its own ones too: a token's result does not depend on
            // whether its key was computed in this batch or an earlier one).
            for t in 0..m {
                for h in 0..c.kv_heads {
                    let src = (t * c.kv_heads + h) * hd;
                    cache.put(li, h, start + t, &k[src..src + hd], &v[src..src + hd]);
                }
            }
            self.attention(&q, cache, li, start, visible.as_ref(), &mut attn);
            layer.o.matmul(&attn, m, &mut proj);
            for (xi, pi) in x.iter_mut().zip(&proj) {
                *xi += pi;
            }

            rms_norm(&x, &layer.ffn_norm, c.norm_eps, &mut normed);
            // SiLU by `quire_simd`'s exponential rather than libm's `expf`, which gives other
            // bits on Windows than on Linux.
            Matrix::gated(&layer.gate, &layer.up, &normed, m, &mut gate);
            layer.down.matmul(&gate, m, &mut proj);
            for (xi, pi) in x.iter_mut().zip(&proj) {
                *xi += pi;
            }
        }
        cache.len = start + m;

        let wanted = m.saturating_sub(logits_from);
        if wanted == 0 {
            return Ok(Vec::new());
        }
        let mut last = vec![0f32; wanted * hidden];
        rms_norm(&x[logits_from * hidden..], &self.final_norm, c.norm_eps, &mut last);
        let mut logits = vec![0f32; wanted * c.vocab];
        self.output.as_ref().unwrap_or(&self.embedding).matmul(&last, wanted, &mut logits);
        Ok(logits)
    }

    /// Causal attention of the batch's queries over the cache. One task per (token, KV head)
    /// serves all the query heads that share that KV head, so each cached key and value is
    /// read once for the group rather than once per query head.
    ///
    /// In a tree (`visible`), a token sees the cache and its ancestors: the positions up to
    /// where its branch leaves the pass's first chain run as above, its other ancestors after.
    fn attention(
        &self,
        q: &[f32],
        cache: &KvCache,
        layer: usize,
        start: usize,
        visible: Option<&Visible>,
        out: &mut [f32],
    ) {
        let c = &self.config;
        let hd = c.head_dim;
        let group = c.heads / c.kv_heads;
        let scale = 1.0 / (hd as f32).sqrt();
        out.par_chunks_mut(group * hd).enumerate().for_each(|(i, o)| {
            let (t, kv) = (i / c.kv_heads, i % c.kv_heads);
            let first_head = kv * group;
            let queries = &q[(t * c.heads + first_head) * hd..(t * c.heads + first_head + group) * hd];
            let (seen, branch) = match visible {
                None => (start + t + 1, &[][..]),
                Some(v) => (start + v.chain[t], &v.branch[t][..]),
            };
            if !branch.is_empty() {
                return self.branch_attention(queries, cache, layer, kv, seen, branch, scale, o);
            }
            let base = cache.slot(kv, 0);
            let mut scores = vec![0f32; group * seen];
            let blocks = seen.next_multiple_of(KEY_BLOCK);
            match (&cache.keys, &cache.values) {
                (Rows::F32(keys), Rows::F32(values)) => {
                    attention::scores(queries, &keys[layer][base..base + blocks * hd], hd, scale, &mut scores);
                    for row in scores.chunks_mut(seen) {
                        quire_simd::softmax(row);
                    }
                    attention::weighted_values(&scores, &values[layer][base..base + seen * hd], hd, o);
                }
                (
                    Rows::Int8 { rows: keys, scales: key_scales, blocks: per_row },
                    Rows::Int8 { rows: values, scales: value_scales, .. },
                ) => {
                    let scales = kv * cache.capacity * per_row;
                    let keys = &keys[layer][base..base + blocks * hd];
                    let key_scales = &key_scales[layer][scales..scales + blocks * per_row];
                    attention::scores_i8(queries, keys, key_scales, hd, scale, &mut scores);
                    for row in scores.chunks_mut(seen) {
                        quire_simd::softmax(row);
                    }
                    let values = &values[layer][base..base + seen * hd];
                    let value_scales = &value_scales[layer][scales..scales + seen * per_row];
                    attention::weighted_values_i8(&scores, values, value_scales, hd, o);
                }
                _ => unreachable!("keys and values are cached in one precision"),
            }
        });
    }

    /// One token's attention for KV head `kv` over the cache's first `seen` positions and then
    /// the positions `slots` (its other ancestors): their scores by the same kernels over a
    /// copy of their keys, the softmax over all in order, the values of the first `seen` by
    /// the kernel and the chains carried on over the others'.
    #[allow(clippy::too_many_arguments)]
    fn branch_attention(
        &self,
        queries: &[f32],
        cache: &KvCache,
        layer: usize,
        kv: usize,
        seen: usize,
        slots: &[usize],
        scale: f32,
        o: &mut [f32],
    ) {
        let hd = self.config.head_dim;
        let group = queries.len() / hd;
        let (more, total) = (slots.len(), seen + slots.len());
        let base = cache.slot(kv, 0);
        let (mut near, mut far) = (vec![0f32; group * seen], vec![0f32; group * more]);
        let gathered = more.next_multiple_of(KEY_BLOCK);
        // The ancestors' places in the cache, and in the copy of their keys: the layout of a
        // cache of one head holding them in order.
        let places: Vec<(Place, Place)> =
            slots.iter().enumerate().map(|(j, &p)| (cache.place(kv, p), Place::of(0, j, gathered, hd))).collect();
        let scores_of = |near: &mut [f32], far: &mut [f32]| {
            let mut rows = vec![0f32; group * total];
            for h in 0..group {
                let row = &mut rows[h * total..(h + 1) * total];
                row[..seen].copy_from_slice(&near[h * seen..(h + 1) * seen]);
                row[seen..].copy_from_slice(&far[h * more..(h + 1) * more]);
                quire_simd::softmax(row);
                near[h * seen..(h + 1) * seen].copy_from_slice(&row[..seen]);
                far[h * more..(h + 1) * more].copy_from_slice(&row[seen..]);
            }
        };
        let blocks = seen.next_multiple_of(KEY_BLOCK);
        match (&cache.keys, &cache.values) {
            (Rows::F32(keys), Rows::F32(values)) => {
                let (keys, values) = (&keys[layer], &values[layer]);
                attention::scores(queries, &keys[base..base + blocks * hd], hd, scale, &mut near);
                let mut copied = vec![0f32; gathered * hd];
                for (at, to) in &places {
                    (0..hd).for_each(|d| copied[to.key(d)] = keys[at.key(d)]);
                }
                attention::scores(queries, &copied, hd, scale, &mut far);
                scores_of(&mut near, &mut far);
                attention::weighted_values(&near, &values[base..base + seen * hd], hd, o);
                let copied: Vec<f32> =
                    places.iter().flat_map(|(at, _)| &values[at.value(0)..][..hd]).copied().collect();
                attention::weighted_values_more(&far, &copied, hd, o);
            }
            (
                Rows::Int8 { rows: keys, scales: key_scales, blocks: per_row },
                Rows::Int8 { rows: values, scales: value_scales, .. },
            ) => {
                let per_row = *per_row;
                let (keys, key_scales) = (&keys[layer], &key_scales[layer]);
                let (values, value_scales) = (&values[layer], &value_scales[layer]);
                let first = cache.place(kv, 0);
                attention::scores_i8(
                    queries,
                    &keys[base..base + blocks * hd],
                    &key_scales[first.key_scales_at..first.key_scales_at + blocks * per_row],
                    hd,
                    scale,
                    &mut near,
                );
                let (mut copied, mut copied_scales) = (vec![0i8; gathered * hd], vec![0f32; gathered * per_row]);
                for (at, to) in &places {
                    (0..hd).for_each(|d| copied[to.key(d)] = keys[at.key(d)]);
                    (0..per_row).for_each(|b| copied_scales[to.key_scale(b)] = key_scales[at.key_scale(b)]);
                }
                attention::scores_i8(queries, &copied, &copied_scales, hd, scale, &mut far);
                scores_of(&mut near, &mut far);
                let near_scales = first.value_scales_at..first.value_scales_at + seen * per_row;
                attention::weighted_values_i8(
                    &near,
                    &values[base..base + seen * hd],
                    &value_scales[near_scales],
                    hd,
                    o,
                );
                let copied: Vec<i8> = places.iter().flat_map(|(at, _)| &values[at.value(0)..][..hd]).copied().collect();
                let copied_scales: Vec<f32> =
                    places.iter().flat_map(|(at, _)| &value_scales[at.value_scale(0)..][..per_row]).copied().collect();
                attention::weighted_values_i8_more(&far, &copied, &copied_scales, hd, o);
            }
            _ => unreachable!("keys and values are cached in one precision"),
        }
    }
}

/// What each token of a tree's pass sees beyond the cache: `chain[t]` positions of the pass
/// from its start (where token t's ancestors are the pass's first tokens in order), then the
/// cache positions `branch[t]` (its other ancestors', itself last); `depths[t]` its distance
/// from the first token.
struct Visible {
    depths: Vec<usize>,
    chain: Vec<usize>,
    branch: Vec<Vec<usize>>,
}

impl Visible {
    /// For a pass whose first token goes at cache position `start`.
    fn of(parents: &[usize], start: usize) -> Visible {
        let m = parents.len() + 1;
        let mut depths = Vec::with_capacity(m);
        let (mut chain, mut branch) = (Vec::with_capacity(m), Vec::with_capacity(m));
        for t in 0..m {
            let (mut path, mut n) = (vec![t], t);
            while n > 0 {
                n = parents[n - 1];
                path.push(n);
            }
            path.reverse();
            depths.push(path.len() - 1);
            let shared = path.iter().enumerate().take_while(|(i, n)| i == *n).count();
            chain.push(shared);
            branch.push(path[shared..].iter().map(|n| start + n).collect());
        }
        Visible { depths, chain, branch }
    }
}

fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let n = weight.len();
    x.par_chunks(n).zip(out.par_chunks_mut(n)).for_each(|(row, o)| {
        let mean = row.iter().map(|v| v * v).sum::<f32>() / n as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        for ((oi, xi), wi) in o.iter_mut().zip(row).zip(weight) {
            *oi = xi * scale * wi;
        }
    });
}

fn add_bias(x: &mut [f32], bias: Option<&[f32]>) {
    if let Some(bias) = bias {
        for row in x.chunks_mut(bias.len()) {
            for (xi, bi) in row.iter_mut().zip(bias) {
                *xi += bi;
            }
        }
    }
}

fn rotate(head: &mut [f32], cos: &[f32], sin: &[f32], halves: bool) {
    let half = head.len() / 2;
    for i in 0..half {
        let (a, b) = if halves { (i, i + half) } else { (2 * i, 2 * i + 1) };
        let (x0, x1) = (head[a], head[b]);
        head[a] = x0 * cos[i] - x1 * sin[i];
        head[b] = x0 * sin[i] + x1 * cos[i];
    }
}
