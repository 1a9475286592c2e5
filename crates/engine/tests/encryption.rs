//! Encryption at rest, at the engine: the same search results with and without it; a key
//! rotation that is interrupted finishes at the next open and loses nothing; a collection made
//! without encryption is sealed when it is opened.

mod common;

use std::collections::BTreeMap;

use quire_engine::{Cancel, Engine, EngineConfig, SearchHit};
use quire_index::{KnowledgeBase, Protection};

async fn engine(data: &std::path::Path, passphrase: &str) -> anyhow::Result<Engine> {
    Engine::open(EngineConfig { top_k: 4, max_answer_tokens: 256, ..common::tiny_config(data, passphrase) }).await
}

/// Copies every document of `from` into `to` (ids and chunk hashes as `to` makes them).
async fn copy_collection(from: &KnowledgeBase, to: &KnowledgeBase) {
    for doc in from.documents().await.unwrap() {
        let id = to.document_id(&doc.path);
        let mut chunks = from.chunk_records_of(&doc.doc_id).await.unwrap();
        for c in &mut chunks {
            c.doc_id = id.clone();
            c.hash = to.chunk_hash(&c.text);
        }
        to.commit(&[quire_index::DocumentRecord { doc_id: id, ..doc }], &chunks).await.unwrap();
    }
    to.refresh_indexes().await.unwrap();
}

/// A ranking as (score, path, place), ties in any order: document ids differ between the two
/// stores (keyed fingerprints), places do not.
fn ranking(hits: &[SearchHit]) -> Vec<(i64, String, u32)> {
    let mut r: Vec<(i64, String, u32)> =
        hits.iter().map(|h| (-(h.score as f64 * 1e5).round() as i64, h.path.clone(), h.seq)).collect();
    r.sort();
    r
}

fn questions(documents: &[&str]) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/eval/sample-docs-answers.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        // The questions the documents answer: each has words a passage holds.
        .filter(|q| q["unanswerable"] != serde_json::Value::Bool(true))
        .filter(|q| documents.iter().any(|d| q["document"].as_str().unwrap().starts_with(d)))
        .map(|q| q["question"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn search_finds_the_same_top_10_with_and_without_encryption() {
    let docs = quire_testkit::copy_samples(&["markdown", "fasta_guide.pdf"]);
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path(), "test passphrase").await.unwrap();
    engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
    let sealed = engine.knowledge_base();
    assert!(sealed.protection().is_sealed());
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = KnowledgeBase::open(plain_dir.path(), sealed.dim(), Protection::Plain).await.unwrap();
    copy_collection(sealed, &plain).await;
    assert_eq!(plain.chunk_count().await.unwrap(), sealed.chunk_count().await.unwrap());

    let questions = questions(&["fasta_guide.pdf", "markdown/"]);
    assert!(questions.len() >= 25, "{} questions", questions.len());
    let mut keyword_hits = 0;
    let mut seconds = BTreeMap::<(&str, bool), f64>::new();
    for q in &questions {
        let v = engine.embedder().embed_query(q).unwrap();
        let mut timed = |mode: &'static str, sealed: bool, started: std::time::Instant| {
            *seconds.entry((mode, sealed)).or_default() += started.elapsed().as_secs_f64();
        };
        let t = std::time::Instant::now();
        let dense = (sealed.search_dense(&v, 10, true).await.unwrap(), timed("dense", true, t));
        let t = std::time::Instant::now();
        let dense_plain = (plain.search_dense(&v, 10, true).await.unwrap(), timed("dense", false, t));
        let t = std::time::Instant::now();
        let bm25 = (sealed.search_bm25(q, 10).await.unwrap(), timed("bm25", true, t));
        let t = std::time::Instant::now();
        let bm25_plain = (plain.search_bm25(q, 10).await.unwrap(), timed("bm25", false, t));
        let t = std::time::Instant::now();
        let hybrid = (sealed.search_hybrid(&v, q, 10).await.unwrap(), timed("hybrid", true, t));
        let t = std::time::Instant::now();
        let hybrid_plain = (plain.search_hybrid(&v, q, 10).await.unwrap(), timed("hybrid", false, t));
        let pairs =
            [("dense", dense.0, dense_plain.0), ("bm25", bm25.0, bm25_plain.0), ("hybrid", hybrid.0, hybrid_plain.0)];
        for (mode, with, without) in pairs {
            assert_eq!(with.len(), 10.min(without.len().max(with.len())), "{mode} {q}");
            assert_eq!(ranking(&with), ranking(&without), "{mode} top 10 differ for {q:?}");
            if mode == "bm25" && !with.is_empty() {
                keyword_hits += 1;
                // The texts come back opened, and the hit is a real match.
                assert!(with.iter().all(|h| !h.text.starts_with("~q1.")));
            }
        }
    }
    assert_eq!(keyword_hits, questions.len(), "every question finds keyword hits");
    for mode in ["dense", "bm25", "hybrid"] {
        let (with, without) = (seconds[&(mode, true)], seconds[&(mode, false)]);
        let n = questions.len() as f64;
        eprintln!(
            "{mode}: {:.1} ms per search sealed, {:.1} ms plain ({:.2}x)",
            with / n * 1e3,
            without / n * 1e3,
            with / without
        );
    }
    // What sealing costs per chunk when storing (AES-GCM of the text, blinding its terms).
    let chunks: Vec<String> = chunk_texts(sealed).await.into_values().flatten().collect();
    let t = std::time::Instant::now();
    for c in &chunks {
        std::hint::black_box((sealed.protection().seal("chunk text x", c), sealed.blind_terms(c)));
    }
    let sealing = t.elapsed().as_secs_f64() / chunks.len() as f64;
    let t = std::time::Instant::now();
    for c in &chunks {
        std::hint::black_box(plain.blind_terms(c));
    }
    let plain_terms = t.elapsed().as_secs_f64() / chunks.len() as f64;
    eprintln!(
        "storing, per chunk: {:.0} µs sealed (text + blind terms), {:.0} µs plain (terms only), over {} chunks",
        sealing * 1e6,
        plain_terms * 1e6,
        chunks.len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_key_rotation_finishes_at_the_next_open_and_loses_nothing() {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let data = tempfile::tempdir().unwrap();
    let (before, old_key) = {
        let engine = engine(data.path(), "pass").await.unwrap();
        engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
        let before: BTreeMap<String, Vec<String>> = chunk_texts(engine.knowledge_base()).await;
        let old_key = engine.key_info().key_id;
        // Stop after the first document is resealed (as a quit or a crash would).
        let cancel = Cancel::new();
        let stop = cancel.clone();
        let done = engine
            .rotate_key(
                &mut |done, _| {
                    if done >= 1 {
                        stop.cancel()
                    }
                },
                &cancel,
            )
            .await
            .unwrap();
        assert_eq!(done, 1);
        let info = engine.key_info();
        assert_ne!(info.key_id, old_key);
        assert_eq!(info.rotating_from, vec![old_key.clone()], "the old key is kept until the rotation ends");
        // Meanwhile everything reads, under both keys.
        assert_eq!(chunk_texts(engine.knowledge_base()).await, before);
        assert_eq!(engine.knowledge_base().documents_to_reseal(true).await.unwrap().len(), 2);
        (before, old_key)
    };
    // The next open finishes the rotation.
    let engine = engine(data.path(), "pass").await.unwrap();
    let info = engine.key_info();
    assert!(info.rotating_from.is_empty(), "{info:?}");
    assert_ne!(info.key_id, old_key);
    assert!(engine.knowledge_base().documents_to_reseal(true).await.unwrap().is_empty());
    assert_eq!(chunk_texts(engine.knowledge_base()).await, before);
    // Keyword search works under the new key (the terms were blinded again).
    let hits = engine.search("work-stealing scheduler", quire_engine::SearchMode::Bm25, 3).await.unwrap();
    assert!(hits[0].path.ends_with("tokio-README.md"), "{:?}", hits.iter().map(|h| &h.path).collect::<Vec<_>>());
    // Nothing on disk is sealed under the old key any more (old table versions are pruned),
    // and the manifest has forgotten it.
    assert_eq!(quire_testkit::files_holding(data.path(), &format!("~q1.{old_key}.")), Vec::<std::path::PathBuf>::new());
    let manifest = std::fs::read_to_string(data.path().join("vault.json")).unwrap();
    assert!(!manifest.contains(&old_key), "{manifest}");
    drop(engine);
    // And the passphrase is what opens it: a wrong one is refused, cleanly.
    let err = engine_error(data.path(), "wrong").await;
    assert!(err.contains("wrong passphrase"), "{err}");
}

async fn engine_error(data: &std::path::Path, passphrase: &str) -> String {
    match engine(data, passphrase).await {
        Ok(_) => panic!("opened with the wrong passphrase"),
        Err(e) => format!("{e:#}"),
    }
}

/// Every document's chunk texts by path.
async fn chunk_texts(kb: &KnowledgeBase) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for d in kb.documents().await.unwrap() {
        let texts = kb.chunk_records_of(&d.doc_id).await.unwrap().into_iter().map(|c| c.text).collect();
        out.insert(d.path, texts);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collection_stored_without_encryption_is_sealed_when_opened() {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let data = tempfile::tempdir().unwrap();
    // A collection as an unencrypted store holds it.
    let texts = {
        let made = tempfile::tempdir().unwrap();
        let engine = engine(made.path(), "x").await.unwrap();
        engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
        let plain = KnowledgeBase::open(data.path(), engine.knowledge_base().dim(), Protection::Plain).await.unwrap();
        copy_collection(engine.knowledge_base(), &plain).await;
        chunk_texts(&plain).await
    };
    assert_eq!(texts.len(), 3);
    let engine = engine(data.path(), "now sealed").await.unwrap();
    let kb = engine.knowledge_base();
    assert!(kb.documents_to_reseal(true).await.unwrap().is_empty(), "every document resealed on open");
    assert_eq!(chunk_texts(kb).await, texts);
    let hits = engine.search("work-stealing scheduler", quire_engine::SearchMode::Bm25, 3).await.unwrap();
    assert!(hits[0].path.ends_with("tokio-README.md"));
    // The plain text is gone from the folder, old table versions included.
    assert_eq!(quire_testkit::files_holding(data.path(), "work-stealing"), Vec::<std::path::PathBuf>::new());
}
