//! Finding a model's quote in its passage, blind to what PDF text extraction does to words.

/// Where `quote` appears in `passage`, word for word but blind to what PDF text does to words
/// without changing them: whitespace (line breaks, doubled spaces, or none: "global: global"
/// where the model writes "global:global"), a word hyphenated at a line break ("homoge- neous"),
/// typographic quotes and dashes against ASCII ones, and ligatures ("ﬁ"). Returns a byte range
/// in `passage`.
pub fn find_quote(passage: &str, quote: &str) -> Option<(usize, usize)> {
    let (wanted, _) = squeeze(quote, false);
    if wanted.is_empty() {
        return None;
    }
    // First with line-break hyphens dropped ("homogeneous"), then kept ("well-known").
    [true, false].into_iter().find_map(|drop_hyphens| {
        let (kept, spans) = squeeze(passage, drop_hyphens);
        let at = kept.find(&wanted)?;
        let first = kept[..at].chars().count();
        let last = first + wanted.chars().count() - 1;
        Some((spans[first].0, spans[last].1))
    })
}

/// `text` folded for comparison: without whitespace (and, if asked, without hyphens that end a
/// line inside a word), typography made plain; with each output character's byte range in `text`.
fn squeeze(text: &str, drop_break_hyphens: bool) -> (String, Vec<(usize, usize)>) {
    let mut kept = String::with_capacity(text.len());
    let mut spans = Vec::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            continue;
        }
        if drop_break_hyphens && c == '-' {
            let before = text[..i].chars().next_back();
            let after = &text[i + 1..];
            let breaks = after.starts_with(char::is_whitespace);
            let next = after.trim_start().chars().next();
            if breaks && before.is_some_and(char::is_alphabetic) && next.is_some_and(char::is_lowercase) {
                continue;
            }
        }
        let span = (i, i + c.len_utf8());
        for plain in plain_typography(c).chars() {
            kept.push(plain);
            spans.push(span);
        }
    }
    (kept, spans)
}

/// The plain spelling of a typographic character (the character itself if it has none).
fn plain_typography(c: char) -> std::borrow::Cow<'static, str> {
    let plain = match c {
        '\u{2018}' | '\u{2019}' | '\u{201a}' | '\u{2032}' => "'",
        '\u{201c}' | '\u{201d}' | '\u{201e}' | '\u{2033}' => "\"",
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2212}' => "-",
        '\u{2026}' => "...",
        '\u{fb00}' => "ff",
        '\u{fb01}' => "fi",
        '\u{fb02}' => "fl",
        '\u{fb03}' => "ffi",
        '\u{fb04}' => "ffl",
        _ => return std::borrow::Cow::Owned(c.to_string()),
    };
    std::borrow::Cow::Borrowed(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_match_across_line_breaks() {
        let passage = "The ssearch36 program\nperforms a rigorous  Smith-Waterman search.";
        let (s, e) = find_quote(passage, "rigorous Smith-Waterman search").unwrap();
        assert_eq!(&passage[s..e], "rigorous  Smith-Waterman search");
        assert_eq!(find_quote(passage, "program performs"), Some((14, 30)));
        assert_eq!(find_quote(passage, "not there"), None);
        assert_eq!(find_quote(passage, "   "), None);
    }

    #[test]
    fn quotes_match_whatever_the_pdf_did_to_spaces_and_hyphens() {
        let passage = "global: global (ggsearch36) only supports homoge- neous linear systems; a well-\nknown case.";
        let (s, e) = find_quote(passage, "global:global (ggsearch36)").unwrap();
        assert_eq!(&passage[s..e], "global: global (ggsearch36)");
        let (s, e) = find_quote(passage, "supports homogeneous linear").unwrap();
        assert_eq!(&passage[s..e], "supports homoge- neous linear");
        // A quote that keeps the hyphen matches too; a real hyphen before a space is kept.
        assert!(find_quote(passage, "homoge- neous").is_some());
        assert!(find_quote(passage, "a well-known case").is_some());
        // Words still have to be the passage's, in its order.
        assert_eq!(find_quote(passage, "global (ggsearch36) global:"), None);
        assert_eq!(find_quote(passage, "homogeneous nonlinear"), None);
        // Multi-byte characters map back to whole characters.
        let (s, e) = find_quote("Köppe’s   method", "Köppe’s method").unwrap();
        assert_eq!((s, e), (0, "Köppe’s   method".len()));
        // Typography: curly quotes, dashes and ligatures against their plain spelling.
        let passage = "the “classic” interactive mode, 2 – 5X slower, a ﬁle’s end";
        let (s, e) = find_quote(passage, "the \"classic\" interactive mode, 2-5X").unwrap();
        assert_eq!(&passage[s..e], "the “classic” interactive mode, 2 – 5X");
        let (s, e) = find_quote(passage, "a file's end").unwrap();
        assert_eq!(&passage[s..e], "a ﬁle’s end");
        assert_eq!(find_quote(passage, "a fine end"), None);
    }
}
