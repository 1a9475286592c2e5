//! Helpers for tests: the sample documents (`../shared/sample-docs` beside the repository, or
//! `QUIRE_SAMPLE_DOCS`) and the installed models. Tests never write into the shared folder: they
//! copy what they need into a temporary folder first.

use std::path::{Path, PathBuf};

/// The shared sample documents. Panics with instructions when they are not there.
/// Found from the test's working folder (cargo runs tests in their package's folder), walking up
/// to the folder that holds `shared/`, not from a path baked in at compile time: the build is
/// shared between checkouts in different places.
pub fn sample_docs() -> PathBuf {
    if let Some(dir) = std::env::var_os("QUIRE_SAMPLE_DOCS") {
        return PathBuf::from(dir);
    }
    let cwd = std::env::current_dir().expect("current folder");
    let found = cwd.ancestors().map(|a| a.join("shared/sample-docs")).find(|d| d.is_dir());
    let dir = found.unwrap_or_else(|| {
        panic!("sample documents not found in shared/sample-docs above {}: set QUIRE_SAMPLE_DOCS", cwd.display())
    });
    dir.canonicalize().expect("canonical sample-docs path")
}

/// Three short German notes in a new temporary folder (a printer, leave requests, the package
/// manager), for the tests of search across languages: each is found by a question in another
/// language only by its meaning.
pub fn german_notes() -> tempfile::TempDir {
    let notes = [
        ("pakete.md", "# Paketverwaltung\n\nDer Paketmanager lädt für jede Paketquelle die Datei Packages herunter und prüft ihre Signatur, bevor er Pakete installiert.\n"),
        ("drucker.md", "# Drucker\n\nDer Farbdrucker im zweiten Stock druckt nur noch schwarz; die Tonerkassette für Cyan muss ersetzt werden.\n"),
        ("urlaub.md", "# Urlaub\n\nUrlaubsanträge werden spätestens vier Wochen vorher bei der Personalabteilung eingereicht.\n"),
    ];
    let tmp = tempfile::tempdir().expect("temp dir");
    for (name, text) in notes {
        std::fs::write(tmp.path().join(name), text).expect("a note written");
    }
    tmp
}

/// Copies `names` (files or folders, relative to the sample documents) into a new temporary folder.
pub fn copy_samples(names: &[&str]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("temp dir");
    for name in names {
        copy_tree(&sample_docs().join(name), &tmp.path().join(name));
    }
    tmp
}

fn copy_tree(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::copy(from, to).unwrap();
        // The shared files are read-only; copies must be writable so tests can edit or delete them.
        let mut perms = std::fs::metadata(to).unwrap().permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        perms.set_readonly(false);
        std::fs::set_permissions(to, perms).unwrap();
    }
}

/// An installed model's location; panics naming the command that fetches it.
pub fn model(model: &quire_models::KnownModel) -> PathBuf {
    assert!(model.is_installed(), "{}", quire_models::missing_model_error(model));
    model.location().unwrap()
}

/// A zip archive of `(name, bytes)` entries, each deflated, written here rather than with the zip
/// crate so tests can make any archive (a bomb, a lying header) without its writer's features.
pub fn zip_archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in entries {
        let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(data).unwrap();
        let packed = encoder.finish().unwrap();
        let crc = crc32fast::hash(data);
        let offset = out.len() as u32;
        let header = |sig: u32, central: bool| {
            let mut h = Vec::new();
            h.extend(sig.to_le_bytes());
            if central {
                h.extend(20u16.to_le_bytes()); // made by
            }
            h.extend(20u16.to_le_bytes()); // version needed
            h.extend(0u16.to_le_bytes()); // flags
            h.extend(8u16.to_le_bytes()); // deflate
            h.extend(0u32.to_le_bytes()); // time, date
            h.extend(crc.to_le_bytes());
            h.extend((packed.len() as u32).to_le_bytes());
            h.extend((data.len() as u32).to_le_bytes());
            h.extend((name.len() as u16).to_le_bytes());
            h.extend(0u16.to_le_bytes()); // extra
            if central {
                h.extend([0u8; 6]); // comment len, disk, internal attrs
                h.extend(0u32.to_le_bytes()); // external attrs
                h.extend(offset.to_le_bytes());
            }
            h.extend(name.as_bytes());
            h
        };
        out.extend(header(0x04034b50, false));
        out.extend(&packed);
        central.extend(header(0x02014b50, true));
    }
    let central_offset = out.len() as u32;
    out.extend(&central);
    out.extend(0x06054b50u32.to_le_bytes());
    out.extend([0u8; 4]); // disk numbers
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((entries.len() as u16).to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(central_offset.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

/// A Word document whose body is the given paragraphs.
pub fn docx(paragraphs: &[&str]) -> Vec<u8> {
    let body: String = paragraphs
        .iter()
        .map(|p| format!("<w:p><w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>", xml_escape(p)))
        .collect();
    let document = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\"><w:body>{body}</w:body></w:document>"
    );
    zip_archive(&[
        (
            "[Content_Types].xml",
            b"<?xml version=\"1.0\"?><Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\"/>",
        ),
        ("word/document.xml", document.as_bytes()),
    ])
}

/// An EPUB book with the given chapters (title, text), listed in the spine in that order but in
/// the manifest in reverse, so a reader must follow the spine.
pub fn epub(chapters: &[(&str, &str)]) -> Vec<u8> {
    let files: Vec<(String, String)> = chapters
        .iter()
        .enumerate()
        .map(|(i, (title, text))| {
            (
                format!("OEBPS/text/chapter {i}.xhtml"),
                format!(
                    "<?xml version=\"1.0\" encoding=\"utf-8\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><head><title>{0}</title></head><body><h1>{0}</h1><p>{1}</p></body></html>",
                    xml_escape(title),
                    xml_escape(text)
                ),
            )
        })
        .collect();
    let manifest: String = (0..chapters.len())
        .rev()
        .map(|i| format!("<item id=\"c{i}\" href=\"text/chapter%20{i}.xhtml\" media-type=\"application/xhtml+xml\"/>"))
        .collect();
    let spine: String = (0..chapters.len()).map(|i| format!("<itemref idref=\"c{i}\"/>")).collect();
    let opf = format!(
        "<?xml version=\"1.0\"?><package xmlns=\"http://www.idpf.org/2007/opf\" version=\"3.0\"><metadata/><manifest>{manifest}</manifest><spine>{spine}</spine></package>"
    );
    let container = "<?xml version=\"1.0\"?><container version=\"1.0\" xmlns=\"urn:oasis:names:tc:opendocument:xmlns:container\"><rootfiles><rootfile full-path=\"OEBPS/content.opf\" media-type=\"application/oebps-package+xml\"/></rootfiles></container>";
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("mimetype", b"application/epub+zip"),
        ("META-INF/container.xml", container.as_bytes()),
        ("OEBPS/content.opf", opf.as_bytes()),
    ];
    entries.extend(files.iter().map(|(n, t)| (n.as_str(), t.as_bytes())));
    zip_archive(&entries)
}

/// A one-page PDF whose trailer names an encryption dictionary no password opens (what a
/// password-protected PDF looks like to a reader without the password).
pub fn encrypted_pdf() -> Vec<u8> {
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>".to_string(),
        "<< /Length 44 >>\nstream\nBT /F1 12 Tf 72 712 Td (Secret text) Tj ET\nendstream".to_string(),
        format!(
            "<< /Filter /Standard /V 2 /R 3 /Length 128 /P -3904 /O <{}> /U <{}> >>",
            "ab".repeat(32),
            "cd".repeat(32)
        ),
    ];
    let ids = format!("/Encrypt 5 0 R /ID [<{}> <{}>]", "01".repeat(16), "01".repeat(16));
    pdf_file(&objects.map(String::into_bytes), &ids)
}

/// A page of text written for the tests (a heat pump's warranty card: seven years, the
/// compressor twelve, a service line 0800 555 0199), drawn at 150 dpi, turned 1.5°, with
/// noise, as a grayscale JPEG of 1240 × 760 pixels (`tools/make-scan-fixture.py` made it).
pub fn scanned_page_jpeg() -> &'static [u8] {
    include_bytes!("../fixtures/scanned-page.jpg")
}

/// How the scans of `scanned_pdf_as` are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanStorage {
    /// Gray, as a JPEG (DCTDecode): what a scanner makes of a page in gray or colour.
    Jpeg,
    /// Black and white, CCITT group 4 (CCITTFaxDecode, `/K -1`): an office scanner's usual.
    FaxGroup4,
    /// Black and white, CCITT group 3 one-dimensional with end-of-line codes (`/K 0
    /// /EndOfLine true`), as fax software stores pages (libtiff's coding, made by
    /// tools/make-scan-fixture.py).
    FaxGroup3,
    /// Gray JPEG stored on its side (the page fed sideways), the page's `/Rotate 90` turning it
    /// upright for display, as scanners that detect orientation do.
    JpegSideways,
    /// Gray JPEG 2000 (JPXDecode, a JP2 file), as archives and some scanners store pages.
    Jpeg2000,
    /// Black and white JBIG2 (JBIG2Decode, embedded: a page information segment and one
    /// generic region, MMR coded), what office scanners make of a black-and-white page.
    Jbig2,
    /// Claims to be JPEG 2000 and holds no such thing: a page that cannot be read.
    DamagedJpeg2000,
    /// CCITT group 4 whose data is random bytes (seeded): it decodes, to noise.
    NoiseFax,
    /// Gray JPEG stored on its side, drawn upright by the matrix that places it (`cm`), as phone
    /// scanning apps do, not by `/Rotate`.
    JpegTurnedByMatrix,
    /// Gray JPEG drawn by a form XObject that the page draws (as some scanning and editing
    /// software wraps a scan), not by the page itself.
    JpegInForm,
}

/// A PDF of scanned pages: each page the scan above and no text layer, as a scanner makes them.
pub fn scanned_pdf(pages: usize) -> Vec<u8> {
    scanned_pdf_as(pages, ScanStorage::Jpeg)
}

/// The scan in black and white (gray under 128 is black), CCITT group 4 encoded.
fn fax_group_4(width: u32, height: u32) -> Vec<u8> {
    let gray = image::load_from_memory_with_format(scanned_page_jpeg(), image::ImageFormat::Jpeg).unwrap().to_luma8();
    assert_eq!(gray.dimensions(), (width, height));
    let mut encoder = fax::encoder::Encoder::new(fax::VecWriter::new());
    for row in gray.rows() {
        let pels = row.map(|p| if p.0[0] < 128 { fax::Color::Black } else { fax::Color::White });
        encoder.encode_line(pels, width as u16).unwrap();
    }
    encoder.finish().unwrap().finish()
}

/// The scan in black and white as a JBIG2 stream in PDF's embedded organization (ITU-T T.88
/// annex D.3): a page information segment, then an immediate lossless generic region of the
/// whole page coded by MMR (CCITT group 4's code, black runs 1).
fn jbig2_generic_region(width: u32, height: u32) -> Vec<u8> {
    let segment = |number: u32, kind: u8, data: &[u8]| {
        let mut out = number.to_be_bytes().to_vec();
        // Type (1-byte page association), no referred-to segments, page 1, the data's length.
        out.extend_from_slice(&[kind, 0, 1]);
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(data);
        out
    };
    let mut page = Vec::new();
    for v in [width, height, 0, 0] {
        page.extend_from_slice(&v.to_be_bytes()); // size, then resolution unknown
    }
    page.extend_from_slice(&[0, 0, 0]); // white page, no striping
    let mut region = Vec::new();
    for v in [width, height, 0, 0] {
        region.extend_from_slice(&v.to_be_bytes()); // size, at the page's origin
    }
    region.push(0); // combined by OR
    region.push(1); // MMR
    region.extend(fax_group_4(width, height));
    let mut stream = segment(0, 48, &page);
    stream.extend(segment(1, 39, &region));
    stream
}

/// A PNG whose header claims `width` × `height` gray pixels and whose data holds next to none:
/// what a decompression bomb looks like to a decoder before it allocates.
pub fn png_claiming(width: u32, height: u32) -> Vec<u8> {
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut out = (data.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let mut crc = crc32fast::Hasher::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(&crc.finalize().to_be_bytes());
        out
    };
    let mut header = width.to_be_bytes().to_vec();
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[8, 0, 0, 0, 0]); // 8-bit gray, deflate, adaptive filter, no interlace
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend(chunk(b"IHDR", &header));
    png.extend(chunk(b"IDAT", &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01]));
    png.extend(chunk(b"IEND", &[]));
    png
}

/// A multi-page TIFF (a scanner's file of a whole document): `pages` pages of the scan, 8-bit
/// gray, uncompressed.
pub fn scanned_tiff(pages: usize) -> Vec<u8> {
    let gray = image::load_from_memory_with_format(scanned_page_jpeg(), image::ImageFormat::Jpeg).unwrap().to_luma8();
    let mut file = std::io::Cursor::new(Vec::new());
    let mut tiff = tiff::encoder::TiffEncoder::new(&mut file).unwrap();
    for _ in 0..pages {
        tiff.write_image::<tiff::encoder::colortype::Gray8>(gray.width(), gray.height(), gray.as_raw()).unwrap();
    }
    file.into_inner()
}

/// `scanned_pdf` with its pages stored as `storage` says.
pub fn scanned_pdf_as(pages: usize, storage: ScanStorage) -> Vec<u8> {
    scanned_pdf_of(&vec![storage; pages])
}

/// A photo with no text on it (a wall in soft light), as a JPEG.
pub fn textless_photo_jpeg() -> Vec<u8> {
    let photo = image::GrayImage::from_fn(800, 600, |x, y| image::Luma([(120 + x * 60 / 800 + y * 40 / 600) as u8]));
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 85).encode_image(&photo).unwrap();
    jpeg
}

/// A scanned PDF whose pages are stored as `pages` says, one after the other.
pub fn scanned_pdf_of(pages: &[ScanStorage]) -> Vec<u8> {
    // 1240 × 760 pixels at 150 dpi, in points.
    let (pixels_wide, pixels_high) = (1240, 760);
    let (width, height) = (595.2, 364.8);
    // Per page three objects from 3 on: its image (or the form that draws it), the page, its
    // content; the images of forms after all the pages.
    let kids: Vec<String> = (0..pages.len()).map(|i| format!("{} 0 R", 4 + 3 * i)).collect();
    let mut drawn_by_forms = Vec::new();
    let mut objects = vec![
        b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
        format!("<< /Type /Pages /Kids [{}] /Count {} >>", kids.join(" "), pages.len()).into_bytes(),
    ];
    for (i, &storage) in pages.iter().enumerate() {
        let gray_jpeg = |w: u32, h: u32| format!("/Width {w} /Height {h} /BitsPerComponent 8 /Filter /DCTDecode");
        let (data, format) = match storage {
            ScanStorage::Jpeg | ScanStorage::JpegInForm => {
                (scanned_page_jpeg().to_vec(), gray_jpeg(pixels_wide, pixels_high))
            }
            ScanStorage::FaxGroup4 => (
                fax_group_4(pixels_wide, pixels_high),
                format!(
                    "/Width {pixels_wide} /Height {pixels_high} /BitsPerComponent 1 /Filter /CCITTFaxDecode \
                     /DecodeParms << /K -1 /Columns {pixels_wide} /Rows {pixels_high} >>"
                ),
            ),
            ScanStorage::FaxGroup3 => (
                include_bytes!("../fixtures/scanned-page.g3").to_vec(),
                format!(
                    "/Width {pixels_wide} /Height {pixels_high} /BitsPerComponent 1 /Filter /CCITTFaxDecode \
                     /DecodeParms << /K 0 /EndOfLine true /Columns {pixels_wide} /Rows {pixels_high} >>"
                ),
            ),
            ScanStorage::JpegSideways | ScanStorage::JpegTurnedByMatrix => {
                (sideways_jpeg(), gray_jpeg(pixels_high, pixels_wide))
            }
            ScanStorage::Jpeg2000 => (
                include_bytes!("../fixtures/scanned-page.jp2").to_vec(),
                format!("/Width {pixels_wide} /Height {pixels_high} /BitsPerComponent 8 /Filter /JPXDecode"),
            ),
            ScanStorage::Jbig2 => (
                jbig2_generic_region(pixels_wide, pixels_high),
                format!("/Width {pixels_wide} /Height {pixels_high} /BitsPerComponent 1 /Filter /JBIG2Decode"),
            ),
            ScanStorage::NoiseFax => (
                {
                    let mut state = 0x9e37_79b9_7f4a_7c15u64;
                    (0..40_000)
                        .map(|_| {
                            state ^= state << 13;
                            state ^= state >> 7;
                            state ^= state << 17;
                            state as u8
                        })
                        .collect()
                },
                format!(
                    "/Width {pixels_wide} /Height {pixels_high} /BitsPerComponent 1 /Filter /CCITTFaxDecode \
                     /DecodeParms << /K -1 /Columns {pixels_wide} /Rows {pixels_high} >>"
                ),
            ),
            ScanStorage::DamagedJpeg2000 => (
                b"\0\0\0\x0cjP  \r\n\x87\n not really".to_vec(),
                format!("/Width {pixels_wide} /Height {pixels_high} /BitsPerComponent 8 /Filter /JPXDecode"),
            ),
        };
        let mut image = format!(
            "<< /Type /XObject /Subtype /Image /ColorSpace /DeviceGray {format} /Length {} >>\nstream\n",
            data.len()
        )
        .into_bytes();
        image.extend_from_slice(&data);
        image.extend_from_slice(b"\nendstream");
        if storage == ScanStorage::JpegInForm {
            let number = 3 + 3 * pages.len() + drawn_by_forms.len();
            drawn_by_forms.push(image);
            let draw = "q 1 0 0 1 0 0 cm /Picture Do Q";
            objects.push(
                format!(
                    "<< /Type /XObject /Subtype /Form /BBox [0 0 1 1] \
                     /Resources << /XObject << /Picture {number} 0 R >> >> /Length {} >>\nstream\n{draw}\nendstream",
                    draw.len()
                )
                .into_bytes(),
            );
        } else {
            objects.push(image);
        }
        // A sideways page is as tall as the others are wide, and shown turned.
        let (box_wide, box_high, turn) =
            if storage == ScanStorage::JpegSideways { (height, width, " /Rotate 90") } else { (width, height, "") };
        let draw = if storage == ScanStorage::JpegTurnedByMatrix {
            // The image's rows run down the page and its columns across: turned a quarter
            // clockwise, filling the page (the unit square's corner (0, 0) at the top left).
            format!("q 0 -{box_high} {box_wide} 0 0 {box_high} cm /Scan Do Q")
        } else {
            format!("q {box_wide} 0 0 {box_high} 0 0 cm /Scan Do Q")
        };
        objects.push(
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {box_wide} {box_high}]{turn} \
                 /Resources << /XObject << /Scan {} 0 R >> >> /Contents {} 0 R >>",
                3 + 3 * i,
                5 + 3 * i
            )
            .into_bytes(),
        );
        objects.push(format!("<< /Length {} >>\nstream\n{draw}\nendstream", draw.len()).into_bytes());
    }
    objects.extend(drawn_by_forms);
    pdf_file(&objects, "")
}

/// The scan turned a quarter counter-clockwise (lying on its side), as a JPEG.
fn sideways_jpeg() -> Vec<u8> {
    let gray = image::load_from_memory_with_format(scanned_page_jpeg(), image::ImageFormat::Jpeg).unwrap().to_luma8();
    let turned = image::imageops::rotate270(&gray);
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90).encode_image(&turned).unwrap();
    jpeg
}

/// A PDF file of `objects` (numbered from 1, the first the catalog) with its cross-reference
/// table; `trailer` adds entries to the trailer.
fn pdf_file(objects: &[Vec<u8>], trailer: &str) -> Vec<u8> {
    let mut pdf = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, body) in objects.iter().enumerate() {
        offsets.push(pdf.len());
        pdf.extend(format!("{} 0 obj\n", i + 1).as_bytes());
        pdf.extend(body);
        pdf.extend(b"\nendobj\n");
    }
    let xref = pdf.len();
    pdf.extend(format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes());
    for o in offsets {
        pdf.extend(format!("{o:010} 00000 n \n").as_bytes());
    }
    pdf.extend(
        format!("trailer\n<< /Size {} /Root 1 0 R {trailer} >>\nstartxref\n{xref}\n%%EOF\n", objects.len() + 1)
            .as_bytes(),
    );
    pdf
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Every file under `dir` with its bytes.
pub fn files_under(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The files under `dir` that hold `phrase` (as UTF-8 bytes, in any letter case): what someone
/// with the disk and grep would find.
pub fn files_holding(dir: &Path, phrase: &str) -> Vec<PathBuf> {
    let needle = phrase.to_lowercase().into_bytes();
    files_under(dir)
        .into_iter()
        .filter(|(_, bytes)| bytes.to_ascii_lowercase().windows(needle.len()).any(|w| w == needle.as_slice()))
        .map(|(p, _)| p)
        .collect()
}

/// A Quire home folder of a test's own and the `quire` command run in it, as a person would
/// run it: the installed models, no passphrase from the test's environment unless `passphrase`
/// sets one (then collections are protected by it, not the OS keychain).
pub struct QuireHome {
    pub dir: tempfile::TempDir,
    exe: PathBuf,
    passphrase: Option<String>,
}

impl QuireHome {
    /// `exe` is the `quire` binary (`env!("CARGO_BIN_EXE_quire")` in the test).
    pub fn new(exe: &str) -> QuireHome {
        QuireHome { dir: tempfile::tempdir().expect("temp dir"), exe: exe.into(), passphrase: None }
    }

    pub fn with_passphrase(exe: &str, passphrase: &str) -> QuireHome {
        QuireHome { passphrase: Some(passphrase.into()), ..QuireHome::new(exe) }
    }

    pub fn command(&self, args: &[&str]) -> std::process::Command {
        self.program(&self.exe, args)
    }

    /// Another program (strace, unshare) with this home's environment, as `command` sets it.
    pub fn program(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(program);
        c.args(args)
            .env("QUIRE_HOME", self.dir.path())
            .env("QUIRE_MODELS", quire_models::models_dir().expect("models folder"))
            // The tests read the command line's English, whatever the machine's locale.
            .env("QUIRE_LANGUAGE", "en")
            .env_remove("QUIRE_PASSPHRASE");
        if let Some(p) = &self.passphrase {
            c.env("QUIRE_PASSPHRASE", p);
        }
        c
    }

    /// Runs `quire args…` to the end; its output is printed for the test's log.
    pub fn quire(&self, args: &[&str]) -> std::process::Output {
        self.run(self.command(args), args)
    }

    /// Runs a command made by `command` or `program` to the end, printing its output for the
    /// test's log under `shown` (its arguments, or what it does).
    pub fn run(&self, mut command: std::process::Command, shown: &[&str]) -> std::process::Output {
        let out = command.output().expect("the command runs");
        eprintln!("$ quire {}\n{}{}", shown.join(" "), text(&out.stdout), text(&out.stderr));
        out
    }

    /// The default collection's folder.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("index")
    }
}

/// A process's output as text, for assertions and messages.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Resident memory and CPU time used so far (user + system, seconds) of process `pid`, read
/// from /proc (Linux; compiled on Unix, where the tests that call it are built).
#[cfg(unix)]
pub fn process_usage(pid: u32) -> (u64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("process stat");
    // Fields after the command name (which may hold spaces, and ends with the last ')').
    let fields: Vec<&str> = stat[stat.rfind(')').expect("stat format") + 2..].split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (rss_kb * 1024, ticks / per_second)
}

/// Damages `file` as a failing disk or a stray write would: the bytes `de ad be ef` written at
/// each offset (wrapping at the file's end).
pub fn damage_file(file: &Path, offsets: &[usize]) {
    let mut bytes = std::fs::read(file).unwrap();
    let len = bytes.len();
    for &at in offsets {
        for (i, b) in [0xde, 0xad, 0xbe, 0xef].into_iter().enumerate() {
            bytes[(at + i) % len] = b;
        }
    }
    std::fs::write(file, bytes).unwrap();
}
