//! Privacy as a person (or an attacker with the disk) can check it, through the `quire` command:
//! nothing readable in the data folder, a clear error and no damage without the key, the key
//! back from a backup, and no network connection while ingesting and answering.
//!
//! The keychain tests need a Secret Service: `scripts/test.sh` runs the suite inside
//! `scripts/keyring-session.sh` (GNOME Keyring on a private session bus) where there is none.

use std::path::PathBuf;
use std::process::Command;

use quire_testkit::{text, QuireHome};

const QUIRE: &str = env!("CARGO_BIN_EXE_quire");

/// Phrases of tokio-README.md, and its file name (paths are private too).
const PHRASES: [&str; 5] =
    ["work-stealing", "backpressure", "event-driven, non-blocking", "bare-metal", "tokio-README"];

/// The grep below can only find nothing if LanceDB stores text where a grep would see it: the
/// same chunk written without encryption is found, phrase by phrase.
#[tokio::test(flavor = "multi_thread")]
async fn a_grep_finds_the_phrases_in_an_unencrypted_store() {
    let dir = tempfile::tempdir().unwrap();
    let kb = quire_index::KnowledgeBase::open(dir.path(), 4, quire_index::Protection::Plain).await.unwrap();
    let text = std::fs::read_to_string(quire_testkit::sample_docs().join("markdown/tokio-README.md")).unwrap();
    let path = "/docs/tokio-README.md";
    let doc_id = kb.document_id(path);
    let chunk = quire_index::ChunkRecord {
        doc_id: doc_id.clone(),
        hash: kb.chunk_hash(&text),
        seq: 0,
        page: None,
        start: 0,
        end: text.len() as u64,
        tokens: 1,
        text: text.clone(),
        vector: vec![0.5; 4],
    };
    let doc = quire_index::DocumentRecord {
        doc_id,
        path: path.into(),
        kind: "markdown".into(),
        content_hash: "x".into(),
        bytes: text.len() as u64,
        pages: 1,
        chunks: 1,
        ingested_at_ms: 0,
        modified_ms: 0,
    };
    kb.replace_document(&doc, &[chunk]).await.unwrap();
    kb.refresh_indexes().await.unwrap();
    for phrase in PHRASES {
        assert!(!quire_testkit::files_holding(dir.path(), phrase).is_empty(), "a plain store shows {phrase:?}");
    }
}

#[test]
fn data_folder_reveals_nothing_and_a_missing_key_fails_cleanly_until_restored() {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let home = QuireHome::new(QUIRE);
    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert!(out.status.success(), "ingest: {}", text(&out.stderr));

    // With the key (in the keychain): a correct, cited answer from the document.
    let out = home.quire(&["ask", "--json", "What kind of task scheduler does Tokio provide?"]);
    assert!(out.status.success(), "ask: {}", text(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let said = answer["text"].as_str().unwrap().to_lowercase();
    assert!(
        said.contains("work-stealing") || said.contains("multithreaded") || said.contains("multi-threaded"),
        "{said}"
    );
    let cited: Vec<&str> =
        answer["citations"].as_array().unwrap().iter().map(|c| c["path"].as_str().unwrap()).collect();
    assert!(cited.iter().any(|p| p.ends_with("tokio-README.md")), "cites the tokio README: {cited:?}");

    // The data folder holds none of the document's words, nor its name.
    let data = home.data_dir();
    assert!(quire_testkit::files_under(&data).len() > 5, "the data folder has its files");
    for phrase in PHRASES {
        assert_eq!(
            quire_testkit::files_holding(&data, phrase),
            Vec::<PathBuf>::new(),
            "{phrase:?} readable in the data folder"
        );
    }

    // A key backup (which `key status` then knows of), then the keychain entry lost.
    let status = text(&home.quire(&["key", "status"]).stdout);
    assert!(status.contains("no backup of this key saved yet"), "{status}");
    let backup = home.dir.path().join("key-backup.json");
    let mut export = home.command(&["key", "export", backup.to_str().unwrap()]);
    export.env("QUIRE_BACKUP_PASSPHRASE", "a long backup passphrase");
    assert!(home.run(export, &["key", "export"]).status.success());
    let status = text(&home.quire(&["key", "status"]).stdout);
    assert!(status.contains("a backup of this key was saved"), "{status}");
    let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(data.join("vault.json")).unwrap()).unwrap();
    let entry = format!(
        "collection {} key {}",
        manifest["collection"].as_str().unwrap(),
        manifest["current"].as_str().unwrap()
    );
    let cleared = Command::new("secret-tool").args(["clear", "service", "Quire", "username", &entry]).status().unwrap();
    assert!(cleared.success());

    // Without the key: a clear error that says what to do, and the data untouched.
    let before = quire_testkit::files_under(&data);
    for args in [&["search", "work-stealing scheduler"][..], &["ask", "What is Tokio?"], &["list"]] {
        let out = home.quire(args);
        assert!(!out.status.success(), "{args:?} must fail without the key");
        let err = text(&out.stderr);
        assert!(err.contains("not in the OS keychain") && err.contains("quire key import"), "{err}");
        assert!(err.contains("nothing was changed"), "{err}");
    }
    assert!(quire_testkit::files_under(&data) == before, "the data folder changed while the key was missing");

    // A wrong backup passphrase restores nothing; the right one brings everything back.
    let mut bad = home.command(&["key", "import", backup.to_str().unwrap()]);
    bad.env("QUIRE_BACKUP_PASSPHRASE", "not the passphrase");
    let out = home.run(bad, &["key", "import (wrong passphrase)"]);
    assert!(!out.status.success() && text(&out.stderr).contains("wrong passphrase"));
    let mut import = home.command(&["key", "import", backup.to_str().unwrap()]);
    import.env("QUIRE_BACKUP_PASSPHRASE", "a long backup passphrase");
    assert!(home.run(import, &["key", "import"]).status.success());
    let out = home.quire(&["search", "--mode", "bm25", "work-stealing scheduler"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).lines().next().unwrap_or("").contains("tokio-README.md"), "{}", text(&out.stdout));
}

/// Ingesting and answering open no network connection: the whole run under strace, every
/// connect/send to an IPv4 or IPv6 address counted (local sockets are fine: the key's D-Bus,
/// the loader child's pipe). Then the same in a network namespace with no interface at all.
#[test]
fn ingest_and_ask_make_no_network_connection() {
    let docs = quire_testkit::copy_samples(&["markdown", "fasta_guide.pdf"]);
    let home = QuireHome::new(QUIRE);
    let trace = home.dir.path().join("trace");
    // The watch sees a connection when there is one (to a closed local port: refused, but tried).
    let probe = trace.with_extension("probe");
    Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=connect",
            "-o",
            probe.to_str().unwrap(),
            "bash",
            "-c",
            "echo > /dev/tcp/127.0.0.1/9",
        ])
        .status()
        .unwrap();
    assert!(std::fs::read_to_string(&probe).unwrap().contains("AF_INET"), "strace shows a tried connection");
    let quire = env!("CARGO_BIN_EXE_quire");
    for (i, args) in [
        vec!["ingest", docs.path().to_str().unwrap()],
        vec!["ask", "--model", "smollm2-135m", "What does the tokio crate provide?"],
    ]
    .iter()
    .enumerate()
    {
        let log = trace.with_extension(i.to_string());
        let mut strace_args =
            vec!["-f", "-qq", "-e", "trace=connect,sendto,sendmsg,sendmmsg", "-o", log.to_str().unwrap(), quire];
        strace_args.extend(args.iter().copied());
        let mut c = home.program("strace", &strace_args);
        c.env("QUIRE_PASSPHRASE", "offline test");
        let out = home.run(c, args);
        assert!(out.status.success(), "{args:?} under strace: {}", text(&out.stderr));
        let calls = std::fs::read_to_string(&log).unwrap();
        let network: Vec<&str> = calls.lines().filter(|l| l.contains("AF_INET")).collect();
        assert!(network.is_empty(), "{args:?} tried the network: {network:#?}");
    }
    // No network at all (a namespace with only a downed loopback): the same commands work.
    let mut offline = home.program("unshare", &["-rn", quire, "ask", "--model", "smollm2-135m", "What is Tokio?"]);
    offline.env("QUIRE_PASSPHRASE", "offline test");
    let out = home.run(offline, &["ask (unshare -rn)"]);
    assert!(out.status.success(), "answering without a network: {}", text(&out.stderr));
}

/// One HTTP request to 127.0.0.1:`port`; returns the status and the body.
fn http(port: u16, host: &str, token: Option<&str>, method: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

#[test]
fn the_local_api_answers_this_machine_with_its_token_only() {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let home = QuireHome::new(QUIRE);
    assert!(home.quire(&["ingest", docs.path().to_str().unwrap()]).status.success());
    let token = text(&home.quire(&["key", "api-token"]).stdout).trim().to_owned();
    assert_eq!(token.len(), 64, "a 256-bit token from the keychain");
    assert_eq!(text(&home.quire(&["key", "api-token"]).stdout).trim(), token, "the same token every time");

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = Killed(
        home.command(&["serve", "--port", &port.to_string(), "--model", "smollm2-135m"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.0.stdout.take().unwrap()), &mut line).unwrap();
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    let host = format!("127.0.0.1:{port}");

    let (status, body) = http(port, &host, None, "GET", "/v1/models", "");
    assert_eq!(status, 401, "no token: {body}");
    let (status, _) = http(
        port,
        &host,
        Some("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
        "GET",
        "/v1/models",
        "",
    );
    assert_eq!(status, 401, "a wrong token");
    let (status, _) = http(port, &format!("attacker.example:{port}"), Some(&token), "GET", "/v1/models", "");
    assert_eq!(status, 403, "a foreign Host header (DNS rebinding)");
    let (status, body) = http(port, &host, Some(&token), "GET", "/v1/models", "");
    assert_eq!(status, 200);
    assert!(body.contains("\"quire\""), "{body}");
    let (status, _) = http(port, &host, Some(&token), "POST", "/v1/chat/completions", "{not json");
    assert_eq!(status, 400);

    let ask = r#"{"model":"quire","messages":[{"role":"user","content":"What does the tokio crate provide?"}]}"#;
    let (status, body) = http(port, &host, Some(&token), "POST", "/v1/chat/completions", ask);
    assert_eq!(status, 200, "{body}");
    let reply: serde_json::Value = serde_json::from_str(&body).unwrap();
    let content = reply["choices"][0]["message"]["content"].as_str().unwrap();
    // The tiny model's answer need not be right; the reply must carry its cited sources, or be
    // a decline that names the documents read and cites nothing.
    if reply["declined"] == serde_json::Value::Bool(true) {
        assert!(content.starts_with("Your documents don't say.") && content.contains("README.md"), "{content}");
        assert!(reply["citations"].as_array().unwrap().is_empty(), "{reply}");
    } else {
        assert!(content.contains("Sources:\n[") && content.contains("README.md"), "{content}");
        assert!(!reply["citations"].as_array().unwrap().is_empty(), "{reply}");
    }

    // Streamed: server-sent events ending in [DONE].
    let streamed = ask.replace("]}", "],\"stream\":true}");
    let (status, body) = http(port, &host, Some(&token), "POST", "/v1/chat/completions", &streamed);
    assert_eq!(status, 200);
    assert!(body.matches("data: ").count() >= 3 && body.trim_end().ends_with("data: [DONE]"), "{body}");

    // Bound to the loopback only: another address of this machine is refused.
    let others = Command::new("hostname").arg("-I").output().map(|o| text(&o.stdout)).unwrap_or_default();
    for ip in others.split_whitespace().filter_map(|a| a.parse::<std::net::IpAddr>().ok()).filter(|a| !a.is_loopback())
    {
        assert!(std::net::TcpStream::connect((ip, port)).is_err(), "reachable on {ip}");
    }
}

/// A child process killed when the test ends, passed or not (a server left running would hold
/// the test's output open).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
