//! A library shared by several computers (issue 60): Quire homes (each a computer) attached to one
//! store write their own tables there and search everyone's. The fast tier shares a folder; the
//! same scenario on a 3-node Garage cluster, with a node killed, the store stopped and a writer
//! killed, runs by explicit command:
//!
//! ```sh
//! tools/garage.sh start && source /tmp/quire-garage/env
//! scripts/keyring-session.sh cargo test --release --workspace --test shared -- --ignored --nocapture
//! ```

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use quire_testkit::{text, QuireHome};

const QUIRE: &str = env!("CARGO_BIN_EXE_quire");

/// The output of a command that must succeed.
fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

/// Runs `command` with `input` on its standard input.
fn with_input(mut command: Command, input: &str) -> Output {
    use std::io::Write;
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    eprintln!("$ quire …\n{}{}", text(&out.stdout), text(&out.stderr));
    out
}

fn backup(home: &QuireHome, action: &str, file: &Path) -> Output {
    let mut c = home.command(&["key", action, file.to_str().unwrap()]);
    c.env("QUIRE_BACKUP_PASSPHRASE", "backup words");
    home.run(c, &["key", action])
}

/// `quire search` in `mode` for each query, as printed (paths, scores, passages).
fn searches(home: &QuireHome, mode: &str, queries: &[&str]) -> Vec<String> {
    queries.iter().map(|q| ok(home.quire(&["search", "--mode", mode, "--limit", "10", q]))).collect()
}

const QUERIES: [&str; 4] =
    ["how do I install it", "FASTA format sequence header line", "Markov basis of a lattice", "secrets on Linux"];

/// Each of `shared` searches as `local`, a library of one's own holding the same documents: the
/// same ten hits, in the same order, with the same scores, in every mode. Dense search reads
/// every writer's vectors as one table would; keyword search ranks in the reader's mirror of
/// every writer's terms, so with the statistics of the whole library.
fn searched_as_one_library(local: &QuireHome, shared: &[&QuireHome]) {
    for mode in ["dense", "bm25", "hybrid"] {
        let expected = searches(local, mode, &QUERIES);
        assert!(expected.iter().all(|hits| hits.starts_with("1. ")), "{expected:?}");
        for home in shared {
            assert_eq!(searches(home, mode, &QUERIES), expected, "{mode} search");
        }
    }
}

/// Where a second computer attaches: the first's key imported, then the same store.
fn second_computer(first: &QuireHome, attach: &dyn Fn(&QuireHome) -> Output, passphrase: &str) -> QuireHome {
    let key = first.dir.path().join("key-backup.json");
    ok(backup(first, "export", &key));
    let second = QuireHome::with_passphrase(QUIRE, passphrase);
    // Attached before it holds the library's key: refused, nothing written.
    let early = attach(&second);
    assert!(!early.status.success());
    assert!(text(&early.stderr).contains("import that key's backup here first"), "{}", text(&early.stderr));
    assert!(!second.data_dir().join("store.json").exists());
    ok(backup(&second, "import", &key));
    ok(attach(&second));
    second
}

/// Issue 60, items 1 and 2 on a shared folder: computer A makes the library there and adds the
/// Markdown notes; computer B, with A's key imported, adds two PDFs and the same notes (found
/// already stored, not stored again); each lists all five documents and searches them as a
/// library of one's own holding the same documents does (the same ten hits, scores included, in
/// every mode); B may not remove what A added; what A removes is gone for B too.
#[test]
fn two_computers_write_one_shared_folder_library_and_each_searches_all_of_it() {
    let store = tempfile::tempdir().unwrap();
    let docs = quire_testkit::copy_samples(&["markdown", "fasta_guide.pdf", "4ti2_manual.pdf"]);
    let path = |name: &str| docs.path().join(name).to_str().unwrap().to_owned();
    let attach = |home: &QuireHome| home.quire(&["library", "attach", store.path().to_str().unwrap()]);

    let a = QuireHome::with_passphrase(QUIRE, "computer a");
    let attached = ok(attach(&a));
    assert!(attached.contains("this computer writes as"), "{attached}");
    let added = ok(a.quire(&["ingest", &path("markdown")]));
    assert!(added.contains("3 indexed"), "{added}");
    let b = second_computer(&a, &attach, "computer b");

    let both = ok(b.quire(&["ingest", &path("fasta_guide.pdf"), &path("4ti2_manual.pdf"), &path("markdown")]));
    assert!(both.contains("2 indexed, 3 unchanged"), "A's notes are not stored twice: {both}");
    for home in [&a, &b] {
        let list = ok(home.quire(&["list"]));
        assert!(list.contains("5 documents"), "{list}");
        assert!(ok(home.quire(&["library"])).contains("1 other computer writes to it."));
    }
    // Each computer wrote its own two tables, and nothing else, in the store.
    let mut tables: Vec<String> =
        std::fs::read_dir(store.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    tables.sort();
    assert_eq!(tables.len(), 4, "{tables:?}");
    assert!(tables.iter().all(|t| t.starts_with("chunks-") || t.starts_with("documents-")), "{tables:?}");

    let local = QuireHome::with_passphrase(QUIRE, "one computer");
    ok(local.quire(&["ingest", &path("markdown"), &path("fasta_guide.pdf"), &path("4ti2_manual.pdf")]));
    searched_as_one_library(&local, &[&a, &b]);

    let theirs = b.quire(&["remove", &path("markdown/tokio-README.md")]);
    assert!(!theirs.status.success());
    assert!(text(&theirs.stderr).contains("was added by another computer sharing this library"));
    ok(a.quire(&["remove", &path("markdown/tokio-README.md")]));
    assert!(ok(b.quire(&["list"])).contains("4 documents"));
    // A library of one's own cannot be moved into a store (yet): refused, nothing changed.
    let refused = local.quire(&["library", "attach", store.path().to_str().unwrap()]);
    assert!(text(&refused.stderr).contains("already holds documents on this computer"), "{}", text(&refused.stderr));
    assert!(ok(local.quire(&["library"])).contains("kept on this computer"));
}

/// The Garage cluster `tools/garage.sh start` made (its env file sourced).
struct Garage {
    endpoint: String,
    bucket: String,
    key_id: String,
    secret: String,
    dir: String,
}

impl Garage {
    fn from_env() -> Garage {
        let var = |name: &str| {
            std::env::var(name)
                .unwrap_or_else(|_| panic!("{name} is not set: tools/garage.sh start, then source its env"))
        };
        Garage {
            endpoint: var("QUIRE_TEST_S3_ENDPOINT"),
            bucket: var("QUIRE_TEST_S3_BUCKET"),
            key_id: var("QUIRE_TEST_S3_KEY_ID"),
            secret: var("QUIRE_TEST_S3_SECRET"),
            dir: var("QUIRE_TEST_GARAGE_DIR"),
        }
    }

    fn node(&self, action: &str, node: u32) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/garage.sh");
        let status = Command::new(script).args([action, &node.to_string(), &self.dir]).status().unwrap();
        assert!(status.success(), "garage.sh {action} {node}");
        if action == "revive" {
            std::thread::sleep(Duration::from_secs(3));
        }
    }
}

/// Issue 60's scenario on a real 3-node Garage cluster (replication 3): A makes the library at
/// an s3:// URL (the access key typed once, kept in the keychain); B (A's key imported) and A
/// ingest at the same moment while C, a third computer, searches, and a node is killed during
/// it; every document is there once and searched as in a library of one's own; with the store
/// stopped, a command says so within 5 s and a file added meanwhile stays queued, then goes in
/// when the store is back; a writer killed mid-ingestion leaves the library opening at its last
/// whole version, and goes on where it stopped; the secret is in no file of any home.
#[test]
#[ignore = "needs a Garage cluster (tools/garage.sh start), by explicit command"]
fn three_computers_share_a_library_on_a_garage_cluster_through_faults() {
    let garage = Garage::from_env();
    let url = format!("s3://{}/shared-{}", garage.bucket, std::process::id());
    let credentials = format!("{}\n{}\n", garage.key_id, garage.secret);
    let attach = |home: &QuireHome| {
        let c = home.command(&["library", "attach", &url, "--endpoint", &garage.endpoint, "--region", "garage"]);
        with_input(c, &credentials)
    };
    let docs = quire_testkit::copy_samples(&["markdown", "fasta_guide.pdf", "4ti2_manual.pdf"]);
    let path = |name: &str| docs.path().join(name).to_str().unwrap().to_owned();

    let a = QuireHome::with_passphrase(QUIRE, "computer a");
    ok(attach(&a));
    ok(a.quire(&["ingest", &path("markdown")]));
    let b = second_computer(&a, &attach, "computer b");
    let c = second_computer(&a, &attach, "computer c");

    // A and B ingest at once; C searches meanwhile; node 3 is killed a moment in.
    let spawn_path = |home: &QuireHome, file: &str| home.command(&["ingest", file]).output_in_background();
    let spawn = |home: &QuireHome, file: &str| spawn_path(home, &path(file));
    let (ingest_a, ingest_b) = (spawn(&a, "4ti2_manual.pdf"), spawn(&b, "fasta_guide.pdf"));
    std::thread::sleep(Duration::from_millis(1500));
    garage.node("kill", 3);
    let during = searches(&c, "hybrid", &QUERIES[..1]);
    assert!(during[0].starts_with("1. "), "C searches while they write: {during:?}");
    for ingest in [ingest_a, ingest_b] {
        ok(ingest.join().unwrap());
    }
    garage.node("revive", 3);

    let local = QuireHome::with_passphrase(QUIRE, "one computer");
    ok(local.quire(&["ingest", &path("markdown"), &path("fasta_guide.pdf"), &path("4ti2_manual.pdf")]));
    for home in [&a, &b, &c] {
        assert!(ok(home.quire(&["list"])).contains("5 documents"));
    }
    searched_as_one_library(&local, &[&a, &b, &c]);

    // The store stopped during an ingestion: it stops with the file queued; a command is told
    // within 5 s; once the store is back, the ingestion goes on where it stopped.
    let copies = docs.path().join("copies");
    std::fs::create_dir_all(&copies).unwrap();
    std::fs::copy(path("4ti2_manual.pdf"), copies.join("4ti2-first-copy.pdf")).unwrap();
    let copy = |name: &str| copies.join(name).to_str().unwrap().to_owned();
    let stopped_during = spawn_path(&a, &copy("4ti2-first-copy.pdf"));
    std::thread::sleep(Duration::from_millis(1500));
    for node in 1..=3 {
        garage.node("kill", node);
    }
    let stopped_during = stopped_during.join().unwrap();
    let started = Instant::now();
    let list = a.quire(&["list"]);
    let waited = started.elapsed();
    assert!(!list.status.success());
    assert!(text(&list.stderr).contains("did not answer"), "{}", text(&list.stderr));
    assert!(waited < Duration::from_secs(5), "said after {waited:?}");
    eprintln!("the stopped store was said after {waited:?}");
    for node in 1..=3 {
        garage.node("revive", node);
    }
    // The cluster answers once its nodes found each other again (a few seconds).
    let back = Instant::now();
    while !a.command(&["list"]).output().unwrap().status.success() {
        assert!(back.elapsed() < Duration::from_secs(60), "the cluster did not come back");
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!("the cluster answered again {:?} after its nodes were started", back.elapsed());
    if !stopped_during.status.success() {
        assert!(text(&stopped_during.stderr).contains("stay queued"), "{}", text(&stopped_during.stderr));
        // Just after its restart the cluster still refuses some requests for a few seconds (seen
        // on 2 of 6 runs): the person runs the ingestion again, and the queued file is still there.
        let mut resumed = a.quire(&["ingest"]);
        for _ in 0..3 {
            if resumed.status.success() {
                break;
            }
            assert!(text(&resumed.stderr).contains("queued"), "{}", text(&resumed.stderr));
            std::thread::sleep(Duration::from_secs(5));
            resumed = a.quire(&["ingest"]);
        }
        assert!(ok(resumed).contains("1 indexed"));
    }
    assert!(ok(b.quire(&["list"])).contains("4ti2-first-copy.pdf"));

    // A writer killed mid-ingestion (a long log of its own words, so embedding takes a while):
    // the library opens at its last whole version, and the ingestion goes on.
    let log = copies.join("long-log.md");
    let entries: Vec<String> = (0..1500)
        .map(|i| format!("Entry {i}: the pump at station {} read {} bar on day {}.", i % 37, i % 11, i))
        .collect();
    std::fs::write(&log, format!("# Station log\n\n{}\n", entries.join("\n\n"))).unwrap();
    let mut writer =
        b.command(&["ingest", log.to_str().unwrap()]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(4));
    writer.kill().unwrap();
    writer.wait().unwrap();
    let whole = ok(c.quire(&["list"]));
    assert!(whole.contains("6 documents") || whole.contains("7 documents"), "{whole}");
    let again = ok(b.quire(&["ingest", log.to_str().unwrap()]));
    assert!(again.contains("1 indexed") || again.contains("1 unchanged"), "{again}");
    assert!(ok(a.quire(&["list"])).contains("7 documents"));

    for home in [&a, &b, &c] {
        let holding = quire_testkit::files_holding(home.dir.path(), &garage.secret);
        assert!(holding.is_empty(), "the secret is in {holding:?}");
    }
}

/// A command run on a thread of its own, its output joined later.
trait InBackground {
    fn output_in_background(self) -> std::thread::JoinHandle<Output>;
}

impl InBackground for Command {
    fn output_in_background(mut self) -> std::thread::JoinHandle<Output> {
        std::thread::spawn(move || {
            let out = self.output().unwrap();
            eprintln!("$ quire (in the background)\n{}{}", text(&out.stdout), text(&out.stderr));
            out
        })
    }
}
