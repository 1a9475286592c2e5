//! What an unlucky or hostile user can do to Quire through the `quire` command, and what must
//! hold: a key rotation killed anywhere, a lost key manifest, a file swapped for a named pipe
//! while it is being ingested, file names made of terminal escape sequences, links that lead out
//! of the folder given, and the local API flooded with a header or abandoned mid-answer.

use std::io::{BufRead, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use quire_testkit::{text, QuireHome};

const QUIRE: &str = env!("CARGO_BIN_EXE_quire");

/// Notes in Markdown, each with a sentence of its own, for collections with many documents.
fn write_notes(dir: &Path, count: usize) {
    let animals = ["otter", "heron", "lynx", "badger", "marten", "ibis", "newt", "vole"];
    for i in 0..count {
        let animal = animals[i % animals.len()];
        let body = format!(
            "# Field note {i}\n\nThe {animal} seen at station {i} was tagged with ring number {}.\n\n\
             Observers logged the {animal} feeding near the reed bed for {} minutes before it left.\n",
            1000 + i * 7,
            10 + i
        );
        std::fs::write(dir.join(format!("note-{i:02}.md")), body).unwrap();
    }
}

/// A child process killed when the test ends, passed or not.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `child` to end, at most `limit`; `None` if it had to be killed.
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A pseudo-random number generator for kill points, seeded from the clock (the seed is printed
/// so a failing run can be repeated).
struct Rng(u64);

impl Rng {
    fn from_clock() -> Rng {
        let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1;
        eprintln!("kill points from seed {seed}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// `quire key rotate` killed (SIGKILL) at random points while it reseals, round after round:
/// after each kill dense and hybrid search work, and at the end answers too, every document is
/// there and the rotation has finished. (Before, a kill between a document's new rows and the
/// removal of its old chunks left chunks under a key that the next start then forgot.)
#[test]
fn a_key_rotation_killed_anywhere_leaves_search_and_answers_working() {
    let home = QuireHome::with_passphrase(QUIRE, "rotation test");
    let docs = tempfile::tempdir().unwrap();
    const NOTES: usize = 24;
    write_notes(docs.path(), NOTES);
    assert!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.success());

    // One whole rotation, its resealing timed: the kills are spread over that long.
    let (mut rotate, mut stderr) = start_resealing(&home);
    let started = Instant::now();
    assert!(rotate.wait().unwrap().success());
    let resealing = started.elapsed();
    let _ = stderr.read_to_string(&mut String::new());
    eprintln!("a whole rotation reseals in {resealing:?}");
    let mut rng = Rng::from_clock();
    let mut mid_reseal = 0;
    for round in 0..10 {
        let (mut rotate, mut stderr) = start_resealing(&home);
        let delay = Duration::from_millis(rng.below(resealing.as_millis() as u64));
        std::thread::sleep(delay);
        let finished = rotate.try_wait().unwrap().is_some();
        let _ = rotate.kill();
        let _ = rotate.wait();
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        eprintln!(
            "round {round}: killed after {delay:?} ({}), at {:?}",
            if finished { "already done" } else { "resealing" },
            rest.rsplit('\r').next().unwrap_or("")
        );
        mid_reseal += usize::from(!finished);
        for mode in ["dense", "hybrid"] {
            let out = home.quire(&["search", "Which animal was tagged with ring number 1049?", "--mode", mode]);
            assert!(out.status.success(), "round {round}: {mode} search after the kill: {}", text(&out.stderr));
            assert!(text(&out.stdout).contains("note-"), "round {round}: {mode} search found nothing");
        }
    }
    assert!(mid_reseal >= 5, "only {mid_reseal} of 10 kills landed while resealing");
    let out = home.quire(&["ask", "Which animal was tagged with ring number 1049?", "--model", "smollm2-135m"]);
    assert!(out.status.success(), "ask after the kills: {}", text(&out.stderr));
    let list = text(&home.quire(&["list"]).stdout);
    assert!(list.contains(&format!("{NOTES} documents")), "{list}");
    let status = text(&home.quire(&["key", "status"]).stdout);
    assert!(!status.contains("rotation under way"), "{status}");
}

/// Starts `quire key rotate` and returns once it has begun resealing (its first progress count
/// is printed), with its standard error to read the rest from.
fn start_resealing(home: &QuireHome) -> (Child, std::process::ChildStderr) {
    let mut rotate = home.command(&["key", "rotate"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let mut stderr = rotate.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !text(&seen).ends_with("resealing documents: ") && stderr.read(&mut byte).unwrap_or(0) == 1 {
        seen.push(byte[0]);
    }
    assert!(text(&seen).ends_with("resealing documents: "), "the rotation did not start: {}", text(&seen));
    (rotate, stderr)
}

/// A collection whose `vault.json` is lost: the next command fails, writes nothing and says to
/// import the backup, and the backup then brings it back. (Before, `quire list` made a new key
/// and manifest for a new collection id, and the backup was refused as another collection's.)
#[test]
fn a_lost_key_manifest_is_restored_from_the_backup_not_replaced() {
    let home = QuireHome::with_passphrase(QUIRE, "manifest test");
    let docs = tempfile::tempdir().unwrap();
    write_notes(docs.path(), 2);
    assert!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.success());
    let backup = home.dir.path().join("backup.json");
    let export = home
        .command(&["key", "export", backup.to_str().unwrap()])
        .env("QUIRE_BACKUP_PASSPHRASE", "backup words")
        .output()
        .unwrap();
    assert!(export.status.success(), "{}", text(&export.stderr));

    std::fs::remove_file(home.data_dir().join("vault.json")).unwrap();
    let before = quire_testkit::files_under(&home.data_dir());
    let out = home.quire(&["list"]);
    assert!(!out.status.success(), "opened a collection without its key manifest");
    assert!(text(&out.stderr).contains("quire key import"), "{}", text(&out.stderr));
    assert_eq!(quire_testkit::files_under(&home.data_dir()), before, "nothing written");

    let import = home
        .command(&["key", "import", backup.to_str().unwrap()])
        .env("QUIRE_BACKUP_PASSPHRASE", "backup words")
        .output()
        .unwrap();
    assert!(import.status.success(), "the backup is refused: {}", text(&import.stderr));
    let list = home.quire(&["list"]);
    assert!(list.status.success() && text(&list.stdout).contains("2 documents"), "{}", text(&list.stderr));
    let search = home.quire(&["search", "reed bed", "--mode", "hybrid"]);
    assert!(search.status.success() && text(&search.stdout).contains("note-"), "{}", text(&search.stderr));
}

/// A byte that is not text at the end of the ingestion queue and a letter changed in the first
/// line of the conversation history (the probe of 2026-12-03: every command then exited 1, and a key
/// rotation after it locked every command out): each command works, the damaged lines are set
/// aside in a `.damaged` file beside the log, and the user is told once.
#[test]
fn damaged_lines_in_the_logs_are_set_aside_and_nothing_stops() {
    let home = QuireHome::with_passphrase(QUIRE, "line log test");
    let docs = tempfile::tempdir().unwrap();
    write_notes(docs.path(), 3);
    assert!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.success());
    let (queue, history) = (home.data_dir().join("ingest-queue.jsonl"), home.data_dir().join("history.jsonl"));
    // Two exchanges in the history, the first then damaged in the middle of its sealed bytes.
    for question in ["Which animal was tagged with ring number 1007?", "How long did the heron feed?"] {
        let out = home.quire(&["ask", question, "--model", "smollm2-135m"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let kept = std::fs::read_to_string(&history).unwrap();
    let lines: Vec<&str> = kept.lines().collect();
    assert_eq!(lines.len(), 2, "{kept}");
    // A letter of the sealed bytes changed: still text, no longer opens.
    let mut middle = lines[0].as_bytes().to_vec();
    let at = middle.len() - 10;
    middle[at] = if middle[at] == b'A' { b'B' } else { b'A' };
    std::fs::write(&history, [&middle[..], lines[1].as_bytes(), b""].join(&b'\n')).unwrap();
    std::fs::OpenOptions::new().append(true).open(&queue).unwrap().write_all(b"\xff").unwrap();

    let list = home.quire(&["list"]);
    assert!(list.status.success() && text(&list.stdout).contains("3 documents"), "{}", text(&list.stderr));
    let told = text(&list.stderr);
    assert!(told.contains("a damaged line of ingest-queue.jsonl was set aside in"), "{told}");
    assert!(told.contains("ingest-queue.jsonl.damaged"), "{told}");
    assert_eq!(std::fs::read(home.data_dir().join("ingest-queue.jsonl.damaged")).unwrap(), b"\xff\n");
    for args in [&["search", "reed bed", "--mode", "hybrid"][..], &["jobs"], &["key", "status"], &["optimize"]] {
        let out = home.quire(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(!text(&out.stderr).contains("set aside"), "told twice: {}", text(&out.stderr));
    }
    // The rotation reads the history: its damaged line is set aside (kept), the rest resealed.
    let rotate = home.quire(&["key", "rotate"]);
    assert!(rotate.status.success(), "{}", text(&rotate.stderr));
    assert!(text(&rotate.stderr).contains("of history.jsonl was set aside"), "{}", text(&rotate.stderr));
    assert_eq!(std::fs::read(home.data_dir().join("history.jsonl.damaged")).unwrap(), [&middle[..], b"\n"].concat());
    let resealed = std::fs::read_to_string(&history).unwrap();
    assert!(resealed.lines().count() == 1 && resealed.lines().all(|l| l != lines[1]), "{resealed}");
    for args in [&["list"][..], &["search", "reed bed"], &["jobs"]] {
        let out = home.quire(args);
        assert!(out.status.success(), "after the rotation, {args:?}: {}", text(&out.stderr));
    }
    let ingest = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert!(ingest.status.success() && text(&ingest.stdout).contains("3 unchanged"), "{}", text(&ingest.stdout));
}

/// Two ingestions into one collection at once (the probe's `quire ingest A & quire ingest B`
/// failed one of them in 2 of 4 runs on a commit conflict in the compaction after it): both
/// succeed and every document is there once, round after round.
#[test]
fn two_ingestions_at_once_both_succeed() {
    for round in 0..4 {
        let home = QuireHome::with_passphrase(QUIRE, "two writers");
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        write_notes(a.path(), 40);
        for i in 0..40 {
            std::fs::write(
                b.path().join(format!("log-{i:02}.md")),
                format!("# Log {i}\n\nThe buoy {i} drifted {i} miles east.\n"),
            )
            .unwrap();
        }
        let spawn = |dir: &Path| home.command(&["ingest", dir.to_str().unwrap()]).output();
        let (first, second) = std::thread::scope(|s| {
            let first = s.spawn(|| spawn(a.path()).unwrap());
            let second = s.spawn(|| spawn(b.path()).unwrap());
            (first.join().unwrap(), second.join().unwrap())
        });
        for out in [&first, &second] {
            assert!(out.status.success(), "round {round}: {}{}", text(&out.stdout), text(&out.stderr));
        }
        let list = text(&home.quire(&["list"]).stdout);
        assert!(list.contains("80 documents"), "round {round}: {list}");
        let search = home.quire(&["search", "buoy drifted miles east", "--mode", "hybrid", "--limit", "3"]);
        assert!(text(&search.stdout).contains("log-"), "round {round}: {}", text(&search.stdout));
    }
}

/// Reading commands on a home that has no collection (a mistyped `--home`) say so and create
/// nothing; an empty search is refused in every mode, not answered with the nearest passages
/// to nothing.
#[test]
fn reading_commands_create_nothing_and_empty_searches_are_refused() {
    let home = QuireHome::with_passphrase(QUIRE, "reading test");
    let missing = home.dir.path().join("no such home");
    let backup = home.dir.path().join("key-backup.json");
    let reading: [&[&str]; 8] = [
        &["list"],
        &["search", "tide"],
        &["jobs"],
        &["optimize"],
        &["ask", "What is the tide?"],
        // Reading or changing a key (before, `key status` made a collection with a new key).
        &["key", "status"],
        &["key", "rotate"],
        &["key", "export", backup.to_str().unwrap()],
    ];
    for args in reading {
        let out = home.command(&[&["--home", missing.to_str().unwrap()][..], args].concat()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(text(&out.stderr).contains("there is no library at"), "{args:?}: {}", text(&out.stderr));
        assert!(!missing.exists(), "{args:?} created {}", missing.display());
    }
    assert!(!backup.exists());
    let docs = tempfile::tempdir().unwrap();
    write_notes(docs.path(), 2);
    assert!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.success());
    for mode in ["dense", "bm25", "hybrid"] {
        let out = home.quire(&["search", "  ", "--mode", mode]);
        assert_eq!(out.status.code(), Some(1), "{mode}: {}", text(&out.stdout));
        assert!(text(&out.stderr).contains("the search is empty"), "{mode}: {}", text(&out.stderr));
    }
}

/// A key backup made before a key rotation cannot open the collection any more: importing it is
/// refused up front, naming both keys, and nothing is changed (before, it said "restored" and
/// every command then failed).
#[test]
fn a_backup_from_before_a_rotation_is_refused_up_front() {
    let home = QuireHome::with_passphrase(QUIRE, "old backup test");
    let docs = tempfile::tempdir().unwrap();
    write_notes(docs.path(), 2);
    assert!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.success());
    let backup = home.dir.path().join("old-backup.json");
    let with_backup_passphrase =
        |args: &[&str]| home.command(args).env("QUIRE_BACKUP_PASSPHRASE", "backup words").output().unwrap();
    assert!(with_backup_passphrase(&["key", "export", backup.to_str().unwrap()]).status.success());
    let rotate = home.quire(&["key", "rotate"]);
    assert!(rotate.status.success(), "{}", text(&rotate.stderr));
    std::fs::remove_file(home.data_dir().join("vault.json")).unwrap();
    let before = quire_testkit::files_under(&home.data_dir());

    let import = with_backup_passphrase(&["key", "import", backup.to_str().unwrap()]);
    assert_eq!(import.status.code(), Some(1), "{}", text(&import.stdout));
    let said = text(&import.stderr);
    assert!(said.contains("before a key rotation") && said.contains("nothing was changed"), "{said}");
    let old_key: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&backup).unwrap()).unwrap();
    assert!(said.contains(old_key["current"].as_str().unwrap()), "the backup's key named: {said}");
    assert_eq!(quire_testkit::files_under(&home.data_dir()), before, "nothing written");
}

/// A disk that fills up in the middle of an ingestion (a tmpfs in a mount namespace of its
/// own, `unshare -rm`, shrunk to just past what the collection holds): the message names the
/// folder, the room it needs and how to go on, instead of LanceDB's error three times over; with
/// room again, `quire ingest` resumes and every document is there once.
#[test]
fn a_full_disk_is_said_plainly_and_the_ingestion_resumes() {
    let home = QuireHome::with_passphrase(QUIRE, "full disk test");
    let (first, rest) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_notes(first.path(), 3);
    for i in 0..300 {
        let body =
            format!("# Buoy {i}\n\n{}\n", format!("The buoy {i} drifted {i} miles east of the reef. ").repeat(12));
        std::fs::write(rest.path().join(format!("buoy-{i:03}.md")), body).unwrap();
    }
    let script = r#"
        set -u
        mount -t tmpfs -o size=200m tmpfs "$QUIRE_HOME" || { echo "NO TMPFS"; exit 0; }
        "$1" ingest "$2" >/dev/null 2>&1 || echo "FIRST FAILED"
        used=$(du -sk "$QUIRE_HOME" | cut -f1)
        mount -o remount,size=$((used + 400))k "$QUIRE_HOME"
        "$1" ingest "$3"; echo "FULL EXIT $?"
        cat /dev/zero > "$QUIRE_HOME/filler" 2>/dev/null
        "$1" remove "$2/note-00.md"; echo "REMOVE EXIT $?"
        rm "$QUIRE_HOME/filler"
        mount -o remount,size=200m "$QUIRE_HOME"
        "$1" ingest; echo "RESUMED EXIT $?"
        "$1" list | tail -n 1
        "$1" search --mode bm25 --limit 1 "buoy 137 drifted"
    "#;
    let dirs = [QUIRE, first.path().to_str().unwrap(), rest.path().to_str().unwrap()];
    let out = home.run(
        home.program("unshare", &[&["-rm", "sh", "-c", script, "sh"][..], &dirs].concat()),
        &["(a disk that fills up)"],
    );
    let (said, err) = (text(&out.stdout), text(&out.stderr));
    assert!(!said.contains("NO TMPFS") && !said.contains("FIRST FAILED"), "{said}{err}");
    assert!(said.contains("FULL EXIT 1"), "the ingestion into a full disk fails: {said}{err}");
    let full = err.lines().find(|l| l.contains("is full")).unwrap_or_else(|| panic!("no word of a full disk: {err}"));
    assert!(full.contains(&format!("the disk that holds {}", home.data_dir().display())), "{full}");
    assert!(full.contains("needs about") && full.contains("`quire ingest`"), "{full}");
    assert!(!err.contains("lance error"), "LanceDB's own words shown: {err}");
    // A removal on the full disk fails plainly and loses nothing (the note is still listed below).
    assert!(said.contains("REMOVE EXIT 1"), "{said}{err}");
    let removal = err.lines().find(|l| l.contains("was not removed")).unwrap_or_else(|| panic!("{err}"));
    assert!(removal.contains("is full") && removal.contains("nothing is lost"), "{removal}");
    assert!(!err.contains("LanceError"), "LanceDB's own words shown: {err}");
    assert!(said.contains("RESUMED EXIT 0"), "{said}{err}");
    assert!(said.contains("303 documents"), "{said}");
    assert!(said.contains("buoy-137.md"), "{said}");
}

/// A file swapped for a named pipe after the folder was scanned is reported, not waited on, and
/// everything else is stored; a pipe that was there at the scan is named too. (Before, the
/// ingestion blocked on the pipe until the loader's time limit and beyond.)
#[test]
fn a_file_swapped_for_a_named_pipe_is_skipped_not_waited_on() {
    let home = QuireHome::with_passphrase(QUIRE, "pipe test");
    let docs = tempfile::tempdir().unwrap();
    write_notes(docs.path(), 12);
    std::fs::write(docs.path().join("zz-last.md"), "# Last\n\nThe last note, swapped for a pipe.\n").unwrap();
    let mkfifo = |path: &Path| assert!(std::process::Command::new("mkfifo").arg(path).status().unwrap().success());
    mkfifo(&docs.path().join("pipe-from-the-start.md"));

    let mut ingest = Killed(
        home.command(&["ingest", docs.path().to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // The scan is done once the queue on disk names the files; the last one is then swapped.
    let queue = home.data_dir().join("ingest-queue.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(&queue).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "the ingestion never queued its files");
        std::thread::sleep(Duration::from_millis(5));
    }
    let swap = docs.path().join("swap.tmp");
    mkfifo(&swap);
    std::fs::rename(&swap, docs.path().join("zz-last.md")).unwrap();

    // Well within the loader's 120 s limit.
    let status = wait_at_most(&mut ingest.0, Duration::from_secs(60)).expect("the ingestion hung on the named pipe");
    let (mut out, mut err) = (String::new(), String::new());
    ingest.0.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    ingest.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    eprintln!("{out}{err}");
    assert_eq!(status.code(), Some(2), "some files failed");
    for name in ["zz-last.md", "pipe-from-the-start.md"] {
        let line = err.lines().find(|l| l.contains(name)).unwrap_or_else(|| panic!("{name} not named: {err}"));
        assert!(line.contains("named pipe"), "{line}");
    }
    assert!(out.contains("12 indexed"), "{out}");
}

/// File names holding terminal escape sequences and a line break are printed escaped: no ESC
/// byte reaches the terminal, and no line of the report can be forged.
#[test]
fn control_characters_in_file_names_are_printed_escaped() {
    let home = QuireHome::with_passphrase(QUIRE, "names test");
    let docs = tempfile::tempdir().unwrap();
    let good = "\u{1b}]0;pwned\u{7}\u{1b}[2Jclear.md";
    let forged = "x.md\nFAILED    forged.md: a line that was never printed\n.md";
    std::fs::write(docs.path().join(good), "# Escapes\n\nA note whose name clears the screen.\n").unwrap();
    std::fs::write(docs.path().join(forged), [0x7f, b'E', b'L', b'F', 0, 0, 0, 0]).unwrap();
    let ingest = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    let list = home.quire(&["list"]);
    let jobs = home.quire(&["jobs"]);
    for out in [&ingest, &list, &jobs] {
        for stream in [&out.stdout, &out.stderr] {
            assert!(!stream.contains(&0x1b) && !stream.contains(&0x07), "a raw control character: {:?}", text(stream));
            assert!(
                !text(stream).lines().any(|l| l.starts_with("FAILED    forged.md")),
                "a forged line: {}",
                text(stream)
            );
        }
    }
    assert!(text(&ingest.stdout).contains("\\u{1b}]0;pwned"), "{}", text(&ingest.stdout));
    assert!(text(&ingest.stderr).contains("x.md\\nFAILED"), "{}", text(&ingest.stderr));
    assert!(text(&list.stdout).contains("[2Jclear.md"), "{}", text(&list.stdout));
}

/// A link inside an ingested folder that leads out of it is skipped and reported, unless the
/// user asks to follow such links; a link within the folder is followed.
#[test]
fn links_out_of_the_folder_are_not_followed_unless_asked() {
    let home = QuireHome::with_passphrase(QUIRE, "links test");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("private.md"), "# Private\n\nSomeone else's private diary entry.\n").unwrap();
    let docs = tempfile::tempdir().unwrap();
    write_notes(docs.path(), 1);
    std::os::unix::fs::symlink(outside.path().join("private.md"), docs.path().join("diary.md")).unwrap();
    std::fs::create_dir(docs.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(docs.path().join("note-00.md"), docs.path().join("sub/again.md")).unwrap();
    // A link to a folder outside (its name has no document's extension), and one back up the tree.
    let shelf = tempfile::tempdir().unwrap();
    std::fs::write(shelf.path().join("shelved.md"), "# Shelved\n\nA note kept on another shelf.\n").unwrap();
    std::os::unix::fs::symlink(shelf.path(), docs.path().join("shelf")).unwrap();
    std::os::unix::fs::symlink(docs.path(), docs.path().join("sub/loop")).unwrap();

    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "the links out are reported as skipped");
    let said = |out: &std::process::Output, name: &str| {
        text(&out.stderr)
            .lines()
            .find(|l| l.contains(name))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("{name} not named: {}", text(&out.stderr)))
    };
    let line = said(&out, "diary.md");
    assert!(line.contains("outside the folder") && line.contains("--follow-links"), "{line}");
    let line = said(&out, "shelf");
    assert!(line.contains("a link to the folder") && line.contains("--follow-links"), "{line}");
    let list = text(&home.quire(&["list"]).stdout);
    assert!(
        !list.contains("private.md") && !list.contains("shelved.md") && list.contains("1 document, embedded"),
        "{list}"
    );

    let out = home.quire(&["ingest", "--follow-links", docs.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let list = text(&home.quire(&["list"]).stdout);
    assert!(list.contains("private.md") && list.contains("shelved.md") && list.contains("3 documents"), "{list}");
}

/// Starts `quire serve` with the tiny model on a free port over a collection of the sample
/// Markdown files; returns the server, its port and the bearer token.
fn serve(home: &QuireHome) -> (Killed, u16, String) {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    assert!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.success());
    let token = text(&home.quire(&["key", "api-token"]).stdout).trim().to_owned();
    let (server, port) = start_server(|args| home.command(args));
    (server, port, token)
}

/// `quire serve` on a free port with the tiny model, as `command` makes it, once it listens.
fn start_server(command: impl Fn(&[&str]) -> Command) -> (Killed, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Killed(
        command(&["serve", "--port", &port.to_string(), "--model", "smollm2-135m"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufReader::new(server.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    (server, port)
}

/// With no OS keychain, a passphrase library keeps the local API's token as it keeps its key:
/// sealed under the passphrase in its folder. Before, `key api-token` and `serve` failed,
/// telling the user to set QUIRE_PASSPHRASE, which was set.
#[test]
fn the_api_token_is_sealed_under_the_passphrase_where_there_is_no_keychain() {
    let home = QuireHome::with_passphrase(QUIRE, "no keychain here");
    let no_keychain = |args: &[&str]| {
        let mut command = home.command(args);
        command.env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus");
        command
    };
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let ingest = ["ingest", docs.path().to_str().unwrap()];
    assert!(home.run(no_keychain(&ingest), &ingest).status.success());
    let out = home.run(no_keychain(&["key", "api-token"]), &["key", "api-token"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let token = text(&out.stdout).trim().to_owned();
    assert_eq!(token.len(), 64, "a 256-bit token: {token}");
    let again = home.run(no_keychain(&["key", "api-token"]), &["key", "api-token"]);
    assert_eq!(text(&again.stdout).trim(), token, "the same token every time");
    // Sealed: no file of the home holds it in plain text.
    for (path, bytes) in quire_testkit::files_under(home.dir.path()) {
        assert!(!String::from_utf8_lossy(&bytes).contains(&token), "{} holds the token", path.display());
    }
    // Another passphrase does not open it.
    let mut wrong = no_keychain(&["key", "api-token"]);
    wrong.env("QUIRE_PASSPHRASE", "not the passphrase");
    let out = home.run(wrong, &["key", "api-token", "(wrong passphrase)"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!text(&out.stdout).contains(&token));
    // The server takes it.
    let (_server, port) = start_server(no_keychain);
    let get = |token: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n")
            .unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        status_of(&reply)
    };
    assert_eq!(get(&token), 200);
    assert_eq!(get(&"0".repeat(64)), 401);
}

fn chat_request(port: u16, token: &str, question: &str) -> String {
    let body = format!(r#"{{"model":"quire","messages":[{{"role":"user","content":"{question}"}}]}}"#);
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn status_of(reply: &str) -> u16 {
    reply.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0)
}

/// The local API under abuse: a header line that never ends (no token) costs the server a
/// bounded amount of memory and gets 431; questions whose clients hang up stop costing CPU at
/// once, waiting ones included; more waiting questions than the bound get 503; a question
/// past the length limit gets 413 at once.
#[test]
fn the_local_api_bounds_headers_and_drops_abandoned_questions() {
    let home = QuireHome::new(QUIRE);
    let (server, port, token) = serve(&home);
    let pid = server.0.id();
    let host = format!("127.0.0.1:{port}");

    // Warm up: one whole answer, so the model is loaded before anything is measured.
    let mut s = std::net::TcpStream::connect(&host).unwrap();
    s.write_all(chat_request(port, &token, "What does the tokio crate provide?").as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert_eq!(status_of(&reply), 200, "{reply}");

    // 1. A header line of up to 256 MiB with no line end, without a token.
    let (rss_before, _) = quire_testkit::process_usage(pid);
    let mut flood = std::net::TcpStream::connect(&host).unwrap();
    flood.write_all(b"GET /v1/models HTTP/1.1\r\nX-Flood: ").unwrap();
    let block = vec![b'a'; 1 << 20];
    let mut sent = 0usize;
    while sent < 256 << 20 && flood.write_all(&block).is_ok() {
        sent += block.len();
    }
    // Measured while the connection is still open: a server that kept the line would hold it now.
    let (rss_after, _) = quire_testkit::process_usage(pid);
    let mut reply = Vec::new();
    let _ = flood.read_to_end(&mut reply);
    eprintln!(
        "header flood: {} MiB sent; server RSS {} MB -> {} MB",
        sent >> 20,
        rss_before / 1_000_000,
        rss_after / 1_000_000
    );
    assert!(rss_after < rss_before + (32 << 20), "the server grew from {rss_before} to {rss_after} bytes");
    if !reply.is_empty() {
        assert_eq!(status_of(&text(&reply)), 431, "{}", text(&reply));
    }

    // 2. Five questions whose clients hang up right after asking.
    for i in 0..5 {
        let mut s = std::net::TcpStream::connect(&host).unwrap();
        s.write_all(
            chat_request(port, &token, &format!("Question {i}: what does tokio do for backpressure?")).as_bytes(),
        )
        .unwrap();
        drop(s);
    }
    std::thread::sleep(Duration::from_secs(2));
    let (_, cpu_before) = quire_testkit::process_usage(pid);
    std::thread::sleep(Duration::from_secs(10));
    let (_, cpu_after) = quire_testkit::process_usage(pid);
    eprintln!("CPU used in the 10 s after 5 abandoned questions: {:.2} s", cpu_after - cpu_before);
    assert!(
        cpu_after - cpu_before < 1.5,
        "abandoned questions kept the server busy: {:.2} CPU s in 10 s",
        cpu_after - cpu_before
    );

    // 3. One answering and MAX_WAITING waiting: the next is told to come back later.
    let mut held = Vec::new();
    for i in 0..=quire_api::MAX_WAITING {
        let mut s = std::net::TcpStream::connect(&host).unwrap();
        s.write_all(chat_request(port, &token, &format!("Held question {i} about tokio")).as_bytes()).unwrap();
        held.push(s);
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut extra = std::net::TcpStream::connect(&host).unwrap();
    extra.write_all(chat_request(port, &token, "One too many").as_bytes()).unwrap();
    extra.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reply = String::new();
    let _ = extra.read_to_string(&mut reply);
    assert_eq!(status_of(&reply), 503, "{reply}");

    // 4. A 100 kB question, while the server is busy: refused at once, with its length.
    let started = Instant::now();
    let mut long = std::net::TcpStream::connect(&host).unwrap();
    long.write_all(chat_request(port, &token, &"word ".repeat(20_000)).as_bytes()).unwrap();
    let mut reply = String::new();
    long.read_to_string(&mut reply).unwrap();
    assert_eq!(status_of(&reply), 413, "{reply}");
    assert!(reply.contains("characters long"), "{reply}");
    assert!(started.elapsed() < Duration::from_secs(1), "refused after {:?}", started.elapsed());
    drop(held);
}

/// A 100 kB question (the probe's ran for minutes as a 24,539-token prompt) is refused by the
/// command line at once, saying how long it is and what the limit is.
#[test]
fn a_question_too_long_is_refused_at_once() {
    let home = QuireHome::new(QUIRE);
    let started = Instant::now();
    let out = home.quire(&["ask", &"word ".repeat(20_000), "--model", "smollm2-135m"]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(said.contains("the question is 99999 characters long") && said.contains("up to 8000"), "{said}");
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
}

/// The data files of one table of the collection, or its newest manifest (LanceDB names
/// manifests `u64::MAX - version`, so the newest sorts first).
fn table_files(home: &QuireHome, table: &str, which: &str) -> Vec<std::path::PathBuf> {
    let dir = home.data_dir().join(format!("{table}.lance")).join(which);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "lance" || e == "manifest"));
    files.sort();
    files
}

/// A passphrase library of `write_notes`' twelve notes, indexed; the notes' folder.
fn twelve_notes_indexed(passphrase: &str) -> (QuireHome, tempfile::TempDir) {
    let home = QuireHome::with_passphrase(QUIRE, passphrase);
    let docs = tempfile::tempdir().unwrap();
    write_notes(docs.path(), 12);
    assert!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.success());
    (home, docs)
}

/// Damaged index files (the probe: bytes flipped in the chunk table's data files stopped every
/// search with LanceDB's "corrupt file" error; 16 bytes in the newest manifest stopped every
/// command, one of them with a panic): the damage is named with the way out, `quire check` says
/// which table, and `quire repair` brings back the same top 10 as the collection had, from the
/// documents on disk, keeping the damaged files aside.
#[test]
fn damaged_index_files_are_named_and_repaired_from_the_documents() {
    let (home, docs) = twelve_notes_indexed("repair test");
    let searches: [&[&str]; 2] = [
        &["search", "heron feeding near the reed bed", "--mode", "bm25", "--limit", "10"],
        &["search", "which animal was tagged", "--mode", "dense", "--limit", "10"],
    ];
    let reference: Vec<String> = searches.iter().map(|args| text(&home.quire(args).stdout)).collect();
    let listed = text(&home.quire(&["list"]).stdout);
    assert!(reference.iter().all(|r| r.contains("note-")) && listed.contains("12 documents"), "{listed}");
    let check = home.quire(&["check"]);
    assert!(check.status.success() && text(&check.stdout).contains("reads whole"), "{}", text(&check.stdout));

    // 1. The chunk table's data files, damaged at several offsets.
    for file in table_files(&home, "chunks", "data") {
        let len = std::fs::metadata(&file).unwrap().len() as usize;
        quire_testkit::damage_file(&file, &[100, len / 2, len - 40]);
    }
    let search = home.quire(searches[0]);
    assert!(!search.status.success());
    // LanceDB's reading task panics on some of these bytes; the panic is not printed, Quire's
    // error (which carries its message) is, with the way out.
    let said = text(&search.stderr);
    assert!(said.trim_end().ends_with("`quire check` says which, `quire repair` mends them"), "{said}");
    assert!(!said.contains("panicked at"), "LanceDB's panic printed: {said}");
    let check = home.quire(&["check"]);
    assert_eq!(check.status.code(), Some(1));
    let said = text(&check.stdout);
    assert!(said.contains("The passages are DAMAGED") && said.contains("The list of documents reads whole"), "{said}");
    let repair = home.quire(&["repair"]);
    assert!(repair.status.success(), "{}", text(&repair.stderr));
    // Back to an older version (one from before the compaction, whose files are whole) or, with
    // none, an empty table and the documents indexed again.
    let said = text(&repair.stdout);
    assert!(
        said.contains("The passages went back to the newest earlier state")
            || said.contains("The passages could not be read in any earlier state"),
        "{said}"
    );
    for (args, before) in searches.iter().zip(&reference) {
        assert_eq!(&text(&home.quire(args).stdout), before, "{args:?} after the repair");
    }
    assert!(home.quire(&["check"]).status.success());

    // 2. The documents table's newest manifest: 16 bytes at its start (LanceDB panics reading it).
    let newest = table_files(&home, "documents", "_versions")[0].clone();
    quire_testkit::damage_file(&newest, &[0, 4, 8, 12]);
    let list = home.quire(&["list"]);
    assert!(!list.status.success());
    let said = text(&list.stderr);
    assert!(
        said.contains("the list of documents cannot be opened; the library's files look damaged")
            && said.contains("quire repair")
            && !said.contains("Protobuf"),
        "{said}"
    );
    assert!(!said.contains("panicked"), "the panic is caught: {said}");
    let check = home.quire(&["check"]);
    assert_eq!(check.status.code(), Some(1));
    assert!(text(&check.stdout).contains("The list of documents is DAMAGED"), "{}", text(&check.stdout));
    // The listing goes back to an older version; what it lacks is found in the versions before
    // and indexed again (the chunks' vectors reused).
    let repair = home.quire(&["repair", docs.path().to_str().unwrap()]);
    assert!(repair.status.success(), "{}", text(&repair.stderr));
    assert!(text(&repair.stdout).contains("the damaged files are kept in"), "{}", text(&repair.stdout));
    assert_eq!(text(&home.quire(&["list"]).stdout), listed);
    for (args, before) in searches.iter().zip(&reference) {
        assert_eq!(&text(&home.quire(args).stdout), before, "{args:?} after the second repair");
    }
    // The damaged manifest is kept, not deleted.
    let aside = home.data_dir().join("damaged");
    assert!(quire_testkit::files_under(&aside).keys().any(|p| p.extension().is_some_and(|e| e == "manifest")));

    // 3. The chunk table's BM25 index (`_indices`), each of its files damaged, its footer too:
    // the table reads whole, the index does not; the repair drops it and builds it again.
    let indices = home.data_dir().join("chunks.lance").join("_indices");
    let index_files: Vec<_> = quire_testkit::files_under(&indices).into_keys().collect();
    assert!(!index_files.is_empty(), "no index files under {}", indices.display());
    for file in &index_files {
        let len = std::fs::metadata(file).unwrap().len() as usize;
        quire_testkit::damage_file(file, &[100, len / 2, len - 40]);
    }
    let check = home.quire(&["check"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check.stdout));
    let said = text(&check.stdout);
    assert!(
        said.contains("The passages are DAMAGED: its search index")
            && said.contains("The list of documents reads whole"),
        "{said}"
    );
    let repair = home.quire(&["repair"]);
    assert!(repair.status.success(), "{}", text(&repair.stderr));
    assert!(text(&repair.stdout).contains("could not be read and is built again"), "{}", text(&repair.stdout));
    for (args, before) in searches.iter().zip(&reference) {
        assert_eq!(&text(&home.quire(args).stdout), before, "{args:?} after the index was built again");
    }
    assert!(home.quire(&["check"]).status.success());
}

/// Every file of `from`, copied under `to` (made anew).
fn copy_folder(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    for (path, bytes) in quire_testkit::files_under(from) {
        let target = to.join(path.strip_prefix(from).unwrap());
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, bytes).unwrap();
    }
}

/// Damage that still decodes (issue 57): 64 bytes flipped at 5, 25, 50, 75 and 95 % of each
/// table's data files, and of its newest manifest, one place at a time on a copy of the same
/// library. Flips inside a sealed text or a vector read back without an error from LanceDB and
/// used to pass the check (then fail every search, or change rankings without a word). Each time:
/// `quire check` finds it (or it changed nothing a search or the list shows) and names the
/// damaged documents, and after `quire repair` every document is listed and found again as before.
#[test]
fn bytes_flipped_anywhere_in_the_tables_are_found_named_and_repaired() {
    let (home, docs) = twelve_notes_indexed("flip test");
    let searches: [&[&str]; 2] = [
        &["search", "heron feeding near the reed bed", "--mode", "bm25", "--limit", "12"],
        &["search", "which animal was tagged with a ring", "--mode", "dense", "--limit", "12"],
    ];
    let results = |home: &QuireHome| -> Vec<String> {
        let mut said = vec![text(&home.quire(&["list"]).stdout)];
        said.extend(searches.iter().map(|args| text(&home.quire(args).stdout)));
        said
    };
    let reference = results(&home);
    assert!(reference[0].contains("12 documents") && reference[1].contains("note-"), "{reference:?}");
    let pristine = tempfile::tempdir().unwrap();
    copy_folder(&home.data_dir(), pristine.path());

    let mut outcomes = Vec::new();
    for table in ["documents", "chunks"] {
        for which in ["data", "_versions"] {
            for percent in [5, 25, 50, 75, 95] {
                copy_folder(pristine.path(), &home.data_dir());
                let mut files = table_files(&home, table, which);
                if which == "_versions" {
                    files.truncate(1);
                }
                for file in &files {
                    let len = std::fs::metadata(file).unwrap().len() as usize;
                    let at = len * percent / 100;
                    quire_testkit::damage_file(file, &(0..16).map(|i| at + 4 * i).collect::<Vec<_>>());
                }
                let case = format!("{table} {which} at {percent} %");
                let check = home.quire(&["check"]);
                let said = text(&check.stdout);
                if check.status.success() {
                    // Unseen damage must be damage that changed nothing.
                    assert_eq!(results(&home), reference, "{case}: the check saw nothing, yet: {said}");
                    outcomes.push(format!("{case}: changed nothing a search shows"));
                    continue;
                }
                assert_eq!(check.status.code(), Some(1), "{case}: {said} {}", text(&check.stderr));
                if said.contains("did not read back as") {
                    // Entries that decode but changed: the documents they belong to are named.
                    assert!(said.contains("Damaged document"), "{case}: {said}");
                    if table == "chunks" {
                        assert!(said.contains("note-"), "{case}: the damaged document is named by its path: {said}");
                    }
                }
                let repair = home.quire(&["repair", docs.path().to_str().unwrap()]);
                let repaired = text(&repair.stdout);
                assert!(repair.status.success(), "{case}: {repaired} {}", text(&repair.stderr));
                assert_eq!(results(&home), reference, "{case}: after the repair: {repaired}");
                assert!(home.quire(&["check"]).status.success(), "{case}: still damaged after: {repaired}");
                let first_line = said.lines().find(|l| l.contains("DAMAGED")).unwrap_or("").to_owned();
                outcomes.push(format!("{case}: {first_line}"));
                // What was set aside is kept, not in the data folder.
                if repaired.contains("did not read back as written") {
                    assert!(home.data_dir().join("damaged").is_dir(), "{case}: {repaired}");
                }
            }
        }
    }
    println!("{}", outcomes.join("\n"));

    // One character of a passage's sealed text changed for another that still decodes: the
    // search that meets it names the document and the way out, the check names it, the repair
    // indexes it again.
    copy_folder(pristine.path(), &home.data_dir());
    let file = table_files(&home, "chunks", "data")[0].clone();
    let mut bytes = std::fs::read(&file).unwrap();
    let sealed = bytes.windows(4).position(|w| w == b"~q1.").expect("a sealed text in the chunks' data file");
    let at = sealed + 60;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    std::fs::write(&file, bytes).unwrap();
    let search = home.quire(searches[0]);
    let said = text(&search.stderr);
    assert!(!search.status.success(), "{}", text(&search.stdout));
    assert!(said.contains("a passage of /") && said.contains("note-") && said.contains("quire check"), "{said}");
    let check = home.quire(&["check"]);
    let said = text(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{said}");
    assert!(said.contains("1 of 12 entries did not read back as it was written"), "{said}");
    let named = said.lines().find(|l| l.starts_with("Damaged document: ")).unwrap_or_else(|| panic!("{said}"));
    assert!(named.contains(&docs.path().display().to_string()) && named.contains("note-"), "{said}");
    let repair = home.quire(&["repair"]);
    assert!(repair.status.success(), "{} {}", text(&repair.stdout), text(&repair.stderr));
    assert_eq!(results(&home), reference, "after the repair: {}", text(&repair.stdout));
    let aside = quire_testkit::files_under(&home.data_dir().join("damaged"));
    assert!(aside.keys().any(|p| p.extension().is_some_and(|e| e == "lance")), "a copy of the damaged file is kept");
    assert!(!file.exists(), "the damaged data file has left the data folder");
}
