//! End-to-end tests of the `quire` command as a person uses it: real models, a real LanceDB in a
//! temporary QUIRE_HOME, the shared sample documents (copied first).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

struct Home {
    dir: tempfile::TempDir,
    models: std::path::PathBuf,
}

impl Home {
    fn new() -> Home {
        Home { dir: tempfile::tempdir().unwrap(), models: quire_models::models_dir().unwrap() }
    }

    fn quire(&self, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_quire"))
            .args(args)
            .env("QUIRE_HOME", self.dir.path())
            .env("QUIRE_MODELS", &self.models)
            .output()
            .unwrap();
        eprintln!("$ quire {}\n{}{}", args.join(" "), String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        out
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ingest_samples(home: &Home, docs: &Path) {
    let out = home.quire(&["ingest", docs.to_str().unwrap()]);
    // The bad files are skipped and named; the exit status says some files failed.
    assert_eq!(out.status.code(), Some(2), "ingest exit status");
    let err = text(&out.stderr);
    for bad in ["binary.md", "empty.txt", "header-only.pdf", "truncated.pdf"] {
        assert!(err.contains(bad), "{bad} reported: {err}");
    }
    assert!(!err.contains("latin1.txt"), "latin1.txt is good text");
    let list = text(&home.quire(&["list"]).stdout);
    assert!(list.contains("6 documents"), "{list}");
}

/// Asks through the CLI with `--json` and checks the invariants every answer must hold.
fn ask(home: &Home, model: &str, question: &str) -> Value {
    let out = home.quire(&["ask", "--json", "--model", model, question]);
    assert!(out.status.success(), "ask failed: {}", text(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("ask --json prints JSON");
    let retrieved: Vec<&str> = answer["sources"].as_array().unwrap().iter().map(|s| s["chunk_id"].as_str().unwrap()).collect();
    let citations = answer["citations"].as_array().unwrap();
    assert!(!citations.is_empty(), "at least one citation");
    for c in citations {
        assert!(retrieved.contains(&c["chunk_id"].as_str().unwrap()), "cited {} not among retrieved {retrieved:?}", c["chunk_id"]);
    }
    // The raw model output is the constrained JSON.
    let raw: Value = serde_json::from_str(answer["raw"].as_str().unwrap()).expect("raw answer is JSON");
    assert_eq!(raw["answer"], answer["text"]);
    answer
}

#[test]
fn ingest_then_ask_with_the_tiny_model() {
    let docs = quire_testkit::copy_samples(&["fasta_guide.pdf", "markdown", "bad"]);
    let home = Home::new();
    let out = home.quire(&["ingest", docs.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    ask(&home, "smollm2-135m", "What does the tokio crate provide?");
    // Missing models are named with the command that fetches them.
    let out = home.quire(&["ask", "--model", "/nonexistent/model.gguf", "hello"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("quire models fetch"), "{}", text(&out.stderr));
}

/// The answers' facts are on known pages (see shared/sample-docs/README.md).
#[test]
fn default_model_answers_cite_the_page_with_the_fact() {
    let docs = quire_testkit::copy_samples(&["fasta_guide.pdf", "4ti2_manual.pdf", "markdown", "bad"]);
    let home = Home::new();
    ingest_samples(&home, docs.path());
    let cases = [
        ("Which FASTA program performs a rigorous Smith-Waterman search?", "ssearch36", "fasta_guide.pdf"),
        ("Which 4ti2 program solves linear systems over Z?", "zsolve", "4ti2_manual.pdf"),
    ];
    for (question, fact, file) in cases {
        let answer = ask(&home, "qwen2.5-coder-1.5b", question);
        let citations = answer["citations"].as_array().unwrap();
        let supporting = citations.iter().find(|c| {
            c["path"].as_str().unwrap().ends_with(file) && c["passage"].as_str().unwrap().contains(fact)
        });
        assert!(supporting.is_some(), "{question}: no citation of {file} containing {fact:?}: {answer:#}");
        assert!(supporting.unwrap()["page"].as_u64().is_some(), "PDF citations carry a page");
        assert!(answer["text"].as_str().unwrap().contains(fact), "{question}: answer {}", answer["text"]);
    }
}

/// `quire eval retrieval` on a small BEIR-format dataset whose answers are unambiguous: every
/// mode must rank the one relevant document first, and the table must hold all four metrics.
#[test]
fn eval_retrieval_on_a_small_beir_dataset() {
    let home = Home::new();
    let data = tempfile::tempdir().unwrap();
    let corpus = [
        ("d-tides", "Tides", "Ocean tides are caused by the gravitational pull of the Moon and the Sun on the oceans."),
        ("d-bread", "Baking bread", "Yeast ferments the sugars in the dough and releases carbon dioxide, which makes bread rise."),
        ("d-volcano", "Volcanoes", "A volcano erupts when magma from the mantle rises through cracks in the crust."),
    ];
    let lines: Vec<String> = corpus.iter().map(|(id, t, x)| serde_json::json!({"_id": id, "title": t, "text": x}).to_string()).collect();
    std::fs::write(data.path().join("corpus.jsonl"), lines.join("\n")).unwrap();
    std::fs::write(
        data.path().join("queries.jsonl"),
        "{\"_id\": \"q1\", \"text\": \"What makes bread rise when yeast ferments the dough?\"}\n\
         {\"_id\": \"q2\", \"text\": \"Why do volcanoes erupt magma?\"}\n\
         {\"_id\": \"q3\", \"text\": \"not judged\"}\n",
    )
    .unwrap();
    std::fs::create_dir(data.path().join("qrels")).unwrap();
    std::fs::write(data.path().join("qrels/test.tsv"), "query-id\tcorpus-id\tscore\nq1\td-bread\t1\nq2\td-volcano\t1\n").unwrap();
    let out = home.quire(&["eval", "retrieval", data.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("3 documents, 2 judged queries"), "{stdout}");
    for mode in ["dense", "bm25", "hybrid"] {
        let row = stdout.lines().find(|l| l.starts_with(mode)).unwrap_or_else(|| panic!("no {mode} row: {stdout}"));
        let cols: Vec<f64> = row.split_whitespace().skip(1).map(|c| c.parse().unwrap()).collect();
        assert_eq!(&cols[..4], &[100.0, 100.0, 100.0, 100.0], "{mode}: {row}");
    }
}
