//! BEIR datasets: `corpus.jsonl` ({"_id", "title", "text"}), `queries.jsonl` ({"_id", "text"}),
//! `qrels/<split>.tsv` (query-id, corpus-id, score; with a header line).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

/// Judged relevance per query: query id → document id → relevance.
pub type Qrels = HashMap<String, HashMap<String, u32>>;

#[derive(Debug, Clone, Deserialize)]
pub struct Document {
    #[serde(rename = "_id")]
    pub id: String,
    #[serde(default)]
    pub title: String,
    pub text: String,
}

#[derive(Debug, Clone, Deserialize)]
struct Query {
    #[serde(rename = "_id")]
    id: String,
    text: String,
}

#[derive(Debug)]
pub struct Dataset {
    pub corpus: Vec<Document>,
    /// The queries that have judgements in the split, in the file's order.
    pub queries: Vec<(String, String)>,
    pub qrels: Qrels,
}

impl Dataset {
    pub fn load(dir: &Path, split: &str) -> Result<Dataset> {
        let file = |name: &str| {
            let p = dir.join(name);
            if !p.is_file() {
                bail!("{} is not a BEIR dataset folder: {} is missing", dir.display(), name);
            }
            Ok(p)
        };
        let corpus: Vec<Document> = read_jsonl(&file("corpus.jsonl")?)?;
        let all_queries: Vec<Query> = read_jsonl(&file("queries.jsonl")?)?;
        let qrels = read_qrels(&file(&format!("qrels/{split}.tsv"))?)?;
        let queries = all_queries.into_iter().filter(|q| qrels.contains_key(&q.id)).map(|q| (q.id, q.text)).collect();
        Ok(Dataset { corpus, queries, qrels })
    }

    /// Only the documents of a BEIR folder (for benchmarks that need no judgements).
    pub fn load_corpus(dir: &Path) -> Result<Vec<Document>> {
        let path = dir.join("corpus.jsonl");
        if !path.is_file() {
            bail!("{} is not a BEIR dataset folder: corpus.jsonl is missing", dir.display());
        }
        read_jsonl(&path)
    }
}

fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{} line {}: not a valid record", path.display(), i + 1))
        })
        .collect()
}

fn read_qrels(path: &Path) -> Result<Qrels> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut qrels = Qrels::new();
    for (i, line) in text.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 || (i == 0 && cols[2].trim().parse::<i64>().is_err()) {
            continue; // header or blank line
        }
        let score: i64 =
            cols[2].trim().parse().with_context(|| format!("{} line {}: bad score", path.display(), i + 1))?;
        qrels.entry(cols[0].trim().to_string()).or_default().insert(cols[1].trim().to_string(), score.max(0) as u32);
    }
    Ok(qrels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_a_small_dataset_and_keeps_judged_queries_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("corpus.jsonl"),
            "{\"_id\": \"d1\", \"title\": \"T\", \"text\": \"x\"}\n{\"_id\": \"d2\", \"text\": \"y\"}\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("queries.jsonl"),
            "{\"_id\": \"q1\", \"text\": \"one\"}\n{\"_id\": \"q2\", \"text\": \"two\"}\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("qrels")).unwrap();
        std::fs::write(dir.path().join("qrels/test.tsv"), "query-id\tcorpus-id\tscore\nq1\td2\t1\nq1\td1\t0\n")
            .unwrap();
        let ds = Dataset::load(dir.path(), "test").unwrap();
        assert_eq!(ds.corpus.len(), 2);
        assert_eq!(ds.corpus[1].title, "");
        assert_eq!(ds.queries, vec![("q1".to_string(), "one".to_string())]);
        assert_eq!(ds.qrels["q1"]["d2"], 1);
        assert_eq!(ds.qrels["q1"]["d1"], 0);
        let err = format!("{:#}", Dataset::load(&dir.path().join("qrels"), "test").unwrap_err());
        assert!(err.contains("corpus.jsonl is missing"), "{err}");
    }
}
