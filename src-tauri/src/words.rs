//! The app's words in the person's language. The catalogue is the UI's (ui/src/i18n/<tag>.json,
//! English the source of every key); the shell reads it for what it draws itself: the tray's
//! menu and the titles of the system's file dialogs. The language is the one chosen in Settings,
//! else the system's (its locale), else English.

use std::collections::HashMap;
use std::sync::OnceLock;

/// Every language the app speaks, by tag, with its catalogue.
const CATALOGUES: &[(&str, &str)] = &[
    ("en", include_str!("../../ui/src/i18n/en.json")),
    ("de", include_str!("../../ui/src/i18n/de.json")),
    ("fr", include_str!("../../ui/src/i18n/fr.json")),
    ("es", include_str!("../../ui/src/i18n/es.json")),
    ("ja", include_str!("../../ui/src/i18n/ja.json")),
    ("zh", include_str!("../../ui/src/i18n/zh.json")),
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

/// The language a locale ("ja-JP", "de_DE.UTF-8", "zh-Hans-CN") is read in: its own where the
/// app speaks it, else English. The UI's `languageOf` reads tags the same way.
pub fn language_of(locale: &str) -> &'static str {
    let base = locale.split(['-', '_', '.', '@']).next().unwrap_or("").to_ascii_lowercase();
    CATALOGUES.iter().map(|(tag, _)| *tag).find(|tag| *tag == base).unwrap_or("en")
}

/// The system's language, as the app speaks it.
pub fn system_language() -> &'static str {
    sys_locale::get_locale().map_or("en", |locale| language_of(&locale))
}

/// The language the app speaks: `chosen` in Settings where there is one, else the system's.
pub fn app_language(chosen: Option<&str>) -> &'static str {
    chosen.map_or_else(system_language, language_of)
}

/// A message of the catalogue that has no placeholders (the shell's are all plain), in
/// `language`, else in English.
pub fn word(language: &str, key: &str) -> String {
    let all = catalogues();
    let said = |tag: &str| all.get(tag)?.get(key)?.as_str().map(str::to_string);
    said(language).or_else(|| said("en")).unwrap_or_else(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locales_are_read_in_the_languages_the_app_speaks() {
        assert_eq!(language_of("ja_JP.UTF-8"), "ja");
        assert_eq!(language_of("de-AT"), "de");
        assert_eq!(language_of("zh-Hans-CN"), "zh");
        assert_eq!(language_of("fr"), "fr");
        assert_eq!(language_of("pt_BR.UTF-8"), "en");
        assert_eq!(language_of("C"), "en");
        assert_eq!(language_of(""), "en");
        assert_eq!(app_language(Some("es")), "es");
    }

    /// Every language has every key of the English catalogue, no other key, and the same
    /// placeholders in each message; the shell's own words are there in each.
    #[test]
    fn every_catalogue_has_every_key_with_its_placeholders() {
        let all = catalogues();
        let english = &all["en"];
        let placeholders = |v: &serde_json::Value| {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Object(forms) => {
                    forms.get("other").and_then(|o| o.as_str()).unwrap_or("").to_string()
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
        assert_eq!(word("ja", "tray.quit"), "終了");
        assert_eq!(word("de", "tray.open"), "Quire öffnen");
        assert_eq!(word("xx", "tray.quit"), "Quit");
    }
}
