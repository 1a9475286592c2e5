//! Above HNSW_MIN_ROWS chunks the vector index is built and used: large result pools (as hybrid
//! search asks for) work, and approximate results agree with exact ones.

use quire_index::{ChunkRecord, DocumentRecord, KnowledgeBase, HNSW_MIN_ROWS};

const DIM: usize = 16;

mod common;

fn vector(seed: u64) -> Vec<f32> {
    common::vector(seed, DIM)
}

#[tokio::test(flavor = "multi_thread")]
async fn hnsw_index_is_built_and_serves_large_pools() {
    let dir = tempfile::tempdir().unwrap();
    let kb = KnowledgeBase::open(dir.path(), DIM, quire_index::Protection::sealed(&quire_index::DataKey::random()))
        .await
        .unwrap();
    let rows = HNSW_MIN_ROWS + 500;
    let chunks: Vec<ChunkRecord> = (0..rows)
        .map(|i| ChunkRecord {
            doc_id: "doc".into(),
            hash: format!("h{i}"),
            seq: i as u32,
            page: Some(1),
            start: 0,
            end: 1,
            tokens: 1,
            text: format!("chunk number {i} word{}", i % 97),
            vector: vector(i as u64),
        })
        .collect();
    let doc = DocumentRecord {
        doc_id: "doc".into(),
        path: "/doc".into(),
        kind: "text".into(),
        content_hash: "h".into(),
        bytes: 1,
        pages: 1,
        chunks: rows as u32,
        ingested_at_ms: 0,
        modified_ms: 0,
    };
    kb.replace_document(&doc, &chunks).await.unwrap();
    assert!(!kb.has_vector_index().await.unwrap());
    kb.refresh_indexes().await.unwrap();
    assert!(kb.has_vector_index().await.unwrap(), "HNSW index built at {rows} rows");

    let mut found = 0;
    let mut total = 0;
    for q in 0..20u64 {
        let query = vector(1_000_000 + q);
        let exact = kb.search_dense(&query, 10, true).await.unwrap();
        let approx = kb.search_dense(&query, 10, false).await.unwrap();
        total += exact.len();
        found += exact.iter().filter(|e| approx.iter().any(|a| a.chunk_id == e.chunk_id)).count();
        // Hybrid asks the vector index for a large pool.
        let hybrid = kb.search_hybrid(&query, "word5", 10).await.unwrap();
        assert_eq!(hybrid.len(), 10);
    }
    let recall = found as f64 / total as f64;
    assert!(recall >= 0.9, "recall@10 {recall}");
}
