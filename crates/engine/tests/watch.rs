//! A watched folder, changed the ways people change folders: new files, edits, a one-character
//! edit (only the chunks it touches are embedded again), renames and moves (no embedding at all),
//! deletions of files and folders, save-by-rename, editors' temporary files. The index must follow
//! each within a bounded time.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use quire_engine::watch::FolderWatcher;
use quire_engine::{Cancel, DocumentRecord, Engine, EngineConfig, FileOutcome, IngestReport};

/// How long the index may take to follow a change (debounce included).
const FOLLOW_WITHIN: Duration = Duration::from_secs(20);

async fn engine(data: &Path) -> Engine {
    let config = EngineConfig { top_k: 4, max_answer_tokens: 64, ..common::tiny_config(data, "test passphrase") };
    Engine::open(config).await.unwrap()
}

/// Applies watcher changes until `done` holds for the stored documents; returns the reports seen.
async fn follow(
    engine: &Engine,
    watcher: &mut FolderWatcher,
    what: &str,
    done: impl Fn(&[DocumentRecord]) -> bool,
) -> Vec<IngestReport> {
    let started = Instant::now();
    let mut reports = Vec::new();
    loop {
        let docs = engine.documents().await.unwrap();
        let paths: Vec<&str> = docs.iter().map(|d| d.path.as_str()).collect();
        if done(&docs) {
            println!("{what}: followed in {:.2} s", started.elapsed().as_secs_f64());
            return reports;
        }
        let left = FOLLOW_WITHIN
            .checked_sub(started.elapsed())
            .unwrap_or_else(|| panic!("{what}: not followed within {FOLLOW_WITHIN:?}; stored: {paths:#?}"));
        if let Ok(Some(changed)) = tokio::time::timeout(left, watcher.next_changes()).await {
            reports.push(engine.sync_paths(&changed, &mut |_| {}, &Cancel::new()).await.unwrap());
        }
    }
}

fn name_of(p: &str) -> String {
    Path::new(p).file_name().unwrap().to_string_lossy().into_owned()
}

fn has(docs: &[DocumentRecord], name: &str) -> bool {
    docs.iter().any(|d| d.path.ends_with(&format!("/{name}")))
}

/// Over a step's reports, the chunks of the last time the file named `name` was indexed, and
/// how many chunks were embedded in all (0 chunks when it was never indexed).
fn embedded_over_step(reports: &[IngestReport], name: &str) -> (u32, u32) {
    let mut chunks = 0;
    let mut embedded = 0;
    for (path, outcome) in reports.iter().flat_map(|r| &r.files) {
        if let FileOutcome::Indexed { chunks: c, embedded: e, .. } = outcome {
            if name_of(path) == name {
                chunks = *c;
                embedded += e;
            }
        }
    }
    (chunks, embedded)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_index_follows_a_watched_folder() {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let root: PathBuf = docs.path().join("markdown").canonicalize().unwrap();
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    let mut watcher = FolderWatcher::new(Duration::from_millis(300)).unwrap();
    watcher.watch(&root).unwrap();
    let first = engine.ingest(std::slice::from_ref(&root), &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!(first.count(|o| matches!(o, FileOutcome::Indexed { .. })), 3);

    // A new file.
    std::fs::write(root.join("new.md"), "# Field notes\n\nThe heron nests by the north pond every spring.\n").unwrap();
    follow(&engine, &mut watcher, "create", |p| has(p, "new.md")).await;

    // A one-character edit in the middle of a long file: only the chunks around it are embedded.
    let tokio_md = root.join("tokio-README.md");
    let text = std::fs::read_to_string(&tokio_md).unwrap();
    let middle = text.len() / 2;
    let at = middle + text[middle..].find(" the ").unwrap() + 1;
    let edited = format!("{}T{}", &text[..at], &text[at + 1..]);
    std::fs::write(&tokio_md, &edited).unwrap();
    let reports = follow(&engine, &mut watcher, "one-character edit", |d| stored_as(d, &tokio_md, &edited)).await;
    // The debouncer may hand one edit's events over in more than one set (it releases each event
    // once it is old enough, not once its file is quiet), so the file can be seen twice: the
    // second time unchanged. What counts is what was embedded over the whole step.
    let (chunks, embedded) = embedded_over_step(&reports, "tokio-README.md");
    println!("one-character edit: {embedded} of {chunks} chunks embedded again");
    assert!(chunks >= 4, "a long file: {chunks} chunks; {reports:#?}");
    assert!(
        (1..=2).contains(&embedded),
        "{embedded} of {chunks} chunks embedded for a one-character edit; {reports:#?}"
    );

    // A rename keeps every vector.
    std::fs::rename(root.join("notify-README.md"), root.join("watching.md")).unwrap();
    let reports =
        follow(&engine, &mut watcher, "rename", |p| has(p, "watching.md") && !has(p, "notify-README.md")).await;
    let (chunks, embedded) = embedded_over_step(&reports, "watching.md");
    assert!(chunks > 0 && embedded == 0, "a renamed file must not be embedded again: {reports:#?}");

    // A folder made, filled, renamed (a move of everything in it), then deleted.
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/inner.txt"), "Inner file about the lighthouse keeper's logbook.\n").unwrap();
    follow(&engine, &mut watcher, "new folder", |p| has(p, "sub/inner.txt")).await;
    std::fs::rename(root.join("sub"), root.join("moved")).unwrap();
    // Late events of the step before (the file written into the new folder) may come first and
    // remove sub/inner.txt before the rename's own events index moved/inner.txt: its vectors
    // are kept for reuse either way.
    let reports =
        follow(&engine, &mut watcher, "folder rename", |p| has(p, "moved/inner.txt") && !has(p, "sub/inner.txt")).await;
    let (chunks, embedded) = embedded_over_step(&reports, "inner.txt");
    assert!(chunks > 0 && embedded == 0, "a moved folder's file must not be embedded again: {reports:#?}");
    std::fs::remove_dir_all(root.join("moved")).unwrap();
    follow(&engine, &mut watcher, "folder delete", |p| !has(p, "moved/inner.txt")).await;

    // Save-by-rename: the editor writes a temporary file, then renames it over the original.
    std::fs::write(root.join("new.md.tmp"), "# Field notes\n\nThe heron left; a kingfisher took the nest.\n").unwrap();
    std::fs::rename(root.join("new.md.tmp"), root.join("new.md")).unwrap();
    let new_md = root.join("new.md");
    follow(&engine, &mut watcher, "save by rename", |d| {
        stored_as(d, &new_md, &std::fs::read_to_string(&new_md).unwrap())
    })
    .await;

    // Editors' temporary files are never indexed; a deleted file is removed.
    std::fs::write(root.join("~$report.docx"), "lock").unwrap();
    std::fs::write(root.join(".keyring-README.md.swp"), "swap").unwrap();
    std::fs::write(root.join("keyring-README.md~"), "backup").unwrap();
    std::fs::remove_file(root.join("keyring-README.md")).unwrap();
    follow(&engine, &mut watcher, "delete", |p| !has(p, "keyring-README.md")).await;
    let names: Vec<String> = engine.documents().await.unwrap().iter().map(|d| name_of(&d.path)).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, ["new.md", "tokio-README.md", "watching.md"]);

    // The chunk table holds exactly the chunks of the stored documents.
    let stored: usize = engine.documents().await.unwrap().iter().map(|d| d.chunks as usize).sum();
    assert_eq!(engine.knowledge_base().chunk_count().await.unwrap(), stored);
}

/// Whether the document stored for `path` is `content`.
fn stored_as(docs: &[DocumentRecord], path: &Path, content: &str) -> bool {
    let want = quire_ingest::content_hash(content.as_bytes());
    docs.iter().any(|d| Path::new(&d.path) == path && d.content_hash == want)
}

/// What the watcher hands over when one change's events are split across sets (the debouncer
/// releases each event once it is old enough, so a file written into a new folder can arrive
/// after the folder itself, and after a rename that followed): the stale path comes first, and
/// nothing may be embedded again because of it.
#[tokio::test(flavor = "multi_thread")]
async fn late_events_of_an_earlier_change_cost_no_embedding() {
    let docs = tempfile::tempdir().unwrap();
    let root = docs.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/inner.txt"), "Inner file about the lighthouse keeper's logbook.\n").unwrap();
    std::fs::write(root.join("notes.md"), "# Notes\n\nThe heron nests by the north pond every spring.\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    let first = engine.ingest(std::slice::from_ref(&root), &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!(first.embedded(), 2, "{first:?}");

    // The folder is renamed; the late event for the file inside it (by its old path) comes first.
    std::fs::rename(root.join("sub"), root.join("moved")).unwrap();
    let stale = engine.sync_paths(&[root.join("sub/inner.txt")], &mut |_| {}, &Cancel::new()).await.unwrap();
    assert!(matches!(stale.files.as_slice(), [(_, FileOutcome::Removed)]), "{stale:?}");
    let moved = engine.sync_paths(&[root.join("sub"), root.join("moved")], &mut |_| {}, &Cancel::new()).await.unwrap();
    let (chunks, embedded) = embedded_over_step(std::slice::from_ref(&moved), "inner.txt");
    assert!(chunks == 1 && embedded == 0, "the moved file was embedded again: {moved:?}");

    // One edit seen twice (its events in two sets): the second time it is unchanged.
    std::fs::write(root.join("notes.md"), "# Notes\n\nA kingfisher took the nest.\n").unwrap();
    let edit = engine.sync_paths(&[root.join("notes.md")], &mut |_| {}, &Cancel::new()).await.unwrap();
    let again = engine.sync_paths(&[root.join("notes.md")], &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!(edit.embedded(), 1, "{edit:?}");
    assert!(matches!(again.files.as_slice(), [(_, FileOutcome::Unchanged)]), "{again:?}");

    let mut names: Vec<String> = engine.documents().await.unwrap().iter().map(|d| d.path.clone()).collect();
    names.sort();
    let want: Vec<String> =
        ["moved/inner.txt", "notes.md"].iter().map(|n| root.join(n).to_string_lossy().into_owned()).collect();
    assert_eq!(names, want);
}
