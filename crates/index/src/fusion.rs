//! Hybrid fusion: how a dense (vector) ranking and a BM25 ranking of the same chunks become one.
//! Pure functions over ranked hits; the knowledge base fetches the two lists, the evaluation
//! (`quire eval`) compares the variants on the same lists.

use std::collections::HashMap;

use crate::SearchHit;

/// Reciprocal-rank-fusion constant (Cormack et al.); 60 is the usual choice.
pub const RRF_K: f32 = 60.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion, Σ w / (k + rank), with weight `dense` on the dense list and
    /// `1 − dense` on BM25 (scaled by 2, so 0.5 is plain RRF).
    Rrf { k: f32, dense: f32 },
    /// Each list's scores min-max normalised over its candidates, then `dense`·dense +
    /// (1 − `dense`)·BM25, a chunk missing from a list scoring 0 there.
    Scores { dense: f32 },
    /// RRF with a per-query weight: each list weighs by how far its best hit stands out,
    /// (s₁ − s₂) / (s₁ − s₁₀), smoothed so that two flat lists get equal weights.
    AdaptiveRrf { k: f32 },
}

/// The fusion `SearchMode::Hybrid` uses, chosen with `quire eval` (BENCHMARKS.md): the one
/// variant that lost to neither dense nor BM25 on any metric of SciFact and of the sample
/// documents' question set (plain RRF lost to BM25 on the latter).
pub const DEFAULT_FUSION: Fusion = Fusion::Scores { dense: 0.3 };

impl Fusion {
    /// The variants `quire eval` compares.
    pub fn candidates() -> Vec<Fusion> {
        vec![
            Fusion::Rrf { k: RRF_K, dense: 0.5 },
            Fusion::Rrf { k: RRF_K, dense: 0.3 },
            Fusion::Rrf { k: RRF_K, dense: 0.7 },
            Fusion::Rrf { k: 20.0, dense: 0.5 },
            Fusion::Scores { dense: 0.3 },
            Fusion::Scores { dense: 0.4 },
            Fusion::Scores { dense: 0.5 },
            Fusion::Scores { dense: 0.7 },
            Fusion::AdaptiveRrf { k: RRF_K },
        ]
    }

    pub fn label(&self) -> String {
        match self {
            Fusion::Rrf { k, dense } => format!("rrf k={k} d={dense}"),
            Fusion::Scores { dense } => format!("scores d={dense}"),
            Fusion::AdaptiveRrf { k } => format!("adaptive-rrf k={k}"),
        }
    }
}

/// Fuses two rankings (best first) into at most `limit` hits, best first; each chunk once.
pub fn fuse(dense: &[SearchHit], bm25: &[SearchHit], fusion: Fusion, limit: usize) -> Vec<SearchHit> {
    let mut fused: Vec<SearchHit> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut add = |list: &[SearchHit], score: &dyn Fn(usize, &SearchHit) -> f32| {
        for (rank, hit) in list.iter().enumerate() {
            let s = score(rank, hit);
            match index.get(&hit.chunk_id) {
                Some(&i) => fused[i].score += s,
                None => {
                    index.insert(hit.chunk_id.clone(), fused.len());
                    fused.push(SearchHit { score: s, ..hit.clone() });
                }
            }
        }
    };
    match fusion {
        Fusion::Rrf { k, dense: w } => {
            add(dense, &|rank, _| 2.0 * w / (k + rank as f32 + 1.0));
            add(bm25, &|rank, _| 2.0 * (1.0 - w) / (k + rank as f32 + 1.0));
        }
        Fusion::Scores { dense: w } => {
            let (dense_min, dense_span) = score_range(dense);
            let (bm25_min, bm25_span) = score_range(bm25);
            add(dense, &|_, h| w * (h.score - dense_min) / dense_span);
            add(bm25, &|_, h| (1.0 - w) * (h.score - bm25_min) / bm25_span);
        }
        Fusion::AdaptiveRrf { k } => {
            let (d, b) = (standout(dense), standout(bm25));
            // Smoothing of 0.5 on each side: weights stay within [0.25, 0.75].
            let w = (0.5 + d) / (1.0 + d + b);
            add(dense, &|rank, _| 2.0 * w / (k + rank as f32 + 1.0));
            add(bm25, &|rank, _| 2.0 * (1.0 - w) / (k + rank as f32 + 1.0));
        }
    }
    // Stable: equal scores keep the order they were first seen in (dense first).
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused.truncate(limit);
    fused
}

/// Lowest score and the span to the highest (1 when all are equal, so nothing divides by 0).
fn score_range(list: &[SearchHit]) -> (f32, f32) {
    let min = list.iter().map(|h| h.score).fold(f32::INFINITY, f32::min);
    let max = list.iter().map(|h| h.score).fold(f32::NEG_INFINITY, f32::max);
    let span = max - min;
    (if min.is_finite() { min } else { 0.0 }, if span > 0.0 { span } else { 1.0 })
}

/// How far the best hit stands out of the top ten: (s₁ − s₂) / (s₁ − s₁₀), 0 for short or flat lists.
fn standout(list: &[SearchHit]) -> f32 {
    if list.len() < 3 {
        return 0.0;
    }
    let last = list[list.len().min(10) - 1].score;
    let span = list[0].score - last;
    if span > 0.0 {
        ((list[0].score - list[1].score) / span).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str, score: f32) -> SearchHit {
        SearchHit { chunk_id: id.into(), score, ..Default::default() }
    }

    fn ids(hits: &[SearchHit]) -> Vec<&str> {
        hits.iter().map(|h| h.chunk_id.as_str()).collect()
    }

    #[test]
    fn rrf_rewards_agreement_and_keeps_singletons() {
        let dense = vec![hit("a", 0.9), hit("b", 0.8), hit("c", 0.7)];
        let bm25 = vec![hit("c", 9.0), hit("d", 5.0)];
        let fused = fuse(&dense, &bm25, Fusion::Rrf { k: RRF_K, dense: 0.5 }, 10);
        // c is third in one list and first in the other: 1/63 + 1/61 beats a's 1/61; b and d
        // tie at 1/62 and keep the order they were first seen in.
        assert_eq!(ids(&fused), ["c", "a", "b", "d"]);
        assert!((fused[0].score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-6);
    }

    #[test]
    fn weights_move_the_ranking_toward_the_weighted_list() {
        let dense = vec![hit("a", 0.9), hit("b", 0.8)];
        let bm25 = vec![hit("b", 9.0), hit("a", 5.0)];
        // Equal weights: a and b tie, dense's order kept.
        assert_eq!(ids(&fuse(&dense, &bm25, Fusion::Rrf { k: 60.0, dense: 0.5 }, 2)), ["a", "b"]);
        assert_eq!(ids(&fuse(&dense, &bm25, Fusion::Rrf { k: 60.0, dense: 0.3 }, 2)), ["b", "a"]);
        assert_eq!(ids(&fuse(&dense, &bm25, Fusion::Scores { dense: 0.7 }, 2)), ["a", "b"]);
        assert_eq!(ids(&fuse(&dense, &bm25, Fusion::Scores { dense: 0.3 }, 2)), ["b", "a"]);
    }

    #[test]
    fn score_fusion_normalises_each_list() {
        // BM25 scores are ~10× dense ones; after min-max both run 0..1.
        let dense = vec![hit("a", 0.80), hit("b", 0.60), hit("c", 0.40)];
        let bm25 = vec![hit("c", 20.0), hit("b", 15.0), hit("a", 10.0)];
        let fused = fuse(&dense, &bm25, Fusion::Scores { dense: 0.5 }, 3);
        for h in &fused {
            assert!((h.score - 0.5).abs() < 1e-6, "{} {}", h.chunk_id, h.score);
        }
        // A list of one (or equal) scores does not divide by zero.
        let one = fuse(&[hit("a", 0.5)], &[], Fusion::Scores { dense: 0.5 }, 3);
        assert_eq!(one[0].score, 0.0);
    }

    #[test]
    fn adaptive_weight_favours_the_list_whose_top_hit_stands_out() {
        let flat: Vec<_> = (0..10).map(|i| hit(&format!("d{i}"), 0.60 - i as f32 * 0.001)).collect();
        let mut peaked: Vec<_> = (0..10).map(|i| hit(&format!("b{i}"), 5.0 - i as f32 * 0.1)).collect();
        peaked[0].score = 20.0;
        let fused = fuse(&flat, &peaked, Fusion::AdaptiveRrf { k: 60.0 }, 3);
        assert_eq!(fused[0].chunk_id, "b0");
        let fused = fuse(&peaked, &flat, Fusion::AdaptiveRrf { k: 60.0 }, 3);
        assert_eq!(fused[0].chunk_id, "b0");
    }
}
