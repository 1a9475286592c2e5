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

/// Refuses, before anything is written, work that needs about `needed` bytes in `dir` where
/// its disk has less free: the folder, both figures, and that nothing changed. Where the free
/// space cannot be read, the work goes on (a full disk is then told as it happens).
pub(crate) fn ensure_room(dir: &Path, needed: u64, work: &str) -> anyhow::Result<()> {
    match fs2::available_space(dir) {
        Ok(free) => room(free, needed, dir, work),
        Err(_) => Ok(()),
    }
}

fn room(free: u64, needed: u64, dir: &Path, work: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        free >= needed,
        "the disk that holds {} has {} free; {work} needs about {}. Nothing was changed: free some space, then try again",
        dir.display(),
        megabytes(free),
        megabytes(needed)
    );
    Ok(())
}

fn megabytes(bytes: u64) -> String {
    format!("{:.0} MB", (bytes as f64 / 1e6).max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_without_room_is_refused_before_it_starts() {
        let dir = Path::new("/library");
        let work = "embedding the library again";
        assert!(room(5_000_000, 4_000_000, dir, work).is_ok());
        let said = room(3_000_000, 40_000_000, dir, work).unwrap_err().to_string();
        assert_eq!(
            said,
            "the disk that holds /library has 3 MB free; embedding the library again needs about 40 MB. \
             Nothing was changed: free some space, then try again"
        );
        // A real folder: the room this disk has is enough for a byte, never for an exabyte.
        let tmp = tempfile::tempdir().unwrap();
        assert!(ensure_room(tmp.path(), 1, work).is_ok());
        assert!(ensure_room(tmp.path(), u64::MAX, work).unwrap_err().to_string().contains("free some space"));
    }

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
