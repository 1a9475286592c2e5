//! Quire's own words in the person's language, for everything that speaks outside the web page:
//! the app's shell (the tray's menu, the system's file dialogs) and the command line. The
//! catalogue is the UI's, one file per language (ui/src/i18n/<tag>.json, English the source of
//! every key), so each message is written and translated once. A message is a string with
//! `{placeholders}`, or, where a count decides the wording, one string per plural category of
//! the language ("one", "other"…), chosen by its `n`, as the UI's `t` does.
//!
//! The language is the one asked for (the app's setting, the CLI's `QUIRE_LANGUAGE`), else the
//! system's (its locale: `LANGUAGE`, `LC_ALL`, `LC_MESSAGES`, `LANG` on Unix), else English.

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::OnceLock;

/// Every language Quire speaks, by tag, with its catalogue.
const CATALOGUES: &[(&str, &str)] = &[
    ("en", include_str!("../../../ui/src/i18n/en.json")),
    ("de", include_str!("../../../ui/src/i18n/de.json")),
    ("fr", include_str!("../../../ui/src/i18n/fr.json")),
    ("es", include_str!("../../../ui/src/i18n/es.json")),
    ("ja", include_str!("../../../ui/src/i18n/ja.json")),
    ("zh", include_str!("../../../ui/src/i18n/zh.json")),
];

type Catalogue = HashMap<String, serde_json::Value>;

fn catalogues() -> &'static HashMap<&'static str, Catalogue> {
    static PARSED: OnceLock<HashMap<&'static str, Catalogue>> = OnceLock::new();
    PARSED.get_or_init(|| {
        CATALOGUES
            .iter()
            .map(|(tag, text)| {
                (*tag, serde_json::from_str(text).unwrap_or_else(|e| panic!("ui/src/i18n/{tag}.json: {e}")))
            })
            .collect()
    })
}

/// The language a locale ("ja-JP", "de_DE.UTF-8", "zh-Hans-CN") is read in: its own where
/// Quire speaks it, else English. The UI's `languageOf` reads tags the same way.
pub fn language_of(locale: &str) -> &'static str {
    let base = locale.split(['-', '_', '.', '@']).next().unwrap_or("").to_ascii_lowercase();
    CATALOGUES.iter().map(|(tag, _)| *tag).find(|tag| *tag == base).unwrap_or("en")
}

/// The system's language, as Quire speaks it.
pub fn system_language() -> &'static str {
    sys_locale::get_locale().map_or("en", |locale| language_of(&locale))
}

/// The language Quire speaks: `chosen` where there is a choice, else the system's.
pub fn app_language(chosen: Option<&str>) -> &'static str {
    chosen.filter(|c| !c.is_empty()).map_or_else(system_language, language_of)
}

/// The messages of one language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Words {
    language: &'static str,
}

impl Words {
    /// The messages of the language `locale` is read in (English where Quire does not speak it).
    pub fn new(locale: &str) -> Words {
        Words { language: language_of(locale) }
    }

    /// The messages of the language chosen by `QUIRE_LANGUAGE`, else the system's.
    pub fn from_environment() -> Words {
        Words { language: app_language(std::env::var("QUIRE_LANGUAGE").ok().as_deref()) }
    }

    pub fn language(self) -> &'static str {
        self.language
    }

    /// A message that has no placeholders.
    pub fn word(self, key: &str) -> String {
        self.say(key, &[])
    }

    /// The message `key` with its placeholders filled from `args` (by name); a message with
    /// plural forms takes the form of its `n`. A key missing in this language (never, while
    /// the tests pass) reads in English; a key missing in English reads as itself.
    pub fn say(self, key: &str, args: &[(&str, &dyn Display)]) -> String {
        let all = catalogues();
        let entry = all.get(self.language).and_then(|c| c.get(key)).or_else(|| all["en"].get(key));
        let text = match entry {
            Some(serde_json::Value::String(s)) => s.as_str(),
            Some(serde_json::Value::Object(forms)) => {
                let n = args.iter().find(|(name, _)| *name == "n").map(|(_, v)| v.to_string());
                let form = plural_form(self.language, n.as_deref().and_then(|n| n.parse().ok()).unwrap_or(0));
                forms.get(form).or_else(|| forms.get("other")).and_then(|v| v.as_str()).unwrap_or(key)
            }
            _ => key,
        };
        fill(text, args)
    }
}

/// The plural category of `n` in `language` (CLDR's rules for whole numbers).
fn plural_form(language: &str, n: u64) -> &'static str {
    match language {
        "ja" | "zh" => "other",
        "fr" if n <= 1 => "one",
        "fr" if n != 0 && n.is_multiple_of(1_000_000) => "many",
        "es" if n != 0 && n.is_multiple_of(1_000_000) => "many",
        "fr" | "es" | "en" | "de" if n == 1 => "one",
        _ => "other",
    }
}

/// `text` with each `{name}` replaced by its argument (left as it is where none is given).
fn fill(text: &str, args: &[(&str, &dyn Display)]) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}').map(|close| (&after[..close], close)) {
            Some((name, close)) if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.is_empty() => {
                match args.iter().find(|(n, _)| *n == name) {
                    Some((_, value)) => out.push_str(&value.to_string()),
                    None => out.push_str(&rest[open..open + close + 2]),
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locales_are_read_in_the_languages_quire_speaks() {
        assert_eq!(language_of("ja_JP.UTF-8"), "ja");
        assert_eq!(language_of("de-AT"), "de");
        assert_eq!(language_of("zh-Hans-CN"), "zh");
        assert_eq!(language_of("fr"), "fr");
        assert_eq!(language_of("pt_BR.UTF-8"), "en");
        assert_eq!(language_of("C"), "en");
        assert_eq!(language_of(""), "en");
        assert_eq!(app_language(Some("es")), "es");
    }

    /// Every language has every key of the English catalogue, no other key, the same
    /// placeholders in each message, and an "other" form in each message with plural forms.
    #[test]
    fn every_catalogue_has_every_key_with_its_placeholders() {
        let all = catalogues();
        let english = &all["en"];
        let placeholders = |v: &serde_json::Value| {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Object(forms) => {
                    forms.get("other").and_then(|o| o.as_str()).expect("an \"other\" form").to_string()
                }
                other => panic!("a message is a string or plural forms, not {other}"),
            };
            let mut names: Vec<String> =
                text.split('{').skip(1).filter_map(|p| p.split_once('}')).map(|(n, _)| n.to_string()).collect();
            names.sort();
            names
        };
        for (tag, catalogue) in all {
            let mut missing: Vec<&String> = english.keys().filter(|k| !catalogue.contains_key(*k)).collect();
            let mut extra: Vec<&String> = catalogue.keys().filter(|k| !english.contains_key(*k)).collect();
            missing.sort();
            extra.sort();
            assert!(missing.is_empty(), "{tag}.json lacks {missing:?}");
            assert!(extra.is_empty(), "{tag}.json has keys English does not: {extra:?}");
            for (key, english_message) in english {
                assert_eq!(
                    placeholders(&catalogue[key]),
                    placeholders(english_message),
                    "{tag}.json {key}: other placeholders than English's"
                );
            }
            for key in ["tray.quickAsk", "tray.open", "tray.quit", "dialog.addFiles", "dialog.saveBackup"] {
                assert!(catalogue[key].is_string(), "{tag}.json {key}");
            }
        }
    }

    #[test]
    fn messages_are_filled_and_counted_as_each_language_does() {
        let (en, de, fr, ja) = (Words::new("en"), Words::new("de_DE.UTF-8"), Words::new("fr"), Words::new("ja"));
        assert_eq!(ja.word("tray.quit"), "終了");
        assert_eq!(de.word("tray.open"), "Quire öffnen");
        assert_eq!(Words::new("xx").word("tray.quit"), "Quit");
        assert_eq!(en.word("no.such.key"), "no.such.key");
        // Plural forms by `n`: French counts 0 and 1 as one.
        let one = |w: Words, n: u64| w.say("cli.documents", &[("n", &n)]);
        assert_eq!(
            (one(en, 1), one(en, 0), one(en, 3)),
            ("1 document".into(), "0 documents".into(), "3 documents".into())
        );
        assert_eq!((one(fr, 0), one(fr, 2)), ("0 document".into(), "2 documents".into()));
        assert_eq!(one(ja, 1), "1 件の文書");
        // Placeholders by name; braces that name nothing given stay.
        assert_eq!(fill("{a} and {b}, {c} {", &[("a", &1), ("b", &"two")]), "1 and two, {c} {");
    }
}
