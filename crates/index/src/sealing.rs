//! Encryption at rest inside the tables: the key ring rows are sealed under, keyed fingerprints
//! (document ids, chunk hashes), blind terms for BM25, where each sealed value belongs, and
//! resealing what a key rotation (or an older, unencrypted Quire) left under another key.

use anyhow::{Context, Result};
use arrow_array::RecordBatch;
use futures::TryStreamExt;
use lance_index::scalar::inverted::tokenizer::document_tokenizer::LanceTokenizer;
use lance_tokenizer::TokenStream;
use lancedb::index::scalar::FtsIndexBuilder;
use lancedb::query::{ExecutableQuery, QueryBase, Select};

use crate::schema::str_col;
use crate::{doc_id_filter, sql_str, DocumentRecord, KnowledgeBase, Protection};

impl KnowledgeBase {
    pub fn protection(&self) -> Protection {
        self.protection.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Seals what is written from now on under `protection` (a rotation's new key ring).
    pub fn set_protection(&self, protection: Protection) {
        *self.protection.write().unwrap_or_else(|p| p.into_inner()) = protection;
    }

    /// A document's id: a keyed fingerprint of its path (16 hex digits).
    pub fn document_id(&self, path: &str) -> String {
        self.protection().fingerprint(path.as_bytes())[..16].to_owned()
    }

    /// A chunk text's fingerprint, the key its vector is reused by.
    pub fn chunk_hash(&self, text: &str) -> String {
        self.protection().fingerprint(text.as_bytes())
    }

    /// The blinded terms BM25 indexes for `text` (or searches for, given a query), space-separated:
    /// its words as the English analyser reads them, then, for a text in another language with a
    /// stemmer, the words that language's analyser reads otherwise (`terms`).
    pub fn blind_terms(&self, text: &str) -> String {
        self.blind_terms_in(text, crate::terms::stemming_language(text))
    }

    /// `blind_terms` of `text` read in `language` (a `terms::stemming_language`) besides English:
    /// a word of a longer text, read in the text's language.
    pub fn blind_terms_in(&self, text: &str, language: Option<&'static str>) -> String {
        let prepared = crate::terms::prepared(text);
        let mut terms = self.analysed(ENGLISH, &prepared);
        if let Some(language) = language {
            let english: std::collections::HashSet<String> = terms.iter().cloned().collect();
            terms.extend(self.analysed(language, &prepared).into_iter().filter(|t| !english.contains(t)));
        }
        let protection = self.protection();
        let mut out = String::with_capacity(text.len());
        for term in &terms {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&protection.blind(term));
        }
        out
    }

    /// Whether `word` is one `language`'s analyser leaves out ("und", "der", "les"): a word that
    /// says nothing a document could hold.
    pub fn is_stop_word(&self, word: &str, language: &'static str) -> bool {
        self.analysed(language, &crate::terms::prepared(word)).is_empty()
    }

    /// `text`'s words as `language`'s analyser reads them (each analyser made once).
    fn analysed(&self, language: &'static str, text: &str) -> Vec<String> {
        let mut analysers = self.analysers.lock().unwrap_or_else(|p| p.into_inner());
        if !analysers.contains_key(language) {
            match analyser(language) {
                Ok(made) => {
                    analysers.insert(language, made);
                }
                // Never for the languages `terms` names: the words are then read as English.
                Err(_) => return tokens(english(&mut analysers), text),
            }
        }
        tokens(analysers.get_mut(language).expect("made above").as_mut(), text)
    }

    /// Documents whose blind terms an earlier reading of text made (`terms::TERMS_VERSION`) and
    /// this one makes differently: those holding Chinese, Japanese or Korean text, compatibility
    /// forms, or text in a language with a stemmer of its own. One pass over every chunk, its
    /// terms made again and compared with those stored; none once the library is marked as read
    /// by this version (`mark_terms_current`), as a new library is from the start.
    pub async fn documents_to_reanalyse(&self) -> Result<Vec<DocumentRecord>> {
        crate::damage::at_boundary(async move {
            if self.terms_are_current() {
                return Ok(Vec::new());
            }
            let batches: Vec<RecordBatch> = self
                .chunks
                .query()
                .select(Select::columns(&["chunk_id", "doc_id", "text", "terms"]))
                .execute()
                .await?
                .try_collect()
                .await?;
            let protection = self.protection();
            let mut differing = std::collections::BTreeSet::new();
            for b in &batches {
                let (ids, docs) = (str_col(b, "chunk_id")?, str_col(b, "doc_id")?);
                let (texts, terms) = (str_col(b, "text")?, str_col(b, "terms")?);
                for i in 0..b.num_rows() {
                    if differing.contains(docs.value(i)) {
                        continue;
                    }
                    let text = protection.open(&text_context(ids.value(i)), texts.value(i))?;
                    if self.blind_terms(&text) != terms.value(i) {
                        differing.insert(docs.value(i).to_owned());
                    }
                }
            }
            Ok(self.documents().await?.into_iter().filter(|d| differing.contains(&d.doc_id)).collect())
        })
        .await
    }

    /// Makes a document's blind terms again, by the current reading of its chunks' text.
    pub async fn reanalyse(&self, doc: &DocumentRecord) -> Result<()> {
        crate::damage::at_boundary(async move {
            let chunks = self.chunk_records_of(&doc.doc_id).await?;
            self.commit(std::slice::from_ref(doc), &chunks).await
        })
        .await
    }

    /// Records that every document's terms are made by the current reading.
    pub fn mark_terms_current(&self) -> Result<()> {
        let file = self.terms_version_file()?;
        std::fs::write(&file, format!("{}\n", crate::terms::TERMS_VERSION))
            .with_context(|| format!("cannot write {}", file.display()))
    }

    /// Whether the library's terms are all made by this version's reading (its record says so).
    pub fn terms_are_current(&self) -> bool {
        self.terms_version() >= crate::terms::TERMS_VERSION
    }

    /// The reading that made the library's terms: 1 (before there was a record of it) where
    /// the record is missing or unreadable.
    fn terms_version(&self) -> u32 {
        let file = self.terms_version_file();
        file.ok().and_then(|f| std::fs::read_to_string(f).ok()).and_then(|t| t.trim().parse().ok()).unwrap_or(1)
    }

    fn terms_version_file(&self) -> Result<std::path::PathBuf> {
        Ok(self.writes_lock.parent().context("the data folder")?.join("terms-version"))
    }

    /// Documents not sealed under the current key: made before encryption, or under a key being
    /// rotated away from. `reseal` each to finish the migration or rotation. With `thorough`,
    /// also the documents any of whose chunk rows is sealed under another key (a scan of every
    /// chunk's text: done while a rotation is under way, not at every start).
    pub async fn documents_to_reseal(&self, thorough: bool) -> Result<Vec<DocumentRecord>> {
        crate::damage::at_boundary(async move {
            let mut docs = self.query_documents(Some(self.documents_under_other_keys())).await?;
            if thorough {
                let listed: std::collections::HashSet<String> = docs.iter().map(|d| d.doc_id.clone()).collect();
                let mut owners: Vec<String> = self
                    .chunk_doc_ids(self.chunks_under_other_keys())
                    .await?
                    .into_iter()
                    .filter(|id| !listed.contains(id))
                    .collect();
                owners.sort();
                owners.dedup();
                for group in owners.chunks(500) {
                    let ids: Vec<&str> = group.iter().map(String::as_str).collect();
                    docs.extend(self.query_documents(Some(doc_id_filter(&ids))).await?);
                }
            }
            Ok(docs)
        })
        .await
    }

    /// Rows not sealed under the current key: document rows (by `sealed_by`) and chunk rows (by
    /// their text). A key may be forgotten only when this is zero.
    pub async fn rows_under_other_keys(&self) -> Result<usize> {
        crate::damage::at_boundary(async move {
            let Some(chunks) = self.chunks_under_other_keys() else { return Ok(0) };
            Ok(self.documents.count_rows(Some(self.documents_under_other_keys())).await?
                + self.chunks.count_rows(Some(chunks)).await?)
        })
        .await
    }

    /// The filter for document rows not sealed under the current key.
    pub(crate) fn documents_under_other_keys(&self) -> String {
        format!("sealed_by IS NULL OR sealed_by != {}", sql_str(self.protection().key_id()))
    }

    /// The filter for chunk rows whose text is not sealed under the current key (`None` when
    /// the collection is not sealed).
    pub(crate) fn chunks_under_other_keys(&self) -> Option<String> {
        let prefix = self.protection().current_prefix()?;
        Some(format!("text NOT LIKE {}", sql_str(&format!("{prefix}%"))))
    }

    /// Rewrites a document and its chunks under the current key: new id and chunk hashes (keyed
    /// fingerprints), text and path sealed anew, blind terms made again; vectors kept. The new
    /// rows are committed before the old ones go, so an interruption leaves the document
    /// readable (under the old key, or both), and doing it again finishes it.
    pub async fn reseal(&self, doc: &DocumentRecord) -> Result<()> {
        crate::damage::at_boundary(async move {
            let old_id = doc.doc_id.clone();
            let new_id = self.document_id(&doc.path);
            let mut chunks = self.chunk_records_of(&old_id).await?;
            for c in &mut chunks {
                c.doc_id = new_id.clone();
                c.hash = self.chunk_hash(&c.text);
            }
            let new_doc = DocumentRecord { doc_id: new_id.clone(), ..doc.clone() };
            self.commit(std::slice::from_ref(&new_doc), &chunks).await?;
            if new_id != old_id {
                self.remove_documents(&[&old_id]).await?;
            }
            Ok(())
        })
        .await
    }
}

/// Where a sealed value belongs (its associated data): a value moved elsewhere fails to open.
pub(crate) fn path_context(doc_id: &str) -> String {
    format!("document path {doc_id}")
}

pub(crate) fn hash_context(doc_id: &str) -> String {
    format!("document hash {doc_id}")
}

pub(crate) fn text_context(chunk_id: &str) -> String {
    format!("chunk text {chunk_id}")
}

/// The analyser keyword search has always used (LanceDB's default: English stems and stop words).
pub(crate) const ENGLISH: &str = "English";

/// LanceDB's analyser for `language`: its stemmer, and its stop words where it has a list.
pub(crate) fn analyser(language: &str) -> Result<Box<dyn LanceTokenizer>> {
    if language == ENGLISH {
        return Ok(FtsIndexBuilder::default().build()?);
    }
    let builder = FtsIndexBuilder::default().language(language)?;
    match builder.clone().build() {
        Ok(analyser) => Ok(analyser),
        Err(_) => Ok(builder.remove_stop_words(false).build()?),
    }
}

type Analysers = std::collections::HashMap<&'static str, Box<dyn LanceTokenizer>>;

fn english(analysers: &mut Analysers) -> &mut dyn LanceTokenizer {
    analysers.get_mut(ENGLISH).expect("the English analyser is made when the library opens").as_mut()
}

fn tokens(analyser: &mut dyn LanceTokenizer, text: &str) -> Vec<String> {
    let mut stream = analyser.token_stream_for_doc(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChunkRecord, DataKey};

    /// A library whose terms the previous reading made (English stems only, CJK already in
    /// pairs): only its document in German is read again.
    #[tokio::test]
    async fn a_library_read_by_the_previous_version_has_its_german_document_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let kb = KnowledgeBase::open(dir.path(), 4, Protection::sealed(&DataKey::random())).await.unwrap();
        let notes = [
            ("/n/en.md", "The boiler was serviced in March by the heating engineer of the building."),
            ("/n/de.md", "Die Heizungsanlagen des Gebäudes wurden im März vom Fachbetrieb gewartet."),
            ("/n/ja.md", "サーバーの設定ファイルは毎週月曜日にバックアップされます。"),
        ];
        for (path, text) in notes {
            let doc = DocumentRecord {
                doc_id: kb.document_id(path),
                path: path.into(),
                kind: "markdown".into(),
                content_hash: path.into(),
                bytes: 1,
                pages: 1,
                chunks: 1,
                ingested_at_ms: 0,
                modified_ms: 0,
            };
            let chunk = ChunkRecord {
                doc_id: doc.doc_id.clone(),
                hash: kb.chunk_hash(text),
                seq: 0,
                page: None,
                start: 0,
                end: text.len() as u64,
                tokens: 10,
                text: text.into(),
                vector: vec![0.5; 4],
            };
            kb.commit(&[doc], std::slice::from_ref(&chunk)).await.unwrap();
            // The terms as the previous version made them: English only.
            let old: Vec<String> = kb.analysed(ENGLISH, &crate::terms::prepared(text));
            let protection = kb.protection();
            let old = old.iter().map(|t| protection.blind(t)).collect::<Vec<_>>().join(" ");
            kb.chunks
                .update()
                .only_if(format!("chunk_id = {}", sql_str(&chunk.id())))
                .column("terms", sql_str(&old))
                .execute()
                .await
                .unwrap();
        }
        std::fs::write(dir.path().join("terms-version"), "2\n").unwrap();
        let again: Vec<String> = kb.documents_to_reanalyse().await.unwrap().into_iter().map(|d| d.path).collect();
        assert_eq!(again, ["/n/de.md"]);
        // An inflected form the German text holds only in another form is found once it is read again.
        assert!(kb.search_bm25("Heizungsanlage", 3).await.unwrap().is_empty(), "not before");
        for doc in kb.documents_to_reanalyse().await.unwrap() {
            kb.reanalyse(&doc).await.unwrap();
        }
        kb.mark_terms_current().unwrap();
        assert!(kb.documents_to_reanalyse().await.unwrap().is_empty());
        let found = kb.search_bm25("Wann wurde die Heizungsanlage gewartet?", 3).await.unwrap();
        assert_eq!(found.first().map(|h| h.path.as_str()), Some("/n/de.md"));
    }
}
