//! A collection is opened by more than one process at a time (the app, `quire watch`, `quire
//! list`): when the folder is new, each of them finds no table and creates it. Whoever loses
//! that race must open the winner's table, not fail. And when two of them store the same
//! document at once, it is stored once.

use quire_index::{ChunkRecord, DataKey, DocumentRecord, KnowledgeBase, Protection};

mod common;

const DIM: usize = 16;
const OPENERS: usize = 6;

fn document(kb: &KnowledgeBase, path: &str) -> DocumentRecord {
    DocumentRecord {
        doc_id: kb.document_id(path),
        path: path.into(),
        kind: "markdown".into(),
        content_hash: "h".into(),
        bytes: 1,
        pages: 1,
        chunks: 0,
        ingested_at_ms: 0,
        modified_ms: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn openers_of_a_new_collection_at_once_all_get_its_tables() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let key = DataKey::random().bytes().to_vec();
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(OPENERS));
        let openers: Vec<_> = (0..OPENERS)
            .map(|i| {
                let (dir, key, barrier) = (dir.path().to_owned(), key.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let kb = KnowledgeBase::open(&dir, DIM, Protection::sealed(&DataKey::from_bytes(&key).unwrap()))
                        .await
                        .unwrap_or_else(|e| panic!("round {round}, opener {i}: {e:#}"));
                    kb.commit(&[document(&kb, &format!("/notes/{i}.md"))], &[]).await.unwrap();
                })
            })
            .collect();
        for o in openers {
            o.await.unwrap();
        }
        let kb = KnowledgeBase::open(dir.path(), DIM, Protection::sealed(&DataKey::from_bytes(&key).unwrap()))
            .await
            .unwrap();
        let paths: Vec<String> = kb.documents().await.unwrap().into_iter().map(|d| d.path).collect();
        let expected: Vec<String> = (0..OPENERS).map(|i| format!("/notes/{i}.md")).collect();
        assert_eq!(paths, expected, "round {round}: every opener's document is in the one table");
    }
}

/// Two processes storing the same document at once (the app and `quire watch` both see a file
/// change): whichever commit lands last, the document has one row and one set of chunks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_document_stored_by_two_writers_at_once_is_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let key = DataKey::random().bytes().to_vec();
    let open = || KnowledgeBase::open(dir.path(), DIM, Protection::sealed(&DataKey::from_bytes(&key).unwrap()));
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    for round in 0..5 {
        let version = |kb: &KnowledgeBase, n: usize| {
            let doc = DocumentRecord { chunks: n as u32, ..document(kb, "/notes/shared.md") };
            let chunks: Vec<ChunkRecord> = (0..n)
                .map(|i| {
                    let text = format!("round {round} part {i} of {n}");
                    ChunkRecord {
                        doc_id: doc.doc_id.clone(),
                        hash: kb.chunk_hash(&text),
                        seq: i as u32,
                        page: Some(1),
                        start: 0,
                        end: text.len() as u64,
                        tokens: 5,
                        text,
                        vector: common::vector(i as u64, DIM),
                    }
                })
                .collect();
            (doc, chunks)
        };
        let ((doc_a, chunks_a), (doc_b, chunks_b)) = (version(&a, 3), version(&b, 4));
        let (docs_a, docs_b) = ([doc_a], [doc_b]);
        let (ra, rb) = tokio::join!(a.commit(&docs_a, &chunks_a), b.commit(&docs_b, &chunks_b));
        ra.unwrap();
        rb.unwrap();
        let docs = a.documents().await.unwrap();
        assert_eq!(docs.len(), 1, "round {round}: one document row, not {}", docs.len());
        let stored = a.chunk_count().await.unwrap();
        assert_eq!(stored, docs[0].chunks as usize, "round {round}: the chunks of the stored version only");
    }
}
