//! The network's layers other than the dense ones: convolutions over patches and depthwise,
//! pools, activations, channels joined. Plain loops the compiler vectorizes, no fused
//! multiply-adds and no libm: the same bits on every CPU.

use rten_simd::SimdUnaryOp;

use super::{spare, Conv, Depthwise, Layer, Map, BAND};

pub(super) fn relu(mut map: Map) -> Map {
    map.data.iter_mut().for_each(|v| *v = v.max(0.0));
    map
}

pub(super) fn hard_sigmoid(v: f32, alpha: f32, beta: f32) -> f32 {
    (v * alpha + beta).clamp(0.0, 1.0)
}

/// `x · sigmoid(x)`, by rten's vectorized kernel.
pub(super) fn swish(values: &mut [f32]) {
    rten_vecmath::Silu {}.map_mut(values);
}

/// `pointwise`, the input's buffer given back after.
pub(super) fn pointwise_consuming(layer: &Layer, input: Map) -> Map {
    let out = pointwise(layer, &input);
    spare::give(input.data);
    out
}

pub(super) fn pointwise(layer: &Layer, input: &Map) -> Map {
    Map {
        height: input.height,
        width: input.width,
        channels: layer.outputs,
        data: layer.forward(&input.data, input.pixels()),
    }
}

pub(super) fn output_size(size: usize, kernel: usize, stride: usize, before: usize, after: usize) -> usize {
    (size + before + after - kernel) / stride + 1
}

/// A convolution as a dense layer over its patches, each laid out `[ky][kx][c]`, a band of
/// output pixels at a time (the band's patches stay in cache).
pub(super) fn conv(c: &Conv, input: &Map) -> Map {
    let (kh, kw) = c.kernel;
    let [top, left, bottom, right] = c.pads;
    let height = output_size(input.height, kh, c.stride.0, top, bottom);
    let width = output_size(input.width, kw, c.stride.1, left, right);
    let (patch, channels) = (kh * kw * input.channels, c.layer.outputs);
    let mut data = spare::take(height * width * channels);
    let mut patches = Vec::new();
    for (band, out) in data.chunks_mut(BAND * channels).enumerate() {
        let first = band * BAND;
        let pixels = out.len() / channels;
        patches.clear();
        patches.resize(pixels * patch, 0f32);
        for (p, row) in patches.chunks_exact_mut(patch).enumerate() {
            let (y, x) = ((first + p) / width, (first + p) % width);
            for ky in 0..kh {
                let Some(iy) = (y * c.stride.0 + ky).checked_sub(top).filter(|&iy| iy < input.height) else { continue };
                for kx in 0..kw {
                    let Some(ix) = (x * c.stride.1 + kx).checked_sub(left).filter(|&ix| ix < input.width) else {
                        continue;
                    };
                    let from = &input.data[(iy * input.width + ix) * input.channels..][..input.channels];
                    row[(ky * kw + kx) * input.channels..][..input.channels].copy_from_slice(from);
                }
            }
        }
        c.layer.forward_into(&patches, pixels, out);
    }
    Map { height, width, channels, data }
}

/// A depthwise convolution. Rows above and below the map read a row of zeros; columns off
/// its sides are left out of the pixels at the edges (`depthwise_edge_pixel`), so the pixels
/// in between read every tap where it lies (`depthwise_pixel`).
pub(super) fn depthwise(d: &Depthwise, input: &Map) -> Map {
    let (kh, kw) = d.kernel;
    let [top, left, bottom, right] = d.pads;
    let channels = input.channels;
    let height = output_size(input.height, kh, d.stride.0, top, bottom);
    let width = output_size(input.width, kw, d.stride.1, left, right);
    assert!(d.stride.1 == 1 && left < kw && right < kw, "depthwise convolutions here step 1 across");
    let mut zeros = spare::take(input.width * channels);
    zeros.fill(0.0);
    let mut data = spare::take(height * width * channels);
    let mut rows: Vec<&[f32]> = Vec::with_capacity(kh);
    for (y, out_row) in data.chunks_exact_mut(width * channels).enumerate() {
        rows.clear();
        rows.extend((0..kh).map(|ky| match (y * d.stride.0 + ky).checked_sub(top).filter(|&iy| iy < input.height) {
            Some(iy) => &input.data[iy * input.width * channels..][..input.width * channels],
            None => &zeros[..],
        }));
        // Output x reads input columns x − left ..= x − left + kw − 1: all on the map for
        // x in left ..= input width + left − kw.
        let inside = left..(input.width + left + 1).saturating_sub(kw).max(left);
        for (x, out) in out_row.chunks_exact_mut(channels).enumerate() {
            if inside.contains(&x) {
                depthwise_pixel(d, &rows, x - left, out);
            } else {
                depthwise_edge_pixel(d, &rows, x as isize - left as isize, input.width, out);
            }
        }
    }
    drop(rows);
    spare::give(zeros);
    Map { height, width, channels, data }
}

/// A pixel at the edge of a depthwise convolution: its taps from column `x` (which may be
/// off the map, as may the next ones) only where they lie on the map's `width` columns.
pub(super) fn depthwise_edge_pixel(d: &Depthwise, rows: &[&[f32]], x: isize, width: usize, out: &mut [f32]) {
    let (c, kw) = (d.bias.len(), d.kernel.1);
    out.copy_from_slice(&d.bias);
    for (ky, row) in rows.iter().enumerate() {
        for kx in 0..kw {
            let column = x + kx as isize;
            if column < 0 || column >= width as isize {
                continue;
            }
            let (a, w) = (&row[column as usize * c..][..c], &d.weight[(ky * kw + kx) * c..][..c]);
            for ((o, a), w) in out.iter_mut().zip(a).zip(w) {
                *o = a.mul_add(*w, *o);
            }
        }
    }
}

/// One output pixel of a depthwise convolution, its taps read from the rows at columns `x`
/// onwards, all on the map. 3 × 3 kernels (the backbone's) go through all nine taps per channel in one
/// run along the channels, so the compiler vectorizes across channels with nine independent
/// values in flight; other kernels (the neck's 1 × 7) tap by tap.
pub(super) fn depthwise_pixel(d: &Depthwise, rows: &[&[f32]], x: usize, out: &mut [f32]) {
    let c = d.bias.len();
    let kw = d.kernel.1;
    let tap = |ky: usize, kx: usize| (&rows[ky][(x + kx) * c..][..c], &d.weight[(ky * kw + kx) * c..][..c]);
    if d.kernel == (3, 3) {
        let [(a0, w0), (a1, w1), (a2, w2)] = [0, 1, 2].map(|kx| tap(0, kx));
        let [(b0, v0), (b1, v1), (b2, v2)] = [0, 1, 2].map(|kx| tap(1, kx));
        let [(c0, u0), (c1, u1), (c2, u2)] = [0, 1, 2].map(|kx| tap(2, kx));
        let out = &mut out[..c];
        for i in 0..c {
            let mut s = d.bias[i];
            s = a0[i].mul_add(w0[i], s);
            s = a1[i].mul_add(w1[i], s);
            s = a2[i].mul_add(w2[i], s);
            s = b0[i].mul_add(v0[i], s);
            s = b1[i].mul_add(v1[i], s);
            s = b2[i].mul_add(v2[i], s);
            s = c0[i].mul_add(u0[i], s);
            s = c1[i].mul_add(u1[i], s);
            s = c2[i].mul_add(u2[i], s);
            out[i] = s;
        }
        return;
    }
    out.copy_from_slice(&d.bias);
    for ky in 0..rows.len() {
        for kx in 0..kw {
            let (a, w) = tap(ky, kx);
            for ((o, a), w) in out.iter_mut().zip(a).zip(w) {
                *o = a.mul_add(*w, *o);
            }
        }
    }
}

/// 2×2 max pool, stride 1, padded at the bottom and right (`SAME_UPPER`): the same size out.
pub(super) fn max_pool_2x2(input: &Map) -> Map {
    let (h, w, c) = (input.height, input.width, input.channels);
    let mut data = spare::take(input.data.len());
    data.copy_from_slice(&input.data);
    for y in 0..h {
        for x in 0..w {
            let out = &mut data[(y * w + x) * c..][..c];
            for (dy, dx) in [(0, 1), (1, 0), (1, 1)] {
                if y + dy < h && x + dx < w {
                    let other = &input.data[((y + dy) * w + x + dx) * c..][..c];
                    out.iter_mut().zip(other).for_each(|(o, v)| *o = o.max(*v));
                }
            }
        }
    }
    Map { data, ..*input }
}

/// 3 high × 2 wide average pool, stride 3 × 2, no padding.
pub(super) fn average_pool_3x2(input: &Map) -> Map {
    let (c, height, width) = (input.channels, input.height / 3, input.width / 2);
    let mut data = vec![0f32; height * width * c];
    for y in 0..height {
        for x in 0..width {
            let out = &mut data[(y * width + x) * c..][..c];
            for dy in 0..3 {
                for dx in 0..2 {
                    let from = &input.data[((3 * y + dy) * input.width + 2 * x + dx) * c..][..c];
                    out.iter_mut().zip(from).for_each(|(o, v)| *o += v);
                }
            }
            out.iter_mut().for_each(|o| *o /= 6.0);
        }
    }
    Map { height, width, channels: c, data }
}

pub(super) fn concat(a: &Map, b: &Map) -> Map {
    let channels = a.channels + b.channels;
    let mut data = spare::take(a.pixels() * channels);
    let pixels = a.data.chunks_exact(a.channels).zip(b.data.chunks_exact(b.channels));
    for (out, (pa, pb)) in data.chunks_exact_mut(channels).zip(pixels) {
        out[..a.channels].copy_from_slice(pa);
        out[a.channels..].copy_from_slice(pb);
    }
    Map { height: a.height, width: a.width, channels, data }
}
