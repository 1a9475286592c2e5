//! Reading the text of a scanned page: PP-OCR's detector finds the text lines, its recognizer
//! reads each one, and the lines are put in reading order. The detector runs on rten (pure
//! Rust, on the CPU); the recognizer on Quire's own layers (`network`: built from the same
//! model file, its dense layers in 8-bit integers where the CPU has them). The models are
//! files this crate is handed, it opens nothing else.
//!
//! The pipeline, as PaddleOCR defines it for these models:
//! - detection (`detect`): the page scaled so its long side is at most `DETECT_LONG_SIDE`,
//!   normalized with ImageNet's mean and deviation, gives a map of text probability; its
//!   connected regions over 0.3 are the lines' kernels, each grown back ("unclipped") by
//!   area × 1.5 / perimeter to the line's box, which may be slanted (skewed scans);
//! - recognition (`recognize`): each box cut out upright at 48 pixels high, read by the CTC
//!   recognizer, the best class per step, repeats and blanks dropped, classes named by the
//!   dictionary (its last class is the space); a page's lines in parallel, one to a core;
//! - reading order (`layout`): the page's skew undone, XY cuts split it into columns and bands,
//!   the lines of each read top to bottom, left to right.

mod detect;
mod graph;
mod layout;
mod network;
mod recognize;

use std::path::Path;

use anyhow::{Context, Result};
use image::RgbImage;
use rayon::prelude::*;

/// The image crate the pages are decoded with (its version and formats are this crate's).
pub use image;
pub use image::DynamicImage;
pub use layout::{reading_order, TextLine};
pub use network::Precision;

/// The file names of PP-OCRv6 small inside its model folder (`quire models fetch pp-ocrv6-small`).
pub const DETECTOR_FILE: &str = "PP-OCRv6_det_small.rten";
pub const RECOGNIZER_FILE: &str = "PP-OCRv6_rec_small.rten";
pub const DICTIONARY_FILE: &str = "ppocrv6_dict.txt";

/// A loaded OCR engine: the detector, the recognizer and its alphabet.
pub struct Ocr {
    detector: rten::Model,
    recognizer: network::Recognizer,
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
    /// Loads the models from the folder that holds the three files above, the recognizer's
    /// layers in 8-bit integers where the CPU has them (`QUIRE_OCR=f32`: in f32).
    pub fn load(folder: &Path) -> Result<Ocr> {
        Ocr::load_with(folder, Precision::from_env())
    }

    pub fn load_with(folder: &Path, precision: Precision) -> Result<Ocr> {
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
        // The detector's deepest layers meet denormal numbers, each operation on one ~100
        // cycles of microcode on x86: flushed to zero on rten's threads (which run nothing but
        // rten), detection takes 0.56 s a page instead of 1.0.
        rten::thread_pool().run(|| rayon::broadcast(|_| quire_simd::flush_denormals_on_this_thread()));
        let path = folder.join(RECOGNIZER_FILE);
        let bytes = std::fs::read(&path).with_context(|| format!("cannot read the OCR model {}", path.display()))?;
        let recognizer = graph::operators(&bytes)
            .and_then(|ops| network::Recognizer::build(&ops, precision))
            .with_context(|| format!("cannot load the OCR model {}", path.display()))?;
        Ok(Ocr { detector: model(DETECTOR_FILE)?, recognizer, alphabet })
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
        // Lines in parallel, one to a core (a line's layers then run without waiting on each
        // other; splitting each layer over the cores instead took 3.15 s for the dense page
        // against 2.4).
        let texts: Vec<String> = boxes
            .par_iter()
            .map(|quad| recognize::read_line(&self.recognizer, &self.alphabet, &upright_crop(&rgb, quad)))
            .collect();
        let mut lines = Vec::with_capacity(boxes.len());
        for (quad, text) in boxes.iter().zip(texts) {
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

    /// Edit distance between two texts, in characters.
    fn distance(a: &str, b: &str) -> usize {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.iter().enumerate() {
            let mut diagonal = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let next = (diagonal + usize::from(ca != cb)).min(row[j] + 1).min(row[j + 1] + 1);
                diagonal = row[j + 1];
                row[j + 1] = next;
            }
        }
        row[b.len()]
    }

    /// The recognizer as rten runs the model file's own graph (its softmax included), each
    /// step's largest class.
    fn read_by_rten(model: &rten::Model, alphabet: &[String], line: &RgbImage) -> String {
        use rten_tensor::prelude::*;
        use rten_tensor::NdTensor;
        let input = recognize::line_input(line);
        let mut tensor = NdTensor::<f32, 4>::zeros([1, 3, input.height, input.width]);
        for (p, pixel) in input.data.chunks_exact(3).enumerate() {
            for (c, &v) in pixel.iter().enumerate() {
                tensor[[0, c, p / input.width, p % input.width]] = v;
            }
        }
        let output: NdTensor<f32, 3> = model.run_one(tensor.into(), None).unwrap().try_into().unwrap();
        let [_, steps, classes] = output.shape();
        let best = (0..steps).map(|t| {
            let row: Vec<f32> = (0..classes).map(|c| output[[0, t, c]]).collect();
            (0..classes).fold(0, |best, c| if row[c] > row[best] { c } else { best })
        });
        recognize::ctc_greedy(best, alphabet)
    }

    /// Quire's own run of the recognizer is the model: in f32 it reads every line of a scanned
    /// page as rten does running the file's graph, and in 8-bit integers within 1 % of the
    /// characters of that.
    #[test]
    fn the_recognizer_reads_as_the_models_own_graph() {
        let folder = quire_testkit::model(&quire_models::PP_OCR);
        let page = image::load_from_memory(quire_testkit::scanned_page_jpeg()).unwrap().to_rgb8();
        let reference = rten::Model::load_file(folder.join(RECOGNIZER_FILE)).unwrap();
        let f32_ocr = Ocr::load_with(&folder, Precision::F32).unwrap();
        let int8_ocr = Ocr::load_with(&folder, Precision::Int8).unwrap();
        let boxes = detect::text_boxes(&f32_ocr.detector, &page).unwrap();
        assert!(boxes.len() >= 7, "{} lines found", boxes.len());
        let (mut characters, mut int8_errors) = (0, 0);
        for quad in &boxes {
            let line = upright_crop(&page, quad);
            let expected = read_by_rten(&reference, &f32_ocr.alphabet, &line);
            assert_eq!(recognize::read_line(&f32_ocr.recognizer, &f32_ocr.alphabet, &line), expected);
            let int8 = recognize::read_line(&int8_ocr.recognizer, &int8_ocr.alphabet, &line);
            characters += expected.chars().count();
            int8_errors += distance(&int8, &expected);
        }
        assert!(characters > 250, "{characters} characters read");
        eprintln!("int8: {int8_errors} of {characters} characters differ from the f32 reading");
        assert!(int8_errors * 100 <= characters, "int8: {int8_errors} of {characters} characters differ");
    }
}
