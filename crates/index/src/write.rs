//! Writing documents: commits (chunks first, the document row last), removals (document rows
//! first, chunks after) and the repair of chunks a crash left without their document.

use std::collections::HashMap;

use anyhow::Result;
use arrow_array::RecordBatch;
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase, Select};

use crate::schema::{lock_file_async, str_col};
use crate::{doc_id_filter, sql_str, ChunkKey, ChunkRecord, DocumentRecord, KnowledgeBase};

impl KnowledgeBase {
    /// Stores a document and its chunks, replacing whatever was stored for the same document id.
    pub async fn replace_document(&self, doc: &DocumentRecord, chunks: &[ChunkRecord]) -> Result<()> {
        crate::damage::at_boundary(async move { self.commit(std::slice::from_ref(doc), chunks).await }).await
    }

    /// Stores documents and their chunks in four writes whatever their number, replacing what
    /// was stored under the same document ids. Ordered for the crash-safety invariant: old
    /// document rows out, old chunks out, new chunks in, new document rows in.
    pub async fn commit(&self, docs: &[DocumentRecord], chunks: &[ChunkRecord]) -> Result<()> {
        crate::damage::at_boundary(async move {
            if docs.is_empty() {
                return Ok(());
            }
            for c in chunks {
                anyhow::ensure!(
                    docs.iter().any(|d| d.doc_id == c.doc_id),
                    "chunk {} has no document in the commit",
                    c.id()
                );
            }
            let ids: Vec<&str> = docs.iter().map(|d| d.doc_id.as_str()).collect();
            let filter = doc_id_filter(&ids);
            // Two processes replacing one document at once would each delete, then each add.
            let _writing = lock_file_async(self.writes_lock.clone()).await?;
            if self.documents.count_rows(Some(filter.clone())).await? > 0 {
                self.documents.delete(&filter).await?;
            }
            if self.chunks.count_rows(Some(filter.clone())).await? > 0 {
                self.chunks.delete(&filter).await?;
            }
            if !chunks.is_empty() {
                self.chunks.add(self.chunk_batch(chunks)?).execute().await?;
            }
            self.documents.add(self.document_batch(docs)?).execute().await?;
            Ok(())
        })
        .await
    }

    /// Records a stored document's new modification time (one atomic write; chunks untouched).
    pub async fn update_document(&self, doc: &DocumentRecord) -> Result<()> {
        crate::damage::at_boundary(async move {
            self.documents
                .update()
                .only_if(format!("doc_id = {}", sql_str(&doc.doc_id)))
                .column("modified_ms", format!("CAST({} AS BIGINT)", doc.modified_ms))
                .column("ingested_at_ms", format!("CAST({} AS BIGINT)", doc.ingested_at_ms))
                .execute()
                .await?;
            Ok(())
        })
        .await
    }

    /// Removes a document and its chunks; returns whether it was there.
    pub async fn remove_document(&self, doc_id: &str) -> Result<bool> {
        crate::damage::at_boundary(async move { Ok(self.remove_documents(&[doc_id]).await? > 0) }).await
    }

    /// Removes documents and their chunks (document rows first); returns how many were there.
    pub async fn remove_documents(&self, doc_ids: &[&str]) -> Result<usize> {
        crate::damage::at_boundary(async move {
            if doc_ids.is_empty() {
                return Ok(0);
            }
            let filter = doc_id_filter(doc_ids);
            let _writing = lock_file_async(self.writes_lock.clone()).await?;
            let existed = self.documents.count_rows(Some(filter.clone())).await?;
            if existed > 0 {
                self.documents.delete(&filter).await?;
            }
            if self.chunks.count_rows(Some(filter.clone())).await? > 0 {
                self.chunks.delete(&filter).await?;
            }
            Ok(existed)
        })
        .await
    }

    pub(crate) async fn chunk_doc_ids(&self, filter: Option<String>) -> Result<Vec<String>> {
        let Some(filter) = filter else { return Ok(Vec::new()) };
        let batches: Vec<RecordBatch> = self
            .chunks
            .query()
            .only_if(filter)
            .select(Select::columns(&["doc_id"]))
            .execute()
            .await?
            .try_collect()
            .await?;
        let mut ids = Vec::new();
        for b in &batches {
            let col = str_col(b, "doc_id")?;
            ids.extend((0..b.num_rows()).map(|i| col.value(i).to_owned()));
        }
        Ok(ids)
    }

    /// Deletes the chunks a crash left without a document row (see the crate's docs), holding
    /// the write lock so that another process's commit in progress is not taken for a crash's
    /// leftovers. Returns the keys of the chunks that remain and the removed ones' vectors by
    /// chunk hash (kept by the caller for reuse: the file they came from is processed again).
    pub async fn remove_orphans(&self) -> Result<(Vec<ChunkKey>, HashMap<String, Vec<f32>>)> {
        crate::damage::at_boundary(async move {
            let _writing = lock_file_async(self.writes_lock.clone()).await?;
            let known: std::collections::HashSet<String> = self.document_ids().await?;
            let (keys, orphans): (Vec<_>, Vec<_>) =
                self.chunk_keys().await?.into_iter().partition(|k| known.contains(&k.doc_id));
            let mut orphan_docs: Vec<&str> = orphans.iter().map(|k| k.doc_id.as_str()).collect();
            orphan_docs.sort();
            orphan_docs.dedup();
            let mut vectors = HashMap::new();
            for group in orphan_docs.chunks(500) {
                vectors.extend(self.vectors_of_documents(group).await?);
                self.chunks.delete(&doc_id_filter(group)).await?;
            }
            Ok((keys, vectors))
        })
        .await
    }

    /// The ids of the stored documents (no other column read, nothing opened).
    pub(crate) async fn document_ids(&self) -> Result<std::collections::HashSet<String>> {
        let batches: Vec<RecordBatch> =
            self.documents.query().select(Select::columns(&["doc_id"])).execute().await?.try_collect().await?;
        let mut ids = std::collections::HashSet::new();
        for b in &batches {
            let col = str_col(b, "doc_id")?;
            ids.extend((0..b.num_rows()).map(|i| col.value(i).to_owned()));
        }
        Ok(ids)
    }
}
