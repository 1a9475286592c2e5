//! Text as it is printed on a terminal: names and passages from the user's files shown safely
//! (escaped, not obeyed), cut to a width, and a place in a document named.

pub fn location(path: &str, page: Option<u32>) -> String {
    match page {
        Some(p) => crate::say("cli.location", &[("path", &shown(path)), ("page", &p)]),
        None => shown(path),
    }
}

pub fn short(path: &str) -> String {
    shown(&std::path::Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
}

pub fn one_line(text: &str, max_chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    shown(head(&flat, max_chars))
}

/// A name (or any one-line text from a file, a folder or a document) as it is safe to print on
/// a terminal: control characters, line breaks included, and the marks that reorder text shown
/// escaped (`\u{1b}`, `\n`), not obeyed. A file named with ESC sequences could otherwise clear
/// the screen or retitle the window, and one with a newline could forge a line of the report.
pub fn shown(text: &str) -> String {
    escaped(text, false)
}

/// As `shown`, keeping line breaks and tabs: for text that runs over lines (an answer).
pub fn shown_text(text: &str) -> String {
    escaped(text, true)
}

pub fn escaped(text: &str, keep_lines: bool) -> String {
    let reorders = |c: char| matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if keep_lines && matches!(c, '\n' | '\t') {
            out.push(c);
        } else if c.is_control() || reorders(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

pub fn head(s: &str, max_chars: usize) -> &str {
    match s.char_indices().nth(max_chars) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

pub fn tail(s: &str, max_chars: usize) -> &str {
    let n = s.chars().count();
    if n <= max_chars {
        return s;
    }
    let (i, _) = s.char_indices().nth(n - max_chars).expect("in range");
    &s[i..]
}
