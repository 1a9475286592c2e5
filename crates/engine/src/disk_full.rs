//! A full disk, said so a person can act on it: which folder, how much room is free and about
//! how much is needed, and how to go on. The data already written holds (LanceDB commits whole
//! versions), so the remedy is always to free space and resume.

use std::path::Path;

/// Whether `e` comes from a disk (or quota) that is full, however deep the cause: LanceDB
/// passes its storage layer's errors on as text, so the operating systems' words count too.
pub(crate) fn is_disk_full(e: &anyhow::Error) -> bool {
    let by_kind = e
        .chain()
        .any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::StorageFull));
    let text = format!("{e:#}");
    by_kind
        || ["No space left on device", "Disk quota exceeded", "not enough space on the disk", "(os error 28)"]
            .iter()
            .any(|words| text.contains(words))
}

/// `e` said as a full disk, when it is one: the folder, the free space, about `needed` bytes
/// more, and that the ingestion goes on once there is room (`Remedy::ResumeIngestion`);
/// otherwise `e` as it is.
pub(crate) fn explained(e: anyhow::Error, dir: &Path, needed: u64) -> anyhow::Error {
    if !is_disk_full(&e) {
        return e;
    }
    let free = fs2::available_space(dir).map(|b| format!("{} free", megabytes(b))).unwrap_or_else(|_| "no room".into());
    let problem = format!(
        "the disk that holds {} is full ({free}); Quire needs about {} more. Nothing stored so far is lost: \
         free some space, then go on from where it stopped",
        dir.display(),
        megabytes(needed)
    );
    crate::Remedied { problem, remedy: crate::Remedy::ResumeIngestion }.into()
}

/// `e` said as a full disk, when it is one, for a removal that did not happen: nothing changed,
/// and it can be done again once there is room (a removal writes a little: LanceDB records
/// deletions in new files). Otherwise `e` as it is.
pub(crate) fn explained_removal(e: anyhow::Error, dir: &Path) -> anyhow::Error {
    if !is_disk_full(&e) {
        return e;
    }
    let free = fs2::available_space(dir).map(|b| format!("{} free", megabytes(b))).unwrap_or_else(|_| "no room".into());
    anyhow::anyhow!(
        "the disk that holds {} is full ({free}), so the document was not removed; nothing is lost. \
         Free some space, then remove it again",
        dir.display()
    )
}

fn megabytes(bytes: u64) -> String {
    format!("{:.0} MB", (bytes as f64 / 1e6).max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_told_with_its_folder_and_the_way_on() {
        let full = anyhow::Error::from(std::io::Error::from_raw_os_error(28)).context("writing the chunks");
        let lance_like =
            anyhow::anyhow!("lance error: Unable to copy data to file: No space left on device (os error 28)");
        let dir = tempfile::tempdir().unwrap();
        for e in [full, lance_like] {
            let full = explained(e, dir.path(), 3_000_000);
            assert_eq!(crate::remedy(&full), Some(crate::Remedy::ResumeIngestion));
            let said = full.to_string();
            assert!(said.starts_with(&format!("the disk that holds {} is full (", dir.path().display())), "{said}");
            assert!(said.contains("needs about 3 MB more") && said.ends_with("from where it stopped"), "{said}");
        }
        let lance_remove = anyhow::anyhow!(
            "LanceError(IO): Generic LocalFileSystem error: Unable to open file /x/_deletions/1.arrow: (os error 28)"
        );
        let said = explained_removal(lance_remove, dir.path()).to_string();
        assert!(said.contains("is full (") && said.contains("the document was not removed; nothing is lost"), "{said}");
        assert!(!said.contains("LanceError"), "{said}");
        let other = explained(anyhow::anyhow!("permission denied"), dir.path(), 1);
        assert_eq!(other.to_string(), "permission denied");
    }
}
