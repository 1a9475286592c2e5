//! Text detection: PP-OCR's DB detector and its post-processing.

use anyhow::{Context, Result};
use image::RgbImage;
use rten_tensor::prelude::*;
use rten_tensor::NdTensor;

use crate::Quad;

/// The detector sees the page with its long side at most this many pixels (then rounded to a
/// multiple of 32, as the network needs): a letter page comes down to ~93 dpi. On the
/// benchmark's scans (`quire bench ocr`) 1,024, 1,152 and 1,280 read alike (CER 2.34, 2.33 and
/// 2.35 % at 150 dpi with noise, 2.35, 2.37 and 2.32 % at 300 dpi clean) and detection took 0.41,
/// 0.55 and 0.66 s a page: detection is a third of a page's time, so the smallest.
pub(crate) const DETECT_LONG_SIDE: f32 = 1024.0;
/// A pixel is text where the map says more than this (PaddleOCR's `thresh`).
const PIXEL_THRESHOLD: f32 = 0.3;
/// A region is a line when its mean probability is at least this (PaddleOCR's `box_thresh`).
const REGION_THRESHOLD: f32 = 0.6;
/// How far a kernel is grown back to the line's box (PaddleOCR's `unclip_ratio`).
const UNCLIP_RATIO: f32 = 1.5;
const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

/// The boxes of the text lines on `page`, in its pixels, in no particular order.
pub(crate) fn text_boxes(detector: &rten::Model, page: &RgbImage) -> Result<Vec<Quad>> {
    let (w, h) = page.dimensions();
    let scale = (DETECT_LONG_SIDE / w.max(h) as f32).min(1.0);
    let to_32 = |v: f32| ((v / 32.0).round().max(1.0) as usize) * 32;
    let (dw, dh) = (to_32(w as f32 * scale), to_32(h as f32 * scale));
    let small = image::imageops::resize(page, dw as u32, dh as u32, image::imageops::FilterType::Triangle);
    let mut input = NdTensor::<f32, 4>::zeros([1, 3, dh, dw]);
    for (x, y, pixel) in small.enumerate_pixels() {
        // The models were trained on BGR images (OpenCV's order).
        for c in 0..3 {
            let v = pixel.0[2 - c] as f32 / 255.0;
            input[[0, c, y as usize, x as usize]] = (v - IMAGENET_MEAN[c]) / IMAGENET_STD[c];
        }
    }
    let output = detector.run_one(input.into(), None).context("the OCR detector failed")?;
    let map: NdTensor<f32, 4> = output.try_into().context("the OCR detector gave an unexpected output")?;
    let [_, _, mh, mw] = map.shape();
    let map = map.slice([0, 0]);
    let (sx, sy) = (w as f32 / mw as f32, h as f32 / mh as f32);
    let mut boxes = Vec::new();
    for region in regions(mw, mh, |x, y| map[[y, x]]) {
        if region.mean < REGION_THRESHOLD || region.pixels.len() < 6 {
            continue;
        }
        if let Some(Quad(corners)) = line_box(&region.pixels) {
            boxes.push(Quad(corners.map(|(x, y)| (x * sx, y * sy))));
        }
    }
    Ok(boxes)
}

struct Region {
    pixels: Vec<(usize, usize)>,
    mean: f32,
}

/// The 4-connected regions of the map above `PIXEL_THRESHOLD`, with their mean probability.
fn regions(width: usize, height: usize, probability: impl Fn(usize, usize) -> f32) -> Vec<Region> {
    let mut seen = vec![false; width * height];
    let mut found = Vec::new();
    let mut stack = Vec::new();
    for y0 in 0..height {
        for x0 in 0..width {
            if seen[y0 * width + x0] || probability(x0, y0) <= PIXEL_THRESHOLD {
                continue;
            }
            seen[y0 * width + x0] = true;
            stack.push((x0, y0));
            let (mut pixels, mut sum) = (Vec::new(), 0.0f32);
            while let Some((x, y)) = stack.pop() {
                sum += probability(x, y);
                pixels.push((x, y));
                let neighbours = [(x.wrapping_sub(1), y), (x + 1, y), (x, y.wrapping_sub(1)), (x, y + 1)];
                for (nx, ny) in neighbours {
                    if nx < width && ny < height && !seen[ny * width + nx] && probability(nx, ny) > PIXEL_THRESHOLD {
                        seen[ny * width + nx] = true;
                        stack.push((nx, ny));
                    }
                }
            }
            let mean = sum / pixels.len() as f32;
            found.push(Region { pixels, mean });
        }
    }
    found
}

/// The box of a line from its kernel's pixels: the direction of the pixels' second moments (a
/// line is longer than it is high, so within ±45° of horizontal), the extent along and across
/// it, grown by DB's unclip distance (area × ratio / perimeter) on every side.
fn line_box(pixels: &[(usize, usize)]) -> Option<Quad> {
    let n = pixels.len() as f32;
    let (sum_x, sum_y) = pixels.iter().fold((0.0, 0.0), |(a, b), &(x, y)| (a + x as f32, b + y as f32));
    let (cx, cy) = (sum_x / n + 0.5, sum_y / n + 0.5);
    let (mut sxx, mut syy, mut sxy) = (0.0f32, 0.0f32, 0.0f32);
    for &(x, y) in pixels {
        let (dx, dy) = (x as f32 + 0.5 - cx, y as f32 + 0.5 - cy);
        sxx += dx * dx;
        syy += dy * dy;
        sxy += dx * dy;
    }
    let mut angle = 0.5 * (2.0 * sxy).atan2(sxx - syy);
    use std::f32::consts::{FRAC_PI_2, FRAC_PI_4};
    if angle > FRAC_PI_4 {
        angle -= FRAC_PI_2;
    } else if angle < -FRAC_PI_4 {
        angle += FRAC_PI_2;
    }
    let along = (angle.cos(), angle.sin());
    let across = (-angle.sin(), angle.cos());
    let (mut a0, mut a1, mut b0, mut b1) = (f32::MAX, f32::MIN, f32::MAX, f32::MIN);
    for &(x, y) in pixels {
        // Each pixel is a unit square: its four corners bound the region.
        for (ox, oy) in [(0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)] {
            let (dx, dy) = (x as f32 + ox - cx, y as f32 + oy - cy);
            let (a, b) = (dx * along.0 + dy * along.1, dx * across.0 + dy * across.1);
            (a0, a1, b0, b1) = (a0.min(a), a1.max(a), b0.min(b), b1.max(b));
        }
    }
    let (length, thickness) = (a1 - a0, b1 - b0);
    if length.min(thickness) < 2.0 {
        return None;
    }
    let grow = length * thickness * UNCLIP_RATIO / (2.0 * (length + thickness));
    let (a0, a1, b0, b1) = (a0 - grow, a1 + grow, b0 - grow, b1 + grow);
    let corner = |a: f32, b: f32| (cx + a * along.0 + b * across.0, cy + a * along.1 + b * across.1);
    Some(Quad([corner(a0, b0), corner(a1, b0), corner(a1, b1), corner(a0, b1)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(x0: usize, x1: usize, y: impl Fn(usize) -> usize, thickness: usize) -> Vec<(usize, usize)> {
        (x0..x1).flat_map(|x| (0..thickness).map(move |t| (x, t))).map(|(x, t)| (x, y(x) + t)).collect()
    }

    #[test]
    fn a_level_kernel_grows_to_its_line() {
        // A kernel 100 × 6: grown by 100·6·1.5 / (2·106) ≈ 4.25 on every side.
        let quad = line_box(&bar(10, 110, |_| 20, 6)).unwrap();
        let [tl, tr, br, bl] = quad.0;
        let close = |a: f32, b: f32| (a - b).abs() < 0.01;
        assert!(close(tl.0, 5.75) && close(tl.1, 15.75), "{tl:?}");
        assert!(close(tr.0, 114.25) && close(tr.1, 15.75), "{tr:?}");
        assert!(close(br.0, 114.25) && close(br.1, 30.25), "{br:?}");
        assert!(close(bl.0, 5.75) && close(bl.1, 30.25), "{bl:?}");
    }

    #[test]
    fn a_skewed_kernel_gives_a_slanted_box() {
        // Rising 1 px every 20 (about 2.9°, y grows downwards): the box's top edge follows it.
        let quad = line_box(&bar(0, 200, |x| 40 - x / 20, 5)).unwrap();
        let [tl, tr, _, _] = quad.0;
        let slope = (tr.1 - tl.1) / (tr.0 - tl.0);
        assert!((slope + 0.05).abs() < 0.01, "slope {slope}");
    }

    #[test]
    fn separate_lines_are_separate_regions() {
        let lines = [5usize, 15, 25];
        let found =
            regions(
                50,
                30,
                |x, y| if x > 2 && x < 45 && lines.iter().any(|&l| y >= l && y < l + 3) { 0.9 } else { 0.1 },
            );
        assert_eq!(found.len(), 3);
        assert!(found.iter().all(|r| r.pixels.len() == 42 * 3 && (r.mean - 0.9).abs() < 1e-5));
    }
}
