//! Keeping the tables fast and small: the vector and BM25 indexes refreshed, files compacted,
//! old versions pruned. Each step is tried again when another process's commit beat it (two
//! ingestions at once, the app beside `quire watch`): these steps only reorganise what is there,
//! so planning them again over the newer version is always right.

use anyhow::Result;
use lancedb::index::vector::IvfHnswSqIndexBuilder;
use lancedb::index::Index;
use lancedb::table::{Duration, OptimizeAction};
use lancedb::DistanceType;

use crate::schema::terms_index;
use crate::{KnowledgeBase, HNSW_MIN_ROWS};

impl KnowledgeBase {
    /// Brings the search indexes up to date after writes: creates the BM25 index (and, once the
    /// table is large enough, the HNSW index) or folds new rows into the existing ones.
    pub async fn refresh_indexes(&self) -> Result<()> {
        crate::damage::at_boundary(async move {
            let rows = self.chunks.count_rows(None).await?;
            if rows == 0 {
                return Ok(());
            }
            let indices = self.chunks.list_indices().await?;
            let has = |col: &str| indices.iter().any(|i| i.columns.iter().any(|c| c == col));
            let (has_fts, has_vector) = (has("terms"), has("vector"));
            if has_fts || has_vector {
                retried(|| self.chunks.optimize(OptimizeAction::Index(Default::default()))).await?;
            }
            if !has_fts {
                retried(|| self.chunks.create_index(&["terms"], Index::FTS(terms_index())).execute()).await?;
            }
            if !has_vector && rows >= HNSW_MIN_ROWS {
                retried(|| {
                    let builder = IvfHnswSqIndexBuilder::default().distance_type(DistanceType::Cosine);
                    self.chunks.create_index(&["vector"], Index::IvfHnswSq(builder)).execute()
                })
                .await?;
            }
            Ok(())
        })
        .await
    }

    /// Compacts small files into large ones and deletes table versions older than `keep`, so
    /// the data folder does not grow with every write. Versions another process may still be
    /// reading are kept by passing a `keep` longer than its reads.
    pub async fn optimize(&self, keep: std::time::Duration) -> Result<()> {
        crate::damage::at_boundary(async move {
            for table in [&self.documents, &self.chunks] {
                retried(|| {
                    table.optimize(OptimizeAction::Compact { options: Default::default(), remap_options: None })
                })
                .await?;
            }
            self.prune(keep).await
        })
        .await
    }

    /// Deletes table versions older than `keep` without compacting (cheap; for long ingestions).
    pub async fn prune(&self, keep: std::time::Duration) -> Result<()> {
        crate::damage::at_boundary(async move {
            let older_than = Duration::from_std(keep).unwrap_or(Duration::zero());
            for table in [&self.documents, &self.chunks] {
                retried(|| {
                    table.optimize(OptimizeAction::Prune {
                        older_than: Some(older_than),
                        delete_unverified: None,
                        error_if_tagged_old_versions: None,
                    })
                })
                .await?;
            }
            Ok(())
        })
        .await
    }

    /// How many versions the chunk table has accumulated (each write makes one).
    pub async fn chunk_table_versions(&self) -> Result<usize> {
        crate::damage::at_boundary(async move { Ok(self.chunks.list_versions().await?.len()) }).await
    }

    pub async fn has_vector_index(&self) -> Result<bool> {
        crate::damage::at_boundary(async move {
            Ok(self.chunks.list_indices().await?.iter().any(|i| i.columns.iter().any(|c| c == "vector")))
        })
        .await
    }
}

/// Tries for an upkeep step, the waits between them doubling from 50 ms (3 s in all).
const UPKEEP_TRIES: u32 = 7;

/// `step`, run again while another process's commit beats it (LanceDB's commit conflicts).
async fn retried<T, F: std::future::Future<Output = lancedb::Result<T>>>(step: impl Fn() -> F) -> Result<T> {
    let mut wait = std::time::Duration::from_millis(50);
    for _ in 1..UPKEEP_TRIES {
        match step().await {
            Err(e) if is_commit_conflict(&e) => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            done => return Ok(done?),
        }
    }
    Ok(step().await?)
}

/// A commit that lost to another process's (LanceDB says "Retryable commit conflict" or
/// "Commit conflict"; its error types are not re-exported).
fn is_commit_conflict(e: &lancedb::Error) -> bool {
    let lancedb::Error::Lance { source } = e else { return false };
    let said = source.to_string();
    said.starts_with("Retryable commit conflict") || said.starts_with("Commit conflict")
}
