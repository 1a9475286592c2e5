//! A library embedded again with another model (issue 58): the new index is built beside the
//! old one, a stopped change goes on where it stopped, a library changed meanwhile is not switched
//! until the change catches up, and once switched every document is there, searched with the
//! new model, its passages at the same places.

mod common;

use std::path::Path;

use quire_engine::{change_waiting, Cancel, Engine, Event, SearchMode};

async fn open(data: &Path) -> Engine {
    Engine::open(common::tiny_config(data, "test passphrase")).await.unwrap()
}

async fn ingest(engine: &Engine, path: &Path) {
    let report = engine.ingest(&[path.to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
    assert!(report.failed().is_empty(), "{:?}", report.failed());
}

/// Each document's passages (text, page and byte range), by path.
async fn passages(engine: &Engine) -> Vec<(String, Vec<(Option<u32>, u64, u64, String)>)> {
    let mut out = Vec::new();
    for doc in engine.documents().await.unwrap() {
        let chunks = engine.knowledge_base().chunk_records_of(&doc.doc_id).await.unwrap();
        out.push((doc.path, chunks.into_iter().map(|c| (c.page, c.start, c.end, c.text)).collect()));
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_library_is_embedded_again_with_another_model_and_loses_nothing() {
    let e5 = quire_testkit::model(&quire_models::MULTILINGUAL_E5_SMALL);
    let data = tempfile::tempdir().unwrap();
    let docs = quire_testkit::german_notes();
    // A PDF too: its passages keep their pages and byte ranges through the change.
    let samples = quire_testkit::copy_samples(&["fasta_guide.pdf"]);

    let engine = open(data.path()).await;
    ingest(&engine, docs.path()).await;
    ingest(&engine, samples.path()).await;
    assert_eq!(engine.embedder_name(), "all-minilm-l6-v2");
    let before = passages(&engine).await;
    assert_eq!(before.len(), 4);

    // Stopped after the first document: nothing switched, the library as it was.
    let cancel = Cancel::new();
    let stop = cancel.clone();
    let change = engine
        .change_embedder(
            &e5,
            &mut |e| {
                if matches!(e, Event::FileFinished { .. }) {
                    stop.cancel();
                }
            },
            &cancel,
        )
        .await
        .unwrap();
    assert_eq!((change.documents, change.whole), (1, false), "{change:?}");
    assert_eq!(change_waiting(data.path()).as_deref(), Some("multilingual-e5-small"));
    drop(engine);
    let engine = open(data.path()).await;
    assert_eq!(engine.embedder_name(), "all-minilm-l6-v2", "a change not whole does not switch");

    // Gone on with: only the three left are embedded; whole.
    let change = engine.change_embedder(&e5, &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!((change.documents, change.whole), (3, true), "{change:?}");
    // A document added before the library opens again: the list changed, so no switch yet.
    let more = tempfile::tempdir().unwrap();
    std::fs::write(more.path().join("kantine.md"), "# Kantine\n\nDie Kantine hat freitags nur bis 13 Uhr geöffnet.\n")
        .unwrap();
    ingest(&engine, more.path()).await;
    drop(engine);
    let engine = open(data.path()).await;
    assert_eq!(engine.embedder_name(), "all-minilm-l6-v2", "a list changed since the change was whole");
    assert!(change_waiting(data.path()).is_some());

    // Caught up: only the new document embedded, then switched on opening.
    let change = engine.change_embedder(&e5, &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!((change.documents, change.whole), (1, true), "{change:?}");
    drop(engine);
    let engine = open(data.path()).await;
    assert_eq!(engine.embedder_name(), "multilingual-e5-small");
    assert_eq!(change_waiting(data.path()), None);
    assert_eq!(std::fs::read_to_string(data.path().join("embedder")).unwrap(), "multilingual-e5-small\n");
    assert!(!data.path().join("new-embedder").exists() && !data.path().join("old-embedder").exists());

    // Every document there, each passage's text where its range says, pages kept.
    let after = passages(&engine).await;
    assert_eq!(after.len(), 5);
    for (path, old) in &before {
        let (_, new) = after.iter().find(|(p, _)| p == path).expect("every document kept");
        let pages = |c: &[(Option<u32>, u64, u64, String)]| {
            let mut p: Vec<Option<u32>> = c.iter().map(|c| c.0).collect();
            p.dedup();
            p
        };
        assert_eq!(pages(new), pages(old), "{path}");
        if path.ends_with(".pdf") {
            // Each new passage is the text at its range of the page the old passages laid out.
            for (page, start, end, text) in new {
                let covering = old.iter().find(|(p, s, e, _)| p == page && *s <= *start && *end <= *e);
                if let Some((_, s, _, old_text)) = covering {
                    assert_eq!(&old_text[(start - s) as usize..(end - s) as usize], text, "{path} page {page:?}");
                }
            }
        } else {
            assert_eq!(new, old, "a short note is one passage, the same");
        }
    }
    // Searched with the new model: a Japanese question finds the German note by meaning.
    let hits = engine.search("プリンターのトナーはどうなっていますか", SearchMode::Dense, 1).await.unwrap();
    assert!(hits[0].path.ends_with("drucker.md"), "{hits:?}");
    // The same model again: refused, nothing to do.
    let again = engine.change_embedder(&e5, &mut |_| {}, &Cancel::new()).await.unwrap_err();
    assert!(again.to_string().contains("already searched with multilingual-e5-small"), "{again}");
}
