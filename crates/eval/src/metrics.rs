//! Retrieval metrics per query, defined as pytrec_eval (trec_eval) computes them, which is what
//! BEIR reports:
//! - nDCG@k: DCG = Σ rel_i / log2(i + 1) over ranks i = 1..k with the judged relevance as gain
//!   (trec_eval's linear gain, not 2^rel − 1); IDCG from the judged documents in decreasing
//!   relevance. Unjudged documents have gain 0.
//! - recall@k: relevant documents (relevance > 0) in the top k, over all relevant documents.
//! - MRR@k: 1 / rank of the first relevant document within the top k, else 0.
//!
//! A ranking holds each document once; the caller collapses chunk hits to documents first.

use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QueryScores {
    pub ndcg_at_10: f64,
    pub recall_at_10: f64,
    pub recall_at_100: f64,
    pub mrr_at_10: f64,
}

/// Discounted cumulative gain of the top `k`: Σ rel_i / log2(i + 1), ranks from 1.
pub fn dcg_at(k: usize, gains: impl IntoIterator<Item = u32>) -> f64 {
    gains.into_iter().take(k).enumerate().map(|(i, rel)| rel as f64 / ((i + 2) as f64).log2()).sum()
}

pub fn ndcg_at(k: usize, ranking: &[&str], judged: &HashMap<String, u32>) -> f64 {
    let dcg = dcg_at(k, ranking.iter().map(|d| judged.get(*d).copied().unwrap_or(0)));
    let mut ideal: Vec<u32> = judged.values().copied().filter(|&r| r > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg = dcg_at(k, ideal);
    if idcg == 0.0 {
        0.0
    } else {
        dcg / idcg
    }
}

pub fn recall_at(k: usize, ranking: &[&str], judged: &HashMap<String, u32>) -> f64 {
    let relevant = judged.values().filter(|&&r| r > 0).count();
    if relevant == 0 {
        return 0.0;
    }
    let found = ranking.iter().take(k).filter(|d| judged.get(**d).is_some_and(|&r| r > 0)).count();
    found as f64 / relevant as f64
}

pub fn mrr_at(k: usize, ranking: &[&str], judged: &HashMap<String, u32>) -> f64 {
    ranking
        .iter()
        .take(k)
        .position(|d| judged.get(*d).is_some_and(|&r| r > 0))
        .map(|i| 1.0 / (i + 1) as f64)
        .unwrap_or(0.0)
}

pub fn score_query(ranking: &[&str], judged: &HashMap<String, u32>) -> QueryScores {
    QueryScores {
        ndcg_at_10: ndcg_at(10, ranking, judged),
        recall_at_10: recall_at(10, ranking, judged),
        recall_at_100: recall_at(100, ranking, judged),
        mrr_at_10: mrr_at(10, ranking, judged),
    }
}

/// The mean of each metric over queries (BEIR averages over every judged query; a query with
/// no results scores 0, so the caller passes one entry per judged query).
pub fn mean_scores(per_query: &[QueryScores]) -> QueryScores {
    let n = per_query.len().max(1) as f64;
    let sum = |f: fn(&QueryScores) -> f64| per_query.iter().map(f).sum::<f64>() / n;
    QueryScores {
        ndcg_at_10: sum(|s| s.ndcg_at_10),
        recall_at_10: sum(|s| s.recall_at_10),
        recall_at_100: sum(|s| s.recall_at_100),
        mrr_at_10: sum(|s| s.mrr_at_10),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(pairs: &[(&str, u32)]) -> HashMap<String, u32> {
        pairs.iter().map(|(d, r)| (d.to_string(), *r)).collect()
    }

    const EPS: f64 = 1e-12;

    #[test]
    fn ndcg_by_hand() {
        // Relevant: a (2), b (1). Ranking: x, a, b.
        // DCG = 0/log2(2) + 2/log2(3) + 1/log2(4) = 1.2618595 + 0.5 = 1.7618595
        // IDCG = 2/log2(2) + 1/log2(3) = 2 + 0.6309298 = 2.6309298
        let j = judged(&[("a", 2), ("b", 1), ("n", 0)]);
        let got = ndcg_at(10, &["x", "a", "b"], &j);
        let want = (2.0 / 3f64.log2() + 1.0 / 4f64.log2()) / (2.0 + 1.0 / 3f64.log2());
        assert!((got - want).abs() < EPS, "{got} vs {want}");
        assert!((got - 0.669_671_816_494).abs() < 1e-9, "{got}");
        // DCG itself: 2/log2(3) + 1/log2(4) = 1.7618595. With ln it would be 2.5418; with ranks
        // from 0 the first term would divide by log2(1) = 0.
        assert!((dcg_at(10, [0, 2, 1]) - 1.761_859_507_142_915).abs() < 1e-12);
        assert!((dcg_at(10, [0, 2, 1]) - (2.0 / 3f64.ln() + 1.0 / 4f64.ln())).abs() > 0.5);
        assert!((dcg_at(10, [3]) - 3.0).abs() < EPS, "rank 1 is not discounted");
        // A definition that leaves rank 1 undiscounted and divides later ranks by log2(rank)
        // gives another nDCG here (0.877): the test pins trec_eval's.
        let other = (0.0 + 2.0 / 2f64.log2() + 1.0 / 3f64.log2()) / (2.0 + 1.0 / 2f64.log2());
        assert!((got - other).abs() > 1e-2);
        // Perfect order scores 1; the cut-off drops later ranks.
        assert!((ndcg_at(10, &["a", "b"], &j) - 1.0).abs() < EPS);
        assert!((ndcg_at(1, &["x", "a"], &j)).abs() < EPS);
        // Linear gain (trec_eval), not 2^rel - 1: with exponential gain this would differ.
        let exp_gain = (3.0 / 3f64.log2() + 1.0 / 4f64.log2()) / (3.0 + 1.0 / 3f64.log2());
        assert!((got - exp_gain).abs() > 1e-3);
    }

    #[test]
    fn recall_and_mrr_by_hand() {
        let j = judged(&[("a", 1), ("b", 1), ("c", 1), ("z", 0)]);
        let ranking = ["z", "x", "b", "y", "a"];
        assert!((recall_at(10, &ranking, &j) - 2.0 / 3.0).abs() < EPS);
        assert!((recall_at(3, &ranking, &j) - 1.0 / 3.0).abs() < EPS);
        // First relevant at rank 3 (1-based): 1/3. Off by one would give 1/2 or 1/4.
        assert!((mrr_at(10, &ranking, &j) - 1.0 / 3.0).abs() < EPS);
        assert_eq!(mrr_at(2, &ranking, &j), 0.0);
        assert_eq!(recall_at(10, &ranking, &judged(&[("z", 0)])), 0.0);
    }

    #[test]
    fn the_mean_counts_every_judged_query() {
        let j = judged(&[("a", 1)]);
        let hit = score_query(&["a"], &j);
        let miss = score_query(&[], &j);
        let mean = mean_scores(&[hit, miss]);
        assert!((mean.ndcg_at_10 - 0.5).abs() < EPS);
        assert!((mean.mrr_at_10 - 0.5).abs() < EPS);
        assert!((mean.recall_at_100 - 0.5).abs() < EPS);
    }
}
