//! Which embedder made a library's vectors. Vectors of another model mean nothing beside them,
//! even of the same size (all-MiniLM-L6-v2 and multilingual-e5-small both give 384), so a
//! library keeps the embedder it was made with: recorded in its folder when it is made, read
//! back each time it opens. The configured embedder only chooses for a new library.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

const RECORD: &str = "embedder";
/// The only embedder libraries were made with before the record was kept.
const BEFORE_THE_RECORD: &str = "all-minilm-l6-v2";

/// The embedder folder the library in `data_dir` must be read with: the one it records (a
/// known model's folder in `models`, or the folder the record names), else `configured` for a
/// library with nothing in it yet, else all-MiniLM-L6-v2 (a library from before the record).
pub(crate) fn for_library(data_dir: &Path, configured: &Path, has_documents: bool, models: &Path) -> Result<PathBuf> {
    let name = match recorded(data_dir) {
        Some(name) => name,
        _ if !has_documents => return Ok(configured.to_path_buf()),
        _ => BEFORE_THE_RECORD.to_string(),
    };
    if name_of(configured, models) == name {
        return Ok(configured.to_path_buf());
    }
    match quire_models::find(&name) {
        Ok(known) => Ok(known.location_in(models)),
        // A folder outside the catalogue is recorded by its path.
        Err(_) => Ok(PathBuf::from(name)),
    }
}

/// Writes down the embedder the library in `data_dir` is read with, if it is not written yet.
pub(crate) fn record(data_dir: &Path, embedder_dir: &Path, models: &Path) -> Result<()> {
    let file = data_dir.join(RECORD);
    if file.is_file() {
        return Ok(());
    }
    std::fs::write(&file, format!("{}\n", name_of(embedder_dir, models)))
        .with_context(|| format!("cannot write {}", file.display()))
}

/// The embedder the library (or staged index) in `data_dir` records, if any.
pub(crate) fn recorded(data_dir: &Path) -> Option<String> {
    let name = std::fs::read_to_string(data_dir.join(RECORD)).ok()?;
    Some(name.trim().to_string()).filter(|n| !n.is_empty())
}

/// A known model by its name, any other folder by its path.
pub(crate) fn name_of(embedder_dir: &Path, models: &Path) -> String {
    match quire_models::KNOWN_MODELS.iter().find(|m| m.location_in(models) == embedder_dir) {
        Some(known) => known.name.to_string(),
        None => embedder_dir.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_keeps_the_embedder_it_was_made_with() {
        let home = tempfile::tempdir().unwrap();
        let models = home.path().join("models");
        let (minilm, e5) =
            (quire_models::MINILM.location_in(&models), quire_models::MULTILINGUAL_E5_SMALL.location_in(&models));
        let library = home.path().join("library");
        std::fs::create_dir_all(&library).unwrap();
        let m = models.as_path();
        // New and empty: the configured one, then recorded.
        assert_eq!(for_library(&library, &e5, false, m).unwrap(), e5);
        record(&library, &e5, m).unwrap();
        assert_eq!(std::fs::read_to_string(library.join(RECORD)).unwrap(), "multilingual-e5-small\n");
        // Configured otherwise later: the library's own still.
        assert_eq!(for_library(&library, &minilm, true, m).unwrap(), e5);
        record(&library, &minilm, m).unwrap();
        assert_eq!(std::fs::read_to_string(library.join(RECORD)).unwrap(), "multilingual-e5-small\n");
        // A library from before the record, with documents: MiniLM whatever is configured.
        let older = home.path().join("older");
        std::fs::create_dir_all(&older).unwrap();
        assert_eq!(for_library(&older, &e5, true, m).unwrap(), minilm);
        // A folder outside the catalogue is named by its path.
        let own = home.path().join("my-bert");
        record(&older, &own, m).unwrap();
        assert_eq!(for_library(&older, &e5, true, m).unwrap(), own);
    }
}
