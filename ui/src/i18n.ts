// The app's words in the person's language: one catalogue per language (src/i18n/*.json, read by
// the Rust side too, for the tray and the system dialogs), English the source of every key.
// A message is a string with {placeholders}, or, where a count decides the wording, one string
// per plural category of the language (Intl.PluralRules: "one", "few", "many", "other"…),
// chosen by its `n`. The page's own text is marked in the HTML (`data-i18n` and
// `data-i18n-<attribute>`) and put in the language by `translatePage`.
import de from "./i18n/de.json";
import en from "./i18n/en.json";
import es from "./i18n/es.json";
import fr from "./i18n/fr.json";
import ja from "./i18n/ja.json";
import zh from "./i18n/zh.json";

export type Key = keyof typeof en;
export type Entry = string | Partial<Record<Intl.LDMLPluralRule, string>>;
export type Catalogue = Record<Key, Entry>;
export type Params = Record<string, string | number>;

/// Every language the app speaks, by its tag, with its own name for itself. A missing or extra
/// key in any of them is a type error here (and a failing test, with the key named).
export const CATALOGUES: Record<Language, Catalogue> = { en, de, fr, es, ja, zh };
export const LANGUAGE_NAMES = { en: "English", de: "Deutsch", fr: "Français", es: "Español", ja: "日本語", zh: "简体中文" } as const;
export type Language = keyof typeof LANGUAGE_NAMES;

let language: Language = "en";
let plurals = new Intl.PluralRules("en");

/// The language a locale tag ("ja-JP", "de_DE.UTF-8", "zh-Hant-TW") is read in: its own where
/// the app speaks it, else English.
export function languageOf(tag: string | null | undefined): Language {
  const base = (tag ?? "").toLowerCase().split(/[-_.@]/)[0];
  return base in LANGUAGE_NAMES ? (base as Language) : "en";
}

export function setLanguage(tag: string | null | undefined): Language {
  language = languageOf(tag);
  plurals = new Intl.PluralRules(language);
  return language;
}

export function currentLanguage(): Language {
  return language;
}

/// A number as the language writes it ("2,000", "2.000", "2 000").
export function num(n: number, digits?: number): string {
  return n.toLocaleString(language, digits == null ? undefined : { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/// The message `key` in the current language, its placeholders filled (numbers written as the
/// language writes them). A key a language lacks (never, while the tests pass) reads in English.
export function t(key: Key, params: Params = {}): string {
  const entry = CATALOGUES[language][key] ?? en[key];
  let text: string;
  if (typeof entry === "string") text = entry;
  else {
    const n = Number(params.n ?? 0);
    text = entry[plurals.select(n)] ?? entry.other ?? "";
  }
  return text.replace(/\{(\w+)\}/g, (whole, name: string) => {
    const v = params[name];
    return v == null ? whole : typeof v === "number" ? num(v) : v;
  });
}

/// The attributes a page marks for translation, each as `data-i18n-<attribute>="key"`.
const ATTRIBUTES = ["title", "placeholder", "aria-label"] as const;

/// Puts the page's marked text and attributes in the current language.
export function translatePage(root: ParentNode = document): void {
  for (const e of root.querySelectorAll<HTMLElement>("[data-i18n]")) e.textContent = t(e.dataset.i18n as Key);
  for (const attribute of ATTRIBUTES)
    for (const e of root.querySelectorAll<HTMLElement>(`[data-i18n-${attribute}]`))
      e.setAttribute(attribute, t(e.getAttribute(`data-i18n-${attribute}`) as Key));
  document.documentElement.lang = language;
}

/// Puts a window in the language the app speaks (asked of the app; English where it cannot
/// say), then keeps it there: when another language is chosen the window is drawn again in it.
export async function speakTheAppsLanguage(ask: () => Promise<{ language: string }>, onChange: (f: (language: string) => void) => unknown) {
  try {
    setLanguage((await ask()).language);
  } catch {
    setLanguage("en");
  }
  translatePage();
  onChange((next) => {
    if (languageOf(next) !== language) window.location.reload();
  });
}
