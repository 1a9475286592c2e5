//! Line recognition: PP-OCR's CTC recognizer and greedy decoding.

use anyhow::{Context, Result};
use image::RgbImage;
use rten_tensor::prelude::*;
use rten_tensor::NdTensor;

/// The recognizer reads lines scaled to this height.
const LINE_HEIGHT: usize = 48;
/// The widest line it is given (a 66:1 line; longer ones are squeezed to fit).
const MAX_LINE_WIDTH: usize = 3200;

/// The text of one upright line image. (Batches of lines of similar width, padded as
/// PaddleOCR pads them, were slower on rten here: 10.7–11.0 s against 8.5–9.6 s a page.)
pub(crate) fn read_line(recognizer: &rten::Model, alphabet: &[String], line: &RgbImage) -> Result<String> {
    let (w, h) = line.dimensions();
    let width = ((w as f32 / h as f32 * LINE_HEIGHT as f32).ceil() as usize).clamp(16, MAX_LINE_WIDTH);
    let scaled = image::imageops::resize(line, width as u32, LINE_HEIGHT as u32, image::imageops::FilterType::Triangle);
    let mut input = NdTensor::<f32, 4>::zeros([1, 3, LINE_HEIGHT, width]);
    for (x, y, pixel) in scaled.enumerate_pixels() {
        for c in 0..3 {
            // BGR, scaled to [-1, 1].
            input[[0, c, y as usize, x as usize]] = pixel.0[2 - c] as f32 / 127.5 - 1.0;
        }
    }
    let output = recognizer.run_one(input.into(), None).context("the OCR recognizer failed")?;
    let probabilities: NdTensor<f32, 3> = output.try_into().context("the OCR recognizer gave an unexpected output")?;
    let [_, steps, classes] = probabilities.shape();
    let best = (0..steps).map(|t| {
        (0..classes).fold((0, f32::MIN), |(k, p), c| {
            let q = probabilities[[0, t, c]];
            if q > p {
                (c, q)
            } else {
                (k, p)
            }
        })
    });
    Ok(ctc_greedy(best.map(|(class, _)| class), alphabet))
}

/// CTC's greedy decoding: class 0 is the blank, repeats merge, class `i` is the dictionary's
/// line `i - 1`, and the class after the dictionary is the space.
fn ctc_greedy(best: impl Iterator<Item = usize>, alphabet: &[String]) -> String {
    let mut text = String::new();
    let mut previous = 0;
    for class in best {
        if class != 0 && class != previous {
            match alphabet.get(class - 1) {
                Some(symbol) => text.push_str(symbol),
                None => text.push(' '),
            }
        }
        previous = class;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctc_merges_repeats_drops_blanks_and_knows_the_space() {
        let alphabet: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        // a a _ a b b _ <space> c c : "aab c"
        let classes = [1, 1, 0, 1, 2, 2, 0, 4, 3, 3];
        assert_eq!(ctc_greedy(classes.into_iter(), &alphabet), "aab c");
        assert_eq!(ctc_greedy([0, 0, 0].into_iter(), &alphabet), "");
    }
}
