//! The OS keychain, through the keyring crate: macOS Keychain, Windows Credential Manager, the
//! Secret Service (GNOME Keyring, KWallet) on Linux. The only place Quire talks to it; which
//! backend is compiled in is chosen per OS in Cargo.toml, not here.

use crate::{DataKey, VaultError};

const SERVICE: &str = "Quire";

/// The keychain entry's name, shown to people in their keychain app.
pub fn entry_name(collection: &str, key_id: &str) -> String {
    format!("collection {collection} key {key_id}")
}

fn entry(collection: &str, key_id: &str) -> Result<keyring::Entry, VaultError> {
    keyring::Entry::new(SERVICE, &entry_name(collection, key_id)).map_err(unavailable)
}

fn unavailable(e: keyring::Error) -> VaultError {
    VaultError::NoKeychain { reason: e.to_string() }
}

pub fn store(collection: &str, key: &DataKey) -> Result<(), VaultError> {
    let secret = zeroize::Zeroizing::new(hex::encode(key.bytes()));
    entry(collection, &key.id())?.set_password(&secret).map_err(unavailable)
}

/// The key, `None` when the keychain works but has no such entry.
pub fn load(collection: &str, key_id: &str) -> Result<Option<DataKey>, VaultError> {
    match entry(collection, key_id)?.get_password() {
        Ok(secret) => {
            let secret = zeroize::Zeroizing::new(secret);
            let bytes = zeroize::Zeroizing::new(hex::decode(secret.as_bytes()).unwrap_or_default());
            let key = DataKey::from_bytes(&bytes).filter(|k| k.id() == key_id).ok_or_else(|| {
                VaultError::Other(format!(
                    "the keychain entry \"{}\" does not hold this key",
                    entry_name(collection, key_id)
                ))
            })?;
            Ok(Some(key))
        }
        Err(keyring::Error::NoEntry) => Ok(None),
        Err(e) => Err(unavailable(e)),
    }
}

/// The local API's bearer token in the keychain: the one there, or a new random one stored there.
pub(crate) fn api_token() -> Result<String, VaultError> {
    let entry = keyring::Entry::new(SERVICE, "local API token").map_err(unavailable)?;
    match entry.get_password() {
        Ok(token) if token.len() >= 32 => Ok(token),
        Ok(_) | Err(keyring::Error::NoEntry) => {
            let token = hex::encode(DataKey::random().bytes());
            entry.set_password(&token).map_err(unavailable)?;
            Ok(token)
        }
        Err(e) => Err(unavailable(e)),
    }
}

/// The keychain entry holding the credentials of the store at `url` (an S3 URL).
pub fn store_credentials_entry(url: &str) -> String {
    format!("store {url}")
}

/// Keeps a store's access key id and secret in the keychain (one entry, both lines).
pub fn keep_store_credentials(url: &str, key_id: &str, secret: &crate::Secret) -> Result<(), VaultError> {
    let entry = keyring::Entry::new(SERVICE, &store_credentials_entry(url)).map_err(unavailable)?;
    let both = zeroize::Zeroizing::new(format!("{key_id}\n{}", secret.expose()));
    entry.set_password(&both).map_err(unavailable)
}

/// A store's access key id and secret from the keychain; `None` when it has no such entry.
pub fn store_credentials(url: &str) -> Result<Option<(String, crate::Secret)>, VaultError> {
    let entry = keyring::Entry::new(SERVICE, &store_credentials_entry(url)).map_err(unavailable)?;
    match entry.get_password() {
        Ok(both) => {
            let both = zeroize::Zeroizing::new(both);
            let (key_id, secret) = both.split_once('\n').ok_or_else(|| {
                VaultError::Other(format!(
                    "the keychain entry \"{}\" is not a key id and a secret",
                    store_credentials_entry(url)
                ))
            })?;
            Ok(Some((key_id.to_owned(), crate::Secret::new(secret))))
        }
        Err(keyring::Error::NoEntry) => Ok(None),
        Err(e) => Err(unavailable(e)),
    }
}

pub fn delete(collection: &str, key_id: &str) -> Result<(), VaultError> {
    match entry(collection, key_id)?.delete_credential() {
        Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
        Err(e) => Err(unavailable(e)),
    }
}
