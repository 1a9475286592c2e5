//! Keys wrapped under a passphrase: Argon2id stretches the passphrase into a key-encryption key,
//! which seals the data key with AES-256-GCM. Used where there is no OS keychain, and for key
//! backups.

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use crate::{DataKey, VaultError};

/// A passphrase, wiped from memory when dropped.
#[derive(Clone)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(Zeroizing::new(s.into()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// A data key sealed under a passphrase, with the Argon2id parameters that open it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WrappedKey {
    pub kdf: String,
    pub memory_kib: u32,
    pub iterations: u32,
    pub lanes: u32,
    pub salt: String,
    /// base64(nonce ‖ ciphertext ‖ tag).
    pub sealed: String,
}

/// OWASP's first Argon2id choice (46 MiB would do; 64 MiB, 3 passes): ~0.3 s here.
const MEMORY_KIB: u32 = 64 * 1024;
const ITERATIONS: u32 = 3;
const LANES: u32 = 1;

fn stretch(
    passphrase: &Secret,
    salt: &[u8],
    memory_kib: u32,
    iterations: u32,
    lanes: u32,
) -> Result<Zeroizing<[u8; 32]>, VaultError> {
    let params = Params::new(memory_kib, iterations, lanes, Some(32))
        .map_err(|e| VaultError::Other(format!("bad key parameters: {e}")))?;
    let mut out = Zeroizing::new([0u8; 32]);
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password_into(passphrase.expose().as_bytes(), salt, &mut out[..])
        .map_err(|e| VaultError::Other(format!("cannot derive a key from the passphrase: {e}")))?;
    Ok(out)
}

/// Seals `key` under `passphrase`; `purpose` binds it to its use (a collection, a backup).
pub fn wrap(key: &DataKey, passphrase: &Secret, purpose: &str) -> Result<WrappedKey, VaultError> {
    if passphrase.expose().is_empty() {
        return Err(VaultError::Other("the passphrase is empty".into()));
    }
    let mut salt = [0u8; 16];
    OsRng.fill_bytes(&mut salt);
    let kek = stretch(passphrase, &salt, MEMORY_KIB, ITERATIONS, LANES)?;
    let cipher = Aes256Gcm::new_from_slice(&kek[..]).expect("32-byte key");
    let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
    let sealed = cipher
        .encrypt(&nonce, Payload { msg: &key.bytes()[..], aad: purpose.as_bytes() })
        .expect("in-memory encryption");
    let mut bytes = nonce.to_vec();
    bytes.extend_from_slice(&sealed);
    Ok(WrappedKey {
        kdf: "argon2id".into(),
        memory_kib: MEMORY_KIB,
        iterations: ITERATIONS,
        lanes: LANES,
        salt: B64.encode(salt),
        sealed: B64.encode(bytes),
    })
}

/// Opens a wrapped key; a wrong passphrase is `WrongPassphrase`.
pub fn unwrap(wrapped: &WrappedKey, passphrase: &Secret, purpose: &str) -> Result<DataKey, VaultError> {
    let malformed = || VaultError::Other("the wrapped key is malformed".into());
    if wrapped.kdf != "argon2id" {
        return Err(VaultError::Other(format!("unknown key derivation {}", wrapped.kdf)));
    }
    let salt = B64.decode(&wrapped.salt).map_err(|_| malformed())?;
    let bytes = B64.decode(&wrapped.sealed).map_err(|_| malformed())?;
    if bytes.len() != 12 + 32 + 16 {
        return Err(malformed());
    }
    let kek = stretch(passphrase, &salt, wrapped.memory_kib, wrapped.iterations, wrapped.lanes)?;
    let cipher = Aes256Gcm::new_from_slice(&kek[..]).expect("32-byte key");
    let plain = Zeroizing::new(
        cipher
            .decrypt(Nonce::from_slice(&bytes[..12]), Payload { msg: &bytes[12..], aad: purpose.as_bytes() })
            .map_err(|_| VaultError::WrongPassphrase)?,
    );
    DataKey::from_bytes(&plain).ok_or_else(malformed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrapped_key_opens_with_its_passphrase_and_purpose_only() {
        let key = DataKey::random();
        let wrapped = wrap(&key, &Secret::new("correct horse"), "collection x").unwrap();
        assert!(!wrapped.sealed.is_empty());
        let back = unwrap(&wrapped, &Secret::new("correct horse"), "collection x").unwrap();
        assert_eq!(back.bytes(), key.bytes());
        assert!(matches!(
            unwrap(&wrapped, &Secret::new("wrong horse"), "collection x"),
            Err(VaultError::WrongPassphrase)
        ));
        assert!(matches!(
            unwrap(&wrapped, &Secret::new("correct horse"), "collection y"),
            Err(VaultError::WrongPassphrase)
        ));
        assert!(wrap(&key, &Secret::new(""), "x").is_err());
    }
}
