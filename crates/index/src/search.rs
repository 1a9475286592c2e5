//! Search: dense (exact, or the IVF_HNSW_SQ index above `HNSW_MIN_ROWS`), BM25 over blind
//! terms, and hybrid (both fused), each hit with its document's path.

use std::collections::HashMap;

use anyhow::{Context, Result};
use arrow_array::{Array, Float32Array, RecordBatch, UInt32Array, UInt64Array};
use futures::TryStreamExt;
use lancedb::index::scalar::FullTextSearchQuery;
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::DistanceType;

use crate::schema::{col, str_col, HIT_COLUMNS};
use crate::sealing::{path_context, text_context};
use crate::{fuse, hybrid_pool, sql_str, AnnParams, KnowledgeBase, SearchHit, DEFAULT_FUSION};

impl KnowledgeBase {
    pub async fn search_dense(&self, query: &[f32], limit: usize, exact: bool) -> Result<Vec<SearchHit>> {
        crate::damage::at_boundary(async move {
            let ann = if exact { None } else { Some(AnnParams::default()) };
            self.search_dense_with(query, limit, ann).await
        })
        .await
    }

    /// Dense search with the ANN index's effort given (`None`: exact scan).
    pub async fn search_dense_with(
        &self,
        query: &[f32],
        limit: usize,
        ann: Option<AnnParams>,
    ) -> Result<Vec<SearchHit>> {
        crate::damage::at_boundary(async move {
            let mut batches: Vec<RecordBatch> = Vec::new();
            for tables in self.readable().await? {
                let mut q = tables
                    .chunks
                    .vector_search(query.to_vec())?
                    .column("vector")
                    .distance_type(DistanceType::Cosine)
                    .limit(limit)
                    .select(Select::columns(&HIT_COLUMNS));
                match ann {
                    None => q = q.bypass_vector_index(),
                    // The graph search must return at least limit × refine factor candidates (ef ≥ that k).
                    Some(p) => q = q.nprobes(p.nprobes)?.ef(64 + limit * p.refine as usize).refine_factor(p.refine),
                }
                batches.extend(q.execute().await?.try_collect::<Vec<_>>().await?);
            }
            // Cosine distance is 1 - cosine similarity.
            Ok(best_of_all(self.hits(&batches, "_distance", |d| 1.0 - d).await?, limit))
        })
        .await
    }

    pub async fn search_bm25(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        crate::damage::at_boundary(async move {
            self.search_bm25_in(query, crate::terms::stemming_language(query), limit).await
        })
        .await
    }

    /// `search_bm25` with `query` read in `language` besides English (`blind_terms_in`).
    pub async fn search_bm25_in(
        &self,
        query: &str,
        language: Option<&'static str>,
        limit: usize,
    ) -> Result<Vec<SearchHit>> {
        crate::damage::at_boundary(async move {
            let terms = self.blind_terms_in(query, language);
            if terms.is_empty() {
                return Ok(Vec::new());
            }
            let fts = FullTextSearchQuery::new(terms).with_column("terms".into())?;
            if let Some(keywords) = &self.keywords {
                return self.search_keyword_mirror(keywords, fts, limit).await;
            }
            let mut batches: Vec<RecordBatch> = Vec::new();
            for tables in self.readable().await? {
                match tables
                    .chunks
                    .query()
                    .full_text_search(fts.clone())
                    .limit(limit)
                    .select(Select::columns(&HIT_COLUMNS))
                    .execute()
                    .await
                {
                    Ok(stream) => batches.extend(stream.try_collect::<Vec<_>>().await?),
                    // An empty table has no inverted index yet: no keyword hits.
                    Err(_) if tables.chunks.count_rows(None).await? == 0 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(best_of_all(self.hits(&batches, "_score", |s| s).await?, limit))
        })
        .await
    }

    /// BM25 over a shared library: ranked in the keyword mirror (the whole library's
    /// statistics), the passages then read from the writers' tables.
    async fn search_keyword_mirror(
        &self,
        keywords: &crate::shared::KeywordMirror,
        fts: FullTextSearchQuery,
        limit: usize,
    ) -> Result<Vec<SearchHit>> {
        let writers = self.readable().await?;
        let ranked = keywords.search(&writers, fts, limit).await?;
        let scores: HashMap<(&str, &str), f32> =
            ranked.iter().map(|(w, id, score)| ((w.as_str(), id.as_str()), *score)).collect();
        let mut hits = Vec::new();
        for tables in &writers {
            let ids: Vec<&str> =
                ranked.iter().filter(|(w, _, _)| *w == tables.writer).map(|(_, id, _)| id.as_str()).collect();
            if ids.is_empty() {
                continue;
            }
            let batches: Vec<RecordBatch> = tables
                .chunks
                .query()
                .only_if(crate::in_filter("chunk_id", &ids))
                .select(Select::columns(&HIT_COLUMNS))
                .execute()
                .await?
                .try_collect()
                .await?;
            for mut hit in self.hits(&batches, "", |s| s).await? {
                hit.score = scores.get(&(tables.writer.as_str(), hit.chunk_id.as_str())).copied().unwrap_or(0.0);
                hits.push(hit);
            }
        }
        Ok(best_of_all(hits, limit))
    }

    /// Dense and BM25 results fused with `DEFAULT_FUSION`.
    pub async fn search_hybrid(&self, query_vector: &[f32], query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        crate::damage::at_boundary(async move {
            let pool = hybrid_pool(limit);
            let dense = self.search_dense(query_vector, pool, false).await?;
            let bm25 = self.search_bm25(query, pool).await?;
            Ok(fuse(&dense, &bm25, DEFAULT_FUSION, limit))
        })
        .await
    }

    /// A document's chunks in order (from the first writer that holds any).
    pub async fn chunks_of(&self, doc_id: &str) -> Result<Vec<SearchHit>> {
        crate::damage::at_boundary(async move {
            for tables in self.readable().await? {
                let batches: Vec<RecordBatch> = tables
                    .chunks
                    .query()
                    .only_if(format!("doc_id = {}", sql_str(doc_id)))
                    .select(Select::columns(&HIT_COLUMNS))
                    .execute()
                    .await?
                    .try_collect()
                    .await?;
                let mut hits = self.hits(&batches, "", |s| s).await?;
                if !hits.is_empty() {
                    hits.sort_by_key(|h| h.seq);
                    return Ok(hits);
                }
            }
            Ok(Vec::new())
        })
        .await
    }

    /// The paths of the given documents: only their rows are read and opened, so a search costs
    /// the same in a collection of ten documents or of ten thousand.
    pub(crate) async fn paths_of(&self, doc_ids: &[&str]) -> Result<HashMap<String, String>> {
        if doc_ids.is_empty() {
            return Ok(HashMap::new());
        }
        let protection = self.protection();
        let mut out = HashMap::new();
        for tables in self.readable().await? {
            for (id, sealed) in crate::read::sealed_paths(&tables.documents, doc_ids).await? {
                if let std::collections::hash_map::Entry::Vacant(place) = out.entry(id) {
                    let path = protection.open(&path_context(place.key()), &sealed)?;
                    place.insert(path);
                }
            }
        }
        Ok(out)
    }

    /// Turns result batches into hits, with the paths of the documents they come from.
    pub(crate) async fn hits(
        &self,
        batches: &[RecordBatch],
        score_col: &str,
        score: impl Fn(f32) -> f32,
    ) -> Result<Vec<SearchHit>> {
        let mut doc_ids = Vec::new();
        for b in batches {
            let docs = str_col(b, "doc_id")?;
            doc_ids.extend((0..b.num_rows()).map(|i| docs.value(i)));
        }
        doc_ids.sort_unstable();
        doc_ids.dedup();
        let paths = self.paths_of(&doc_ids).await?;
        let protection = self.protection();
        let mut out = Vec::new();
        for b in batches {
            let ids = str_col(b, "chunk_id")?;
            let docs = str_col(b, "doc_id")?;
            let texts = str_col(b, "text")?;
            let seqs = col::<UInt32Array>(b, "seq")?;
            let pages = col::<UInt32Array>(b, "page")?;
            let starts = col::<UInt64Array>(b, "start")?;
            let ends = col::<UInt64Array>(b, "end")?;
            let scores = b.column_by_name(score_col).and_then(|c| c.as_any().downcast_ref::<Float32Array>());
            for i in 0..b.num_rows() {
                let doc_id = docs.value(i).to_string();
                let chunk_id = ids.value(i);
                let path = paths.get(&doc_id).cloned().unwrap_or_default();
                let page = if pages.is_null(i) { String::new() } else { format!(", page {}", pages.value(i)) };
                // Names the document: the sealed value's own words name only a chunk id.
                let text = protection
                    .open(&text_context(chunk_id), texts.value(i))
                    .with_context(|| format!("a passage of {path}{page} cannot be read"))?;
                out.push(SearchHit {
                    text,
                    chunk_id: chunk_id.into(),
                    path,
                    doc_id,
                    seq: seqs.value(i),
                    page: (!pages.is_null(i)).then(|| pages.value(i)),
                    start: starts.value(i),
                    end: ends.value(i),
                    score: scores.map(|s| score(s.value(i))).unwrap_or(0.0),
                });
            }
        }
        Ok(out)
    }
}

/// The `limit` best of several writers' hits, each chunk once.
fn best_of_all(hits: Vec<SearchHit>, limit: usize) -> Vec<SearchHit> {
    let mut seen = std::collections::HashSet::new();
    let mut hits = best_first(hits);
    hits.retain(|h| seen.insert(h.chunk_id.clone()));
    hits.truncate(limit);
    hits
}

/// Hits best first, equal scores in the order of their documents' paths and places in them:
/// LanceDB gives ties in storage order, which changes when a document is indexed again.
fn best_first(mut hits: Vec<SearchHit>) -> Vec<SearchHit> {
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.path.cmp(&b.path)).then(a.seq.cmp(&b.seq)));
    hits
}
