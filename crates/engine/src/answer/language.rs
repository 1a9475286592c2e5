//! The language a question is asked in, and the engine's own words of an answer in it: the
//! model is asked to answer in the question's language, and what Quire itself says (a decline,
//! "the nearest they come is…", an answer withdrawn, a "no" its quotes give) is said in it too,
//! for the six languages the app speaks; other languages get the model's answer in their
//! language and Quire's words in English.
//!
//! Questions are short, and a short text's language is often unclear from letter statistics
//! alone (whatlang takes "Wie viele Tresore kann dirvish höchstens verwalten?" for Afrikaans,
//! and a Japanese question holding a command name for Italian): the script decides first
//! (kana is Japanese, Han without kana Chinese when there are four letters of it or more,
//! Hangul Korean), then, for Latin letters, the
//! question's function words ("welche", "quelle", "cuál", "which"), then whatlang where it is
//! sure. A question none of these settles (a bare "fstab?") has no language: English words.

use whatlang::{Lang, Script};

/// A language a question can be asked in (any whatlang knows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Language(Lang);

impl Language {
    pub const ENGLISH: Language = Language(Lang::Eng);

    pub(crate) fn lang(self) -> Lang {
        self.0
    }

    /// The language's name in English, as the model is told it ("German", "Japanese").
    pub fn english_name(self) -> &'static str {
        match self.0 {
            Lang::Cmn => "Chinese",
            lang => lang.eng_name(),
        }
    }

    /// The ISO 639-1 code of the six languages the app speaks ("de", "ja"), else None.
    pub fn app_code(self) -> Option<&'static str> {
        match self.0 {
            Lang::Eng => Some("en"),
            Lang::Deu => Some("de"),
            Lang::Fra => Some("fr"),
            Lang::Spa => Some("es"),
            Lang::Jpn => Some("ja"),
            Lang::Cmn => Some("zh"),
            _ => None,
        }
    }

    /// Quire's own words of an answer in this language (English where it has none).
    pub fn words(self) -> &'static Words {
        match self.0 {
            Lang::Deu => &GERMAN,
            Lang::Fra => &FRENCH,
            Lang::Spa => &SPANISH,
            Lang::Jpn => &JAPANESE,
            Lang::Cmn => &CHINESE,
            _ => &ENGLISH,
        }
    }
}

/// The language `text` (a question) is written in, when its words tell (see the module's comment).
pub fn language_of(text: &str) -> Option<Language> {
    let mut kana = 0;
    let mut han = 0;
    let mut hangul = 0;
    let mut other_script = 0;
    let mut latin = 0;
    for c in text.chars().filter(|c| c.is_alphabetic()) {
        match c {
            '\u{3040}'..='\u{30FF}' | '\u{31F0}'..='\u{31FF}' | '\u{FF66}'..='\u{FF9D}' => kana += 1,
            '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{2FA1F}' => {
                han += 1
            }
            '\u{AC00}'..='\u{D7AF}' | '\u{1100}'..='\u{11FF}' | '\u{3130}'..='\u{318F}' => hangul += 1,
            c if c.is_ascii_alphabetic() || ('\u{C0}'..='\u{24F}').contains(&c) => latin += 1,
            _ => other_script += 1,
        }
    }
    // Command and file names in Latin letters inside a question in another script do not make
    // it a Latin-script question.
    if kana > 0 {
        return Some(Language(Lang::Jpn));
    }
    if hangul > 0 {
        return Some(Language(Lang::Kor));
    }
    // Han alone, a few letters of it ("5 年"), reads as Japanese as well as Chinese.
    if han >= 4 {
        return Some(Language(Lang::Cmn));
    }
    if han > 0 {
        return None;
    }
    if other_script > latin {
        // One script, one language (Greek, Hebrew, Thai…) or whatlang tells among those that share one.
        let info = whatlang::detect(text)?;
        let single = matches!(
            info.script(),
            Script::Greek | Script::Hebrew | Script::Thai | Script::Georgian | Script::Armenian | Script::Khmer
        );
        return (single || info.is_reliable()).then_some(Language(info.lang()));
    }
    if latin == 0 {
        return None;
    }
    if let Some(lang) = by_function_words(text) {
        return Some(Language(lang));
    }
    whatlang::detect(text).filter(|i| i.is_reliable()).map(|i| Language(i.lang()))
}

/// The language a passage (a longer text than a question) is written in, where it tells. Its
/// script decides where Chinese, Japanese or Korean letters are a fair part of it (each counted
/// as three Latin letters, a word's worth) or the other letters tell no language: Japanese prose
/// full of commands in Latin letters is Japanese, an English paragraph under a Japanese heading
/// English.
pub(crate) fn language_of_passage(text: &str) -> Option<Language> {
    use quire_index::terms::is_cjk;
    let cjk = text.chars().filter(|&c| is_cjk(c)).count();
    let others = text.chars().filter(|&c| c.is_alphabetic() && !is_cjk(c)).count();
    if cjk > 0 && 3 * cjk < others {
        // Mostly other letters: their language, where they tell one (commands and names do not).
        let rest = language_of(&text.chars().filter(|&c| !is_cjk(c)).collect::<String>());
        if rest.is_some() {
            return rest;
        }
    }
    language_of(text)
}

/// Whether `word` reads the same in every language: it holds a digit or a sign inside it
/// (5900, /etc/skel, dpkg-reconfigure, release_signscript).
pub fn reads_the_same_in_every_language(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_digit())
        || word.chars().skip(1).take(word.chars().count().saturating_sub(2)).any(|c| matches!(c, '/' | '-' | '_' | '.'))
}

/// Whether most of `passages` whose language tells are in another language than `asked`
/// (an English question over a German book): their words are not the question's words.
pub fn mostly_in_another_language<'a>(asked: Language, passages: impl IntoIterator<Item = &'a str>) -> bool {
    let (mut same, mut other) = (0, 0);
    for told in passages.into_iter().filter_map(language_of) {
        if told == asked {
            same += 1;
        } else {
            other += 1;
        }
    }
    other > same
}

/// Words that say which language a short Latin-script question is in: question words,
/// articles, auxiliaries, none shared by two of the lists ("la", "que", "des", "en", "es",
/// "se", "son", "in" are left out for that).
const FUNCTION_WORDS: [(Lang, &[&str]); 4] = [
    (
        Lang::Eng,
        &[
            "the", "what", "which", "who", "whom", "whose", "how", "why", "when", "where", "does", "do", "did", "is",
            "are", "were", "of", "a", "an", "to", "for", "with", "many", "much", "can", "should", "there", "your",
            "it", "this", "that", "and", "or", "by", "on", "be", "not", "every", "they", "their",
        ],
    ),
    (
        Lang::Deu,
        &[
            "der", "die", "das", "dem", "den", "welche", "welcher", "welches", "welchen", "welchem", "wie", "was",
            "wer", "wann", "warum", "wo", "ist", "sind", "ein", "eine", "einen", "einem", "für", "mit", "und", "wird",
            "werden", "kann", "von", "zu", "auf", "nicht", "viele", "wieviele", "gibt", "man", "im", "ihre", "nichts",
            "dazu", "jede", "jeder", "jedes", "oder", "auch", "nur", "bei", "aus", "nach", "sich", "wurde",
        ],
    ),
    (
        Lang::Fra,
        &[
            "le", "les", "une", "du", "quel", "quelle", "quels", "quelles", "est", "sont", "qui", "comment", "pour",
            "avec", "dans", "sur", "combien", "pourquoi", "où", "ne", "pas", "au", "aux", "qu", "faut", "peut", "vos",
            "chaque", "aussi", "mais", "très", "il", "elle", "ils",
        ],
    ),
    (
        Lang::Spa,
        &[
            "el", "los", "las", "una", "qué", "cuál", "cuáles", "quién", "cómo", "para", "con", "por", "del", "al",
            "cuántos", "cuántas", "cuándo", "dónde", "puede", "hay", "lo", "sus", "su", "cada", "también", "pero",
            "está", "están",
        ],
    ),
];

/// The language whose function words `text` holds the most of, when one holds more than any other.
fn by_function_words(text: &str) -> Option<Lang> {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_alphabetic()).filter(|w| !w.is_empty()).collect();
    let mut counts: Vec<(Lang, usize)> =
        FUNCTION_WORDS.iter().map(|(lang, list)| (*lang, words.iter().filter(|w| list.contains(w)).count())).collect();
    counts.sort_by_key(|count| std::cmp::Reverse(count.1));
    (counts[0].1 > 0 && counts[0].1 > counts[1].1).then_some(counts[0].0)
}

/// Quire's own words of an answer, in one language.
#[derive(Debug)]
pub struct Words {
    /// What a decline says first.
    pub decline: &'static str,
    /// A decline's nearest sentence: `{place}` and `{sentence}` filled in.
    nearest: &'static str,
    /// A place in a document: `{name}` and `{page}` filled in.
    page: &'static str,
    /// The closest passages' documents when no sentence comes near: `{documents}` filled in.
    closest: &'static str,
    /// One document with one page in that list: `{name}` and `{pages}` filled in.
    one_page: &'static str,
    /// One document with several pages in that list: `{name}` and `{pages}` filled in.
    pages: &'static str,
    /// The word between the last two documents of a list.
    and: &'static str,
    /// No passage at all.
    pub no_passage: &'static str,
    /// Said before a decline when an answer streamed and was then withdrawn.
    pub not_given: &'static str,
    /// A "yes" its own quotes say "not" to.
    pub no: &'static str,
}

impl Words {
    /// Quire's words in English: those of a question whose language is not known.
    pub fn english() -> &'static Words {
        &ENGLISH
    }

    /// Quire's words for a reply to `question`: in its language, English where it has none.
    pub fn for_question(question: &str) -> &'static Words {
        language_of(question).map_or(&ENGLISH, Language::words)
    }

    pub fn nearest(&self, place: &str, sentence: &str) -> String {
        self.nearest.replace("{place}", place).replace("{sentence}", sentence)
    }

    /// `name` and its page, as a person reads a place in a document.
    pub fn place(&self, name: &str, page: Option<u32>) -> String {
        match page {
            Some(page) => self.page.replace("{name}", name).replace("{page}", &page.to_string()),
            None => name.to_string(),
        }
    }

    /// "The closest passages are from a.pdf (pages 3, 12) and b.md."
    pub fn closest(&self, documents: &[(String, Vec<u32>)]) -> String {
        let named: Vec<String> = documents
            .iter()
            .map(|(name, pages)| match pages.as_slice() {
                [] => name.clone(),
                [page] => self.one_page.replace("{name}", name).replace("{pages}", &page.to_string()),
                pages => {
                    let pages: Vec<String> = pages.iter().map(u32::to_string).collect();
                    self.pages.replace("{name}", name).replace("{pages}", &pages.join(", "))
                }
            })
            .collect();
        let listed = match named.as_slice() {
            [] => return self.no_passage.to_string(),
            [one] => one.clone(),
            [rest @ .., last] => format!("{}{}{last}", rest.join(", "), self.and),
        };
        self.closest.replace("{documents}", &listed)
    }
}

/// What the model is told of the answer's language for a question in `language`, as the
/// prompt's last line before the question: nothing for English or an unknown language (the
/// instructions are in English), so their prompts stay as they were.
pub fn answer_language_line(language: Option<Language>) -> String {
    match language {
        Some(language) if language != Language::ENGLISH => {
            ANSWER_IN.replace("{language}", language.english_name()) + "\n"
        }
        _ => String::new(),
    }
}

/// What the model is told of the answer's language (in English, as all its instructions are).
const ANSWER_IN: &str = "The question is in {language}: write \"answer\" in {language}, and copy each \"quote\" word for word from its source, in the source's own language.";

static ENGLISH: Words = Words {
    decline: "Your documents don't say.",
    nearest: "The nearest they come is {place}: “{sentence}”",
    page: "{name}, page {page}",
    closest: "The closest passages are from {documents}.",
    one_page: "{name} (page {pages})",
    pages: "{name} (pages {pages})",
    and: " and ",
    no_passage: "No passage was found.",
    not_given: "(Not given: the passages do not bear this out.)",
    no: "No.",
};

static GERMAN: Words = Words {
    decline: "Ihre Dokumente sagen dazu nichts.",
    nearest: "Am nächsten kommt {place}: „{sentence}“",
    page: "{name}, Seite {page}",
    closest: "Die nächsten Passagen stammen aus {documents}.",
    one_page: "{name} (Seite {pages})",
    pages: "{name} (Seiten {pages})",
    and: " und ",
    no_passage: "Es wurde keine Passage gefunden.",
    not_given: "(Nicht gegeben: Die Passagen belegen es nicht.)",
    no: "Nein.",
};

static FRENCH: Words = Words {
    decline: "Vos documents ne le disent pas.",
    nearest: "Le plus proche est {place} : « {sentence} »",
    page: "{name}, page {page}",
    closest: "Les passages les plus proches viennent de {documents}.",
    one_page: "{name} (page {pages})",
    pages: "{name} (pages {pages})",
    and: " et ",
    no_passage: "Aucun passage n'a été trouvé.",
    not_given: "(Réponse retirée : les passages ne la confirment pas.)",
    no: "Non.",
};

static SPANISH: Words = Words {
    decline: "Sus documentos no lo dicen.",
    nearest: "Lo más cercano está en {place}: «{sentence}»",
    page: "{name}, página {page}",
    closest: "Los pasajes más cercanos son de {documents}.",
    one_page: "{name} (página {pages})",
    pages: "{name} (páginas {pages})",
    and: " y ",
    no_passage: "No se encontró ningún pasaje.",
    not_given: "(Respuesta retirada: los pasajes no la respaldan.)",
    no: "No.",
};

static JAPANESE: Words = Words {
    decline: "お手元の文書には書かれていません。",
    nearest: "最も近い記述は {place} にあります：「{sentence}」",
    page: "{name} の {page} ページ",
    closest: "最も近い箇所は {documents} にあります。",
    one_page: "{name}（{pages} ページ）",
    pages: "{name}（{pages} ページ）",
    and: "、",
    no_passage: "該当する箇所は見つかりませんでした。",
    not_given: "（回答は取り下げました：文書の記述で裏付けられません。）",
    no: "いいえ。",
};

static CHINESE: Words = Words {
    decline: "您的文档中没有提到。",
    nearest: "最接近的内容在 {place}：“{sentence}”",
    page: "{name} 第 {page} 页",
    closest: "最接近的段落来自 {documents}。",
    one_page: "{name}（第 {pages} 页）",
    pages: "{name}（第 {pages} 页）",
    and: "和",
    no_passage: "没有找到任何段落。",
    not_given: "（未给出：这些段落不能证实该回答。）",
    no: "不是。",
};

#[cfg(test)]
mod tests {
    use super::*;

    fn code(question: &str) -> Option<&'static str> {
        language_of(question).and_then(Language::app_code)
    }

    /// Short questions whatlang alone gets wrong or is unsure of, in the six languages.
    #[test]
    fn a_short_question_is_known_by_its_script_and_its_function_words() {
        assert_eq!(code("How many snapshots can rsnapshot keep at most?"), Some("en"));
        assert_eq!(code("What warns a user over quota?"), Some("en"));
        assert_eq!(code("Wie viele Tresore kann dirvish höchstens verwalten?"), Some("de"));
        assert_eq!(code("Welchen Port verwendet VNC?"), Some("de"));
        assert_eq!(code("Quel port utilise VNC pour le premier écran ?"), Some("fr"));
        assert_eq!(code("¿Qué puerto usa VNC para la primera pantalla?"), Some("es"));
        assert_eq!(code("mini-dinstall が最初にリリースされたのは何年ですか？"), Some("ja"));
        assert_eq!(code("dirvish 最多可以管理多少个 vault？"), Some("zh"));
        assert_eq!(language_of("fstab?"), None);
        assert_eq!(language_of("5 年"), None, "Japanese as well as Chinese");
        // Quire's own declines are told as their language.
        for code_of in ["en", "de", "fr", "es", "ja", "zh"] {
            let words = [&ENGLISH, &GERMAN, &FRENCH, &SPANISH, &JAPANESE, &CHINESE]
                [["en", "de", "fr", "es", "ja", "zh"].iter().position(|c| *c == code_of).unwrap()];
            assert_eq!(code(words.decline), Some(code_of), "{}", words.decline);
        }
        assert_eq!(language_of("42"), None);
        assert_eq!(language_of(""), None);
    }

    #[test]
    fn a_question_in_another_script_is_named_for_the_model() {
        let greek = language_of("Ποια θύρα χρησιμοποιεί το VNC για την πρώτη οθόνη;").unwrap();
        assert_eq!(greek.english_name(), "Greek");
        assert_eq!(greek.words().decline, ENGLISH.decline, "no words of Quire's own in Greek yet");
        assert!(answer_language_line(Some(greek)).contains("in Greek"));
        assert_eq!(answer_language_line(Some(Language::ENGLISH)), "");
        assert_eq!(answer_language_line(None), "");
        let chinese = language_of("哪个程序运行定期任务？").unwrap();
        assert!(answer_language_line(Some(chinese)).contains("write \"answer\" in Chinese"));
    }

    /// A word in two lists would vote for both languages and tell neither ("was" is German too).
    #[test]
    fn no_function_word_votes_for_two_languages() {
        for (i, (lang, list)) in FUNCTION_WORDS.iter().enumerate() {
            for (other, other_list) in &FUNCTION_WORDS[i + 1..] {
                for word in *list {
                    assert!(!other_list.contains(word), "{word:?} is both {lang:?} and {other:?}");
                }
            }
        }
        assert_eq!(code("Was ist das?"), Some("de"));
    }

    #[test]
    fn passages_in_another_language_are_told_by_their_majority() {
        let german = "Die Heizungsanlage wurde im März vom Fachbetrieb gewartet, und sie läuft seitdem ohne Störung.";
        let english = "The boiler was serviced in March, and it has run without a fault since then.";
        assert!(mostly_in_another_language(Language::ENGLISH, [german, german, english]));
        assert!(!mostly_in_another_language(Language::ENGLISH, [german, english, english]));
        assert!(!mostly_in_another_language(Language::ENGLISH, ["5900", "fstab?"]), "nothing tells");
        assert!(reads_the_same_in_every_language("/etc/skel") && reads_the_same_in_every_language("5900"));
        assert!(!reads_the_same_in_every_language("hour") && !reads_the_same_in_every_language("-F"));
    }

    #[test]
    fn every_language_has_every_word() {
        for words in [&ENGLISH, &GERMAN, &FRENCH, &SPANISH, &JAPANESE, &CHINESE] {
            for (name, text) in [
                ("decline", words.decline),
                ("no_passage", words.no_passage),
                ("not_given", words.not_given),
                ("no", words.no),
                ("and", words.and),
            ] {
                assert!(!text.trim().is_empty(), "{name} is empty in {words:?}");
            }
            assert!(words.nearest.contains("{place}") && words.nearest.contains("{sentence}"), "{words:?}");
            assert!(words.page.contains("{name}") && words.page.contains("{page}"), "{words:?}");
            assert!(words.closest.contains("{documents}"), "{words:?}");
            for list in [words.one_page, words.pages] {
                assert!(list.contains("{name}") && list.contains("{pages}"), "{words:?}");
            }
        }
        let documents = vec![("a.pdf".to_string(), vec![3, 12]), ("b.md".to_string(), vec![])];
        assert_eq!(GERMAN.closest(&documents), "Die nächsten Passagen stammen aus a.pdf (Seiten 3, 12) und b.md.");
        assert_eq!(JAPANESE.place("a.pdf", Some(4)), "a.pdf の 4 ページ");
    }
}
