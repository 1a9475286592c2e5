//! A collection is opened by more than one process at a time (the app, `quire watch`, `quire
//! list`): when the folder is new, each of them finds no table and creates it. Whoever loses
//! that race must open the winner's table, not fail.

use quire_index::{DataKey, DocumentRecord, KnowledgeBase, Protection};

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
        let kb = KnowledgeBase::open(dir.path(), DIM, Protection::sealed(&DataKey::from_bytes(&key).unwrap())).await.unwrap();
        let paths: Vec<String> = kb.documents().await.unwrap().into_iter().map(|d| d.path).collect();
        let expected: Vec<String> = (0..OPENERS).map(|i| format!("/notes/{i}.md")).collect();
        assert_eq!(paths, expected, "round {round}: every opener's document is in the one table");
    }
}
