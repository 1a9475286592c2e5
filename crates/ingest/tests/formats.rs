//! HTML, DOCX and EPUB loaders on documents built here, and the crafted files they must refuse:
//! a zip bomb, a password-protected document, an encrypted PDF, deep nesting.

use std::path::Path;

use quire_ingest::{load_bytes, load_file, DocKind, LoadError};

fn text_of(kind: DocKind, bytes: &[u8]) -> String {
    let doc = load_bytes(Path::new("x"), kind, bytes).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    doc.pages.iter().map(|p| p.text.as_str()).collect::<Vec<_>>().join("\n")
}

#[test]
fn docx_paragraphs_come_out_as_lines_with_entities_decoded() {
    let bytes = quire_testkit::docx(&["Quarterly report & outlook", "Revenue grew <12%> in Q3.", "Third paragraph."]);
    let text = text_of(DocKind::Docx, &bytes);
    assert_eq!(text, "Quarterly report & outlook\nRevenue grew <12%> in Q3.\nThird paragraph.\n");
}

#[test]
fn epub_chapters_follow_the_spine_not_the_manifest() {
    let bytes = quire_testkit::epub(&[
        ("One", "The first chapter opens."),
        ("Two", "The second chapter follows."),
        ("Three", "The end."),
    ]);
    let text = text_of(DocKind::Epub, &bytes);
    let (one, two, three) =
        (text.find("first chapter").unwrap(), text.find("second chapter").unwrap(), text.find("The end").unwrap());
    assert!(one < two && two < three, "{text}");
    assert!(text.contains("One") && text.contains("Three"), "chapter titles kept: {text}");
    assert!(!text.contains('<'), "no markup left: {text}");
}

#[test]
fn html_keeps_the_text_and_drops_markup_and_scripts() {
    let html = b"<html><head><title>T</title><style>p { color: red }</style><script>var secret = 1;</script></head>\
        <body><h1>Heading</h1><p>First <b>bold</b> paragraph with a <a href=\"https://x.org\">link</a>.</p><ul><li>item one</li><li>item two</li></ul></body></html>";
    let text = text_of(DocKind::Html, html);
    for expected in ["Heading", "First bold paragraph with a link.", "item one", "item two"] {
        assert!(text.contains(expected), "{expected:?} missing from {text:?}");
    }
    for unwanted in ["secret", "color: red", "<b>", "https://x.org"] {
        assert!(!text.contains(unwanted), "{unwanted:?} in {text:?}");
    }
}

#[test]
fn a_zip_bomb_is_refused_by_its_inflated_size() {
    // 80 MB of one byte deflates to under 100 KB; the cap per entry is 64 MiB.
    let body = vec![b'a'; 80 * 1024 * 1024];
    let bomb = quire_testkit::zip_archive(&[("word/document.xml", &body)]);
    assert!(bomb.len() < 200_000, "{} bytes", bomb.len());
    let err = load_bytes(Path::new("bomb.docx"), DocKind::Docx, &bomb).unwrap_err();
    assert!(matches!(err, LoadError::ExpandsTooFar { .. }), "{err}");
}

#[test]
fn deeply_nested_xml_costs_no_stack() {
    // A million nested elements would overflow a recursive parser's stack.
    let depth = 1_000_000;
    let mut xml = String::from("<w:document xmlns:w=\"w\"><w:body>");
    xml.push_str(&"<w:sdt>".repeat(depth));
    xml.push_str("<w:p><w:r><w:t>deep text</w:t></w:r></w:p>");
    xml.push_str(&"</w:sdt>".repeat(depth));
    xml.push_str("</w:body></w:document>");
    let docx = quire_testkit::zip_archive(&[("word/document.xml", xml.as_bytes())]);
    assert_eq!(text_of(DocKind::Docx, &docx).trim(), "deep text");
}

#[test]
fn protected_and_broken_office_files_say_why() {
    let ole = [&[0xD0u8, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1][..], &[0u8; 504][..]].concat();
    let err = load_bytes(Path::new("locked.docx"), DocKind::Docx, &ole).unwrap_err();
    assert!(err.to_string().contains("password-protected"), "{err}");

    let no_body = quire_testkit::zip_archive(&[("word/other.xml", b"<x/>")]);
    let err = load_bytes(Path::new("odd.docx"), DocKind::Docx, &no_body).unwrap_err();
    assert!(err.to_string().contains("word/document.xml is missing"), "{err}");

    let truncated = &quire_testkit::epub(&[("A", "b")])[..100];
    let err = load_bytes(Path::new("cut.epub"), DocKind::Epub, truncated).unwrap_err();
    assert!(err.to_string().contains("the EPUB file is damaged"), "{err}");
}

#[test]
fn an_encrypted_pdf_is_reported_as_such() {
    let err = load_bytes(Path::new("secret.pdf"), DocKind::Pdf, &quire_testkit::encrypted_pdf()).unwrap_err();
    assert!(matches!(err, LoadError::Encrypted), "{err}");
}

#[test]
fn a_file_over_the_size_limit_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.txt");
    // Sparse: 200 MB on paper, nothing on disk; refused by its size before a byte is read.
    std::fs::File::create(&path).unwrap().set_len(200 * 1024 * 1024).unwrap();
    let err = load_file(&path).unwrap_err();
    assert!(matches!(err, LoadError::TooLarge(n) if n == 200 * 1024 * 1024), "{err}");
}
