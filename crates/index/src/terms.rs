//! What keyword search reads of a text, before LanceDB's analyser splits, folds and stems it:
//! the text in its compatibility form (NFKC: the ligatures ﬁ ﬂ ﬃ that real PDFs carry, full-width
//! letters and digits, half-width katakana, as their plain forms), and each run of Chinese,
//! Japanese or Korean characters, written without spaces between words, as its overlapping pairs
//! of characters ("知識庫" → "知識 識庫"), each pair a word, as Lucene's CJK analyser does. A
//! document and a question are read the same way, so a question's pairs meet the document's.
//! Text of plain ASCII is read as it is, at no cost.
//!
//! Words are stemmed as English (LanceDB's analyser), and also, where a text is reliably in
//! another language that has a stemmer (German, French, Spanish, Italian, Portuguese, Dutch,
//! Russian, Swedish…: `stemming_language`), as that language: "Heizungsanlagen" and
//! "Heizungsanlage" meet in "heizungsanlag". A question is read the same way, so a question
//! whose language is not recognised (a word or two) still meets the document's English stems,
//! as it did before.

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

/// The version of this reading. A library whose terms were made by an earlier one has the terms
/// of the documents this one reads differently made again when it opens
/// (`KnowledgeBase::reanalyse`).
pub const TERMS_VERSION: u32 = 3;

/// The stemmer, other than English, that `text` is also read with: its language where it is
/// recognised reliably and has a stemmer (by its name in LanceDB's analyser), else none.
pub fn stemming_language(text: &str) -> Option<&'static str> {
    use whatlang::Lang::*;
    let info = whatlang::detect(text).filter(|i| i.is_reliable())?;
    Some(match info.lang() {
        Deu => "German",
        Fra => "French",
        Spa => "Spanish",
        Ita => "Italian",
        Por => "Portuguese",
        Nld => "Dutch",
        Rus => "Russian",
        Swe => "Swedish",
        Dan => "Danish",
        Nob => "Norwegian",
        Fin => "Finnish",
        Ron => "Romanian",
        Hun => "Hungarian",
        Tur => "Turkish",
        Ell => "Greek",
        Ara => "Arabic",
        Tam => "Tamil",
        _ => return None,
    })
}

/// `text` as keyword search reads it (see the module's comment).
pub fn prepared(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let normal: String = text.nfkc().collect();
    if !normal.chars().any(is_cjk) {
        return Cow::Owned(normal);
    }
    let mut out = String::with_capacity(normal.len() * 2);
    let mut run: Vec<char> = Vec::new();
    for c in normal.chars() {
        if is_cjk(c) {
            run.push(c);
        } else {
            push_pairs(&mut out, &run);
            run.clear();
            out.push(c);
        }
    }
    push_pairs(&mut out, &run);
    Cow::Owned(out)
}

/// A run of CJK characters as its overlapping pairs, spaced apart from each other and from what
/// is around them (a run of one character as itself).
fn push_pairs(out: &mut String, run: &[char]) {
    if run.is_empty() {
        return;
    }
    out.push(' ');
    if run.len() == 1 {
        out.push(run[0]);
    }
    for (i, pair) in run.windows(2).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.extend(pair);
    }
    out.push(' ');
}

/// Characters of scripts written without spaces between words (Han, kana, Hangul syllables).
/// The katakana middle dot (・) and the ideographic punctuation are separators, not letters.
pub fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3040}'..='\u{309F}'            // hiragana
        | '\u{30A0}'..='\u{30FA}'          // katakana (before the middle dot)
        | '\u{30FC}'..='\u{30FF}'          // prolonged sound mark, iteration marks
        | '\u{31F0}'..='\u{31FF}'          // katakana phonetic extensions
        | '\u{3400}'..='\u{4DBF}'          // Han, extension A
        | '\u{4E00}'..='\u{9FFF}'          // Han
        | '\u{F900}'..='\u{FAFF}'          // Han compatibility
        | '\u{20000}'..='\u{2FA1F}'        // Han, extensions B on
        | '\u{AC00}'..='\u{D7AF}'          // Hangul syllables
        | '\u{3005}'                       // 々, the ideographic iteration mark
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_in_languages_with_a_stemmer_are_recognised_and_english_is_not_stemmed_twice() {
        assert_eq!(
            stemming_language("Die Heizungsanlage wurde im März von einem Fachbetrieb gewartet und geprüft."),
            Some("German")
        );
        assert_eq!(
            stemming_language("La chaudière a été révisée en mars par le chauffagiste de l'immeuble."),
            Some("French")
        );
        assert_eq!(
            stemming_language("La caldera fue revisada en marzo por el técnico de la calefacción."),
            Some("Spanish")
        );
        assert_eq!(
            stemming_language("The boiler was serviced in March by the heating engineer of the building."),
            None
        );
        assert_eq!(stemming_language("数据库每天凌晨三点自动备份。"), None);
    }

    #[test]
    fn ascii_is_read_as_it_is() {
        assert!(matches!(prepared("The boiler was serviced in March."), Cow::Borrowed(_)));
    }

    #[test]
    fn ligatures_and_full_width_forms_are_read_as_plain_letters() {
        assert_eq!(prepared("the ﬁrst ﬂoor ofﬁce"), "the first floor office");
        assert_eq!(prepared("ＡＢＣ１２３"), "ABC123");
        // Latin with accents keeps them (the analyser folds them, as it always did).
        assert_eq!(prepared("Größe café"), "Größe café");
    }

    #[test]
    fn chinese_and_japanese_runs_are_read_as_overlapping_pairs() {
        assert_eq!(prepared("知识库"), " 知识 识库 ");
        assert_eq!(prepared("设置，打开"), " 设置 , 打开 ");
        // Katakana and hiragana and kanji alike; the middle dot separates; half-width katakana
        // is read as full-width.
        assert_eq!(prepared("データ・ベース"), " デー ータ ・ ベー ース ");
        assert_eq!(prepared("ﾃﾞｰﾀ"), " デー ータ ");
        // A single character stands as itself; Latin around a run stays a word of its own.
        assert_eq!(prepared("第1章"), " 第 1 章 ");
        assert_eq!(prepared("Quireの設定"), "Quire の設 設定 ");
    }
}
