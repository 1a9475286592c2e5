//! Encryption at rest for a collection: the data key, what is derived from it, and where it is
//! kept.
//!
//! One random 256-bit data key per collection. From it, by HMAC-SHA256 with fixed labels:
//! - the **sealing key** (AES-256-GCM): document paths, chunk text, the ingestion queue and the
//!   conversation history are stored sealed, each value with a fresh 96-bit nonce and bound to
//!   its place (a context string given as associated data) so sealed values cannot be swapped;
//! - the **blinding key** (HMAC-SHA256): each normalised search term is indexed as a keyed tag,
//!   so the BM25 index reveals no words; content fingerprints (file and chunk hashes, document
//!   ids) are keyed the same way, so they confirm nothing about a known file to whoever has only
//!   the disk.
//!
//! Embedding vectors stay plain (nearest-neighbour search needs them): they leak something
//! about the text (ARCHITECTURE.md, "Encryption at rest").
//!
//! The data key lives in the OS keychain (`keychain`), or, where there is none, wrapped under a
//! passphrase (Argon2id) in the collection's `vault.json` (`store`). This module does no I/O;
//! `store` reads and writes the manifest and the keychain.

mod keychain;
mod passphrase;
pub mod store;

use std::sync::Arc;

use aes_gcm::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

pub use keychain::{keep_store_credentials, store_credentials, store_credentials_entry};
pub use passphrase::Secret;
pub use store::{api_token, write_private, KeyAccess, KeyInfo, KeyStore, Vault};

/// What can go wrong opening sealed data or getting a key; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error(
        "this library's key ({key_id}) is not in the OS keychain, so its documents cannot be read; \
         nothing was changed or deleted. Import your key backup or restore the keychain entry \"{entry}\""
    )]
    KeyMissing { key_id: String, entry: String },
    #[error(
        "no OS keychain is available here ({reason}). Quire keeps its encryption key there; without one, \
         protect the collection with a passphrase instead: set QUIRE_PASSPHRASE (or choose one in the app)"
    )]
    NoKeychain { reason: String },
    #[error("this library is protected by a passphrase: set QUIRE_PASSPHRASE (or enter it in the app) to open it")]
    PassphraseNeeded,
    #[error("wrong passphrase (nothing was changed)")]
    WrongPassphrase,
    #[error("stored data was sealed by key {0}, which this library no longer has; restore it from a key backup")]
    UnknownKey(String),
    #[error("a sealed value ({context}) failed to decrypt: the data is damaged or belongs elsewhere")]
    Damaged { context: String },
    #[error("the library is locked: unlock it to read or add documents")]
    Locked,
    #[error("{0}")]
    Other(String),
}

/// A 256-bit data key, wiped from memory when dropped.
pub struct DataKey(Zeroizing<[u8; 32]>);

impl DataKey {
    pub fn random() -> DataKey {
        let key = Aes256Gcm::generate_key(OsRng);
        let mut bytes = Zeroizing::new([0u8; 32]);
        bytes.copy_from_slice(&key);
        DataKey(bytes)
    }

    pub fn from_bytes(bytes: &[u8]) -> Option<DataKey> {
        let mut key = Zeroizing::new([0u8; 32]);
        (bytes.len() == 32).then(|| {
            key.copy_from_slice(bytes);
            DataKey(key)
        })
    }

    pub fn bytes(&self) -> &[u8; 32] {
        &self.0
    }

    fn derive(&self, label: &str) -> Zeroizing<[u8; 32]> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0[..]).expect("any key length");
        mac.update(label.as_bytes());
        let mut out = Zeroizing::new([0u8; 32]);
        out.copy_from_slice(&mac.finalize().into_bytes());
        out
    }

    /// A short public name of the key (8 hex digits), stored beside what it sealed.
    pub fn id(&self) -> String {
        hex::encode(&self.derive("quire/key-id/v1")[..4])
    }
}

/// The working keys derived from one data key.
pub struct Keys {
    id: String,
    cipher: Aes256Gcm,
    blind: Zeroizing<[u8; 32]>,
}

impl Keys {
    pub fn new(key: &DataKey) -> Keys {
        let seal = key.derive("quire/seal/v1");
        Keys {
            id: key.id(),
            cipher: Aes256Gcm::new_from_slice(&seal[..]).expect("32-byte key"),
            blind: key.derive("quire/blind/v1"),
        }
    }

    fn mac(&self, domain: &[u8], data: &[u8]) -> [u8; 32] {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.blind[..]).expect("any key length");
        mac.update(domain);
        mac.update(data);
        mac.finalize().into_bytes().into()
    }
}

/// Marks a sealed value: `~q1.<key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`.
const SEALED_PREFIX: &str = "~q1.";

/// How a collection's data is stored: sealed under its keys, or plain (a collection made before
/// encryption, until it is resealed; and tests comparing the two).
#[derive(Clone)]
pub enum Protection {
    Plain,
    Sealed(Arc<KeyRing>),
}

/// The current keys, and the keys being rotated away from (their data is resealed under the
/// current ones in the background; until then both open).
pub struct KeyRing {
    current: Keys,
    previous: Vec<Keys>,
}

impl KeyRing {
    pub fn new(current: &DataKey, previous: &[DataKey]) -> KeyRing {
        KeyRing { current: Keys::new(current), previous: previous.iter().map(Keys::new).collect() }
    }

    fn by_id(&self, id: &str) -> Option<&Keys> {
        std::iter::once(&self.current).chain(&self.previous).find(|k| k.id == id)
    }
}

impl std::fmt::Debug for Protection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Protection({})", self.key_id())
    }
}

impl Protection {
    pub fn sealed(current: &DataKey) -> Protection {
        Protection::Sealed(Arc::new(KeyRing::new(current, &[])))
    }

    pub fn is_sealed(&self) -> bool {
        matches!(self, Protection::Sealed(_))
    }

    /// Whether data sealed under the key `id` opens here.
    pub fn holds_key(&self, id: &str) -> bool {
        match self {
            Protection::Plain => false,
            Protection::Sealed(ring) => ring.by_id(id).is_some(),
        }
    }

    /// The id of the key new data is sealed with, or "plain".
    pub fn key_id(&self) -> &str {
        match self {
            Protection::Plain => "plain",
            Protection::Sealed(ring) => &ring.current.id,
        }
    }

    /// Seals `plain` for the place named by `context` (plain collections store it as it is).
    pub fn seal(&self, context: &str, plain: &str) -> String {
        let Protection::Sealed(ring) = self else { return plain.to_owned() };
        let nonce = Aes256Gcm::generate_nonce(&mut OsRng);
        let sealed = ring
            .current
            .cipher
            .encrypt(&nonce, Payload { msg: plain.as_bytes(), aad: context.as_bytes() })
            .expect("AES-GCM encryption of an in-memory buffer does not fail");
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("{SEALED_PREFIX}{}.{}", ring.current.id, B64.encode(bytes))
    }

    /// The plain text of a stored value. Values stored before the collection was sealed are
    /// plain and come back as they are.
    pub fn open(&self, context: &str, stored: &str) -> Result<String, VaultError> {
        let Some(rest) = stored.strip_prefix(SEALED_PREFIX) else { return Ok(stored.to_owned()) };
        let damaged = || VaultError::Damaged { context: context.to_owned() };
        let (key_id, body) = rest.split_once('.').ok_or_else(damaged)?;
        let Protection::Sealed(ring) = self else { return Err(VaultError::Locked) };
        let keys = ring.by_id(key_id).ok_or_else(|| VaultError::UnknownKey(key_id.to_owned()))?;
        let bytes = B64.decode(body).map_err(|_| damaged())?;
        if bytes.len() < 12 + 16 {
            return Err(damaged());
        }
        let (nonce, sealed) = bytes.split_at(12);
        let plain = keys
            .cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: sealed, aad: context.as_bytes() })
            .map_err(|_| damaged())?;
        String::from_utf8(plain).map_err(|_| damaged())
    }

    /// How every value sealed under the current key starts (`None` for plain protection), so a
    /// table can be asked which rows are sealed under another key.
    pub fn current_prefix(&self) -> Option<String> {
        match self {
            Protection::Plain => None,
            Protection::Sealed(ring) => Some(format!("{SEALED_PREFIX}{}.", ring.current.id)),
        }
    }

    /// The id of the key a stored value was sealed with (`None`: stored plain).
    pub fn sealed_by(stored: &str) -> Option<&str> {
        stored.strip_prefix(SEALED_PREFIX)?.split_once('.').map(|(id, _)| id)
    }

    /// A content fingerprint (hex, 64 digits): SHA-256 when plain, keyed HMAC when sealed, so
    /// a fingerprint on disk cannot be matched against a known file's hash.
    pub fn fingerprint(&self, bytes: &[u8]) -> String {
        match self {
            Protection::Plain => hex::encode(Sha256::digest(bytes)),
            Protection::Sealed(ring) => hex::encode(ring.current.mac(b"quire/fingerprint\0", bytes)),
        }
    }

    /// The token a normalised search term is indexed and searched under: the term itself when
    /// plain, a keyed tag (80 bits, hex) when sealed. The same term always gives the same tag
    /// under one key, so BM25 statistics (and rankings) are those of the plain words.
    pub fn blind(&self, term: &str) -> String {
        match self {
            Protection::Plain => term.to_owned(),
            Protection::Sealed(ring) => hex::encode(&ring.current.mac(b"quire/term\0", term.as_bytes())[..10]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_in_their_place_and_under_their_key() {
        let key = DataKey::random();
        let p = Protection::sealed(&key);
        let sealed = p.seal("chunk:a:1", "the patient's blood pressure");
        assert!(!sealed.contains("blood"));
        assert_eq!(Protection::sealed_by(&sealed), Some(key.id().as_str()));
        assert_eq!(p.open("chunk:a:1", &sealed).unwrap(), "the patient's blood pressure");
        // Same plain text, fresh nonce: different ciphertext.
        assert_ne!(p.seal("chunk:a:1", "x"), p.seal("chunk:a:1", "x"));
        // Moved to another row: refused.
        assert!(matches!(p.open("chunk:a:2", &sealed), Err(VaultError::Damaged { .. })));
        // One flipped character: refused.
        let mut bad = sealed.clone().into_bytes();
        let last = bad.len() - 3;
        bad[last] = if bad[last] == b'A' { b'B' } else { b'A' };
        assert!(p.open("chunk:a:1", std::str::from_utf8(&bad).unwrap()).is_err());
        // Another key: unknown; plain protection: locked.
        let other = Protection::sealed(&DataKey::random());
        assert!(matches!(other.open("chunk:a:1", &sealed), Err(VaultError::UnknownKey(_))));
        assert!(matches!(Protection::Plain.open("chunk:a:1", &sealed), Err(VaultError::Locked)));
        // Values stored before sealing come back as they are.
        assert_eq!(p.open("x", "plain words").unwrap(), "plain words");
    }

    #[test]
    fn a_rotated_ring_opens_old_and_new_and_seals_new() {
        let (old, new) = (DataKey::random(), DataKey::random());
        let before = Protection::sealed(&old).seal("c", "text");
        let ring = Protection::Sealed(Arc::new(KeyRing::new(&new, &[DataKey::from_bytes(old.bytes()).unwrap()])));
        assert_eq!(ring.open("c", &before).unwrap(), "text");
        assert_eq!(Protection::sealed_by(&ring.seal("c", "text")), Some(new.id().as_str()));
    }

    #[test]
    fn blind_terms_are_keyed_stable_and_reveal_nothing() {
        let (a, b) = (Protection::sealed(&DataKey::random()), Protection::sealed(&DataKey::random()));
        assert_eq!(a.blind("diabet"), a.blind("diabet"));
        assert_ne!(a.blind("diabet"), a.blind("diabetes"));
        assert_ne!(a.blind("diabet"), b.blind("diabet"));
        assert_eq!(a.blind("diabet").len(), 20);
        assert!(a.blind("diabet").chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(Protection::Plain.blind("diabet"), "diabet");
        // Fingerprints: SHA-256 when plain (the known test vector), keyed otherwise.
        assert_eq!(
            Protection::Plain.fingerprint(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(a.fingerprint(b"abc"), Protection::Plain.fingerprint(b"abc"));
        assert_ne!(a.fingerprint(b"abc"), b.fingerprint(b"abc"));
    }
}
