//! A search opens the paths of the documents it returns, not of every document: in a collection
//! of thousands of documents each hit still carries its own document's path, and a document that
//! cannot be opened spoils only the searches that return it.

use std::time::{Duration, Instant};

use quire_index::{ChunkRecord, DataKey, DocumentRecord, KnowledgeBase, Protection};

const DIM: usize = 16;
const DOCUMENTS: usize = 5_000;

mod common;

fn vector(seed: u64) -> Vec<f32> {
    common::vector(seed, DIM)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_hit_in_a_large_collection_carries_its_own_documents_path() {
    let dir = tempfile::tempdir().unwrap();
    let kb = KnowledgeBase::open(dir.path(), DIM, Protection::sealed(&DataKey::random())).await.unwrap();
    let path_of = |i: usize| format!("/home/someone/notes/topic-{i}.md");
    let docs: Vec<DocumentRecord> = (0..DOCUMENTS)
        .map(|i| DocumentRecord {
            doc_id: kb.document_id(&path_of(i)),
            path: path_of(i),
            kind: "markdown".into(),
            content_hash: format!("h{i}"),
            bytes: 100,
            pages: 1,
            chunks: 1,
            ingested_at_ms: 0,
            modified_ms: 0,
        })
        .collect();
    let chunks: Vec<ChunkRecord> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let text = format!("note {i} about marker{} and the weather", i % 500);
            ChunkRecord {
                doc_id: d.doc_id.clone(),
                hash: kb.chunk_hash(&text),
                seq: 0,
                page: Some(1),
                start: 0,
                end: text.len() as u64,
                tokens: 8,
                text,
                vector: vector(i as u64),
            }
        })
        .collect();
    kb.commit(&docs, &chunks).await.unwrap();
    kb.refresh_indexes().await.unwrap();

    // Every hit carries its own document's path, whichever way it was found.
    let index_of = |text: &str| text.split(' ').nth(1).unwrap().parse::<usize>().unwrap();
    for q in 0..10usize {
        let marker = format!("marker{}", q * 37);
        for hits in [
            kb.search_bm25(&marker, 10).await.unwrap(),
            kb.search_dense(&vector(q as u64 * 101), 10, false).await.unwrap(),
            kb.search_hybrid(&vector(q as u64 * 101), &marker, 10).await.unwrap(),
        ] {
            assert_eq!(hits.len(), 10);
            for h in &hits {
                assert_eq!(h.path, path_of(index_of(&h.text)), "hit {}", h.chunk_id);
            }
        }
        let bm25 = kb.search_bm25(&marker, 10).await.unwrap();
        assert!(bm25.iter().all(|h| h.text.contains(&format!("{marker} "))), "BM25 finds the marker's notes");
    }

    // Side by side: listing the collection (every path opened) against whole searches.
    let (mut listing, mut bm25, mut hybrid) = (Vec::new(), Vec::new(), Vec::new());
    for q in 0..15u64 {
        let t = Instant::now();
        assert_eq!(kb.documents().await.unwrap().len(), DOCUMENTS);
        listing.push(t.elapsed());
        let t = Instant::now();
        kb.search_bm25(&format!("marker{q}"), 10).await.unwrap();
        bm25.push(t.elapsed());
        let t = Instant::now();
        kb.search_hybrid(&vector(q), &format!("marker{q}"), 10).await.unwrap();
        hybrid.push(t.elapsed());
    }
    let (listing, bm25, hybrid) = (median(listing), median(bm25), median(hybrid));
    eprintln!("{DOCUMENTS} sealed documents, medians of 15: listing them {listing:?}, BM25 search {bm25:?}, hybrid search {hybrid:?}");
}

fn document(kb: &KnowledgeBase, path: &str, text: &str, seed: u64) -> (DocumentRecord, ChunkRecord) {
    let doc_id = kb.document_id(path);
    let doc = DocumentRecord {
        doc_id: doc_id.clone(),
        path: path.into(),
        kind: "text".into(),
        content_hash: "h".into(),
        bytes: text.len() as u64,
        pages: 1,
        chunks: 1,
        ingested_at_ms: 0,
        modified_ms: 0,
    };
    let chunk = ChunkRecord {
        doc_id,
        hash: kb.chunk_hash(text),
        seq: 0,
        page: None,
        start: 0,
        end: text.len() as u64,
        tokens: 4,
        text: text.into(),
        vector: vector(seed),
    };
    (doc, chunk)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_document_sealed_under_a_foreign_key_spoils_only_searches_that_return_it() {
    let dir = tempfile::tempdir().unwrap();
    // Written by someone holding another key: its path and text cannot be opened with ours.
    let stranger = KnowledgeBase::open(dir.path(), DIM, Protection::sealed(&DataKey::random())).await.unwrap();
    let (doc, chunk) = document(&stranger, "/elsewhere/stranger.txt", "stranger things happen here", 99);
    stranger.commit(&[doc], &[chunk]).await.unwrap();
    drop(stranger);

    let kb = KnowledgeBase::open(dir.path(), DIM, Protection::sealed(&DataKey::random())).await.unwrap();
    let ours = [("/notes/apples.txt", "apples grow on trees"), ("/notes/rivers.txt", "rivers run to the sea")];
    for (i, (path, text)) in ours.iter().enumerate() {
        let (doc, chunk) = document(&kb, path, text, i as u64);
        kb.commit(&[doc], &[chunk]).await.unwrap();
    }
    kb.refresh_indexes().await.unwrap();
    assert!(kb.documents().await.is_err(), "listing opens every path, the stranger's too");
    let hits = kb.search_bm25("apples", 10).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].path.as_str(), hits[0].text.as_str()), ours[0]);
    let hits = kb.search_bm25("rivers sea", 10).await.unwrap();
    assert_eq!(hits.iter().map(|h| h.path.as_str()).collect::<Vec<_>>(), [ours[1].0]);
}
