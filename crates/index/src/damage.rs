//! Damage as a type. Every public operation of the index passes its error through
//! `at_boundary`, which turns what says "these files are damaged" into a `Damaged` error; the
//! engine and the front ends find the remedy by that type (`is_damaged`), never by the words.
//!
//! LanceDB types some of its damage (`TableCorrupted`, lance's `CorruptFile`), the vault its
//! own (`VaultError::Damaged`); the rest LanceDB hands over only as text (a reading task that
//! panicked on a nonsense length, a manifest that does not decode). Those words are read here,
//! once, where LanceDB's errors enter Quire (`looks_damaged`).

use std::future::Future;

use anyhow::Result;

use crate::schema::{CHUNKS, DOCUMENTS};

/// Said after a damage error; each front end adds its way to check and repair.
pub const DAMAGED: &str = "the library's files look damaged";

/// The library's files cannot be read as what they should be: `quire check` names which, and a
/// repair mends them.
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub struct Damaged {
    /// The table whose files are damaged, where the error names it.
    pub table: Option<&'static str>,
    /// What went wrong, as a person reads it (LanceDB's source locations cut).
    pub detail: String,
}

/// Whether `e`, or anything under it, is damage to the library's files.
pub fn is_damaged(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| cause.is::<Damaged>())
}

/// `e`'s text as a person reads it: LanceDB's repeated source locations cut and, where it is
/// damage, `DAMAGED` on a line of its own.
pub fn explained(e: &anyhow::Error) -> String {
    let plain = plain_damage(&format!("{e:#}")).to_string();
    if is_damaged(e) && !plain.contains(DAMAGED) {
        format!("{plain}\n{DAMAGED}")
    } else {
        plain
    }
}

/// Runs one public operation of the index, its damage errors typed.
pub(crate) async fn at_boundary<T>(work: impl Future<Output = Result<T>>) -> Result<T> {
    work.await.map_err(typed)
}

/// `e` as a `Damaged` error where it is damage; otherwise `e` as it is.
pub(crate) fn typed(e: anyhow::Error) -> anyhow::Error {
    if is_damaged(&e) {
        return e;
    }
    match damage_in(&e) {
        Some(damaged) => damaged.into(),
        None => e,
    }
}

/// The damage `e` reports, typed by LanceDB or the vault or said in LanceDB's words.
pub(crate) fn damage_in(e: &anyhow::Error) -> Option<Damaged> {
    let said = format!("{e:#}");
    let mut table = table_named_in(&said);
    let mut typed_damage = false;
    for cause in e.chain() {
        if let Some(lance) = cause.downcast_ref::<lancedb::Error>() {
            match lance {
                lancedb::Error::TableCorrupted { name, .. } => {
                    typed_damage = true;
                    table = table.or_else(|| table_named_in(name));
                }
                lancedb::Error::Lance { source: lance_core::Error::CorruptFile { .. } } => typed_damage = true,
                _ => {}
            }
        }
        if let Some(quire_vault::VaultError::Damaged { .. }) = cause.downcast_ref() {
            typed_damage = true;
        }
    }
    (typed_damage || looks_damaged(&said)).then(|| Damaged { table, detail: plain_damage(&said).to_string() })
}

/// The table a LanceDB message names by its folder (`…/chunks.lance/…`) or its name.
fn table_named_in(said: &str) -> Option<&'static str> {
    [CHUNKS, DOCUMENTS].into_iter().find(|table| said.contains(&format!("{table}.lance")) || said == *table)
}

/// True for LanceDB's words, in errors it gives only as text, on files that cannot be read as
/// what they should be (one of its reading tasks panicking on a nonsense length: "task 72
/// panicked with message …").
fn looks_damaged(message: &str) -> bool {
    [
        "corrupt file",
        "Protobuf",
        "LanceDB stopped",
        "cannot be opened",
        "panicked with message",
        // A data file's footer or column metadata (lance-file's words).
        "metadata region",
        "invalid magic",
        "magic mismatch",
        // A manifest cut short.
        "file size is too small",
        // A sealed value whose bytes changed (the vault's words).
        "failed to decrypt",
    ]
    .iter()
    .any(|m| message.contains(m))
}

/// LanceDB's account of damage without the source locations it repeats it with
/// ("…, /root/.cargo/registry/…/binary.rs:769:20: …").
/// Only a `, ` followed by a Rust source file's path is cut: other errors name paths too.
pub fn plain_damage(message: &str) -> &str {
    let mut from = 0;
    while let Some(found) = message[from..].find(", /") {
        let at = from + found;
        let rest = &message[at + 2..];
        let path = &rest[..rest.find(|c: char| c == ':' || c.is_whitespace()).unwrap_or(rest.len())];
        if path.ends_with(".rs") {
            return &message[..at];
        }
        from = at + 3;
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lancedbs_source_locations_are_cut() {
        let lance = "Encountered corrupt file /d/x.lance: bad, /root/.cargo/registry/src/lance-file/src/reader.rs:769:20: again";
        assert_eq!(plain_damage(lance), "Encountered corrupt file /d/x.lance: bad");
        let path = "cannot read the file, /home/ann/notes/a.md: permission denied";
        assert_eq!(plain_damage(path), path);
    }

    #[test]
    fn lancedbs_typed_damage_and_its_words_become_damaged() {
        let corrupted = lancedb::Error::TableCorrupted { name: "chunks".into(), source: "bad manifest".into() };
        let typed_corruption = typed(anyhow::Error::new(corrupted).context("searching"));
        assert!(is_damaged(&typed_corruption));
        assert_eq!(typed_corruption.downcast_ref::<Damaged>().unwrap().table, Some(CHUNKS));

        let panicked = anyhow::anyhow!(
            "task 72 panicked with message \"range start must not be greater than end\", \
             /root/.cargo/registry/src/x/lance-file/src/reader.rs:10:5"
        );
        let typed_panic = typed(panicked);
        assert!(is_damaged(&typed_panic));
        assert!(!explained(&typed_panic).contains("reader.rs"), "{}", explained(&typed_panic));
        assert!(explained(&typed_panic).ends_with(DAMAGED));

        let sealed = quire_vault::VaultError::Damaged { context: "chunk text".into() };
        assert!(is_damaged(&typed(anyhow::Error::new(sealed))));
    }

    #[test]
    fn other_errors_pass_through_untouched() {
        let denied = typed(anyhow::anyhow!("permission denied (os error 13)"));
        assert!(!is_damaged(&denied));
        assert_eq!(explained(&denied), "permission denied (os error 13)");
        let missing = lancedb::Error::TableNotFound { name: "chunks".into(), source: "no such table".into() };
        assert!(!is_damaged(&typed(missing.into())));
    }

    /// Typing twice keeps the first; a damage error found under added context counts.
    #[test]
    fn damage_is_found_under_context_and_typed_once() {
        let damaged: anyhow::Error = Damaged { table: Some(DOCUMENTS), detail: "gone".into() }.into();
        let wrapped = typed(damaged.context("listing the documents"));
        assert!(is_damaged(&wrapped));
        assert_eq!(explained(&wrapped), format!("listing the documents: gone\n{DAMAGED}"));
    }

    #[tokio::test]
    async fn the_boundary_types_what_passes_it() {
        let failed: Result<()> = at_boundary(async { Err(anyhow::anyhow!("Encountered corrupt file x")) }).await;
        assert!(is_damaged(&failed.unwrap_err()));
        assert_eq!(at_boundary(async { Ok(3) }).await.unwrap(), 3);
    }
}
