//! Scans: images (PNG, JPEG, TIFF with all its pages, WebP) and PDF pages that are pictures of text, read by OCR
//! (`quire-ocr`, PP-OCR). The OCR models are the ones installed in the models folder
//! (`quire_models::PP_OCR`); without them a scan is reported as needing them. The engine is
//! loaded once per process, at the first scanned page (a loader worker reads one file).
//!
//! From a PDF page, the images it draws are decoded: JPEG (DCTDecode), Flate/LZW or raw samples
//! (gray, RGB or CMYK, 8 bits; 1-bit gray), and by hayro's pure-Rust decoders CCITT fax (group
//! 3 and 4), JBIG2 (with its shared segments) and JPEG 2000. A page whose text is drawn as vector
//! shapes is not rendered: such pages are reported unreadable, with the reason. A page's `/Rotate` is applied to its scan,
//! and so is a turn in the matrix that places the image (where the page draws it itself).

use std::io::Cursor;
use std::sync::OnceLock;

use pdf_extract::{Dictionary, Document, Object, ObjectId, Stream};
use quire_ocr::{image, DynamicImage, Ocr};

use crate::LoadError;

/// A page with fewer letters or digits than this in its text layer is taken for a scan when it
/// draws an image (a scanner's PDF may carry a page number or a stamp as text).
const SCAN_TEXT_CHARS: usize = 16;
/// Decoding refuses images larger than this (a crafted header would otherwise allocate for it).
const MAX_IMAGE_PIXELS: u64 = 100_000_000;
/// Images smaller than this in either side are decorations, not pages of text.
const MIN_SCAN_SIDE: i64 = 200;

/// The process's OCR engine, loaded at first use; `Err(None)` when the model is not installed.
fn ocr() -> Result<&'static Ocr, LoadError> {
    static ENGINE: OnceLock<Result<Ocr, Option<String>>> = OnceLock::new();
    let loaded = ENGINE.get_or_init(|| {
        let model = &quire_models::PP_OCR;
        if !model.is_installed() {
            return Err(None);
        }
        let folder = model.location().map_err(|e| Some(e.to_string()))?;
        Ocr::load(&folder).map_err(|e| Some(format!("{e:#}")))
    });
    match loaded {
        Ok(ocr) => Ok(ocr),
        Err(None) => Err(LoadError::NeedsOcr),
        Err(Some(reason)) => Err(LoadError::Ocr(reason.clone())),
    }
}

/// True when a page's text layer is too thin to be the page's text.
pub(crate) fn looks_scanned(text: &str) -> bool {
    text.chars().filter(|c| c.is_alphanumeric()).count() < SCAN_TEXT_CHARS
}

/// The text of each page of an image file: a TIFF may hold several (a scanner's multi-page
/// file), the other formats one.
pub(crate) fn image_text(bytes: &[u8]) -> Result<Vec<String>, LoadError> {
    if image::guess_format(bytes).ok() == Some(image::ImageFormat::Tiff) {
        return tiff_text(bytes);
    }
    Ok(vec![read_page((1, 1), || decode_image(bytes, None))?])
}

fn tiff_error(e: tiff::TiffError) -> LoadError {
    LoadError::Image(e.to_string())
}

/// Each page of a TIFF decoded, read and let go in turn (a long fax holds hundreds of MB
/// decoded); the pages are counted first, from their headers alone, for the progress.
fn tiff_text(bytes: &[u8]) -> Result<Vec<String>, LoadError> {
    use tiff::decoder::{Decoder, Limits};
    let open = || {
        let mut limits = Limits::default();
        limits.decoding_buffer_size = (MAX_IMAGE_PIXELS * 4) as usize;
        Decoder::new(Cursor::new(bytes)).map(|d| d.with_limits(limits)).map_err(tiff_error)
    };
    let mut headers = open()?;
    let mut count = 1;
    while headers.more_images() {
        headers.next_image().map_err(tiff_error)?;
        count += 1;
    }
    let mut decoder = open()?;
    let mut texts = Vec::with_capacity(count as usize);
    for number in 1..=count {
        if number > 1 {
            decoder.next_image().map_err(tiff_error)?;
        }
        texts.push(read_page((number, count), || tiff_page(&mut decoder))?);
    }
    Ok(texts)
}

/// The decoder's current TIFF page: 8-bit gray, RGB or RGBA, or 1-bit black and white (white is
/// 0 or 1 as the file says).
fn tiff_page(decoder: &mut tiff::decoder::Decoder<Cursor<&[u8]>>) -> Result<DynamicImage, LoadError> {
    let (width, height) = decoder.dimensions().map_err(tiff_error)?;
    if u64::from(width) * u64::from(height) > MAX_IMAGE_PIXELS {
        return Err(too_large(width, height));
    }
    let color = decoder.colortype().map_err(tiff_error)?;
    let white_is_zero =
        decoder.find_tag_unsigned::<u32>(tiff::tags::Tag::PhotometricInterpretation).ok().flatten() == Some(0);
    let tiff::decoder::DecodingResult::U8(samples) = decoder.read_image().map_err(tiff_error)? else {
        return Err(unsupported(&format!("a TIFF page in {color:?}")));
    };
    let short = || LoadError::Image("a page of the TIFF has fewer samples than its size says".into());
    Ok(match color {
        tiff::ColorType::Gray(8) => {
            let mut gray = image::GrayImage::from_raw(width, height, samples).ok_or_else(short)?;
            if white_is_zero {
                image::imageops::invert(&mut gray);
            }
            DynamicImage::ImageLuma8(gray)
        }
        tiff::ColorType::Gray(1) => bilevel(&samples, width, height, !white_is_zero).ok_or_else(short)?,
        tiff::ColorType::RGB(8) => {
            DynamicImage::ImageRgb8(image::RgbImage::from_raw(width, height, samples).ok_or_else(short)?)
        }
        tiff::ColorType::RGBA(8) => {
            DynamicImage::ImageRgba8(image::RgbaImage::from_raw(width, height, samples).ok_or_else(short)?)
        }
        other => return Err(unsupported(&format!("a TIFF page in {other:?}"))),
    })
}

/// The text of page `at.0` of `at.1`: as it was read before (`pages_read`), or OCR of the image
/// `decode` gives; reported as read, with its text (a loader child's progress).
fn read_page(at: (u32, u32), decode: impl FnOnce() -> Result<DynamicImage, LoadError>) -> Result<String, LoadError> {
    let text = match crate::pages_read::read_before(at.0) {
        Some(text) => text,
        None => {
            let page = ocr()?.read(&decode()?).map_err(|e| LoadError::Ocr(format!("{e:#}")))?;
            // A letter or two is what OCR makes of noise (a damaged image, a speckled blank
            // page), not text a person would look for.
            let letters = page.text.chars().filter(|c| c.is_alphanumeric()).count();
            if letters < OCR_LEAST_LETTERS {
                String::new()
            } else {
                page.text
            }
        }
    };
    crate::limits::report_page_read(at.0, at.1, &text);
    Ok(text)
}

/// The fewest letters and digits an OCR'd page must hold to count as text.
const OCR_LEAST_LETTERS: usize = 3;

fn decode_image(bytes: &[u8], format: Option<image::ImageFormat>) -> Result<DynamicImage, LoadError> {
    let mut reader = image::ImageReader::new(Cursor::new(bytes));
    reader = match format {
        Some(format) => {
            reader.set_format(format);
            reader
        }
        None => reader.with_guessed_format().map_err(|e| LoadError::Image(e.to_string()))?,
    };
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_IMAGE_PIXELS * 4);
    reader.limits(limits);
    reader.decode().map_err(|e| match e {
        // The header says how big: said in pixels, not as the decoder's "Memory limit exceeded".
        image::ImageError::Limits(_) => image::ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .ok()
            .and_then(|r| r.into_dimensions().ok())
            .map(|(width, height)| too_large(width, height))
            .unwrap_or_else(|| LoadError::Image(e.to_string())),
        e => LoadError::Image(e.to_string()),
    })
}

fn too_large(width: u32, height: u32) -> LoadError {
    LoadError::ImageTooLarge { width, height, limit: MAX_IMAGE_PIXELS / 1_000_000 }
}

/// What OCR read on a PDF page that looks scanned (page `at.0` of `at.1`): `Ok(None)` when the
/// page draws no image big enough to be a scan; an error when it does but it cannot be read.
pub(crate) fn pdf_page_text(doc: &Document, page: ObjectId, at: (u32, u32)) -> Result<Option<String>, LoadError> {
    let Some(stream) = largest_image(doc, page) else { return Ok(None) };
    read_page(at, || {
        let image = decode_pdf_image(doc, stream)?;
        // Shown as the page is shown: a scanner that finds a page fed sideways or upside down
        // turns it with `/Rotate`, or draws the pixels turned by the matrix that places them, and
        // leaves the pixels as they came (the detector reads upright lines).
        Ok(match (placement_turn(doc, page, stream) + page_rotation(doc, page)) % 360 {
            90 => image.rotate90(),
            180 => image.rotate180(),
            270 => image.rotate270(),
            _ => image,
        })
    })
    .map(Some)
}

/// How far the page's content turns `image` where it draws it, in clockwise degrees 0, 90,
/// 180 or 270: the direction of the image's rows under the transformation matrix at its `Do`
/// (`q`, `Q` and `cm` followed). 0 when the page does not draw it by name itself (it is inside
/// a form) or its content cannot be read.
fn placement_turn(doc: &Document, page: ObjectId, image: &Stream) -> i64 {
    let Ok((Some(resources), _)) = doc.get_page_resources(page) else { return 0 };
    let Ok(xobjects) = resources.get(b"XObject").and_then(|o| resolve(doc, o)).and_then(Object::as_dict) else {
        return 0;
    };
    let Ok(content) = doc.get_and_decode_page_content(page) else { return 0 };
    // The linear part of the matrix, [a b c d]: enough for a turn.
    let mut matrix = [1f32, 0.0, 0.0, 1.0];
    let mut saved = Vec::new();
    for operation in &content.operations {
        match operation.operator.as_str() {
            "q" => saved.push(matrix),
            "Q" => matrix = saved.pop().unwrap_or([1.0, 0.0, 0.0, 1.0]),
            "cm" => {
                let m: Vec<f32> = operation.operands.iter().filter_map(|o| o.as_float().ok()).collect();
                if let [a, b, c, d, ..] = m[..] {
                    // The new matrix is m × the current one.
                    let [e, f, g, h] = matrix;
                    matrix = [a * e + b * g, a * f + b * h, c * e + d * g, c * f + d * h];
                }
            }
            "Do" => {
                let drawn =
                    operation.operands.first().and_then(|o| o.as_name().ok()).and_then(|name| xobjects.get(name).ok());
                if drawn
                    .and_then(|o| resolve(doc, o).ok())
                    .and_then(|o| o.as_stream().ok())
                    .is_some_and(|s| std::ptr::eq(s, image))
                {
                    // The image's rows run along (a, b) on the page (y up): their angle
                    // counter-clockwise, turned back clockwise.
                    let counter_clockwise = matrix[1].atan2(matrix[0]).to_degrees();
                    let quarter = (counter_clockwise / 90.0).round() as i64;
                    return (-quarter * 90).rem_euclid(360);
                }
            }
            _ => {}
        }
    }
    0
}

/// The page's `/Rotate` (its own or inherited from the page tree), in clockwise degrees 0, 90,
/// 180 or 270.
fn page_rotation(doc: &Document, page: ObjectId) -> i64 {
    let mut node = doc.get_dictionary(page).ok();
    // A page tree deeper than this is a loop in a damaged file.
    for _ in 0..64 {
        let Some(dict) = node else { break };
        if let Ok(rotate) = dict.get(b"Rotate").and_then(|o| resolve(doc, o)).and_then(Object::as_i64) {
            return rotate.rem_euclid(360) / 90 * 90;
        }
        node = dict.get(b"Parent").and_then(Object::as_reference).and_then(|id| doc.get_dictionary(id)).ok();
    }
    0
}

/// The page's largest image XObject of at least `MIN_SCAN_SIDE` pixels a side: drawn by the
/// page itself or inside a form XObject it draws (as some scanning and editing software wraps
/// a scan), forms within forms to a depth of `MAX_FORM_DEPTH`.
fn largest_image(doc: &Document, page: ObjectId) -> Option<&Stream> {
    let (own, inherited) = doc.get_page_resources(page).ok()?;
    let resources = own.into_iter().chain(inherited.iter().filter_map(|id| doc.get_dictionary(*id).ok()));
    let mut best: Option<(i64, &Stream)> = None;
    for dict in resources {
        largest_image_in(doc, dict, 0, &mut best);
    }
    best.map(|(_, stream)| stream)
}

/// How deep forms inside forms are looked into (a loop of forms in a damaged file ends here).
const MAX_FORM_DEPTH: usize = 4;

/// The largest image among the XObjects of `resources` and of the forms among them, kept in
/// `best` with its area.
fn largest_image_in<'a>(
    doc: &'a Document,
    resources: &'a Dictionary,
    depth: usize,
    best: &mut Option<(i64, &'a Stream)>,
) {
    let Ok(xobjects) = resources.get(b"XObject").and_then(|o| resolve(doc, o)).and_then(Object::as_dict) else {
        return;
    };
    for (_, object) in xobjects.iter() {
        let Ok(stream) = resolve(doc, object).and_then(Object::as_stream) else { continue };
        match stream.dict.get(b"Subtype").and_then(Object::as_name).ok() {
            Some(b"Image") => {
                let (w, h) = (int(doc, &stream.dict, b"Width"), int(doc, &stream.dict, b"Height"));
                if w.min(h) >= MIN_SCAN_SIDE && best.is_none_or(|(area, _)| w * h > area) {
                    *best = Some((w * h, stream));
                }
            }
            Some(b"Form") if depth < MAX_FORM_DEPTH => {
                if let Ok(inner) = stream.dict.get(b"Resources").and_then(|o| resolve(doc, o)).and_then(Object::as_dict)
                {
                    largest_image_in(doc, inner, depth + 1, best);
                }
            }
            _ => {}
        }
    }
}

fn resolve<'a>(doc: &'a Document, object: &'a Object) -> Result<&'a Object, pdf_extract::Error> {
    match object {
        Object::Reference(id) => doc.get_object(*id),
        other => Ok(other),
    }
}

fn int(doc: &Document, dict: &Dictionary, key: &[u8]) -> i64 {
    dict.get(key).and_then(|o| resolve(doc, o)).and_then(Object::as_i64).unwrap_or(0)
}

fn unsupported(what: &str) -> LoadError {
    LoadError::Image(format!("the page is a scan stored as {what}, which Quire cannot decode"))
}

/// Decodes an image XObject into pixels.
fn decode_pdf_image(doc: &Document, stream: &Stream) -> Result<DynamicImage, LoadError> {
    let dict = &stream.dict;
    let filters: Vec<Vec<u8>> = match dict.get(b"Filter").and_then(|o| resolve(doc, o)) {
        Ok(Object::Name(name)) => vec![name.clone()],
        Ok(Object::Array(names)) => names.iter().filter_map(|n| n.as_name().ok().map(<[u8]>::to_vec)).collect(),
        _ => Vec::new(),
    };
    let (width, height) = (int(doc, dict, b"Width"), int(doc, dict, b"Height"));
    if width <= 0 || height <= 0 || (width as u64) * (height as u64) > MAX_IMAGE_PIXELS {
        return Err(LoadError::Image(format!("the page's image is {width}×{height} pixels")));
    }
    let last = filters.last().map(Vec::as_slice);
    match last {
        Some(b"DCTDecode") if filters.len() == 1 => decode_image(&stream.content, Some(image::ImageFormat::Jpeg)),
        Some(b"JPXDecode") if filters.len() == 1 => jpeg_2000_image(&stream.content),
        Some(b"JBIG2Decode") if filters.len() == 1 => jbig2_image(doc, dict, &stream.content),
        Some(b"CCITTFaxDecode") if filters.len() == 1 => fax_image(doc, dict, &stream.content, width, height),
        Some(b"DCTDecode" | b"CCITTFaxDecode" | b"JPXDecode" | b"JBIG2Decode") => Err(unsupported("a filter chain")),
        _ => {
            let samples = stream.decompressed_content().map_err(|e| LoadError::Image(e.to_string()))?;
            raw_image(doc, dict, samples, width as u32, height as u32)
        }
    }
}

/// A JPEG 2000 image (JPXDecode: a JP2 file or a bare codestream), gray, RGB or CMYK, its
/// declared size checked before it is decoded.
fn jpeg_2000_image(data: &[u8]) -> Result<DynamicImage, LoadError> {
    let damaged =
        |e: hayro_jpeg2000::DecodeError| LoadError::Image(format!("the page's JPEG 2000 image is damaged ({e})"));
    let jpx = hayro_jpeg2000::Image::new(data, &hayro_jpeg2000::DecodeSettings::default()).map_err(damaged)?;
    let (width, height) = (jpx.width(), jpx.height());
    if width as u64 * height as u64 > MAX_IMAGE_PIXELS {
        return Err(LoadError::Image(format!("the page's image is {width}×{height} pixels")));
    }
    let channels = jpx.color_space().num_channels() as usize + usize::from(jpx.has_alpha());
    let mut context = hayro_jpeg2000::DecoderContext::default();
    let samples = jpx.decode(&mut context).map_err(damaged)?.data_u8();
    let image = match channels {
        1 | 2 => {
            image::GrayImage::from_fn(width, height, |x, y| image::Luma([samples[(y * width + x) as usize * channels]]))
                .into()
        }
        3 | 4 if !matches!(jpx.color_space(), hayro_jpeg2000::ColorSpace::CMYK) => {
            image::RgbImage::from_fn(width, height, |x, y| {
                let at = (y * width + x) as usize * channels;
                image::Rgb([samples[at], samples[at + 1], samples[at + 2]])
            })
            .into()
        }
        4 | 5 => image::GrayImage::from_fn(width, height, |x, y| {
            // CMYK as the gray the ink leaves.
            let at = (y * width + x) as usize * channels;
            let ink =
                (samples[at] as u32 + samples[at + 1] as u32 + samples[at + 2] as u32) / 3 + samples[at + 3] as u32;
            image::Luma([255u32.saturating_sub(ink) as u8])
        })
        .into(),
        _ => return Err(LoadError::Image(format!("the page's JPEG 2000 image has {channels} channels"))),
    };
    Ok(image)
}

/// A JBIG2 image (JBIG2Decode, embedded: the page's segments, with the shared ones of its
/// `/JBIG2Globals`), black and white, its declared size checked before it is decoded.
fn jbig2_image(doc: &Document, dict: &Dictionary, data: &[u8]) -> Result<DynamicImage, LoadError> {
    let damaged = |e: hayro_jbig2::DecodeError| LoadError::Image(format!("the page's JBIG2 image is damaged ({e})"));
    let settings = hayro_jbig2::DecodeSettings::default();
    let globals = dict
        .get(b"DecodeParms")
        .and_then(|o| resolve(doc, o))
        .and_then(Object::as_dict)
        .and_then(|parms| parms.get(b"JBIG2Globals"))
        .and_then(|o| resolve(doc, o))
        .and_then(Object::as_stream)
        .ok()
        .map(|stream| stream.decompressed_content().unwrap_or_else(|_| stream.content.clone()));
    let globals = globals.map(|g| hayro_jbig2::Globals::new(&g, &settings)).transpose().map_err(damaged)?;
    let page = hayro_jbig2::Page::new_embedded(data, globals.as_ref(), &settings).map_err(damaged)?;
    let (width, height) = (page.width(), page.height());
    if width as u64 * height as u64 > MAX_IMAGE_PIXELS {
        return Err(LoadError::Image(format!("the page's image is {width}×{height} pixels")));
    }
    let mut pixels = Bilevel { gray: Vec::with_capacity(width as usize * height as usize) };
    page.decode(&mut pixels).map_err(damaged)?;
    pixels.gray.resize(width as usize * height as usize, 255);
    Ok(image::GrayImage::from_raw(width, height, pixels.gray).expect("the buffer holds the page").into())
}

/// JBIG2's pixels as gray bytes: black 0, white 255.
struct Bilevel {
    gray: Vec<u8>,
}

impl hayro_jbig2::Decoder for Bilevel {
    fn push_pixel(&mut self, black: bool) {
        self.gray.push(if black { 0 } else { 255 });
    }

    fn push_pixel_chunk(&mut self, black: bool, chunk_count: u32) {
        let value = if black { 0 } else { 255 };
        self.gray.extend(std::iter::repeat_n(value, 8 * chunk_count as usize));
    }

    fn next_line(&mut self) {}
}

/// Raw samples: 8-bit gray, RGB or CMYK, or 1-bit gray (1 is white unless `/Decode [1 0]`).
fn raw_image(
    doc: &Document,
    dict: &Dictionary,
    samples: Vec<u8>,
    width: u32,
    height: u32,
) -> Result<DynamicImage, LoadError> {
    let bits = int(doc, dict, b"BitsPerComponent");
    let is_mask = dict.get(b"ImageMask").and_then(Object::as_bool).unwrap_or(false);
    let components = if is_mask { 1 } else { color_components(doc, dict)? };
    let inverted = dict
        .get(b"Decode")
        .and_then(Object::as_array)
        .is_ok_and(|d| d.first().and_then(|v| v.as_float().ok()) == Some(1.0));
    let short = || LoadError::Image("the page's image has fewer samples than its size says".into());
    match (bits, components) {
        // A mask paints where the sample is 0 (by default): black ink on white paper.
        _ if is_mask || (bits, components) == (1, 1) => {
            bilevel(&samples, width, height, !is_mask ^ inverted).ok_or_else(short)
        }
        (8, 1) => image::GrayImage::from_raw(width, height, truncated(samples, width * height))
            .map(DynamicImage::ImageLuma8)
            .ok_or_else(short),
        (8, 3) => image::RgbImage::from_raw(width, height, truncated(samples, width * height * 3))
            .map(DynamicImage::ImageRgb8)
            .ok_or_else(short),
        (8, 4) => {
            let cmyk = truncated(samples, width * height * 4);
            if cmyk.len() < (width * height * 4) as usize {
                return Err(short());
            }
            let rgb = cmyk.chunks_exact(4).flat_map(|p| {
                let k = 255 - p[3] as u32;
                [0, 1, 2].map(|i| ((255 - p[i] as u32) * k / 255) as u8)
            });
            Ok(DynamicImage::ImageRgb8(image::RgbImage::from_raw(width, height, rgb.collect()).ok_or_else(short)?))
        }
        _ => Err(unsupported(&format!("{components} colour components of {bits} bits"))),
    }
}

/// 1-bit samples, rows padded to whole bytes, most significant bit first, as white and black;
/// `None` when there are fewer samples than the size says.
fn bilevel(samples: &[u8], width: u32, height: u32, one_is_white: bool) -> Option<DynamicImage> {
    let row = (width as usize).div_ceil(8);
    if samples.len() < row * height as usize {
        return None;
    }
    Some(DynamicImage::ImageLuma8(image::GrayImage::from_fn(width, height, |x, y| {
        let bit = samples[y as usize * row + x as usize / 8] >> (7 - x % 8) & 1 == 1;
        image::Luma([if bit == one_is_white { 255 } else { 0 }])
    })))
}

fn truncated(mut samples: Vec<u8>, len: u32) -> Vec<u8> {
    samples.truncate(len as usize);
    samples
}

/// The number of colour components of the image's colour space (gray, RGB, CMYK, ICC-based).
fn color_components(doc: &Document, dict: &Dictionary) -> Result<u32, LoadError> {
    let space = dict.get(b"ColorSpace").and_then(|o| resolve(doc, o));
    let name = |n: &[u8]| match n {
        b"DeviceGray" | b"CalGray" | b"G" => Ok(1),
        b"DeviceRGB" | b"CalRGB" | b"RGB" => Ok(3),
        b"DeviceCMYK" | b"CMYK" => Ok(4),
        other => Err(unsupported(&format!("the colour space {}", String::from_utf8_lossy(other)))),
    };
    match space {
        Ok(Object::Name(n)) => name(n.as_slice()),
        Ok(Object::Array(parts)) => match parts.first().and_then(|p| p.as_name().ok()) {
            Some(b"ICCBased") => {
                let profile = parts.get(1).and_then(|p| resolve(doc, p).ok()).and_then(|p| p.as_stream().ok());
                Ok(profile.map(|s| int(doc, &s.dict, b"N")).filter(|n| [1, 3, 4].contains(n)).unwrap_or(3) as u32)
            }
            Some(other) => name(other),
            None => Err(unsupported("an unnamed colour space")),
        },
        _ => Ok(1),
    }
}

/// CCITT fax: group 4 (`/K` < 0), the usual compression of black-and-white scans, and group 3
/// one- or two-dimensional (`/K` 0 or more), with PDF's `/EndOfLine`, `/EncodedByteAlign` and
/// `/EndOfBlock` (hayro-ccitt). The decoder names each run's colour, so `/BlackIs1` (which says
/// how the decoded bits would be stored) does not matter here. Rows a damaged stream ends
/// before are left white.
fn fax_image(
    doc: &Document,
    dict: &Dictionary,
    data: &[u8],
    width: i64,
    height: i64,
) -> Result<DynamicImage, LoadError> {
    use hayro_ccitt::{DecodeSettings, DecoderContext, EncodingMode};
    let params = dict.get(b"DecodeParms").and_then(|o| resolve(doc, o)).and_then(Object::as_dict).ok();
    let param = |key: &[u8]| params.and_then(|p| p.get(key).ok());
    let k = param(b"K").and_then(|v| v.as_i64().ok()).unwrap_or(0);
    let flag = |key: &[u8], default: bool| param(key).and_then(|v| v.as_bool().ok()).unwrap_or(default);
    let (width, height) = (width as u32, height as u32);
    let settings = DecodeSettings {
        columns: width,
        rows: height,
        end_of_block: flag(b"EndOfBlock", true),
        end_of_line: flag(b"EndOfLine", false),
        rows_are_byte_aligned: flag(b"EncodedByteAlign", false),
        encoding: match k {
            ..0 => EncodingMode::Group4,
            0 => EncodingMode::Group3_1D,
            _ => EncodingMode::Group3_2D,
        },
        strict: false,
    };
    let mut rows = FaxRows { gray: Vec::with_capacity(width as usize * height as usize), width, height };
    let decoded = hayro_ccitt::decode(data, &mut rows, &mut DecoderContext::new(settings));
    if rows.gray.is_empty() {
        let why = decoded.err().map(|e| format!(" ({e:?})")).unwrap_or_default();
        return Err(LoadError::Image(format!("the fax image could not be decoded{why}")));
    }
    rows.gray.resize(width as usize * height as usize, 255);
    Ok(image::GrayImage::from_raw(width, height, rows.gray).expect("the buffer holds the page").into())
}

/// A fax image's rows as gray bytes: black 0, white 255; rows past the image's height dropped.
struct FaxRows {
    gray: Vec<u8>,
    width: u32,
    height: u32,
}

impl hayro_ccitt::Decoder for FaxRows {
    fn push_row(&mut self, changes: &[u32]) {
        if self.gray.len() >= self.width as usize * self.height as usize {
            return;
        }
        // Each row starts white; every change flips the colour.
        let mut at = 0;
        for (i, &change) in changes.iter().chain([&self.width]).enumerate() {
            let end = change.min(self.width);
            let colour = if i % 2 == 0 { 255 } else { 0 };
            self.gray.extend(std::iter::repeat_n(colour, end.saturating_sub(at) as usize));
            at = at.max(end);
        }
    }
}
