//! LanceDB on a real Garage cluster (issue 60's first question): do two machines writing at
//! once keep each other's rows? LanceDB commits a version on S3 with a conditional write
//! (`If-None-Match: *` on the next manifest); Garage ignores the condition, so two writers of one
//! table can both "create" the same version and one commit is lost. Quire's rule follows: each
//! machine writes only its own tables. By explicit command, against a cluster on the loopback
//! (`scripts/test.sh --full` skips it):
//!
//! ```sh
//! tools/garage.sh start && source /tmp/quire-garage/env
//! cargo test --release --workspace --test object_store -- --ignored --nocapture
//! ```

use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};

/// The store the cluster's env file names.
fn store() -> (String, Vec<(String, String)>) {
    let var = |name: &str| {
        std::env::var(name)
            .unwrap_or_else(|_| panic!("{name} is not set: run tools/garage.sh start, then source its env"))
    };
    let options = vec![
        ("aws_endpoint".to_string(), var("QUIRE_TEST_S3_ENDPOINT")),
        ("aws_region".to_string(), var("QUIRE_TEST_S3_REGION")),
        ("aws_access_key_id".to_string(), var("QUIRE_TEST_S3_KEY_ID")),
        ("aws_secret_access_key".to_string(), var("QUIRE_TEST_S3_SECRET")),
        ("allow_http".to_string(), "true".to_string()),
        ("aws_virtual_hosted_style_request".to_string(), "false".to_string()),
    ];
    let prefix = format!("s3://{}/probe-{}", var("QUIRE_TEST_S3_BUCKET"), std::process::id());
    (prefix, options)
}

fn batch(writer: i64, n: i64) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("writer", DataType::Int64, false),
        Field::new("n", DataType::Int64, false),
    ]));
    RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![writer])), Arc::new(Int64Array::from(vec![n]))])
        .unwrap()
}

async fn connect(uri: &str, options: &[(String, String)]) -> lancedb::Connection {
    lancedb::connect(uri)
        .storage_options(options.iter().cloned())
        .read_consistency_interval(std::time::Duration::ZERO)
        .execute()
        .await
        .unwrap()
}

/// Two writers (two connections, as two machines) append `APPENDS` rows each at once, each to
/// the table `table_of(writer)` at `uri`; the rows kept (in every table there) and the appends
/// refused.
async fn race(uri: &str, options: &[(String, String)], table_of: fn(i64) -> String) -> (i64, i64) {
    let mut writers = Vec::new();
    for writer in 1..=2 {
        let (uri, options) = (uri.to_string(), options.to_vec());
        writers.push(tokio::spawn(async move {
            let db = connect(&uri, &options).await;
            let name = table_of(writer);
            let table = match db.open_table(&name).execute().await {
                Ok(table) => table,
                Err(_) => db.create_table(&name, batch(writer, -1)).execute().await.unwrap(),
            };
            let mut refused = 0;
            for n in 0..APPENDS {
                if let Err(e) = table.add(batch(writer, n)).execute().await {
                    eprintln!("writer {writer}, append {n}: {e}");
                    refused += 1;
                }
            }
            refused
        }));
    }
    let mut refused = 0;
    for w in writers {
        refused += w.await.unwrap();
    }
    let db = connect(uri, options).await;
    let mut kept = 0;
    for name in db.table_names().execute().await.unwrap() {
        let table = db.open_table(&name).execute().await.unwrap();
        kept += table.count_rows(Some("n >= 0".into())).await.unwrap() as i64;
    }
    (kept, refused)
}

const APPENDS: i64 = 20;

/// Quire's rule for a library on Garage (ARCHITECTURE.md, "A library beyond one machine"): each
/// machine writes only its own tables, and readers read them all. Two writers appending at once,
/// each to its own table: every row is kept. The same race on one shared table is measured
/// beside it (Garage ignores the conditional write LanceDB commits with, so rows are lost there:
/// 20 of 40 on 2026-12-07, none refused), printed, not asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a Garage cluster (tools/garage.sh start), by explicit command"]
async fn two_machines_writing_to_garage_keep_every_row_when_each_writes_its_own_table() {
    let (prefix, options) = store();
    let shared = format!("{prefix}/shared");
    connect(&shared, &options).await.create_table("rows", batch(0, -1)).execute().await.unwrap();
    let (kept, refused) = race(&shared, &options, |_| "rows".to_string()).await;
    eprintln!(
        "one shared table: {} appends, {refused} refused, {kept} kept, {} lost",
        2 * APPENDS,
        2 * APPENDS - kept - refused
    );

    let (kept, refused) = race(&format!("{prefix}/writers"), &options, |w| format!("writer-{w}")).await;
    eprintln!("a table per writer: {} appends, {refused} refused, {kept} kept", 2 * APPENDS);
    assert_eq!((kept, refused), (2 * APPENDS, 0), "every row kept");
}
