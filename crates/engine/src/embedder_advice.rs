//! Whether a library would be searched better by an embedder that reads its languages. A
//! library made with an English-only embedder (all-MiniLM-L6-v2) whose passages are mostly in
//! other languages finds them by meaning poorly (Japanese: the right section among the top 5
//! 8 % of the time, against 92 % with multilingual-e5-small); such a library is offered the
//! multilingual model (`quire reindex --embedder`, the app's banner and Settings → Search model).
//! The library's languages are read from a few passages of each document, not all of them.

use std::collections::HashMap;

use anyhow::Result;
use serde::Serialize;
use ts_rs::TS;
use whatlang::Lang;

use quire_index::{chunk_id, DocumentRecord};

/// Documents read at most (evenly spread over the list): enough to tell what a library holds.
const DOCUMENTS_SAMPLED: usize = 64;
/// The share of the library's passages in other languages from which the offer is made.
pub const OFFER_FROM_SHARE: f32 = 0.3;
/// The share of the passages from which a language is named in the offer.
const NAMED_FROM_SHARE: f32 = 0.1;

/// An offer to embed the library again with a model that reads its languages.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
pub struct EmbedderAdvice {
    /// The model the library is searched with now (it reads English only).
    pub embedder: String,
    /// The model that would read its languages (a known model's name).
    pub suggested: String,
    /// Whether `suggested` is installed (else it is fetched first: `quire models fetch`).
    pub installed: bool,
    /// The languages other than English its passages are in, by ISO 639-1 tag where the
    /// language has one ("de", "ja"), else ISO 639-3; most passages first (those of a tenth of
    /// them at least, and the first).
    pub languages: Vec<String>,
    /// The share of the library's passages in those languages (of those whose language tells).
    pub share: f32,
}

/// The passages read to tell a library's languages (chunk ids): each sampled document's first,
/// middle and last.
pub(crate) fn samples(documents: &[DocumentRecord]) -> Vec<String> {
    let step = documents.len().div_ceil(DOCUMENTS_SAMPLED).max(1);
    documents
        .iter()
        .step_by(step)
        .filter(|d| d.chunks > 0)
        .flat_map(|d| {
            let last = d.chunks - 1;
            let mut seqs = vec![0, last / 2, last];
            seqs.dedup();
            seqs.into_iter().map(|seq| chunk_id(&d.doc_id, seq))
        })
        .collect()
}

/// The catalogue's model named `embedder` where it reads English only (the only embedder an
/// offer is made against; a folder outside the catalogue reads what nobody here knows).
fn english_only(embedder: &str) -> Option<&'static quire_models::KnownModel> {
    quire_models::find(embedder).ok().filter(|m| m.reads_english_only())
}

/// The language a passage is written in, where it tells (code, numbers or a few words do not).
fn language_of_passage(text: &str) -> Option<Lang> {
    crate::answer::language_of_passage(text).map(|l| l.lang())
}

/// The advice for a library searched with `embedder` (a known model, else none is given) whose
/// sampled passages are `texts`.
pub(crate) fn advise(embedder: &str, texts: &[String]) -> Option<EmbedderAdvice> {
    let model = english_only(embedder)?;
    let mut told = 0usize;
    let mut others: HashMap<Lang, usize> = HashMap::new();
    for lang in texts.iter().filter_map(|t| language_of_passage(t)) {
        told += 1;
        if lang != Lang::Eng {
            *others.entry(lang).or_default() += 1;
        }
    }
    let other: usize = others.values().sum();
    if told == 0 || (other as f32) < OFFER_FROM_SHARE * told as f32 {
        return None;
    }
    let mut languages: Vec<(Lang, usize)> = others.into_iter().collect();
    languages.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.code().cmp(b.0.code())));
    // A language a passage or two is taken for (a few words in another) is not named.
    let named = languages.iter().skip(1).take_while(|(_, n)| *n as f32 >= NAMED_FROM_SHARE * told as f32).count();
    languages.truncate(1 + named);
    let suggested = quire_models::EMBEDDER_FOR_EVERY_LANGUAGE;
    Some(EmbedderAdvice {
        embedder: model.name.to_string(),
        suggested: suggested.name.to_string(),
        installed: suggested.is_installed(),
        languages: languages.into_iter().map(|(lang, _)| tag(lang).to_string()).collect(),
        share: other as f32 / told as f32,
    })
}

/// ISO 639-1 tags of the languages that have one (the tags browsers and the UI's catalogues use).
const TAGS: &[(Lang, &str)] = &[
    (Lang::Eng, "en"),
    (Lang::Deu, "de"),
    (Lang::Fra, "fr"),
    (Lang::Spa, "es"),
    (Lang::Ita, "it"),
    (Lang::Por, "pt"),
    (Lang::Nld, "nl"),
    (Lang::Rus, "ru"),
    (Lang::Ukr, "uk"),
    (Lang::Pol, "pl"),
    (Lang::Ces, "cs"),
    (Lang::Swe, "sv"),
    (Lang::Dan, "da"),
    (Lang::Nob, "nb"),
    (Lang::Fin, "fi"),
    (Lang::Ron, "ro"),
    (Lang::Hun, "hu"),
    (Lang::Tur, "tr"),
    (Lang::Ell, "el"),
    (Lang::Ara, "ar"),
    (Lang::Heb, "he"),
    (Lang::Hin, "hi"),
    (Lang::Jpn, "ja"),
    (Lang::Cmn, "zh"),
    (Lang::Kor, "ko"),
    (Lang::Vie, "vi"),
    (Lang::Tha, "th"),
    (Lang::Ind, "id"),
];

/// A language's ISO 639-1 tag where it has one, else its ISO 639-3 code.
fn tag(lang: Lang) -> &'static str {
    TAGS.iter().find(|(l, _)| *l == lang).map_or(lang.code(), |(_, tag)| tag)
}

impl EmbedderAdvice {
    /// The languages' names for a reader of `language` (a tag): in English for English
    /// ("German", "Japanese"), else each in its own ("Deutsch", "日本語").
    pub fn language_names(&self, language: &str) -> Vec<&'static str> {
        self.languages
            .iter()
            .filter_map(|t| TAGS.iter().find(|(_, tag)| tag == t).map(|(l, _)| *l).or_else(|| Lang::from_code(t)))
            .map(|l| match (language, l) {
                ("en", Lang::Cmn) => "Chinese",
                ("en", l) => l.eng_name(),
                (_, Lang::Cmn) => "中文",
                (_, l) => l.name(),
            })
            .collect()
    }
}

/// The advice for the library open in `engine`, remembered until its list of documents changes.
pub(crate) struct AdviceCache {
    last: std::sync::Mutex<Option<(u64, Option<EmbedderAdvice>)>>,
}

impl AdviceCache {
    pub(crate) fn new() -> AdviceCache {
        AdviceCache { last: std::sync::Mutex::new(None) }
    }

    pub(crate) async fn get<F, Fut>(
        &self,
        embedder: &str,
        documents: &[DocumentRecord],
        read: F,
    ) -> Result<Option<EmbedderAdvice>>
    where
        F: FnOnce(Vec<String>) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<String>>>,
    {
        let key = signature(embedder, documents);
        if let Some((k, advice)) = &*self.last.lock().unwrap_or_else(|e| e.into_inner()) {
            if *k == key {
                return Ok(advice.clone());
            }
        }
        // No passage is read where no offer could be made. A failed read is not remembered: the
        // next call reads again.
        let advice = match english_only(embedder) {
            Some(_) if !documents.is_empty() => advise(embedder, &read(samples(documents)).await?),
            _ => None,
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((key, advice.clone()));
        Ok(advice)
    }
}

/// What the advice depends on: the embedder and each document's content.
fn signature(embedder: &str, documents: &[DocumentRecord]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    embedder.hash(&mut h);
    for d in documents {
        (&d.doc_id, &d.content_hash, d.chunks).hash(&mut h);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GERMAN: &str = "Die Konfigurationsdatei wird bei jeder Änderung gesichert, damit der Verwalter \
        eine frühere Fassung wiederherstellen kann, wenn ein Dienst nach dem Neustart nicht mehr startet.";
    const JAPANESE: &str = "設定ファイルは変更のたびにバックアップされるので、管理者はサービスが再起動後に\
        起動しなくなった場合でも以前の版を復元できます。";
    const FRENCH: &str = "Le fichier de configuration est sauvegardé à chaque modification, afin que \
        l'administrateur puisse restaurer une version antérieure.";
    const ENGLISH: &str = "The configuration file is backed up at every change, so that the administrator \
        can restore an earlier version when a service no longer starts after a reboot.";

    fn texts(parts: &[(&str, usize)]) -> Vec<String> {
        parts.iter().flat_map(|(t, n)| std::iter::repeat_n(t.to_string(), *n)).collect()
    }

    #[test]
    fn a_library_mostly_in_other_languages_is_offered_the_multilingual_embedder() {
        let advice =
            advise("all-minilm-l6-v2", &texts(&[(GERMAN, 50), (JAPANESE, 20), (ENGLISH, 29), (FRENCH, 1)])).unwrap();
        assert_eq!(advice.embedder, "all-minilm-l6-v2");
        assert_eq!(advice.suggested, "multilingual-e5-small");
        assert_eq!(advice.languages, ["de", "ja"]);
        assert_eq!(advice.language_names("en"), ["German", "Japanese"]);
        assert_eq!(advice.language_names("fr"), ["Deutsch", "日本語"]);
        assert!((advice.share - 0.71).abs() < 1e-6, "{}", advice.share);
    }

    #[test]
    fn an_english_library_or_a_multilingual_embedder_gets_no_offer() {
        // Mostly English: a German note or two among them is read well enough.
        assert_eq!(advise("all-minilm-l6-v2", &texts(&[(ENGLISH, 8), (GERMAN, 2)])), None);
        // Already read by a model of every language.
        assert_eq!(advise("multilingual-e5-small", &texts(&[(JAPANESE, 10)])), None);
        // A folder outside the catalogue: what it reads is not known.
        assert_eq!(advise("/models/my-embedder", &texts(&[(JAPANESE, 10)])), None);
        // Passages whose language does not tell (code, numbers) count for nothing.
        assert_eq!(advise("all-minilm-l6-v2", &texts(&[("fn main() { 42 }", 10)])), None);
    }

    /// Japanese prose full of commands in Latin letters is Japanese; an English paragraph under
    /// a Japanese heading (an untranslated part of a translated book) is English.
    #[test]
    fn a_passage_is_read_by_its_script_where_a_fair_part_of_it_is_chinese_or_japanese() {
        let commands = "apt-get update を実行してから apt-get install --no-install-recommends \
            postfix dovecot-imapd を実行します。設定は /etc/postfix/main.cf と /etc/dovecot/dovecot.conf にあります。";
        let heading = "第 6 章 メンテナンス\n\n".to_string() + &ENGLISH.repeat(3);
        assert_eq!(language_of_passage(commands), Some(Lang::Jpn));
        assert_eq!(language_of_passage(&heading), Some(Lang::Eng));
    }

    #[test]
    fn each_document_is_read_at_its_start_middle_and_end() {
        let doc = |id: &str, chunks: u32| DocumentRecord {
            doc_id: id.into(),
            path: format!("/{id}"),
            kind: "pdf".into(),
            content_hash: String::new(),
            bytes: 0,
            pages: 1,
            chunks,
            ingested_at_ms: 0,
            modified_ms: 0,
        };
        assert_eq!(samples(&[doc("a", 10), doc("b", 1), doc("c", 0)]), ["a:0", "a:4", "a:9", "b:0"]);
        // A big library: 64 documents read at most, spread over the list.
        let many: Vec<DocumentRecord> = (0..200).map(|i| doc(&format!("d{i}"), 1)).collect();
        let read = samples(&many);
        assert_eq!(read.len(), 50);
        assert_eq!((read[0].as_str(), read[49].as_str()), ("d0:0", "d196:0"));
    }
}
