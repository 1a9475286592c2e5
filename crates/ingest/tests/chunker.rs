//! Chunk sizes and overlaps measured in the embedding model's tokens, and chunk offsets that
//! point back at the exact text of their page, on the real sample documents.

use quire_ingest::{load_file, Chunker, DocKind, LoadError, CHUNK_OVERLAP_TOKENS, CHUNK_TOKENS};
use tokenizers::Tokenizer;

fn tokenizer() -> Tokenizer {
    let dir = quire_testkit::model(&quire_models::MINILM);
    let mut tok = Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    // The file truncates at 128 tokens (sentence-transformers' setting); count everything.
    tok.with_truncation(None).unwrap();
    tok.with_padding(None);
    tok
}

#[test]
fn chunks_fit_500_tokens_overlap_at_most_50_and_map_back_to_their_page() {
    let tok = tokenizer();
    let chunker = Chunker::new(&tok).unwrap();
    let docs = quire_testkit::sample_docs();
    let mut overlaps = Vec::new();
    let mut max_tokens = 0;
    for name in ["fasta_guide.pdf", "4ti2_manual.pdf", "markdown/tokio-README.md", "markdown/keyring-README.md"] {
        let doc = load_file(&docs.join(name)).unwrap();
        let chunks = chunker.chunk(&doc);
        assert!(!chunks.is_empty(), "{name} gave no chunks");
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.seq as usize, i);
            // Offsets round-trip to the original text of the page the chunk cites.
            let page = doc.pages.iter().find(|p| p.number == c.page).expect("page exists");
            assert_eq!(&page.text[c.start..c.end], c.text, "{name} chunk {i}");
            // Sizes are counted with the embedder's own tokenizer (no special tokens).
            let n = tok.encode(c.text.as_str(), false).unwrap().len();
            assert_eq!(n, c.tokens, "{name} chunk {i} token count");
            assert!(n <= CHUNK_TOKENS, "{name} chunk {i} has {n} tokens");
            max_tokens = max_tokens.max(n);
        }
        for pair in chunks.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.page != b.page {
                continue;
            }
            assert!(b.start > a.start && b.end > a.end, "chunks go forward");
            assert!(b.start < a.end, "{name}: chunks {} and {} on a page do not overlap", a.seq, b.seq);
            let page = doc.pages.iter().find(|p| p.number == a.page).unwrap();
            let shared = &page.text[b.start..a.end];
            let n = tok.encode(shared, false).unwrap().len();
            assert!((1..=CHUNK_OVERLAP_TOKENS).contains(&n), "{name}: overlap of {n} tokens: {shared:?}");
            overlaps.push(n);
        }
        if doc.kind == DocKind::Pdf {
            assert!(chunks.iter().all(|c| c.page.is_some()), "PDF chunks carry pages");
        }
    }
    // Full pages fill chunks close to the limit, and neighbours on a page do share text.
    assert!(max_tokens > CHUNK_TOKENS * 9 / 10, "largest chunk only {max_tokens} tokens");
    // The overlap is as close to 50 tokens as whole words allow.
    let mean = overlaps.iter().sum::<usize>() as f64 / overlaps.len() as f64;
    assert!(overlaps.len() > 10 && mean >= 45.0, "{} overlaps, mean {mean:.1} tokens", overlaps.len());
}

#[test]
fn pdf_pages_are_numbered_from_one_and_the_fact_is_on_its_page() {
    let doc = load_file(&quire_testkit::sample_docs().join("fasta_guide.pdf")).unwrap();
    assert_eq!(doc.pages.len(), 37);
    assert_eq!(doc.pages[0].number, Some(1));
    assert!(doc.pages[0].text.contains("ssearch36"), "page 1 names ssearch36");
}

#[test]
fn bad_sample_files_fail_with_reasons_and_latin1_loads() {
    let bad = quire_testkit::sample_docs().join("bad");
    assert!(matches!(load_file(&bad.join("empty.txt")), Err(LoadError::Empty)));
    assert!(matches!(load_file(&bad.join("binary.md")), Err(LoadError::Binary)));
    for pdf in ["truncated.pdf", "header-only.pdf"] {
        let err = load_file(&bad.join(pdf)).unwrap_err();
        assert!(matches!(err, LoadError::Pdf(_) | LoadError::NoText), "{pdf}: {err}");
    }
    let latin1 = load_file(&bad.join("latin1.txt")).unwrap();
    assert!(!latin1.pages[0].text.is_ascii(), "decoded Latin-1 text");
}

/// A line the embedder's tokenizer cannot split (one 20 MB word is one "[UNK]" token) or splits
/// into a token per character (punctuation) still gives chunks of at most 500 tokens and
/// `MAX_CHUNK_BYTES` bytes that cover the line and map back to it.
#[test]
fn a_giant_line_without_spaces_gives_bounded_chunks() {
    let tok = tokenizer();
    let chunker = Chunker::new(&tok).unwrap();
    let letters: String =
        (0..20_000_000u32).map(|i| (b'a' + (i.wrapping_mul(2654435761) >> 27) as u8 % 26) as char).collect();
    let punctuated = "v1.2,x;y:z=".repeat(100_000);
    let mixed = format!(
        "# Title\n\nA normal paragraph before the blob.\n\n{}\n\nAnd a normal one after it.",
        "ab".repeat(50_000)
    );
    for (name, text) in [("letters", letters), ("punctuated", punctuated), ("mixed", mixed)] {
        let doc = quire_ingest::LoadedDocument {
            path: "giant.md".into(),
            kind: DocKind::Markdown,
            content_hash: String::new(),
            byte_len: text.len() as u64,
            pages: vec![quire_ingest::Page { number: None, text: text.clone() }],
            unreadable_pages: vec![],
        };
        let started = std::time::Instant::now();
        let chunks = chunker.chunk(&doc);
        eprintln!(
            "{name}: {} bytes -> {} chunks in {:.1} s",
            text.len(),
            chunks.len(),
            started.elapsed().as_secs_f32()
        );
        assert!(chunks.len() > 1, "{name}");
        let mut covered = 0;
        for c in &chunks {
            assert_eq!(&text[c.start..c.end], c.text, "{name} chunk {}", c.seq);
            assert!(c.text.len() <= quire_ingest::MAX_CHUNK_BYTES, "{name} chunk {}: {} bytes", c.seq, c.text.len());
            let n = tok.encode(c.text.as_str(), false).unwrap().len();
            assert!(n <= CHUNK_TOKENS, "{name} chunk {} has {n} tokens", c.seq);
            assert!(c.end > covered, "{name}: chunks go forward");
            assert!(
                c.start <= covered || text[covered..c.start].trim().is_empty(),
                "{name}: text between chunks {} left out",
                c.seq
            );
            covered = c.end;
        }
        assert_eq!(covered, text.trim_end().len(), "{name}: the chunks reach the end");
    }
}

/// Text in every script a person may keep, with what real files carry that is not plain text:
/// right-to-left Arabic and Hebrew, Japanese and Chinese without spaces, emoji joined by zero-
/// width joiners and skin tones, combining accents, zero-width spaces and non-joiners, a UTF-16
/// file with a lone surrogate, a UTF-8 file with one byte damaged. Each is read (the damage as
/// U+FFFD, the rest of the file as written) and chunked into passages that map back to their
/// text, never a panic.
#[test]
fn text_in_every_script_is_read_and_chunked_whole() {
    let tok = tokenizer();
    let chunker = Chunker::new(&tok).unwrap();
    let mixed = "Notes in every script.\n\
        العربية: يجب تجديد العقد قبل نهاية الشهر.\n\
        עברית: יש לחדש את החוזה לפני סוף החודש.\n\
        日本語：契約は月末までに更新する必要があります。\n\
        中文：合同必须在月底之前续签。\n\
        Emoji: 👩‍👩‍👧‍👦 family, 👍🏽 thumbs, 🇩🇪 flag, e\u{301}te\u{301} combining, zero\u{200B}width, non\u{200C}joiner.\n";
    let mut utf16 = vec![0xFF, 0xFE];
    for unit in "Vertrag über drei Jahre; ".encode_utf16().chain([0xD800]).chain(" Kündigung 契約.".encode_utf16())
    {
        utf16.extend_from_slice(&unit.to_le_bytes());
    }
    let mut damaged_utf8 =
        "Le contrat doit être renouvelé avant la fin du mois. 契約は更新される。".as_bytes().to_vec();
    damaged_utf8.insert(20, 0xFF);
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, Vec<u8>, &[&str]); 3] = [
        (
            "mixed.md",
            mixed.as_bytes().to_vec(),
            &[
                "يجب تجديد العقد",
                "יש לחדש את החוזה",
                "契約は月末までに更新",
                "合同必须在月底之前续签",
                "👩‍👩‍👧‍👦",
                "e\u{301}te\u{301}",
            ],
        ),
        ("utf16.txt", utf16, &["Vertrag über drei Jahre; \u{FFFD} Kündigung 契約."]),
        ("damaged.txt", damaged_utf8, &["renouvelé avant la fin du mois", "契約は更新される", "\u{FFFD}"]),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let doc = load_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = &doc.pages[0].text;
        for part in expected {
            assert!(text.contains(part), "{name}: {part:?} not in {text:?}");
        }
        let chunks = chunker.chunk(&doc);
        assert!(!chunks.is_empty(), "{name} gave no passages");
        for c in &chunks {
            assert_eq!(&text[c.start..c.end], c.text, "{name} passage {}", c.seq);
        }
        let covered: usize = chunks.last().unwrap().end;
        assert_eq!(covered, text.trim_end().len(), "{name}: the passages reach the end of the text");
    }
}
