//! A checksum kept in every row (`row_sum`), so that a check finds damage that still decodes:
//! bytes flipped inside a sealed text or a vector read back without any error from LanceDB,
//! and would only fail a search later ("failed to decrypt") or, for a vector, change rankings
//! without a word. The sum covers each column as stored (sealed values as sealed), so checking
//! it needs no key.
//!
//! The sum is SHA-256 (first 128 bits) over the summed columns in order, each value with its
//! length (or a null mark). Document rows leave out the two times `update_document` rewrites
//! in place; damage there costs at most one more hash of the file. Rows written before sums
//! were kept have an empty one: they are checked only as far as they decode.

use anyhow::{Context, Result};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type, UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, SchemaRef};
use futures::TryStreamExt;
use lancedb::query::{ExecutableQuery, QueryBase};
use lancedb::Table;
use sha2::{Digest, Sha256};

use crate::schema::{col, CHUNKS};

pub(crate) const ROW_SUM: &str = "row_sum";

const DOCUMENT_SUMMED: &[&str] = &["doc_id", "path", "kind", "content_hash", "bytes", "pages", "chunks", "sealed_by"];
const CHUNK_SUMMED: &[&str] =
    &["chunk_id", "doc_id", "seq", "page", "start", "end", "tokens", "text", "chunk_hash", "terms", "vector"];

fn summed_columns(table: &str) -> &'static [&'static str] {
    if table == CHUNKS {
        CHUNK_SUMMED
    } else {
        DOCUMENT_SUMMED
    }
}

/// The batch of `schema` (whose last column is `row_sum`) from `columns` (every other one, in
/// order), each row's sum made from them.
pub(crate) fn with_row_sums(table: &str, schema: SchemaRef, mut columns: Vec<ArrayRef>) -> Result<RecordBatch> {
    let without = std::sync::Arc::new(schema.project(&(0..columns.len()).collect::<Vec<_>>())?);
    let partial = RecordBatch::try_new(without, columns.clone())?;
    let sums = row_sums(&partial, summed_columns(table))?;
    columns.push(std::sync::Arc::new(StringArray::from_iter_values(sums)));
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// Each row's sum over `columns` of `batch`.
fn row_sums(batch: &RecordBatch, columns: &[&str]) -> Result<Vec<String>> {
    let mut hashers = vec![Sha256::new(); batch.num_rows()];
    for name in columns {
        let column = batch.column_by_name(name).with_context(|| format!("the column {name} is missing"))?;
        for (row, hasher) in hashers.iter_mut().enumerate() {
            feed(hasher, column.as_ref(), row)?;
        }
    }
    Ok(hashers.into_iter().map(|h| hex::encode(&h.finalize()[..16])).collect())
}

fn feed(hasher: &mut Sha256, column: &dyn Array, row: usize) -> Result<()> {
    if column.is_null(row) {
        hasher.update([0]);
        return Ok(());
    }
    hasher.update([1]);
    match column.data_type() {
        DataType::Utf8 => {
            let bytes = column.as_string::<i32>().value(row).as_bytes();
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        }
        DataType::UInt32 => hasher.update(column.as_primitive::<UInt32Type>().value(row).to_le_bytes()),
        DataType::UInt64 => hasher.update(column.as_primitive::<UInt64Type>().value(row).to_le_bytes()),
        DataType::Int64 => hasher.update(column.as_primitive::<Int64Type>().value(row).to_le_bytes()),
        DataType::FixedSizeList(_, _) => {
            let values = column.as_fixed_size_list().value(row);
            let floats = values.as_primitive::<Float32Type>();
            let bytes: Vec<u8> = floats.values().iter().flat_map(|v| v.to_le_bytes()).collect();
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
        }
        other => anyhow::bail!("no checksum for a column of {other}"),
    }
    Ok(())
}

/// What reading every row of a table and checking its sum found.
#[derive(Debug, Default)]
pub(crate) struct RowsRead {
    pub rows: usize,
    /// Rows whose sum differs from what was read: their row ids.
    pub damaged: Vec<u64>,
    /// The documents those rows belong to, as far as their ids still read (sorted, once each).
    pub documents: Vec<String>,
    /// Rows written before sums were kept.
    pub unsummed: usize,
}

/// Reads every row and column of `table` (named `name`) at its checked-out version, checking
/// each row's sum.
pub(crate) async fn read_checked(table: &Table, name: &'static str) -> Result<RowsRead> {
    let mut stream = table.query().with_row_id().execute().await?;
    let mut read = RowsRead::default();
    while let Some(batch) = stream.try_next().await? {
        read.rows += batch.num_rows();
        let Some(stored) = batch.column_by_name(ROW_SUM).map(|c| c.as_string::<i32>().clone()) else {
            read.unsummed += batch.num_rows();
            continue;
        };
        let sums = row_sums(&batch, summed_columns(name))?;
        let row_ids = col::<arrow_array::UInt64Array>(&batch, "_rowid")?;
        for (row, sum) in sums.iter().enumerate() {
            if stored.is_null(row) || stored.value(row).is_empty() {
                read.unsummed += 1;
            } else if stored.value(row) != sum {
                read.damaged.push(row_ids.value(row));
                if let Some(doc) = document_named(&batch, row) {
                    read.documents.push(doc);
                }
            }
        }
    }
    read.documents.sort();
    read.documents.dedup();
    Ok(read)
}

/// The document a damaged row belongs to: its `doc_id`, or the one its chunk id was made from,
/// whichever still reads as an id (16 hex digits).
fn document_named(batch: &RecordBatch, row: usize) -> Option<String> {
    let is_id = |s: &str| s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit());
    let read = |name: &str| {
        batch
            .column_by_name(name)
            .map(|c| String::from_utf8_lossy(c.as_string::<i32>().value(row).as_bytes()).into_owned())
    };
    let from_chunk = read("chunk_id").and_then(|id| crate::parse_chunk_id(&id).map(|(doc, _)| doc.to_owned()));
    read("doc_id").filter(|id| is_id(id)).or(from_chunk.filter(|id| is_id(id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_changed_value_changes_the_sum_and_the_sum_covers_lengths() {
        let schema = crate::schema::documents_schema();
        let batch = |path: &str, kind: &str| {
            let strs = |s: &str| Arc::new(StringArray::from(vec![s])) as ArrayRef;
            let columns: Vec<ArrayRef> = vec![
                strs("0123456789abcdef"),
                strs(path),
                strs(kind),
                strs("h"),
                Arc::new(arrow_array::UInt64Array::from(vec![10])),
                Arc::new(arrow_array::UInt32Array::from(vec![1])),
                Arc::new(arrow_array::UInt32Array::from(vec![2])),
                Arc::new(arrow_array::Int64Array::from(vec![3])),
                Arc::new(arrow_array::Int64Array::from(vec![4])),
                strs("plain"),
            ];
            with_row_sums("documents", schema.clone(), columns).unwrap()
        };
        let sum = |b: &RecordBatch| b.column_by_name(ROW_SUM).unwrap().as_string::<i32>().value(0).to_owned();
        let a = batch("a.md", "md");
        assert_eq!(sum(&a).len(), 32);
        assert_eq!(sum(&a), sum(&batch("a.md", "md")));
        assert_ne!(sum(&a), sum(&batch("b.md", "md")));
        // The same bytes split differently between two columns are not the same row.
        assert_ne!(sum(&batch("a.mdm", "d")), sum(&batch("a.md", "md")));
    }
}
