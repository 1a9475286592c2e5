//! Line recognition: PP-OCR's CTC recognizer and greedy decoding.

use image::RgbImage;

use crate::network::{Map, Recognizer};

/// The recognizer reads lines scaled to this height.
const LINE_HEIGHT: usize = 48;
/// The widest line it is given (a 66:1 line; longer ones are squeezed to fit).
const MAX_LINE_WIDTH: usize = 3200;

/// The text of one upright line image.
pub(crate) fn read_line(recognizer: &Recognizer, alphabet: &[String], line: &RgbImage) -> String {
    ctc_greedy(recognizer.best_classes(&line_input(line)).into_iter(), alphabet)
}

/// The line as the recognizer reads it: 48 pixels high.
pub(crate) fn line_input(line: &RgbImage) -> Map {
    let (w, h) = line.dimensions();
    let width = ((w as f32 / h as f32 * LINE_HEIGHT as f32).ceil() as usize).clamp(16, MAX_LINE_WIDTH);
    let scaled = image::imageops::resize(line, width as u32, LINE_HEIGHT as u32, image::imageops::FilterType::Triangle);
    // Blue, green, red (the models were trained on OpenCV's order), scaled to [-1, 1].
    let data = scaled.pixels().flat_map(|p| [2, 1, 0].map(|c| p.0[c] as f32 / 127.5 - 1.0)).collect();
    Map { height: LINE_HEIGHT, width, channels: 3, data }
}

/// CTC's greedy decoding: class 0 is the blank, repeats merge, class `i` is the dictionary's
/// line `i - 1`, and the class after the dictionary is the space.
pub(crate) fn ctc_greedy(best: impl Iterator<Item = usize>, alphabet: &[String]) -> String {
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
