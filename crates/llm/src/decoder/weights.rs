//! Quantized weight matrices read straight from a GGUF file, multiplied weight-stationary:
//! each block of weight rows is loaded once and used for every token of the batch.
//!
//! Why not candle's `QMatMul`: its CPU kernel loops over the tokens outside and streams the
//! whole matrix once per token, so verifying 5 drafted tokens costs 5 decode steps and
//! speculation can never pay. Here a batch of m tokens costs about one pass over the weights
//! plus m dot products per row. Each (token, row) dot product is the same computation
//! whatever the batch, so a token's logits do not depend on how many tokens were verified
//! with it — which is what makes greedy speculative output identical to plain decoding.

use std::io::{Read, Seek, SeekFrom};

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::k_quants::{
    BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8K, BlockQ8_0,
    GgmlType,
};
use candle_core::quantized::GgmlDType;
use half::f16;
use rayon::prelude::*;

use super::kernels;

/// Weight rows handed to one task: small enough that a chunk of rows stays in the core's
/// cache while every token of the batch is multiplied with it.
const ROWS_PER_TASK: usize = 16;
/// Tokens multiplied with a task's rows in one pass (a multiple of the Q4_K kernel's tile).
const TOKENS_PER_PASS: usize = 16;
/// The fewest tokens after whole panels that go through the panel kernel as a part panel
/// rather than through the per-token tiles. Measured on the default model (Xeon, AVX-512):
/// a tile of four tokens costs about 0.12 s of passes over the weights, one more panel in a
/// batch about 0.15 s; a batch with no whole panel stays on the tiles (a lone panel pays
/// for unpacking every row, 0.58 s, against 0.14–0.37 s for 4–12 tokens in tiles).
const PADDED_PANEL: usize = 5;

/// A `rows × cols` matrix (GGUF's `[out, in]`), rows stored as quantized blocks.
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    data: Box<dyn Blocks>,
}

trait Blocks: Send + Sync {
    /// A batch of `m` activations (`cols` each) in the format this matrix's kernels take.
    fn prepare(&self, cols: usize, x: &[f32], m: usize) -> Prepared;
    /// Whether `prepared` (made by this or another matrix) is what this one's kernels take.
    fn takes(&self, prepared: &Prepared) -> bool;
    /// Task `task`'s rows (`ROWS_PER_TASK` from `task * ROWS_PER_TASK`) times every token of
    /// `prepared`, gathered by weight row into `dst` (`[row][token]`, rows `stride` apart).
    /// Returns the task's row count and the stride.
    fn task(&self, rows: usize, cols: usize, prepared: &Prepared, task: usize, dst: &mut Vec<f32>) -> (usize, usize);
    fn row(&self, cols: usize, row: usize, out: &mut [f32]);
    /// Bytes of memory the blocks hold.
    fn bytes(&self) -> usize;
}

/// A batch's activations prepared for one format's kernels (a `Batch` of its dot products'
/// type): matrices whose formats take the same (Q4_K and Q6_K both take Q8_K) share one, so
/// q, k and v, or the FFN's gate and up, quantize and lay out their input once.
type Prepared = Box<dyn std::any::Any + Send + Sync>;

/// `m` tokens quantized to `V`, `per_row` blocks each, and laid out in panels where the
/// kernels in use have them for the format that prepared the batch.
struct Batch<V> {
    tokens: Vec<V>,
    per_row: usize,
    m: usize,
    panels: Option<kernels::panels::Panels>,
}

struct Typed<T: RowDot>(Vec<T>);

impl<T: RowDot> Typed<T> {
    /// Whether a batch of `m` tokens goes (partly) through the panel kernel.
    fn panelled(m: usize) -> bool {
        T::panelled() && m >= kernels::panels::PANEL
    }
}

/// `out` of a matmul, shared by the tasks that each write their own rows' columns of it.
struct DisjointRows(*mut f32);
// SAFETY: the tasks write disjoint elements (see `write`'s callers) and nothing reads `out`
// until they are all done.
unsafe impl Sync for DisjointRows {}

impl DisjointRows {
    /// Where `out` starts: a task writes only its own elements of it.
    fn start(&self) -> *mut f32 {
        self.0
    }
}

/// One weight row times every token of the batch. The default is candle's dot product per
/// token; Q4_K and Q6_K, all of a Q4_K_M model's matrices, have kernels that unpack each block
/// once for several tokens (`kernels`).
trait RowDot: GgmlType + 'static {
    /// One token's activations in the format the dot products take.
    fn quantize(x: &[f32], out: &mut [Self::VecDotType]) {
        if Self::DIRECT_COPY {
            Self::VecDotType::direct_copy(x, out);
        } else {
            Self::VecDotType::from_float(x, out);
        }
    }

    fn dot_rows(cols: usize, row: &[Self], tokens: &[&[Self::VecDotType]], out: &mut [f32]) {
        for (o, t) in out.iter_mut().zip(tokens) {
            *o = Self::vec_dot(cols, row, t);
        }
    }

    /// Whether `panel_rows` can run: the format has a panel kernel and the CPU runs it.
    fn panelled() -> bool {
        false
    }

    /// `out[i * m + t] = row i · token t` for a task's `rows` (as blocks) and the tokens of
    /// `panels`, where `panelled`. Gives `dot_rows`'s bits.
    fn panel_rows(_cols: usize, _rows: &[Self], _panels: &kernels::panels::Panels, _out: &mut [f32], _m: usize) {
        unreachable!("{:?} has no panel kernel", Self::DTYPE)
    }
}

impl RowDot for f32 {}
impl RowDot for f16 {}
impl RowDot for BlockQ4_0 {}
impl RowDot for BlockQ4_1 {}
impl RowDot for BlockQ5_0 {}
impl RowDot for BlockQ5_1 {}
/// Q8_0 through Quire's own dispatch (`kernels::q8_0`), which gives candle's x86 bits on every
/// CPU.
impl RowDot for BlockQ8_0 {
    fn dot_rows(_cols: usize, row: &[Self], tokens: &[&[Self::VecDotType]], out: &mut [f32]) {
        for (o, t) in out.iter_mut().zip(tokens) {
            *o = kernels::q8_0::dot(row, t);
        }
    }
}
impl RowDot for BlockQ2K {}
impl RowDot for BlockQ3K {}
impl RowDot for BlockQ5K {}
/// The k-quant formats with their own kernels: tiles of four tokens, and panels of 16 where the
/// set in use has them (`kernels::KernelTable`).
macro_rules! k_quant_row_dot {
    ($block:ty, $kernels:ident, $panels:ident) => {
        impl RowDot for $block {
            fn quantize(x: &[f32], out: &mut [BlockQ8K]) {
                kernels::quantize_q8k(x, out);
            }

            fn dot_rows(_cols: usize, row: &[Self], tokens: &[&[BlockQ8K]], out: &mut [f32]) {
                for (t, o) in tokens.chunks(kernels::TILE).zip(out.chunks_mut(kernels::TILE)) {
                    kernels::$kernels::dot_tile(row, t, o);
                }
            }

            fn panelled() -> bool {
                kernels::in_use().$panels.is_some()
            }

            fn panel_rows(cols: usize, rows: &[Self], panels: &kernels::panels::Panels, out: &mut [f32], m: usize) {
                let panel_kernel = kernels::in_use().$panels.expect("called only where `panelled`");
                // SAFETY: `in_use` picks only sets this CPU runs; the rows hold whole blocks.
                unsafe { panel_kernel(kernels::bytes_of(rows), cols / 256, panels, out, m) }
            }
        }
    };
}
k_quant_row_dot!(BlockQ4K, q4k, q4k_panels);
k_quant_row_dot!(BlockQ6K, q6k, q6k_panels);

impl<T: RowDot> Blocks for Typed<T> {
    fn prepare(&self, cols: usize, x: &[f32], m: usize) -> Prepared {
        let per_row = cols / T::BLCK_SIZE;
        let mut tokens = vec![T::VecDotType::zeros(); m * per_row];
        tokens
            .par_chunks_mut(per_row)
            .enumerate()
            .for_each(|(t, xq_row)| T::quantize(&x[t * cols..(t + 1) * cols], xq_row));
        // Panels of 16 tokens go through the panel kernel where there is one, and after them a
        // last part panel of at least `PADDED_PANEL` tokens (its empty lanes zero, their
        // results dropped); the rest, and everything where there is no panel kernel, through
        // `dot_rows`. Each lane of a panel is one token's own sums, so none of it changes a bit.
        let panels = Self::panelled(m).then(|| {
            let bytes: Vec<&[u8]> = tokens.chunks(per_row).map(kernels::bytes_of).collect();
            let whole =
                if m % kernels::panels::PANEL >= PADDED_PANEL { m.next_multiple_of(kernels::panels::PANEL) } else { m };
            kernels::panels::Panels::new(&bytes, per_row, whole)
        });
        Box::new(Batch { tokens, per_row, m, panels })
    }

    fn takes(&self, prepared: &Prepared) -> bool {
        prepared
            .downcast_ref::<Batch<T::VecDotType>>()
            .is_some_and(|batch| batch.panels.is_some() == Self::panelled(batch.m))
    }

    fn task(&self, rows: usize, cols: usize, prepared: &Prepared, task: usize, dst: &mut Vec<f32>) -> (usize, usize) {
        let batch = prepared.downcast_ref::<Batch<T::VecDotType>>().expect("a batch this format takes (`takes`)");
        let (per_row, m) = (batch.per_row, batch.m);
        debug_assert_eq!(per_row, cols / T::BLCK_SIZE);
        // Lanes of the panels (a part panel's empty ones too): the gathered rows' length.
        let lanes = batch.panels.as_ref().map_or(0, |p| p.panels * kernels::panels::PANEL);
        let (stride, panelled) = (m.max(lanes), lanes.min(m));
        let first = task * ROWS_PER_TASK;
        let rows_here = ROWS_PER_TASK.min(rows - first);
        dst.clear();
        dst.resize(rows_here * stride, 0.0);
        if let Some(panels) = &batch.panels {
            T::panel_rows(cols, &self.0[first * per_row..(first + rows_here) * per_row], panels, dst, stride);
        }
        // Tokens in passes, so a pass's activations stay in cache across the task's rows:
        // over all m tokens at once, a long prompt's activations (2.6 MB for a 256-token
        // block of the FFN's down projection) were read again from memory for every row.
        let token = |t: usize| &batch.tokens[t * per_row..(t + 1) * per_row];
        for t0 in (panelled..m).step_by(TOKENS_PER_PASS) {
            let t1 = (t0 + TOKENS_PER_PASS).min(m);
            let mut pass: [&[T::VecDotType]; TOKENS_PER_PASS] = [&[]; TOKENS_PER_PASS];
            for (slot, t) in pass.iter_mut().zip(t0..t1) {
                *slot = token(t);
            }
            for i in 0..rows_here {
                let w = &self.0[(first + i) * per_row..(first + i + 1) * per_row];
                T::dot_rows(cols, w, &pass[..t1 - t0], &mut dst[i * stride + t0..i * stride + t1]);
            }
        }
        (rows_here, stride)
    }

    fn row(&self, cols: usize, row: usize, out: &mut [f32]) {
        let per_row = cols / T::BLCK_SIZE;
        T::to_float(&self.0[row * per_row..(row + 1) * per_row], out);
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(self.0.as_slice())
    }
}

/// `x` prepared for each of `matrices`: the batches made, and which one each matrix takes (a
/// matrix takes the first batch made before it that its format takes, else makes its own).
fn prepare_shared(matrices: &[&Matrix], x: &[f32], m: usize) -> (Vec<Prepared>, Vec<usize>) {
    let mut prepared: Vec<Prepared> = Vec::new();
    let mut batch_of = Vec::with_capacity(matrices.len());
    for matrix in matrices {
        let index = match prepared.iter().position(|batch| matrix.data.takes(batch)) {
            Some(index) => index,
            None => {
                prepared.push(matrix.data.prepare(matrix.cols, x, m));
                prepared.len() - 1
            }
        };
        batch_of.push(index);
    }
    (prepared, batch_of)
}

/// Moves a task's results from `src[i * stride + t]` (its `rows_here` weight rows by the `m`
/// tokens) to `out[t * rows + i]`, in 8 × 8 squares transposed in registers where it can: one
/// value at a time this was 5 % of a prompt's time.
///
/// # Safety
/// `out` must be valid for writes at `t * rows + i` for every t < m and i < rows_here, and
/// `src` hold `rows_here * stride` values with m ≤ stride.
unsafe fn move_results(src: &[f32], stride: usize, rows_here: usize, m: usize, out: *mut f32, rows: usize) {
    debug_assert!(m <= stride && src.len() >= rows_here * stride);
    let src = src.as_ptr();
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    let (square_rows, square_tokens) = (rows_here / 8 * 8, m / 8 * 8);
    #[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
    for i in (0..square_rows).step_by(8) {
        for t in (0..square_tokens).step_by(8) {
            transpose_8x8(src.add(i * stride + t), stride, out.add(t * rows + i), rows);
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "avx2")))]
    let (square_rows, square_tokens) = (0, 0);
    for i in 0..rows_here {
        let tokens = if i < square_rows { square_tokens } else { 0 };
        for t in tokens..m {
            *out.add(t * rows + i) = *src.add(i * stride + t);
        }
    }
}

/// `to[c * to_stride + r] = from[r * from_stride + c]` for r, c < 8.
#[cfg(all(target_arch = "x86_64", target_feature = "avx2"))]
#[inline(always)]
unsafe fn transpose_8x8(from: *const f32, from_stride: usize, to: *mut f32, to_stride: usize) {
    use std::arch::x86_64::*;
    let r: [__m256; 8] = std::array::from_fn(|k| _mm256_loadu_ps(from.add(k * from_stride)));
    // Pairs of rows interleaved, then quadruples, then the 128-bit halves swapped into place.
    let a: [__m256; 8] = std::array::from_fn(|k| {
        let (x, y) = (r[k / 2 * 2], r[k / 2 * 2 + 1]);
        if k % 2 == 0 {
            _mm256_unpacklo_ps(x, y)
        } else {
            _mm256_unpackhi_ps(x, y)
        }
    });
    // b[4g + j]: rows 4g..4g + 4 of columns j and j + 4.
    let b: [__m256; 8] = std::array::from_fn(|k| {
        let (g, j) = (k / 4, k % 4);
        let (x, y) = (a[4 * g + j / 2], a[4 * g + j / 2 + 2]);
        if j % 2 == 0 {
            _mm256_shuffle_ps::<0x44>(x, y)
        } else {
            _mm256_shuffle_ps::<0xEE>(x, y)
        }
    });
    for c in 0..8 {
        // Column c: b[c % 4] (rows 0..4) and b[4 + c % 4] (rows 4..8), their halves by c / 4.
        let (low, high) = (b[c % 4], b[4 + c % 4]);
        let column =
            if c < 4 { _mm256_permute2f128_ps::<0x20>(low, high) } else { _mm256_permute2f128_ps::<0x31>(low, high) };
        _mm256_storeu_ps(to.add(c * to_stride), column);
    }
}

impl Matrix {
    /// `out[t][r] = Σ_c W[r][c] · x[t][c]` for the `m` rows of `x` (each `cols` long).
    pub fn matmul(&self, x: &[f32], m: usize, out: &mut [f32]) {
        Matrix::matmuls(&mut [(self, out)], x, m);
    }

    /// Each matrix's `matmul` with the same `x` (q, k and v of a layer): the activations are
    /// prepared once for the matrices whose formats take the same, and the tasks of all run in
    /// one parallel loop (one wait for the slowest task rather than one per matrix). Each
    /// result is `matmul`'s, bit for bit.
    pub fn matmuls(parts: &mut [(&Matrix, &mut [f32])], x: &[f32], m: usize) {
        let Some(cols) = parts.first().map(|(matrix, _)| matrix.cols) else { return };
        assert_eq!(x.len(), m * cols, "the activations are m × cols");
        for (matrix, out) in parts.iter() {
            assert_eq!(matrix.cols, cols, "the matrices multiply the same activations");
            assert_eq!(out.len(), m * matrix.rows, "a matmul's output holds m × rows values");
        }
        let matrices: Vec<&Matrix> = parts.iter().map(|(matrix, _)| *matrix).collect();
        let (prepared, batch_of) = prepare_shared(&matrices, x, m);
        let outs: Vec<DisjointRows> = parts.iter_mut().map(|(_, out)| DisjointRows(out.as_mut_ptr())).collect();
        let tasks: Vec<(usize, usize)> = matrices
            .iter()
            .enumerate()
            .flat_map(|(p, matrix)| (0..matrix.rows.div_ceil(ROWS_PER_TASK)).map(move |task| (p, task)))
            .collect();
        tasks.into_par_iter().for_each(|(p, task)| {
            let matrix = matrices[p];
            let mut dst = Vec::new();
            let (rows_here, stride) = matrix.data.task(matrix.rows, cols, &prepared[batch_of[p]], task, &mut dst);
            // SAFETY: part p's output holds m × rows floats and this task alone writes its
            // columns task * ROWS_PER_TASK.. + rows_here; `dst` holds rows_here × stride ≥ m.
            unsafe { move_results(&dst, stride, rows_here, m, outs[p].start().add(task * ROWS_PER_TASK), matrix.rows) };
        });
    }

    /// `out = SiLU(gate · x) × (up · x)` (the FFN's gated product, element by element): each
    /// task multiplies the same rows of both matrices and combines them while they are in its
    /// cache, so the up projection is never written out whole. Bit for bit `matmul` of each
    /// then `quire_simd::silu_mul`.
    pub fn gated(gate: &Matrix, up: &Matrix, x: &[f32], m: usize, out: &mut [f32]) {
        assert!(gate.rows == up.rows && gate.cols == up.cols, "the gate and up projections have one shape");
        let (rows, cols) = (gate.rows, gate.cols);
        assert_eq!(x.len(), m * cols, "the activations are m × cols");
        assert_eq!(out.len(), m * rows, "the gated product holds m × rows values");
        let (prepared, batch_of) = prepare_shared(&[gate, up], x, m);
        let out_rows = DisjointRows(out.as_mut_ptr());
        (0..rows.div_ceil(ROWS_PER_TASK)).into_par_iter().for_each(|task| {
            let (mut gated, mut ups) = (Vec::new(), Vec::new());
            let (rows_here, stride) = gate.data.task(rows, cols, &prepared[batch_of[0]], task, &mut gated);
            let (_, up_stride) = up.data.task(rows, cols, &prepared[batch_of[1]], task, &mut ups);
            if stride == up_stride {
                // All rows in one call (a decode step's rows are a token or a few long, too
                // short for the vector loop one at a time); a panel's empty lanes are zeros.
                quire_simd::silu_mul(&mut gated[..rows_here * stride], &ups[..rows_here * stride]);
            } else {
                for i in 0..rows_here {
                    let (g, u) = (&mut gated[i * stride..i * stride + m], &ups[i * up_stride..i * up_stride + m]);
                    quire_simd::silu_mul(g, u);
                }
            }
            // SAFETY: as in `matmuls`, for the one output.
            unsafe { move_results(&gated, stride, rows_here, m, out_rows.start().add(task * ROWS_PER_TASK), rows) };
        });
    }

    /// One row as floats (the embedding lookup).
    pub fn row(&self, row: usize, out: &mut [f32]) {
        self.data.row(self.cols, row, out);
    }

    /// Bytes of memory the matrix holds.
    pub fn bytes(&self) -> usize {
        self.data.bytes()
    }
}

/// Whether the decoder keeps a tensor as Q8_0 rather than as stored: matrices in a format whose
/// dot product has no SIMD kernel in candle (Q4_1, Q5_0, Q5_1, F16). Q8_0 has one: 4-5× faster
/// on AVX2, at 8 bits per weight against the file's 5-6 (the re-quantization error is far below
/// the file's own). The draft model (Qwen2.5-0.5B is mostly Q5_0) and the tiny test model need
/// this. `ModelFootprint` counts memory by the same rule.
pub fn widened_to_q8_0(dtype: GgmlDType, dims: &[usize]) -> bool {
    matches!(dtype, GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1 | GgmlDType::F16)
        && dims.len() == 2
        && dims[1].is_multiple_of(32)
}

/// Reads a tensor, widened to Q8_0 where `widened_to_q8_0` says so.
fn read_maybe_widened<T: RowDot, R: Read + Seek>(
    reader: &mut R,
    offset: u64,
    dims: &[usize],
    rows: usize,
    cols: usize,
) -> Result<Box<dyn Blocks>> {
    let source = read_blocks::<T, R>(reader, offset, rows * cols)?;
    if !widened_to_q8_0(T::DTYPE, dims) {
        return Ok(source);
    }
    let mut blocks = vec![BlockQ8_0::zeros(); rows * cols / 32];
    let mut row = vec![0f32; cols];
    for (r, out) in blocks.chunks_mut(cols / 32).enumerate() {
        source.row(cols, r, &mut row);
        BlockQ8_0::from_float(&row, out);
    }
    Ok(Box::new(Typed(blocks)))
}

/// Reads a tensor's raw blocks into typed memory.
fn read_blocks<T: RowDot, R: Read + Seek>(reader: &mut R, offset: u64, elements: usize) -> Result<Box<dyn Blocks>> {
    if !elements.is_multiple_of(T::BLCK_SIZE) {
        bail!("{elements} values do not fill whole {:?} blocks", T::DTYPE);
    }
    let mut blocks = vec![T::zeros(); elements / T::BLCK_SIZE];
    let bytes = blocks.len() * std::mem::size_of::<T>();
    // SAFETY: the block types are plain `repr(C)` data (integers and halves) for which every
    // bit pattern is a value; the slice covers exactly the vector's initialised memory.
    let raw = unsafe { std::slice::from_raw_parts_mut(blocks.as_mut_ptr() as *mut u8, bytes) };
    reader.seek(SeekFrom::Start(offset))?;
    reader.read_exact(raw)?;
    Ok(Box::new(Typed(blocks)))
}

/// Loads the named tensor as a matrix (a 1-d tensor becomes one row).
pub fn load<R: Read + Seek>(content: &Content, reader: &mut R, name: &str) -> Result<Matrix> {
    let info = content.tensor_infos.get(name).with_context(|| format!("the model has no tensor {name}"))?;
    let dims = info.shape.dims();
    let (rows, cols) = match dims {
        [n] => (1, *n),
        [r, c] => (*r, *c),
        _ => bail!("tensor {name} has shape {dims:?}, expected 1 or 2 dimensions"),
    };
    let offset = content.tensor_data_offset + info.offset;
    let n = rows * cols;
    let data = match info.ggml_dtype {
        GgmlDType::F32 => read_blocks::<f32, _>(reader, offset, n)?,
        // Matrices without a fast kernel go where there is one; vectors stay as they are.
        GgmlDType::F16 => read_maybe_widened::<f16, _>(reader, offset, dims, rows, cols)?,
        GgmlDType::Q4_0 => read_blocks::<BlockQ4_0, _>(reader, offset, n)?,
        GgmlDType::Q4_1 => read_maybe_widened::<BlockQ4_1, _>(reader, offset, dims, rows, cols)?,
        GgmlDType::Q5_0 => read_maybe_widened::<BlockQ5_0, _>(reader, offset, dims, rows, cols)?,
        GgmlDType::Q5_1 => read_maybe_widened::<BlockQ5_1, _>(reader, offset, dims, rows, cols)?,
        GgmlDType::Q8_0 => read_blocks::<BlockQ8_0, _>(reader, offset, n)?,
        GgmlDType::Q2K => read_blocks::<BlockQ2K, _>(reader, offset, n)?,
        GgmlDType::Q3K => read_blocks::<BlockQ3K, _>(reader, offset, n)?,
        GgmlDType::Q4K => read_blocks::<BlockQ4K, _>(reader, offset, n)?,
        GgmlDType::Q5K => read_blocks::<BlockQ5K, _>(reader, offset, n)?,
        GgmlDType::Q6K => read_blocks::<BlockQ6K, _>(reader, offset, n)?,
        other => bail!("tensor {name} is stored as {other:?}, which Quire's decoder does not read"),
    };
    Ok(Matrix { rows, cols, data })
}

/// Loads a 1-d tensor (norm weights, biases) as floats.
pub fn load_vector<R: Read + Seek>(content: &Content, reader: &mut R, name: &str) -> Result<Vec<f32>> {
    let matrix = load(content, reader, name)?;
    if matrix.rows != 1 {
        bail!("tensor {name} should be a vector");
    }
    let mut out = vec![0f32; matrix.cols];
    matrix.row(0, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(values: &[f32], rows: usize, cols: usize) -> Matrix {
        let mut blocks = vec![BlockQ8_0::zeros(); rows * cols / 32];
        BlockQ8_0::from_float(values, &mut blocks);
        Matrix { rows, cols, data: Box::new(Typed(blocks)) }
    }

    #[test]
    fn batched_rows_equal_one_token_at_a_time_bit_for_bit() {
        let (rows, cols, m) = (40, 64, 5);
        let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
        let x: Vec<f32> = (0..m * cols).map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0).collect();
        let matrix = typed(&w, rows, cols);
        let mut batched = vec![0f32; m * rows];
        matrix.matmul(&x, m, &mut batched);
        for t in 0..m {
            let mut single = vec![0f32; rows];
            matrix.matmul(&x[t * cols..(t + 1) * cols], 1, &mut single);
            assert_eq!(&batched[t * rows..(t + 1) * rows], &single[..], "token {t}");
            // And close to the float product: both sides are rounded to 8 bits (±1/254 of each
            // block's largest value), so the error stays within 2 % of Σ|w·x|.
            for r in 0..rows {
                let exact: f32 = (0..cols).map(|c| w[r * cols + c] * x[t * cols + c]).sum();
                let magnitude: f32 = (0..cols).map(|c| (w[r * cols + c] * x[t * cols + c]).abs()).sum();
                assert!((single[r] - exact).abs() < 0.02 * magnitude, "{} vs {exact}", single[r]);
            }
        }
    }

    /// Prompt-sized batches (panels of 16 and a rest that fills a part panel or goes through
    /// the tiles) and a verification-sized one (tiles alone) of Q4_K and Q6_K rows against the
    /// same tokens one at a time: the panel and per-token kernels must agree bit for bit, or a
    /// prompt's logits would depend on how it was cut into batches.
    #[test]
    fn k_quant_batches_equal_one_token_at_a_time_bit_for_bit() {
        fn check<T: RowDot<VecDotType = BlockQ8K>>(m: usize) {
            let (rows, cols) = (24, 512);
            let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 300.0).collect();
            let x: Vec<f32> = (0..m * cols).map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0).collect();
            let mut blocks = vec![T::zeros(); rows * cols / 256];
            T::from_float(&w, &mut blocks);
            let matrix = Matrix { rows, cols, data: Box::new(Typed(blocks)) };
            let mut batched = vec![0f32; m * rows];
            matrix.matmul(&x, m, &mut batched);
            for t in 0..m {
                let mut single = vec![0f32; rows];
                matrix.matmul(&x[t * cols..(t + 1) * cols], 1, &mut single);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&batched[t * rows..(t + 1) * rows]), bits(&single), "{:?} token {t}", T::DTYPE);
            }
        }
        for m in [37, 34, 21, 7] {
            check::<BlockQ4K>(m);
            check::<BlockQ6K>(m);
        }
    }

    /// Several matrices sharing one prepared input (Q4_K and Q6_K take the same; Q8_0 its own)
    /// and the gated product give each matrix's own `matmul` bit for bit, and the gate's SiLU
    /// times the up projection as `quire_simd::silu_mul` gives it: for a prompt-sized batch
    /// (panels and a rest) and a verification-sized one (tiles alone).
    #[test]
    fn shared_inputs_and_the_gated_product_equal_separate_matmuls_bit_for_bit() {
        fn matrix<T: RowDot>(rows: usize, cols: usize, seed: usize) -> Matrix {
            let w: Vec<f32> = (0..rows * cols).map(|i| ((i * 7919 + seed) % 1013) as f32 / 300.0 - 1.7).collect();
            let mut blocks = vec![T::zeros(); rows * cols / T::BLCK_SIZE];
            T::from_float(&w, &mut blocks);
            Matrix { rows, cols, data: Box::new(Typed(blocks)) }
        }
        let cols = 512;
        let (a, b, c) =
            (matrix::<BlockQ4K>(40, cols, 1), matrix::<BlockQ6K>(24, cols, 2), matrix::<BlockQ8_0>(8, cols, 3));
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for m in [37, 6] {
            let x: Vec<f32> = (0..m * cols).map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0).collect();
            let alone = |matrix: &Matrix| {
                let mut out = vec![0f32; m * matrix.rows];
                matrix.matmul(&x, m, &mut out);
                out
            };
            let (mut oa, mut ob, mut oc) = (vec![0f32; m * a.rows], vec![0f32; m * b.rows], vec![0f32; m * c.rows]);
            Matrix::matmuls(&mut [(&a, &mut oa), (&b, &mut ob), (&c, &mut oc)], &x, m);
            assert_eq!(bits(&oa), bits(&alone(&a)), "m = {m}: Q4_K beside others");
            assert_eq!(bits(&ob), bits(&alone(&b)), "m = {m}: Q6_K on Q4_K's batch");
            assert_eq!(bits(&oc), bits(&alone(&c)), "m = {m}: Q8_0 on its own batch");

            // An up projection on the gate's batch, and one on its own (rows laid out apart).
            for up in [matrix::<BlockQ6K>(a.rows, cols, 4), matrix::<BlockQ8_0>(a.rows, cols, 5)] {
                let (mut gate, ups) = (alone(&a), alone(&up));
                quire_simd::silu_mul(&mut gate, &ups);
                let mut gated = vec![0f32; m * a.rows];
                Matrix::gated(&a, &up, &x, m, &mut gated);
                assert_eq!(bits(&gated), bits(&gate), "m = {m}: the gated product");
            }
        }
    }

    /// The move of a task's results to the batch's output, squares and edges, against the
    /// definition (a wrong square would also show in the batch tests above).
    #[test]
    fn results_move_to_token_major_order() {
        for (rows_here, m, stride) in [(16, 37, 48), (13, 19, 21), (8, 8, 8), (3, 5, 5)] {
            let src: Vec<f32> = (0..rows_here * stride).map(|v| v as f32).collect();
            let rows = rows_here + 5;
            let mut out = vec![f32::NAN; m * rows];
            // Columns 2.. of the output, as a task whose first row is 2 writes them.
            // SAFETY: `out` has room for `rows` rows of `m` from column 2 on; `src` holds the task's results.
            unsafe { move_results(&src, stride, rows_here, m, out.as_mut_ptr().add(2), rows) };
            for t in 0..m {
                for r in 0..rows {
                    let expected = if (2..2 + rows_here).contains(&r) { src[(r - 2) * stride + t] } else { f32::NAN };
                    assert_eq!(out[t * rows + r].to_bits(), expected.to_bits(), "token {t} column {r}");
                }
            }
        }
    }

    #[test]
    fn a_row_reads_back_its_values() {
        let (rows, cols) = (3, 32);
        let w: Vec<f32> = (0..rows * cols).map(|i| i as f32 / 10.0).collect();
        let matrix = typed(&w, rows, cols);
        let mut row = vec![0f32; cols];
        matrix.row(2, &mut row);
        for c in 0..cols {
            assert!((row[c] - w[2 * cols + c]).abs() < 0.05, "{} vs {}", row[c], w[2 * cols + c]);
        }
    }
}
