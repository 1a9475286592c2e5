//! Ingestion that never loses work, through the `quire` command as a person runs it: killed
//! (SIGKILL) at random points and started again until done, the result must equal one clean
//! ingestion; a folder of bad files must cost only those files; a parser that runs too long or
//! allocates too much is stopped and its file reported.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use quire_index::{ChunkKey, KnowledgeBase};
use quire_testkit::{text, QuireHome};

const EMBEDDING_DIM: usize = 384;

const QUIRE: &str = env!("CARGO_BIN_EXE_quire");

/// Everything that identifies an index's content: its documents and its chunks, by path and
/// place, with the sha256 of each chunk's text. (Document ids and stored hashes are keyed
/// fingerprints, different in every collection: they are checked within one, not compared.)
#[derive(Debug, PartialEq)]
struct Snapshot {
    documents: BTreeMap<String, (String, u32, u32)>,
    chunks: BTreeSet<(String, u32, String)>,
}

/// The index's content, checked: every stored document complete (the invariant that holds even
/// right after a kill); once `settled` (a run finished), no duplicate and no orphan chunks either,
/// and every chunk's stored hash the collection's fingerprint of its text.
async fn snapshot(dir: &Path, settled: bool) -> Snapshot {
    let (_, protection) = quire_engine::Vault::unlock(dir, &quire_engine::KeyAccess::from_env()).unwrap();
    let kb = KnowledgeBase::open(dir, EMBEDDING_DIM, protection).await.unwrap();
    let docs = kb.documents().await.unwrap();
    let keys: Vec<ChunkKey> = kb.chunk_keys().await.unwrap();
    if settled {
        let ids: BTreeSet<&str> = keys.iter().map(|k| k.chunk_id.as_str()).collect();
        assert_eq!(ids.len(), keys.len(), "duplicate chunk ids");
        for k in &keys {
            assert!(docs.iter().any(|d| d.doc_id == k.doc_id), "orphan chunk {}", k.chunk_id);
        }
    }
    let mut chunks = BTreeSet::new();
    for d in &docs {
        let n = keys.iter().filter(|k| k.doc_id == d.doc_id).count();
        assert_eq!(n, d.chunks as usize, "{} has {n} chunks stored, {} recorded", d.path, d.chunks);
        assert_eq!(d.doc_id, kb.document_id(&d.path));
        for c in kb.chunk_records_of(&d.doc_id).await.unwrap() {
            assert_eq!(c.hash, kb.chunk_hash(&c.text), "{}:{} stored hash", d.path, c.seq);
            chunks.insert((d.path.clone(), c.seq, quire_ingest::content_hash(c.text.as_bytes())));
        }
    }
    Snapshot { documents: docs.into_iter().map(|d| (d.path, (d.content_hash, d.pages, d.chunks))).collect(), chunks }
}

/// About 130 short documents cut from the sample Markdown (three variants of each cut), and a
/// DOCX and an EPUB (loaded in a child process).
fn crash_corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut paragraphs: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(quire_testkit::sample_docs().join("markdown")).unwrap() {
        let body = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        paragraphs.extend(body.split("\n\n").map(|p| p.trim().to_string()).filter(|p| p.len() > 40));
    }
    let mut file = 0;
    for variant in ["Draft", "Review", "Final"] {
        for group in paragraphs.chunks(2) {
            let body = format!("{variant} {file}.\n\n{}", group.join("\n\n"));
            std::fs::write(dir.path().join(format!("note-{file:03}.md")), body).unwrap();
            file += 1;
        }
    }
    assert!(file >= 100, "{file} files");
    std::fs::write(
        dir.path().join("report.docx"),
        quire_testkit::docx(&["Crash-safe ingestion report.", &paragraphs[0]]),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("book.epub"),
        quire_testkit::epub(&[("Start", &paragraphs[1]), ("End", &paragraphs[2])]),
    )
    .unwrap();
    dir
}

/// A small deterministic generator for the kill times.
struct Lcg(u64);

impl Lcg {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_at_random_points_and_restarted_the_index_equals_a_clean_ingestion() {
    let corpus = crash_corpus();
    let root = corpus.path();
    let corpus_path = root.to_str().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();

    // Twenty-odd runs, each killed (SIGKILL: no destructor, no flush, like a power cut) at a
    // random point: start-up, reading, embedding, a commit, the index refresh, compaction.
    // Between runs the folder changes as folders do (edits, a deletion, a new file), so every
    // run has work to be killed in, and replacements and removals are interrupted too.
    let crashed = QuireHome::new(QUIRE);
    let mut rng = Lcg(20261129);
    let (mut kills, mut runs) = (0, 0);
    // How long the last run that was not killed took: each kill falls at a random point of a
    // run of about that length, so kills land on a fast machine as on a slow one.
    let mut run_length = 8.0;
    while kills < 20 {
        runs += 1;
        assert!(runs <= 60, "only {kills} kills landed in {runs} runs");
        if runs > 1 {
            for _ in 0..12 {
                let name = &names[(rng.unit() * names.len() as f64) as usize];
                let path = root.join(name);
                if let Ok(mut body) = std::fs::read_to_string(&path) {
                    body.push_str(&format!("\n\nRevision {runs} of {name}.\n"));
                    std::fs::write(&path, body).unwrap();
                }
            }
            if runs % 5 == 0 {
                let _ = std::fs::remove_file(root.join(&names[(rng.unit() * names.len() as f64) as usize]));
                std::fs::write(
                    root.join(format!("added-{runs}.md")),
                    format!("Added in run {runs}: the ferry timetable changes in winter.\n"),
                )
                .unwrap();
            }
        }
        let mut child = ingest_in_background(&crashed, root);
        let started = std::time::Instant::now();
        let at = 0.05 + rng.unit() * run_length;
        let mut finished = None;
        while finished.is_none() && started.elapsed().as_secs_f64() < at {
            std::thread::sleep(Duration::from_millis(10));
            finished = child.try_wait().unwrap().map(|_| started.elapsed().as_secs_f64());
        }
        let killed = finished.is_none() && child.try_wait().unwrap().is_none();
        if killed {
            child.kill().unwrap();
            kills += 1;
        }
        child.wait().unwrap();
        if !killed {
            run_length = finished.unwrap_or(at).max(0.2);
        }
        // Even right after a kill, every stored document is complete.
        let now = snapshot(&crashed.data_dir(), !killed).await;
        println!(
            "run {runs}: {} at {at:.2} s; {} documents, {} chunks stored",
            if killed { "killed" } else { "finished" },
            now.documents.len(),
            now.chunks.len()
        );
    }

    // The queue says what is left (a line per queued file; its last line, "N queued, M failed",
    // is there either way); `quire ingest` without paths finishes it. The last kill may have
    // landed before its run queued anything, after a run that finished: then nothing is left.
    let jobs = text(&crashed.quire(&["jobs"]).stdout);
    if jobs.lines().any(|line| line.starts_with("queued ")) {
        let resumed = crashed.quire(&["ingest"]);
        assert!(resumed.status.success(), "resume: {}\njobs were:\n{jobs}", text(&resumed.stderr));
        assert!(text(&resumed.stdout).contains("resuming an interrupted ingestion"), "{}", text(&resumed.stdout));
    }
    // A full run picks up what the killed runs never queued; after it, nothing is left to do.
    let full = crashed.quire(&["ingest", corpus_path]);
    assert!(full.status.success(), "full run: {}{}", text(&full.stdout), text(&full.stderr));
    let files = std::fs::read_dir(root).unwrap().count();
    let again = crashed.quire(&["ingest", corpus_path]);
    assert!(text(&again.stdout).contains(&format!("0 indexed, {files} unchanged")), "{}", text(&again.stdout));
    let after = snapshot(&crashed.data_dir(), true).await;

    // One clean ingestion of the same files.
    let clean = QuireHome::new(QUIRE);
    let out = clean.quire(&["ingest", corpus_path]);
    assert!(out.status.success(), "clean run: {}{}", text(&out.stdout), text(&out.stderr));
    let expected = snapshot(&clean.data_dir(), true).await;
    assert_eq!(expected.documents.len(), files);
    println!(
        "after {kills} kills in {runs} runs: {} documents, {} chunks, equal to a clean ingestion",
        after.documents.len(),
        after.chunks.len()
    );
    assert_eq!(after, expected, "the index after crashes differs from a clean ingestion");
}

#[cfg(unix)]
fn symlink(target: &str, link: &Path) {
    std::os::unix::fs::symlink(target, link).unwrap();
}

#[cfg(unix)]
#[test]
fn bad_files_are_reported_and_cost_nothing_else() {
    use std::os::unix::fs::PermissionsExt;
    let docs = quire_testkit::copy_samples(&["bad", "markdown/notify-README.md"]);
    let root = docs.path();
    let write = |name: &str, bytes: &[u8]| std::fs::write(root.join(name), bytes).unwrap();
    // Good files in every format.
    write(
        "report.docx",
        &quire_testkit::docx(&["The annual report of the lighthouse society.", "Membership rose to 212."]),
    );
    write(
        "book.epub",
        &quire_testkit::epub(&[
            ("Tides", "Spring tides follow the full and new moon."),
            ("Storms", "Storm surges add to them."),
        ]),
    );
    write("page.html", b"<html><body><h1>Harbour</h1><p>The harbour master keeps the tide tables.</p></body></html>");
    // Bad ones.
    write("secret.pdf", &quire_testkit::encrypted_pdf());
    let bomb_body = vec![b'x'; 80 * 1024 * 1024];
    write("bomb.docx", &quire_testkit::zip_archive(&[("word/document.xml", &bomb_body)]));
    write("locked.docx", &[&[0xD0u8, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1][..], &[0u8; 504][..]].concat());
    write("noise.epub", &(0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect::<Vec<_>>());
    std::fs::File::create(root.join("huge.txt")).unwrap().set_len(200 * 1024 * 1024).unwrap();
    symlink("loop-b.md", &root.join("loop-a.md"));
    symlink("loop-a.md", &root.join("loop-b.md"));
    symlink("nowhere.md", &root.join("broken.md"));
    write("unreadable.md", b"You cannot read me.");
    std::fs::set_permissions(root.join("unreadable.md"), std::fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads anything: then the file is simply good.
    let unreadable = std::fs::read(root.join("unreadable.md")).is_err();

    let home = QuireHome::new(QUIRE);
    let out = home.quire(&["ingest", "--stats", root.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "some files failed");
    let err = text(&out.stderr);
    let mut bad = vec![
        ("binary.md", "binary"),
        ("empty.txt", "empty"),
        ("header-only.pdf", "the PDF is damaged"),
        ("truncated.pdf", "the PDF is damaged"),
        ("secret.pdf", "encrypted"),
        ("bomb.docx", "zip bomb"),
        ("locked.docx", "password-protected"),
        ("noise.epub", "the EPUB file is damaged"),
        ("huge.txt", "over the"),
        ("loop-a.md", "link"),
        ("loop-b.md", "link"),
        ("broken.md", "link"),
    ];
    if unreadable {
        bad.push(("unreadable.md", "ermission"));
    }
    for (name, why) in &bad {
        let line = err
            .lines()
            .find(|l| l.contains(&format!("/{name}:")))
            .unwrap_or_else(|| panic!("{name} not reported: {err}"));
        assert!(line.contains(why), "{name}: expected the reason to mention {why:?}: {line}");
    }
    let list = text(&home.quire(&["list"]).stdout);
    let mut good = vec!["report.docx", "book.epub", "page.html", "latin1.txt", "notify-README.md"];
    if !unreadable {
        good.push("unreadable.md");
    }
    for name in &good {
        assert!(list.contains(&format!("/{name}")), "{name} indexed: {list}");
    }
    assert!(list.contains(&format!("{} documents", good.len())), "{list}");
    // Memory stays bounded: the bomb and the huge file were refused, not read.
    let stats = text(&out.stdout);
    let peak_mb: f64 = stats
        .lines()
        .find_map(|l| {
            l.strip_prefix("peak RSS: ").and_then(|r| r.split_whitespace().next()).and_then(|n| n.parse().ok())
        })
        .unwrap_or_else(|| panic!("no peak RSS in {stats}"));
    println!("peak RSS while ingesting the bad corpus: {peak_mb} MB");
    assert!(peak_mb < 1024.0, "peak RSS {peak_mb} MB");
    let hits = text(&home.quire(&["search", "--mode", "bm25", "spring tides full moon"]).stdout);
    assert!(hits.contains("book.epub"), "{hits}");
}

#[test]
fn a_parser_that_runs_too_long_or_allocates_too_much_is_stopped() {
    let docs = quire_testkit::copy_samples(&["4ti2_manual.pdf", "markdown/notify-README.md"]);
    let home = QuireHome::new(QUIRE);
    let out = home
        .command(&["ingest", docs.path().to_str().unwrap()])
        .env("QUIRE_LOADER_TIMEOUT_S", "0.05")
        .output()
        .unwrap();
    eprintln!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("4ti2_manual.pdf: reading took longer than 0.05 s"), "{err}");
    assert!(text(&out.stdout).contains("indexed   "), "the other file is indexed");

    // A Word document whose text inflates to 60 MB (under the 64 MiB cap per entry) needs more
    // than a 32 MB allowance to read.
    let big = tempfile::tempdir().unwrap();
    let big_docx = big.path().join("big.docx");
    std::fs::write(&big_docx, quire_testkit::docx(&[&"lorem ipsum ".repeat(5_000_000)])).unwrap();
    let out =
        home.command(&["ingest", big_docx.to_str().unwrap()]).env("QUIRE_LOADER_MEMORY_MB", "32").output().unwrap();
    let err = text(&out.stderr);
    eprintln!("{err}");
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("big.docx: reading it needed more than the 32 MB allowed"), "{err}");
    assert!(!text(&out.stdout).contains("indexed   "), "nothing of it stored");

    // With the default limits the same file is read.
    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("4ti2_manual.pdf ("), "{}", text(&out.stdout));
}

/// Files that failed and were then deleted leave `quire jobs` when their folder is read again
/// (issue 57: 17 stale "failed" entries stayed after a watched folder's files were deleted;
/// a watched folder's deletions go the same way, `Engine::sync_paths`).
#[test]
fn failed_files_deleted_from_a_folder_leave_the_job_list() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("good.md"), "# Good\n\nA note that reads.\n").unwrap();
    std::fs::write(docs.path().join("empty.md"), "").unwrap();
    std::fs::write(docs.path().join("broken.pdf"), "%PDF-1.4 nothing more").unwrap();
    let home = QuireHome::new(QUIRE);
    assert_eq!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.code(), Some(2));
    let jobs = text(&home.quire(&["jobs"]).stdout);
    assert!(jobs.contains("empty.md") && jobs.contains("broken.pdf") && jobs.contains("0 queued, 2 failed"), "{jobs}");
    std::fs::remove_file(docs.path().join("empty.md")).unwrap();
    home.quire(&["ingest", docs.path().to_str().unwrap()]);
    let jobs = text(&home.quire(&["jobs"]).stdout);
    assert!(!jobs.contains("empty.md") && jobs.contains("broken.pdf") && jobs.contains("0 queued, 1 failed"), "{jobs}");
}

/// Page 9 of the sample 4ti2 manual includes a figure whose drawing is damaged (line operators
/// without their operands, in a form the PDF embeds): pdf-extract stopped on it and the page's
/// text was lost at every ingest (issue 57). The broken operations are dropped and the page
/// reads.
#[test]
fn a_page_with_a_damaged_figure_is_still_read() {
    let docs = quire_testkit::copy_samples(&["4ti2_manual.pdf"]);
    let home = QuireHome::new(QUIRE);
    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said} {}", text(&out.stderr));
    assert!(said.contains("4ti2_manual.pdf (59 pages") && !said.contains("unreadable"), "{said}");
    let hits = text(
        &home
            .quire(&["search", "--mode", "bm25", "--limit", "1", "system.zinhom system.zhom integer solutions"])
            .stdout,
    );
    assert!(hits.contains("4ti2_manual.pdf, page 9") && hits.contains("4ti2-zsolve"), "{hits}");
}

#[test]
fn quire_watch_follows_a_folder_until_stopped() {
    let docs = quire_testkit::copy_samples(&["markdown/notify-README.md"]);
    let folder = docs.path().join("markdown");
    let home = QuireHome::new(QUIRE);
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut watch = home
        .command(&["watch", folder.to_str().unwrap()])
        .stdout(log.reopen().unwrap())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    let printed = || std::fs::read_to_string(log.path()).unwrap();
    // `quire list` beside a running watcher must always answer: a failure is a failure of the
    // test, not a "not listed".
    let listed = |name: &str| {
        let out = home.command(&["list"]).output().unwrap();
        assert!(
            out.status.success(),
            "quire list failed beside quire watch:\n{}\nwatch printed:\n{}",
            text(&out.stderr),
            printed()
        );
        text(&out.stdout).contains(name)
    };
    let wait_for = |what: &str, check: &dyn Fn() -> bool| {
        let until = std::time::Instant::now() + Duration::from_secs(120);
        while !check() {
            assert!(
                std::time::Instant::now() < until,
                "quire watch did not follow: {what}; it printed:\n{}",
                printed()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    // `list` is a reading command: it refuses a collection that does not exist yet, so ask only
    // once the watcher has opened (created) it and said so.
    wait_for("the first scan", &|| printed().contains("watching 1 folder"));
    assert!(listed("notify-README.md"), "the first scan did not index the folder:\n{}", printed());
    std::fs::write(folder.join("tides.md"), "# Tides\n\nSpring tides follow the full and new moon.\n").unwrap();
    wait_for("a new file", &|| listed("tides.md"));
    std::fs::remove_file(folder.join("notify-README.md")).unwrap();
    wait_for("a deleted file", &|| !listed("notify-README.md"));
    // The watcher reports a removal just after committing it: `list` can see it first.
    wait_for("the removal reported", &|| {
        printed().lines().any(|l| l.starts_with("removed   ") && l.contains("notify-README.md"))
    });
    watch.kill().unwrap();
    watch.wait().unwrap();
}

/// Scans: a scanned PDF (pictures of pages, no text layer) and a photo of a page are read by
/// OCR in the loader's child process, indexed page by page, and found by search with their page;
/// the answer cites the scanned page.
#[test]
fn scans_are_read_found_and_cited_by_page() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("warranty-scan.pdf"), quire_testkit::scanned_pdf(2)).unwrap();
    std::fs::write(docs.path().join("card-photo.jpg"), quire_testkit::scanned_page_jpeg()).unwrap();
    let home = QuireHome::new(QUIRE);
    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let list = text(&home.quire(&["list"]).stdout);
    assert!(list.contains("2 documents"), "{list}");
    assert!(list.lines().any(|l| l.contains("2 pages") && l.contains("warranty-scan.pdf")), "{list}");

    for mode in ["bm25", "dense"] {
        let out = home.quire(&["search", "--mode", mode, "--limit", "3", "How long is the compressor covered?"]);
        let found = text(&out.stdout);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let first = found.lines().next().unwrap_or_default();
        assert!(
            first.contains("warranty-scan.pdf, page ") || first.contains("card-photo.jpg, page 1"),
            "{mode}: {found}"
        );
        assert!(found.contains("compressor alone is covered for twelve years"), "{mode}: the OCR'd text: {found}");
    }
    let answer: serde_json::Value = serde_json::from_slice(
        &home.quire(&["ask", "--json", "--model", "smollm2-135m", "What is the service line's number?"]).stdout,
    )
    .expect("ask --json prints JSON");
    let sources = answer["sources"].as_array().unwrap();
    assert!(
        sources.iter().any(|s| s["page"] == 1 && s["text"].as_str().unwrap_or_default().contains("0800 555 0199")),
        "the scanned page is among the sources, with its page: {answer}"
    );
}

/// A photo with no text fails once, through the loader child, and is not read by OCR again at
/// the next run while its size and time stay the same; once it changes it is read again.
#[test]
fn a_photo_without_text_is_not_read_again_until_it_changes() {
    use std::time::{Duration, SystemTime};
    let docs = tempfile::tempdir().unwrap();
    let photo = docs.path().join("wall.jpg");
    // Two JPEGs of one size (a decoder stops at the image's end marker; the rest is padding).
    let (mut wall, mut page) = (quire_testkit::textless_photo_jpeg(), quire_testkit::scanned_page_jpeg().to_vec());
    let size = wall.len().max(page.len());
    wall.resize(size, 0);
    page.resize(size, 0);
    let set_time = |t: SystemTime| std::fs::File::options().write(true).open(&photo).unwrap().set_modified(t).unwrap();
    std::fs::write(&photo, &wall).unwrap();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    set_time(an_hour_ago);
    let home = QuireHome::new(QUIRE);
    let failed = "wall.jpg: no text was found on the image (a photo or a drawing?)";
    let out = home.command(&["ingest", docs.path().to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(failed), "{}", text(&out.stderr));

    // The page's bytes under the photo's size and time: still the photo's failure, not read.
    std::fs::write(&photo, &page).unwrap();
    set_time(an_hour_ago);
    let out = home.command(&["ingest", docs.path().to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(failed), "{}", text(&out.stderr));

    // A new time: read by OCR, indexed.
    set_time(SystemTime::now() - Duration::from_secs(60));
    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("wall.jpg (1 page,"), "{}", text(&out.stdout));
}

/// `quire ingest docs`, started and left running, its output dropped.
fn ingest_in_background(home: &QuireHome, docs: &Path) -> std::process::Child {
    home.command(&["ingest", docs.to_str().unwrap()]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

/// The loader children reading `file` (their environment names it), by process id.
fn loader_children_reading(file: &Path) -> Vec<u32> {
    let wanted = format!("QUIRE_LOADER_WORKER={}", file.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == wanted.as_bytes()))
        })
        .collect()
}

/// Killed (SIGKILL) while OCR reads a scan: the loader child reading it goes too (it does not
/// read on for minutes), and the next run reads the scan whole, the other file kept.
#[test]
fn a_kill_while_a_scan_is_read_costs_nothing() {
    let docs = tempfile::tempdir().unwrap();
    let scan = docs.path().join("scan.pdf");
    std::fs::write(&scan, quire_testkit::scanned_pdf(8)).unwrap();
    std::fs::write(docs.path().join("note.md"), "# Note\n\nThe boiler was serviced in March.\n").unwrap();
    let home = QuireHome::new(QUIRE);
    let mut ingest = ingest_in_background(&home, docs.path());
    // Killed once the scan has been read for a second (8 pages take several).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while loader_children_reading(&scan).is_empty() {
        assert!(std::time::Instant::now() < deadline, "the scan was never read");
        assert!(ingest.try_wait().unwrap().is_none(), "the ingestion ended before the scan was read");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    let reading = loader_children_reading(&scan);
    ingest.kill().unwrap();
    ingest.wait().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Still running: not gone, and not a zombie waiting for its new parent to reap it.
    let running = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')))
    };
    let left: Vec<u32> = reading.into_iter().filter(running).collect();
    assert!(left.is_empty(), "loader children left reading after the kill: {left:?}");

    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = text(&home.quire(&["list"]).stdout);
    assert!(list.contains("2 documents"), "{list}");
    assert!(list.lines().any(|l| l.contains("8 pages") && l.contains("scan.pdf")), "{list}");
}

/// Killed part way through a scan: the pages OCR had read are kept (sealed, beside the tables)
/// and the next run reads only the others, then lets the kept pages go. A long scan stopped after
/// minutes loses none of them.
#[test]
fn a_scan_stopped_part_way_resumes_from_the_pages_it_had_read() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(docs.path().join("scan.pdf"), quire_testkit::scanned_pdf(8)).unwrap();
    let home = QuireHome::new(QUIRE);
    let kept_pages = home.data_dir().join("ocr-pages.jsonl");
    let pages_kept = || std::fs::read_to_string(&kept_pages).map(|t| t.lines().count()).unwrap_or(0);
    let mut ingest = ingest_in_background(&home, docs.path());
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    while pages_kept() < 3 {
        assert!(std::time::Instant::now() < deadline, "no pages were kept");
        assert!(ingest.try_wait().unwrap().is_none(), "the ingestion ended before three pages were read");
        std::thread::sleep(Duration::from_millis(20));
    }
    ingest.kill().unwrap();
    ingest.wait().unwrap();
    let kept = pages_kept();
    assert!((3..8).contains(&kept), "{kept} pages kept");

    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(said.contains(&format!("{kept} scanned pages read before it was stopped")), "{said}");
    assert_eq!(pages_kept(), 0, "the pages are let go once their document is stored");
    let list = text(&home.quire(&["list"]).stdout);
    assert!(list.lines().any(|l| l.contains("8 pages") && l.contains("scan.pdf")), "{list}");
    let found = text(&home.quire(&["search", "serviced once a year twelve years"]).stdout);
    assert!(found.contains("scan.pdf"), "{found}");
}
