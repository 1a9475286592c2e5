//! A library shared with other computers: its tables in a store (an S3 bucket, such as a Garage
//! cluster on a NAS, or a shared folder), named by `store.json` in the collection's folder with
//! this computer's writer id. Each computer writes only its own tables there and reads every
//! computer's (`quire_index::SharedStore`). The store's access key and secret are kept in the OS
//! keychain (or, on a computer without one, read from `QUIRE_S3_ACCESS_KEY_ID` and
//! `QUIRE_S3_SECRET_ACCESS_KEY` at each run), never in a file. The collection's key, the
//! ingestion queue and the history stay on each computer: the key reaches another computer only
//! by its backup (`quire key export`, `quire key import`), before that computer attaches.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use quire_index::{KnowledgeBase, Protection, SharedStore};
use quire_vault::Secret;

/// The file in a collection's folder that says where its shared library is.
pub const STORE_LINK: &str = "store.json";

/// The environment variables read for a store's credentials where the keychain has none.
pub const ACCESS_KEY_ID_VAR: &str = "QUIRE_S3_ACCESS_KEY_ID";
pub const SECRET_ACCESS_KEY_VAR: &str = "QUIRE_S3_SECRET_ACCESS_KEY";

/// Where a shared library lives, as `store.json` keeps it (no credentials).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreLink {
    /// `s3://bucket/prefix`, or a shared folder's path.
    pub url: String,
    /// The S3 endpoint (a Garage node, `http://nas.local:3900`); none for a folder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The S3 region (Garage's own default is `garage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// This computer's writer id: its tables in the store are `documents-<writer>`, `chunks-<writer>`.
    pub writer: String,
}

/// Where a store is, as a person gives it: the URL (or folder), endpoint and region.
#[derive(Debug, Clone, Default)]
pub struct StorePlace {
    pub url: String,
    pub endpoint: Option<String>,
    pub region: Option<String>,
}

/// An access key id and its secret.
pub struct StoreCredentials {
    pub key_id: String,
    pub secret: Secret,
}

impl StoreLink {
    /// The link in `data_dir`, if the collection's library is shared.
    pub fn read(data_dir: &Path) -> Result<Option<StoreLink>> {
        let path = data_dir.join(STORE_LINK);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(serde_json::from_str(&text).with_context(|| {
                format!("{} is damaged; attach the store again (quire library attach)", path.display())
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    fn is_s3(&self) -> bool {
        self.url.starts_with("s3://")
    }

    /// The store with its credentials (the environment's or the keychain's), for the index.
    pub(crate) fn shared_store(&self) -> Result<SharedStore> {
        let credentials = if self.is_s3() { Some(credentials_for(&self.url)?) } else { None };
        Ok(self.store_with(credentials.as_ref()))
    }

    /// The store reached with `credentials`.
    fn store_with(&self, credentials: Option<&StoreCredentials>) -> SharedStore {
        SharedStore { url: self.url.clone(), options: self.options(credentials), writer: self.writer.clone() }
    }

    /// LanceDB's storage options: path-style requests (Garage serves no per-bucket host names),
    /// plain HTTP where the endpoint says so, and retries bounded to seconds rather than
    /// LanceDB's default three minutes (opening gives up after `STORE_ANSWERS_WITHIN`).
    fn options(&self, credentials: Option<&StoreCredentials>) -> Vec<(String, String)> {
        let mut options = Vec::new();
        let mut set = |k: &str, v: &str| options.push((k.to_owned(), v.to_owned()));
        if !self.is_s3() {
            return options;
        }
        if let Some(endpoint) = &self.endpoint {
            set("aws_endpoint", endpoint);
            if endpoint.starts_with("http://") {
                set("allow_http", "true");
            }
        }
        set("aws_region", self.region.as_deref().unwrap_or("us-east-1"));
        set("aws_virtual_hosted_style_request", "false");
        if let Some(c) = credentials {
            set("aws_access_key_id", &c.key_id);
            set("aws_secret_access_key", c.secret.expose());
        }
        set("connect_timeout", "2s");
        set("client_max_retries", "2");
        set("client_retry_timeout", "3");
        options
    }
}

/// The store at `place` as `writer` would write it, with the credentials the environment or the
/// keychain holds for it (for the benchmarks: a library's own store comes from its `store.json`).
pub fn shared_store_at(place: StorePlace, writer: &str) -> Result<SharedStore> {
    let link = StoreLink {
        url: normalised_url(&place.url)?,
        endpoint: place.endpoint,
        region: place.region,
        writer: writer.into(),
    };
    link.shared_store()
}

/// A store's credentials: the environment's where both variables are set, else the keychain's.
fn credentials_for(url: &str) -> Result<StoreCredentials> {
    if let Some(c) = credentials_from_environment() {
        return Ok(c);
    }
    match quire_vault::store_credentials(url) {
        Ok(Some((key_id, secret))) => Ok(StoreCredentials { key_id, secret }),
        Ok(None) => anyhow::bail!(
            "the credentials of the store {url} are not in this computer's keychain (entry Quire / {}); attach \
             the store again (quire library attach), or set {ACCESS_KEY_ID_VAR} and {SECRET_ACCESS_KEY_VAR}",
            quire_vault::store_credentials_entry(url)
        ),
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "cannot read the credentials of the store {url} from the keychain; set {ACCESS_KEY_ID_VAR} and \
             {SECRET_ACCESS_KEY_VAR} instead"
        ))),
    }
}

fn credentials_from_environment() -> Option<StoreCredentials> {
    let key_id = std::env::var(ACCESS_KEY_ID_VAR).ok().filter(|v| !v.is_empty())?;
    let secret = std::env::var(SECRET_ACCESS_KEY_VAR).ok().filter(|v| !v.is_empty())?;
    Some(StoreCredentials { key_id, secret: Secret::new(secret) })
}

/// Makes the collection in `data_dir` a shared library at `place`: checks that the store answers
/// (within `STORE_ANSWERS_WITHIN`) with these credentials, keeps them in the keychain (unless
/// they came from the environment), and writes `store.json` with a new writer id. Refused, with
/// nothing changed, where the collection already holds a library of its own or is attached, and
/// where the store already holds another computer's documents but this collection has no key
/// yet (its key backup is to be imported first).
pub async fn attach_store(
    data_dir: &Path,
    place: StorePlace,
    credentials: Option<StoreCredentials>,
) -> Result<StoreLink> {
    if let Some(link) = StoreLink::read(data_dir)? {
        anyhow::bail!("this library is already kept in {}; nothing was changed", link.url);
    }
    if KnowledgeBase::made_in(data_dir) {
        anyhow::bail!(
            "this library already holds documents on this computer ({}); a store can be attached only to a new \
             library (an empty QUIRE_HOME). Nothing was changed",
            data_dir.display()
        );
    }
    let url = normalised_url(&place.url)?;
    let s3 = url.starts_with("s3://");
    let from_environment = credentials.is_none();
    let credentials = match credentials.or_else(credentials_from_environment) {
        Some(c) => Some(c),
        None if s3 => anyhow::bail!(
            "a store at an s3:// URL needs an access key: give its id and secret (or set {ACCESS_KEY_ID_VAR} and \
             {SECRET_ACCESS_KEY_VAR})"
        ),
        None => None,
    };
    let mut link = StoreLink {
        url: url.clone(),
        endpoint: place.endpoint.filter(|e| !e.is_empty()),
        region: place.region.filter(|r| !r.is_empty()),
        writer: new_writer_id(),
    };
    let store = link.store_with(credentials.as_ref());
    let writers = tokio::time::timeout(quire_index::STORE_ANSWERS_WITHIN, quire_index::writers_in_store(&store))
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "the store {url} did not answer within {} s; check the endpoint and that the store is running. \
                 Nothing was changed",
                quire_index::STORE_ANSWERS_WITHIN.as_secs()
            )
        })?
        .with_context(|| {
            format!("the store {url} cannot be used; check the endpoint, bucket and key. Nothing was changed")
        })?;
    if !writers.is_empty() && !quire_vault::Vault::exists(data_dir) {
        anyhow::bail!(
            "the store {url} already holds a library ({} computer(s) write to it), sealed under its key: import \
             that key's backup here first (quire key export on a computer that uses it, then quire key import \
             FILE here), then attach again. Nothing was changed",
            writers.len()
        );
    }
    // A writer id already in the store (a copied home folder) would make two writers of one table.
    while writers.contains(&link.writer) {
        link.writer = new_writer_id();
    }
    if let (true, false, Some(c)) = (s3, from_environment, &credentials) {
        quire_vault::keep_store_credentials(&url, &c.key_id, &c.secret).map_err(|e| {
            anyhow::Error::new(e).context(format!(
                "cannot keep the store's credentials in this computer's keychain; set {ACCESS_KEY_ID_VAR} and \
                 {SECRET_ACCESS_KEY_VAR} for each run instead. Nothing was changed"
            ))
        })?;
    }
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create the data folder {}", data_dir.display()))?;
    let text = serde_json::to_string_pretty(&link)?;
    quire_vault::write_private(&data_dir.join(STORE_LINK), text.as_bytes())
        .with_context(|| format!("cannot write {}", data_dir.join(STORE_LINK).display()))?;
    Ok(link)
}

/// `s3://bucket[/prefix]` without a trailing slash, or a folder's absolute path (which must exist).
fn normalised_url(url: &str) -> Result<String> {
    let url = url.trim().trim_end_matches('/');
    if let Some(rest) = url.strip_prefix("s3://") {
        let bucket = rest.split('/').next().unwrap_or("");
        anyhow::ensure!(!bucket.is_empty(), "an S3 URL names its bucket: s3://bucket/prefix (not \"{url}\")");
        return Ok(url.to_owned());
    }
    anyhow::ensure!(
        !url.contains("://"),
        "a shared library lives at an s3://bucket/prefix URL or in a shared folder (not \"{url}\")"
    );
    let folder = PathBuf::from(url);
    anyhow::ensure!(
        folder.is_absolute() && folder.is_dir(),
        "the shared folder {url} does not exist (give the absolute path of a folder every computer reaches)"
    );
    Ok(folder.to_str().context("the shared folder's path is not valid UTF-8")?.to_owned())
}

/// 12 random hex digits: unique among a library's computers in practice, checked against the
/// writers already in the store anyway.
fn new_writer_id() -> String {
    quire_vault::DataKey::random().bytes()[..6].iter().map(|b| format!("{b:02x}")).collect()
}

impl crate::Engine {
    /// The writer ids of the other computers writing this shared library (none for a library
    /// of one's own).
    pub async fn other_writers(&self) -> Result<Vec<String>> {
        let Some(link) = self.store_link() else { return Ok(Vec::new()) };
        let mut writers = quire_index::writers_in_store(&link.shared_store()?).await?;
        writers.retain(|w| *w != link.writer);
        Ok(writers)
    }
}

/// Refuses a shared library whose other computers sealed documents under keys this computer
/// lacks: each of their passages would fail to open in every search.
pub(crate) async fn refuse_keys_missing(kb: &KnowledgeBase, protection: &Protection) -> Result<()> {
    let missing: Vec<String> =
        kb.keys_of_other_writers().await?.into_iter().filter(|k| !protection.holds_key(k)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(crate::Remedied {
        problem: format!(
            "other computers sealed this shared library's documents under key {}, which this computer does not \
             hold; nothing was changed. Import that key's backup (quire key export there, quire key import here)",
            missing.join(", ")
        ),
        remedy: crate::Remedy::ImportKeyBackup,
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_an_s3_bucket_or_an_existing_folder() {
        assert_eq!(normalised_url("s3://quire/team/").unwrap(), "s3://quire/team");
        assert!(normalised_url("s3:///team").is_err());
        assert!(normalised_url("https://example.com/x").is_err());
        assert!(normalised_url("/no/such/folder/anywhere").is_err());
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(normalised_url(dir.path().to_str().unwrap()).unwrap(), dir.path().to_str().unwrap());
    }

    #[test]
    fn the_credentials_go_to_the_store_options_and_never_to_the_link() {
        let link = StoreLink {
            url: "s3://quire/team".into(),
            endpoint: Some("http://127.0.0.1:3910".into()),
            region: Some("garage".into()),
            writer: new_writer_id(),
        };
        let c = StoreCredentials { key_id: "GKid".into(), secret: Secret::new("s3cr3t") };
        let options = link.options(Some(&c));
        let get = |k: &str| options.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("aws_secret_access_key"), Some("s3cr3t"));
        assert_eq!(get("allow_http"), Some("true"));
        assert_eq!(get("aws_region"), Some("garage"));
        let text = serde_json::to_string(&link).unwrap();
        assert!(!text.contains("s3cr3t") && !text.contains("GKid"));
        assert_eq!(link.writer.len(), 12);
        assert!(link.writer.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
