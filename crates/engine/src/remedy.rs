//! What a person can do about an error. The engine says what went wrong; each front end says
//! how to mend it in its own way (the command line names its command, the app its buttons), so
//! no engine message names a command that only one of them has.

use crate::EmptyLibrary;

/// A way out of an error, for the front end to phrase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// The library holds no documents yet: add some.
    AddDocuments,
    /// The library's files look damaged: find which, and repair them.
    CheckAndRepair,
    /// The collection's key is not where it should be: import the key backup.
    ImportKeyBackup,
    /// An ingestion stopped part way (nothing stored is lost): run it again to go on.
    ResumeIngestion,
}

/// An error that calls for a `Remedy`; its text is the problem alone.
#[derive(Debug, thiserror::Error)]
#[error("{problem}")]
pub struct Remedied {
    pub problem: String,
    pub remedy: Remedy,
}

/// The way out of `e`, where there is one: from an error that carries it (whatever context was
/// added on top), a missing key, or damage to the library's files. Found by the errors' types,
/// never their words.
pub fn remedy(e: &anyhow::Error) -> Option<Remedy> {
    if e.downcast_ref::<EmptyLibrary>().is_some() {
        return Some(Remedy::AddDocuments);
    }
    if let Some(remedied) = e.downcast_ref::<Remedied>() {
        return Some(remedied.remedy);
    }
    for cause in e.chain() {
        if let Some(quire_vault::VaultError::KeyMissing { .. } | quire_vault::VaultError::UnknownKey(_)) =
            cause.downcast_ref()
        {
            return Some(Remedy::ImportKeyBackup);
        }
    }
    quire_index::is_damaged(e).then_some(Remedy::CheckAndRepair)
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn each_remedy_is_found_under_added_context() {
        let empty = anyhow::Error::new(EmptyLibrary).context("answering");
        assert_eq!(remedy(&empty), Some(Remedy::AddDocuments));
        let full = anyhow::Error::new(Remedied { problem: "the disk is full".into(), remedy: Remedy::ResumeIngestion });
        assert_eq!(remedy(&full.context("ingesting")), Some(Remedy::ResumeIngestion));
        let key: anyhow::Result<()> =
            Err(quire_vault::VaultError::KeyMissing { key_id: "k1".into(), entry: "quire collection x".into() }.into());
        assert_eq!(remedy(&key.context("opening").unwrap_err()), Some(Remedy::ImportKeyBackup));
        let damaged = quire_index::Damaged { table: None, detail: "corrupt file /x/data/1.lance".into() };
        assert_eq!(remedy(&anyhow::Error::new(damaged).context("searching")), Some(Remedy::CheckAndRepair));
        assert_eq!(remedy(&anyhow::anyhow!("permission denied")), None);
        // Damage is a type: an error that only says the words is not taken for it.
        let words = anyhow::anyhow!("the note says: {}", quire_index::DAMAGED);
        assert_eq!(remedy(&words), None);
    }

    /// The engine's own words name no command of a front end: each adds its own.
    #[test]
    fn no_engine_message_names_a_command() {
        let key = quire_vault::VaultError::KeyMissing { key_id: "k1".into(), entry: "quire collection x".into() };
        let lance = anyhow::Error::new(quire_index::Damaged { table: None, detail: "corrupt file /x/1.lance".into() });
        for said in [key.to_string(), crate::health::explained(&lance)] {
            assert!(!said.contains('`') && !said.contains("quire key") && !said.contains("quire repair"), "{said}");
        }
    }
}
