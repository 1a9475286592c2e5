//! Keyword search over text in every script (issue 58 item 2): Chinese and Japanese, written
//! without spaces, found by the words of a question (none of the four was found before Quire read
//! such text as pairs of characters); ligatures and full-width forms found by plain letters (as
//! LanceDB's ASCII folding already found them: kept as a guard); and a library whose terms an
//! earlier reading made has the terms of exactly the documents this one reads differently made
//! again.

use quire_index::{ChunkRecord, DataKey, DocumentRecord, KnowledgeBase, Protection};

mod common;

const DIM: usize = 16;

/// Notes in several scripts, one passage each: (path, text).
const NOTES: &[(&str, &str)] = &[
    ("/notes/boiler.md", "The boiler was serviced in March by the heating engineer."),
    ("/notes/ligatures.md", "The ﬁrst ﬂoor ofﬁce keeps the ﬁre extinguisher."),
    ("/notes/fullwidth.md", "Ｍｏｄｅｌ ＸＲ２５０ ships with a spare battery."),
    ("/notes/zh-backup.md", "数据库每天凌晨三点自动备份，备份文件保存在外部硬盘上。"),
    ("/notes/zh-printer.md", "打印机的墨盒需要每六个月更换一次。"),
    ("/notes/ja-garden.md", "庭の桜は毎年四月上旬に満開になります。"),
    ("/notes/ja-server.md", "サーバーの設定ファイルは毎週月曜日にバックアップされます。"),
    ("/notes/de-heizung.md", "Die Heizungsanlage wurde im März vom Fachbetrieb gewartet."),
    ("/notes/es-caldera.md", "La caldera del edificio fue revisada en marzo por el técnico."),
];

async fn library(dir: &std::path::Path, key: &[u8]) -> KnowledgeBase {
    KnowledgeBase::open(dir, DIM, Protection::sealed(&DataKey::from_bytes(key).unwrap())).await.unwrap()
}

async fn store(kb: &KnowledgeBase) {
    for (i, (path, text)) in NOTES.iter().enumerate() {
        let doc = DocumentRecord {
            doc_id: kb.document_id(path),
            path: (*path).into(),
            kind: "markdown".into(),
            content_hash: format!("h{i}"),
            bytes: text.len() as u64,
            pages: 1,
            chunks: 1,
            ingested_at_ms: 0,
            modified_ms: 0,
        };
        let chunk = ChunkRecord {
            doc_id: doc.doc_id.clone(),
            hash: kb.chunk_hash(text),
            seq: 0,
            page: Some(1),
            start: 0,
            end: text.len() as u64,
            tokens: 20,
            text: (*text).into(),
            vector: common::vector(i as u64, DIM),
        };
        kb.commit(&[doc], &[chunk]).await.unwrap();
    }
}

async fn top(kb: &KnowledgeBase, query: &str) -> Option<String> {
    kb.search_bm25(query, 3).await.unwrap().into_iter().next().map(|h| h.path)
}

#[tokio::test]
async fn words_in_every_script_are_found_by_keyword() {
    let dir = tempfile::tempdir().unwrap();
    let key = DataKey::random().bytes().to_vec();
    let kb = library(dir.path(), &key).await;
    store(&kb).await;
    // Questions in the documents' own words, none of them written as the passage writes it.
    let mut missed = Vec::new();
    for (query, expected) in [
        ("数据库什么时候备份？", "/notes/zh-backup.md"),
        ("墨盒多久更换", "/notes/zh-printer.md"),
        ("桜はいつ満開になりますか", "/notes/ja-garden.md"),
        ("設定ファイルのバックアップ", "/notes/ja-server.md"),
        ("first floor office", "/notes/ligatures.md"),
        ("fire extinguisher", "/notes/ligatures.md"),
        ("model XR250", "/notes/fullwidth.md"),
        ("ＸＲ２５０", "/notes/fullwidth.md"),
        ("boiler serviced", "/notes/boiler.md"),
        ("Heizungsanlage gewartet", "/notes/de-heizung.md"),
        ("Wann werden die Heizungsanlagen gewartet?", "/notes/de-heizung.md"),
        ("¿Cuándo revisaron las calderas?", "/notes/es-caldera.md"),
    ] {
        let found = top(&kb, query).await;
        if found.as_deref() != Some(expected) {
            missed.push(format!("{query}: {found:?}"));
        }
    }
    assert!(missed.is_empty(), "not found by keyword: {missed:#?}");
    // A word no note holds finds nothing, in any script.
    assert_eq!(top(&kb, "图书馆").await, None);
}

#[tokio::test]
async fn a_library_whose_terms_are_current_is_not_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let key = DataKey::random().bytes().to_vec();
    let kb = library(dir.path(), &key).await;
    store(&kb).await;
    // A new library is read by this version: nothing to do.
    assert!(kb.documents_to_reanalyse().await.unwrap().is_empty(), "a new library has nothing to read again");
    // Without the record (a library from before it was kept), every chunk's terms are made again
    // and compared: the same, so nothing is rewritten, and the record is kept from then on.
    std::fs::remove_file(dir.path().join("terms-version")).unwrap();
    assert!(kb.documents_to_reanalyse().await.unwrap().is_empty());
    kb.mark_terms_current().unwrap();
    assert!(dir.path().join("terms-version").is_file());
    assert_eq!(kb.documents().await.unwrap().len(), NOTES.len(), "every note still listed once");
}
