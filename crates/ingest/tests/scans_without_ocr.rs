//! Without the OCR models a scan says what it needs (its own test binary: the models' place is
//! read once per process).

use std::path::Path;

use quire_ingest::{load_bytes, DocKind, LoadError};

#[test]
fn without_the_ocr_model_a_scan_names_what_it_needs() {
    let empty = tempfile::tempdir().unwrap();
    // This binary holds this one test: the variable is set before anything reads it.
    std::env::set_var("QUIRE_MODELS", empty.path());
    let err = load_bytes(Path::new("card.jpg"), DocKind::Image, quire_testkit::scanned_page_jpeg()).unwrap_err();
    assert!(matches!(err, LoadError::NeedsOcr), "{err}");
    let err = load_bytes(Path::new("scan.pdf"), DocKind::Pdf, &quire_testkit::scanned_pdf(2)).unwrap_err();
    assert!(matches!(err, LoadError::NeedsOcr), "{err}");
    assert!(err.to_string().contains("needs the OCR model"), "{err}");
}
