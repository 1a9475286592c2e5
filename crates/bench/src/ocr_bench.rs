//! `quire bench ocr DIR`: Quire's OCR beside tesseract (Debian's `tesseract-ocr`, English model)
//! on the same page images, in the same run, alternating image by image: the character error
//! rate against each page's known text and the seconds per page. The images and their text come
//! from `tools/make-ocr-scans.py` (sample-document pages drawn at 300 dpi clean and at 150 dpi
//! with noise, 2° of skew and JPEG compression; the text is the PDF's own text layer). Tesseract
//! runs at each thread count (`OMP_THREAD_LIMIT` 1 and 2, its one speed setting) and the faster
//! is its figure; without tesseract, only Quire's figures are printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;

#[derive(Args)]
pub struct OcrArgs {
    /// A folder of page images (`NAME-VARIANT.png|jpg`) beside each page's text (`NAME.txt`).
    scans: PathBuf,
    /// Rounds over all the images; each round reads every image with Quire, then tesseract.
    #[arg(long, default_value_t = 2)]
    rounds: usize,
}

/// Tesseract's configurations: the OpenMP thread limit.
const TESSERACT_THREADS: [&str; 2] = ["1", "2"];

struct Page {
    image: PathBuf,
    variant: String,
    truth: String,
}

#[derive(Default)]
struct Tally {
    errors: usize,
    chars: usize,
    seconds: Vec<f64>,
}

impl Tally {
    fn cer(&self) -> f64 {
        100.0 * self.errors as f64 / self.chars.max(1) as f64
    }
    fn seconds_per_page(&self) -> f64 {
        self.seconds.iter().sum::<f64>() / self.seconds.len().max(1) as f64
    }
}

pub fn run(args: OcrArgs) -> Result<()> {
    let pages = scan_set(&args.scans)?;
    let ocr = quire_ocr::Ocr::load(&quire_models::PP_OCR.location()?)
        .with_context(|| quire_models::missing_model_error(&quire_models::PP_OCR))?;
    let tesseract = Command::new("tesseract").arg("--version").output().is_ok_and(|o| o.status.success());
    if !tesseract {
        println!("tesseract is not installed (Debian: apt install tesseract-ocr): Quire's figures alone");
    }
    println!("{} page images in {}, {} rounds", pages.len(), args.scans.display(), args.rounds);
    // (variant, who) → tally; who is "quire" or "tesseract N threads".
    let mut tallies: BTreeMap<(String, String), Tally> = BTreeMap::new();
    for round in 0..args.rounds {
        for page in &pages {
            let image =
                quire_ocr::image::open(&page.image).with_context(|| format!("cannot read {}", page.image.display()))?;
            let start = Instant::now();
            let read = ocr.read(&image)?;
            let quire_s = start.elapsed().as_secs_f64();
            let errors = edit_distance(&normalized(&page.truth), &normalized(&read.text));
            let mut add = |who: String, errors: usize, seconds: f64| {
                let tally = tallies.entry((page.variant.clone(), who)).or_default();
                if round == 0 {
                    tally.errors += errors;
                    tally.chars += normalized(&page.truth).chars().count();
                }
                tally.seconds.push(seconds);
            };
            add("quire".into(), errors, quire_s);
            if tesseract {
                for threads in TESSERACT_THREADS {
                    let start = Instant::now();
                    let out = Command::new("tesseract")
                        .arg(&page.image)
                        .arg("stdout")
                        .env("OMP_THREAD_LIMIT", threads)
                        .output()
                        .context("cannot run tesseract")?;
                    let seconds = start.elapsed().as_secs_f64();
                    if !out.status.success() {
                        bail!("tesseract failed on {}: {}", page.image.display(), String::from_utf8_lossy(&out.stderr));
                    }
                    let text = String::from_utf8_lossy(&out.stdout);
                    add(
                        format!("tesseract, {threads} thread(s)"),
                        edit_distance(&normalized(&page.truth), &normalized(&text)),
                        seconds,
                    );
                }
            }
            eprintln!("round {}: {} read in {quire_s:.2} s", round + 1, page.image.display());
        }
    }
    println!("{:<14} {:<26} {:>8} {:>12} {:>10}", "images", "reader", "CER", "s per page", "pages/s");
    for ((variant, who), tally) in &tallies {
        let spp = tally.seconds_per_page();
        println!("{variant:<14} {who:<26} {:>7.2}% {spp:>12.2} {:>10.3}", tally.cer(), 1.0 / spp);
    }
    if tesseract {
        for variant in tallies.keys().map(|(v, _)| v.clone()).collect::<std::collections::BTreeSet<_>>() {
            let quire = &tallies[&(variant.clone(), "quire".to_string())];
            let best = TESSERACT_THREADS
                .iter()
                .map(|t| &tallies[&(variant.clone(), format!("tesseract, {t} thread(s)"))])
                .min_by(|a, b| a.seconds_per_page().total_cmp(&b.seconds_per_page()))
                .expect("two configurations");
            println!(
                "{variant}: Quire {:.2}× tesseract's pages/s at its best thread count; CER {:.2}% against {:.2}%",
                best.seconds_per_page() / quire.seconds_per_page(),
                quire.cer(),
                best.cer()
            );
        }
    }
    Ok(())
}

/// The images of `dir` with their page's text: `NAME-VARIANT.ext` goes with `NAME.txt`, the
/// variant being what follows the longest name that has a text file.
fn scan_set(dir: &Path) -> Result<Vec<Page>> {
    let mut pages = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for image in entries {
        let ext = image.extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase();
        if !["png", "jpg", "jpeg", "tif", "tiff", "webp"].contains(&ext.as_str()) {
            continue;
        }
        let stem = image.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        let found = stem.match_indices('-').map(|(i, _)| i).rev().find_map(|i| {
            let truth = dir.join(format!("{}.txt", &stem[..i]));
            truth.is_file().then(|| (truth, stem[i + 1..].to_string()))
        });
        let Some((truth, variant)) = found else { continue };
        pages.push(Page { image, variant, truth: std::fs::read_to_string(&truth)? });
    }
    if pages.is_empty() {
        bail!("no page images with their text in {} (make them with tools/make-ocr-scans.py)", dir.display());
    }
    Ok(pages)
}

/// Text as both sides are compared: typographic quotes, dashes, minus signs and ligatures as
/// their plain forms, runs of white space as one space.
fn normalized(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{2018}' | '\u{2019}' | '\u{2032}' => plain.push('\''),
            '\u{201c}' | '\u{201d}' => plain.push('"'),
            '\u{2010}'..='\u{2015}' | '\u{2212}' => plain.push('-'),
            '\u{fb01}' => plain.push_str("fi"),
            '\u{fb02}' => plain.push_str("fl"),
            '\u{fb00}' => plain.push_str("ff"),
            c => plain.push(c),
        }
    }
    plain.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Levenshtein distance in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_characters() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("naïve", "naive"), 1);
        assert_eq!(normalized("a \u{201c}b\u{201d}\n\n c\u{2212}1 \u{fb01}"), "a \"b\" c-1 fi");
    }
}
