//! Scans read by OCR with the real PP-OCR models (installed by `quire models fetch`): a photo
//! of a page, a scanned PDF, the page geometry kept.

use std::path::Path;

use quire_ingest::{load_bytes, DocKind};

fn ocr_installed() {
    quire_testkit::model(&quire_models::PP_OCR);
}

#[test]
fn a_photo_of_a_page_is_one_page_of_text() {
    ocr_installed();
    let doc = load_bytes(Path::new("card.jpg"), DocKind::Image, quire_testkit::scanned_page_jpeg()).unwrap();
    assert_eq!(doc.pages.len(), 1);
    assert_eq!(doc.pages[0].number, Some(1));
    let text = &doc.pages[0].text;
    // The page is turned 1.5° and noisy: its lines still come out whole and in order.
    for line in [
        "The Larkspur LX-40 heat pump is covered by a warranty of seven years",
        "from the date of installation. The compressor alone is covered for",
        "To make a claim, call the service line on 0800 555 0199 and give",
    ] {
        assert!(text.contains(line), "{line:?} not in {text:?}");
    }
    assert!(text.find("Warranty Card").unwrap() < text.find("serial number").unwrap(), "{text}");
}

#[test]
fn a_scanned_pdf_is_read_page_by_page() {
    ocr_installed();
    let doc = load_bytes(Path::new("scan.pdf"), DocKind::Pdf, &quire_testkit::scanned_pdf(3)).unwrap();
    assert_eq!(doc.pages.iter().map(|p| p.number).collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
    assert!(doc.unreadable_pages.is_empty(), "{:?}", doc.unreadable_pages);
    for page in &doc.pages {
        assert!(page.text.contains("twelve years when the unit is serviced once a year"), "{page:?}");
    }
}

/// A scan whose reading was stopped part way resumes: the pages read before keep the text they
/// were read as (their images are not read again), the others are read.
#[test]
fn pages_read_before_are_taken_as_read() {
    ocr_installed();
    let before = std::collections::HashMap::from([(1, "Page one as read by the stopped run.".to_string())]);
    let pdf = quire_testkit::scanned_pdf(2);
    let doc = quire_ingest::with_pages_read(before, || load_bytes(Path::new("scan.pdf"), DocKind::Pdf, &pdf)).unwrap();
    assert_eq!(doc.pages[0].text, "Page one as read by the stopped run.");
    assert!(doc.pages[1].text.contains("twelve years when the unit is serviced once a year"), "{:?}", doc.pages[1]);
    // Only for that load: the next one reads every page.
    let again = load_bytes(Path::new("scan.pdf"), DocKind::Pdf, &pdf).unwrap();
    assert!(again.pages[0].text.contains("twelve years when the unit is serviced once a year"), "{:?}", again.pages[0]);
}

#[test]
fn a_cut_image_gives_what_it_holds_and_a_false_one_an_error() {
    ocr_installed();
    // A JPEG cut short (a download stopped part way) decodes down to where it stops: the top of
    // the page is read, the rest is not there.
    let jpeg = quire_testkit::scanned_page_jpeg();
    let doc = load_bytes(Path::new("cut.jpg"), DocKind::Image, &jpeg[..jpeg.len() / 3]).unwrap();
    let text = &doc.pages[0].text;
    assert!(text.contains("Warranty Card") && !text.contains("serial number"), "{text}");
    for (name, bytes) in
        [("noise.png", &b"\x89PNG\r\n\x1a\nnot really"[..]), ("noise.jpg", &b"\xff\xd8\xff\xe0 nothing"[..])]
    {
        let err = load_bytes(Path::new(name), DocKind::Image, bytes).unwrap_err();
        assert!(err.to_string().starts_with("the image cannot be read"), "{name}: {err}");
    }
}

#[test]
fn black_and_white_fax_coded_scans_are_read() {
    ocr_installed();
    use quire_testkit::ScanStorage::{FaxGroup3, FaxGroup4};
    let pdf = quire_testkit::scanned_pdf_of(&[FaxGroup4, FaxGroup3]);
    let doc = load_bytes(Path::new("fax.pdf"), DocKind::Pdf, &pdf).unwrap();
    assert_eq!(doc.pages.len(), 2);
    assert!(doc.unreadable_pages.is_empty(), "{:?}", doc.unreadable_pages);
    for page in &doc.pages {
        // Black on white (the decoder's colours), whole lines of it.
        assert!(page.text.contains("The Larkspur LX-40 heat pump is covered by a warranty"), "{page:?}");
        assert!(page.text.contains("0800 555 0199"), "{page:?}");
    }
}

#[test]
fn a_page_drawn_turned_by_its_matrix_is_read_as_shown() {
    ocr_installed();
    // The pixels lie on their side and the page's content turns them upright where it draws
    // them (no `/Rotate`), as phone scanning apps write pages.
    let pdf = quire_testkit::scanned_pdf_as(1, quire_testkit::ScanStorage::JpegTurnedByMatrix);
    let doc = load_bytes(Path::new("turned.pdf"), DocKind::Pdf, &pdf).unwrap();
    let text = &doc.pages[0].text;
    assert!(text.contains("The Larkspur LX-40 heat pump is covered by a warranty of seven years"), "{text}");
}

#[test]
fn a_scan_drawn_inside_a_form_is_read() {
    ocr_installed();
    // The middle page's scan is drawn by a form XObject the page draws, not by the page.
    use quire_testkit::ScanStorage::{Jpeg, JpegInForm};
    let pdf = quire_testkit::scanned_pdf_of(&[Jpeg, JpegInForm, Jpeg]);
    let doc = load_bytes(Path::new("wrapped.pdf"), DocKind::Pdf, &pdf).unwrap();
    assert!(doc.unreadable_pages.is_empty(), "{:?}", doc.unreadable_pages);
    assert_eq!(doc.pages.iter().map(|p| p.number).collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
    assert!(doc.pages[1].text.contains("twelve years when the unit is serviced once a year"), "{:?}", doc.pages[1]);
}

#[test]
fn every_page_of_a_multi_page_tiff_is_read() {
    ocr_installed();
    let doc = load_bytes(Path::new("scan.tif"), DocKind::Image, &quire_testkit::scanned_tiff(3)).unwrap();
    assert_eq!(doc.pages.iter().map(|p| p.number).collect::<Vec<_>>(), [Some(1), Some(2), Some(3)]);
    for page in &doc.pages {
        assert!(page.text.contains("the serial number printed under the front cover"), "{page:?}");
    }
}

#[test]
fn an_image_claiming_billions_of_pixels_is_refused_before_it_is_allocated() {
    ocr_installed();
    // 60,000 × 60,000 gray pixels would be 3.6 GB.
    let bomb = quire_testkit::png_claiming(60_000, 60_000);
    let err = load_bytes(Path::new("bomb.png"), DocKind::Image, &bomb).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the image is 60000×60000 pixels, over the 100 million Quire reads: scale it down to read it"
    );
    // The same header at a readable size is decoded (the data is short: an error of another kind
    // or a blank page, never the size refusal).
    let small = load_bytes(Path::new("small.png"), DocKind::Image, &quire_testkit::png_claiming(64, 64));
    assert!(small.as_ref().map_or_else(|e| !e.to_string().contains("limit"), |_| true), "{small:?}");
}

#[test]
fn a_page_scanned_sideways_is_read_as_its_rotate_shows_it() {
    ocr_installed();
    let pdf = quire_testkit::scanned_pdf_as(1, quire_testkit::ScanStorage::JpegSideways);
    let doc = load_bytes(Path::new("sideways.pdf"), DocKind::Pdf, &pdf).unwrap();
    let text = &doc.pages[0].text;
    // Read without the turn, the detector sees columns of letters and gives next to nothing.
    assert!(text.contains("The Larkspur LX-40 heat pump is covered by a warranty of seven years"), "{text}");
}

#[test]
fn jpeg_2000_and_jbig2_scans_are_read() {
    use quire_testkit::ScanStorage::{Jbig2, Jpeg2000};
    ocr_installed();
    let doc =
        load_bytes(Path::new("stored.pdf"), DocKind::Pdf, &quire_testkit::scanned_pdf_of(&[Jpeg2000, Jbig2])).unwrap();
    assert!(doc.unreadable_pages.is_empty(), "{:?}", doc.unreadable_pages);
    for page in &doc.pages {
        assert!(page.text.contains("The Larkspur LX-40 heat pump is covered by a warranty"), "{page:?}");
        assert!(page.text.contains("0800 555 0199"), "{page:?}");
    }
}

#[test]
fn a_page_that_cannot_be_read_is_named_with_its_reason() {
    use quire_testkit::ScanStorage::{DamagedJpeg2000, Jpeg};
    ocr_installed();
    let doc = load_bytes(
        Path::new("mixed.pdf"),
        DocKind::Pdf,
        &quire_testkit::scanned_pdf_of(&[Jpeg, DamagedJpeg2000, Jpeg]),
    )
    .unwrap();
    assert!(doc.pages[0].text.contains("0800 555 0199") && doc.pages[2].text.contains("0800 555 0199"), "{doc:?}");
    assert_eq!(doc.pages[1].text, "");
    assert_eq!(
        doc.unreadable_pages,
        [quire_ingest::UnreadablePage {
            page: 2,
            reason: "the image cannot be read: the page's JPEG 2000 image is damaged (invalid JP2 file type)".into()
        }]
    );
    // When no page can be read, the file fails with the first page's reason, not "no text".
    let err =
        load_bytes(Path::new("jpx.pdf"), DocKind::Pdf, &quire_testkit::scanned_pdf_as(2, DamagedJpeg2000)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no page of the PDF could be read (page 1: the image cannot be read: the page's JPEG 2000 image is \
         damaged (invalid JP2 file type))"
    );
}

/// A fax-coded page whose data is random bytes decodes to noise, and OCR finds nothing on it:
/// said as such, not as a PDF without scanned images (issue 57).
#[test]
fn a_scan_that_decodes_to_noise_is_said_to_hold_no_text() {
    ocr_installed();
    let pdf = quire_testkit::scanned_pdf_as(1, quire_testkit::ScanStorage::NoiseFax);
    let err = load_bytes(Path::new("noise.pdf"), DocKind::Pdf, &pdf).unwrap_err();
    assert_eq!(
        err.to_string(),
        "OCR read the scanned pages and found no text on them (blank pages, pictures, or damaged images?)"
    );
}
