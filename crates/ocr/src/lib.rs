//! Reading the text of a scanned page: PP-OCR's detector finds the text lines, its recognizer
//! reads each one, and the lines are put in reading order. Both models run on rten (pure Rust,
//! on the CPU); the models are files this crate is handed, it opens nothing else.
//!
//! The pipeline, as PaddleOCR defines it for these models:
//! - detection (`detect`): the page scaled so its long side is at most `DETECT_LONG_SIDE`,
//!   normalized with ImageNet's mean and deviation, gives a map of text probability; its
//!   connected regions over 0.3 are the lines' kernels, each grown back ("unclipped") by
//!   area × 1.5 / perimeter to the line's box, which may be slanted (skewed scans);
//! - recognition (`recognize`): each box cut out upright at 48 pixels high, read by the CTC
//!   recognizer, the best class per step, repeats and blanks dropped, classes named by the
//!   dictionary (its last class is the space);
//! - reading order (`layout`): the page's skew undone, XY cuts split it into columns and bands,
//!   the lines of each read top to bottom, left to right.

mod detect;
mod layout;
mod recognize;

use std::path::Path;

use anyhow::{Context, Result};
use image::RgbImage;

/// The image crate the pages are decoded with (its version and formats are this crate's).
pub use image;
pub use image::DynamicImage;
pub use layout::{reading_order, TextLine};

/// The file names of PP-OCRv6 small inside its model folder (`quire models fetch pp-ocrv6-small`).
pub const DETECTOR_FILE: &str = "PP-OCRv6_det_small.rten";
pub const RECOGNIZER_FILE: &str = "PP-OCRv6_rec_small.rten";
pub const DICTIONARY_FILE: &str = "ppocrv6_dict.txt";

/// A loaded OCR engine: the detector, the recognizer and its alphabet.
pub struct Ocr {
    detector: rten::Model,
    recognizer: rten::Model,
    alphabet: Vec<String>,
}

/// What OCR read on one page.
#[derive(Debug, Clone)]
pub struct ReadPage {
    /// The page's text in reading order, one line of text per line of the page.
    pub text: String,
    pub lines: Vec<TextLine>,
    /// The page's skew in degrees (positive: lines rise to the right, as on screen y grows down).
    pub skew_degrees: f32,
}

impl Ocr {
    /// Loads the models from the folder that holds the three files above.
    pub fn load(folder: &Path) -> Result<Ocr> {
        let model = |name: &str| {
            let path = folder.join(name);
            rten::Model::load_file(&path).with_context(|| format!("cannot load the OCR model {}", path.display()))
        };
        let dictionary = folder.join(DICTIONARY_FILE);
        let alphabet = std::fs::read_to_string(&dictionary)
            .with_context(|| format!("cannot read the OCR dictionary {}", dictionary.display()))?
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>();
        anyhow::ensure!(!alphabet.is_empty(), "the OCR dictionary {} is empty", dictionary.display());
        Ok(Ocr { detector: model(DETECTOR_FILE)?, recognizer: model(RECOGNIZER_FILE)?, alphabet })
    }

    /// Reads the text of one page image.
    pub fn read(&self, page: &DynamicImage) -> Result<ReadPage> {
        let rgb = page.to_rgb8();
        anyhow::ensure!(
            rgb.width() >= 8 && rgb.height() >= 8,
            "the image is {}×{} pixels: too small to read",
            rgb.width(),
            rgb.height()
        );
        let boxes = detect::text_boxes(&self.detector, &rgb)?;
        let skew = layout::skew(&boxes);
        // One line at a time: rten already spreads each line's convolutions over the cores
        // (two workers sharing them read no faster: 2.9 s against 2.9 s a page).
        let texts =
            boxes.iter().map(|quad| recognize::read_line(&self.recognizer, &self.alphabet, &upright_crop(&rgb, quad)));
        let mut lines = Vec::with_capacity(boxes.len());
        for (quad, text) in boxes.iter().zip(texts) {
            let text = text?;
            if !text.trim().is_empty() {
                lines.push(TextLine::new(text.trim().to_owned(), quad, skew));
            }
        }
        Ok(ReadPage { text: reading_order(&lines), lines, skew_degrees: skew.to_degrees() })
    }
}

/// A text line's box on the page: corners top-left, top-right, bottom-right, bottom-left, in
/// the page's pixels (x right, y down).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quad(pub [(f32, f32); 4]);

/// The quad cut out of the page and straightened: bilinear sampling along its edges.
fn upright_crop(page: &RgbImage, quad: &Quad) -> RgbImage {
    let [tl, tr, br, bl] = quad.0;
    let dist = |a: (f32, f32), b: (f32, f32)| ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt();
    let width = dist(tl, tr).max(dist(bl, br)).round().max(1.0) as u32;
    let height = dist(tl, bl).max(dist(tr, br)).round().max(1.0) as u32;
    let mut out = RgbImage::new(width, height);
    for y in 0..height {
        let v = (y as f32 + 0.5) / height as f32;
        for x in 0..width {
            let u = (x as f32 + 0.5) / width as f32;
            let top = (tl.0 + (tr.0 - tl.0) * u, tl.1 + (tr.1 - tl.1) * u);
            let bottom = (bl.0 + (br.0 - bl.0) * u, bl.1 + (br.1 - bl.1) * u);
            let at = (top.0 + (bottom.0 - top.0) * v - 0.5, top.1 + (bottom.1 - top.1) * v - 0.5);
            out.put_pixel(x, y, bilinear(page, at));
        }
    }
    out
}

fn bilinear(page: &RgbImage, (x, y): (f32, f32)) -> image::Rgb<u8> {
    let (w, h) = page.dimensions();
    let x = x.clamp(0.0, (w - 1) as f32);
    let y = y.clamp(0.0, (h - 1) as f32);
    let (x0, y0) = (x.floor() as u32, y.floor() as u32);
    let (x1, y1) = ((x0 + 1).min(w - 1), (y0 + 1).min(h - 1));
    let (fx, fy) = (x - x0 as f32, y - y0 as f32);
    let [a, b, c, d] = [(x0, y0), (x1, y0), (x0, y1), (x1, y1)].map(|(px, py)| page.get_pixel(px, py).0);
    image::Rgb(std::array::from_fn(|i| {
        let v = a[i] as f32 * (1.0 - fx) * (1.0 - fy)
            + b[i] as f32 * fx * (1.0 - fy)
            + c[i] as f32 * (1.0 - fx) * fy
            + d[i] as f32 * fx * fy;
        v.round().clamp(0.0, 255.0) as u8
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slanted_quad_is_cut_out_upright() {
        // A dark bar rising 10 px over 100 px on a white page: cut out along its slant, every
        // row of the crop is uniformly dark.
        let mut page = RgbImage::from_pixel(200, 100, image::Rgb([255, 255, 255]));
        for x in 50..150u32 {
            let rise = (x - 50) as f32 * 0.1;
            for y in 0..10u32 {
                page.put_pixel(x, (60.0 - rise) as u32 - y, image::Rgb([0, 0, 0]));
            }
        }
        let quad = Quad([(50.0, 51.0), (150.0, 41.0), (150.0, 51.0), (50.0, 61.0)]);
        let crop = upright_crop(&page, &quad);
        assert_eq!((crop.width(), crop.height()), (100, 10));
        let dark = crop.pixels().filter(|p| p.0[0] < 128).count();
        assert!(dark as f32 > 0.85 * 1000.0, "{dark} of 1000 pixels dark");
    }
}
