//! A question's literal symbols: the words a person types exactly as the documents print them
//! (`\W`, `$!`, `--bytes`, `-F`, `$HOME`), which the index's word analyser cuts down to
//! letters or drops (`\W` becomes "w", `$!` nothing). Among the passages hybrid search ranked,
//! those that hold a question's literal word for word go first: the prompt escape `\W` is on the
//! one page whose table prints it, wherever its letters rank. No I/O: text in, order out.

use crate::SearchHit;

/// Characters that make a word a literal symbol (letters, digits and a word's own hyphens and
/// apostrophes do not).
const SYMBOL_MARKS: &[char] =
    &['\\', '$', '@', '%', '^', '&', '*', '=', '+', '|', '<', '>', '~', '#', '/', '_', ':', '!', '{', '}', '[', ']'];

/// Punctuation of Chinese and Japanese text, which no literal symbol holds.
const FULL_WIDTH_MARKS: &[char] =
    &['？', '！', '、', '，', '。', '：', '；', '「', '」', '『', '』', '（', '）', '【', '】'];

/// The words of `text` written in a script that spaces its words: Chinese and Japanese do not,
/// so their letters and full-width punctuation part a word from what it is written against
/// ("$HOME変数は？" holds `$HOME`, "rsnapshotは" `rsnapshot`), and are no words themselves.
pub fn spaced_words(text: &str) -> impl Iterator<Item = &str> {
    let apart = |c: char| c.is_whitespace() || quire_index::terms::is_cjk(c) || FULL_WIDTH_MARKS.contains(&c);
    text.split(apart).filter(|w| !w.is_empty())
}

/// The literal symbols of `question`, in its order, each once: words holding one of
/// `SYMBOL_MARKS` (the question's own closing punctuation aside), or options (`-F`, `--bytes`).
pub fn literals(question: &str) -> Vec<&str> {
    let mut found: Vec<&str> = Vec::new();
    for word in spaced_words(question) {
        // Quotes and brackets around a word, and the sentence's own punctuation after it, are
        // not the word's ("`$!`?" is `$!`), but a literal may end in `!` or `.`: `$!`, `..`.
        let wrapping = |c: char| matches!(c, '"' | '\'' | '‘' | '’' | '“' | '”' | '`' | '(' | ')' | ',');
        let word = word.trim_matches(wrapping);
        // The question mark is the sentence's, unless it is the symbol's own (`$?`).
        let word = match word.strip_suffix('?') {
            Some(rest) if rest.chars().count() >= 2 => rest.trim_matches(wrapping),
            _ => word,
        };
        let option =
            word.starts_with('-') && word.trim_start_matches('-').chars().next().is_some_and(char::is_alphanumeric);
        let symbolic = word.chars().any(|c| SYMBOL_MARKS.contains(&c)) && word.chars().count() >= 2;
        // A word ending a sentence with "!" or ":" is prose, not a symbol.
        let prose = match word.char_indices().last() {
            Some((at, '!' | ':')) => at >= 2 && word[..at].chars().all(char::is_alphanumeric),
            _ => false,
        };
        if (option || symbolic) && !prose && !found.contains(&word) {
            found.push(word);
        }
    }
    found
}

/// `hits` in their order, except that those holding more of `question`'s literal symbols word
/// for word come first (a stable sort: among equals, search's order stays).
pub fn promote(question: &str, mut hits: Vec<SearchHit>) -> Vec<SearchHit> {
    let literals = literals(question);
    if literals.is_empty() {
        return hits;
    }
    hits.sort_by_cached_key(|h| std::cmp::Reverse(literals.iter().filter(|l| holds(&h.text, l)).count()));
    hits
}

/// Whether `text` holds `literal` as printed, not inside a longer word: `-F` in "‘-F’ in ls",
/// not in "-Foo"; `$!` in "($!)"; `--bytes` not in "--bytes-per-line". A long option is also
/// held as its name in quotes: manuals' option tables print `--bytes` as "‘bytes’ ‘-c’".
fn holds(text: &str, literal: &str) -> bool {
    if prints(text, literal) {
        return true;
    }
    match literal.strip_prefix("--").filter(|name| name.chars().next().is_some_and(char::is_alphanumeric)) {
        Some(name) => [('‘', '’'), ('\'', '\''), ('`', '\''), ('"', '"'), ('“', '”')]
            .iter()
            .any(|(open, close)| text.contains(&format!("{open}{name}{close}"))),
        None => false,
    }
}

/// Whether `text` prints `literal` itself, not inside a longer word.
fn prints(text: &str, literal: &str) -> bool {
    let option = literal.starts_with('-');
    let word_char = |c: char| c.is_alphanumeric() || c == '_' || (option && c == '-');
    let ends_in_word = literal.chars().last().is_some_and(word_char);
    let starts_in_word = literal.chars().next().is_some_and(word_char);
    text.match_indices(literal).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + literal.len()..].chars().next();
        let joined_before = starts_in_word && before.is_some_and(word_char);
        let joined_after = ends_in_word && after.is_some_and(word_char);
        !(joined_before || joined_after)
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn finds_the_symbols_a_person_types_and_not_prose() {
        assert_eq!(literals(r"What does the \W prompt escape show?"), [r"\W"]);
        assert_eq!(literals(r"What does the \$ prompt escape display?"), [r"\$"]);
        assert_eq!(literals("What does the special parameter $! expand to?"), ["$!"]);
        assert_eq!(
            literals("Which short option corresponds to the long option --bytes, and in which programs?"),
            ["--bytes"]
        );
        assert_eq!(literals("Which short option of ls corresponds to the long option --classify?"), ["--classify"]);
        assert_eq!(literals("What is `$HOME` set to, and what is (\\$)?"), ["$HOME", "\\$"]);
        assert_eq!(literals("Does ls -F mark directories?"), ["-F"]);
        // Written against Japanese or Chinese without a space.
        assert_eq!(
            spaced_words("rsnapshotは何世代？ dirvish 的 vault").collect::<Vec<_>>(),
            ["rsnapshot", "dirvish", "vault"]
        );
        assert_eq!(literals("$HOME変数は何に設定されますか？"), ["$HOME"]);
        assert_eq!(literals("ls 的 -F 选项（--classify）有什么用？"), ["-F", "--classify"]);
        assert_eq!(literals("Where is HISTFILE_SIZE read? And HISTFILE_SIZE again?"), ["HISTFILE_SIZE"]);
        // Prose: hyphenated words, a 24-hour clock, a word before a colon or a cry.
        assert!(literals("Which prompt escape shows the time in 24-hour format?").is_empty());
        assert!(literals("Note: what is the well-known port? Wow!").is_empty());
        assert!(literals("Does it work on Windows too?").is_empty());
        assert_eq!(literals("What does $? hold after a pipeline?"), ["$?"]);
        // Words that end in a letter of more than one byte are read as words, not cut inside it.
        assert!(literals("Où est le café? Et le thé, naïve Zoë?").is_empty());
        assert_eq!(literals("Qu'affiche \\W en été?"), ["\\W"]);
    }

    /// A search hit numbered `n` (its seq and page), ranked by `n`, holding `text`.
    pub(crate) fn hit(n: u32, text: &str) -> SearchHit {
        SearchHit {
            chunk_id: n.to_string(),
            doc_id: "d".into(),
            path: "p".into(),
            seq: n,
            page: Some(n),
            start: 0,
            end: 0,
            text: text.into(),
            score: 1.0 / (n + 1) as f32,
        }
    }

    fn order(question: &str, hits: Vec<SearchHit>) -> Vec<u32> {
        promote(question, hits).iter().map(|h| h.seq).collect()
    }

    #[test]
    fn passages_that_print_the_symbol_go_first_in_searchs_order() {
        let hits = vec![
            hit(0, "The working directory is kept in PWD; w is a letter."),
            hit(1, r"\w The value of $PWD, with $HOME abbreviated with a tilde."),
            hit(2, "Prompt strings are expanded before they are shown."),
            hit(3, r"\W The basename of $PWD, with $HOME abbreviated with a tilde."),
        ];
        assert_eq!(order(r"What does the \W prompt escape show?", hits.clone()), [3, 0, 1, 2]);
        // More of the question's symbols held, earlier; equals keep search's order.
        assert_eq!(order(r"How do \w and $HOME differ?", hits.clone()), [1, 3, 0, 2]);
        // Nothing to promote: search's order, untouched.
        assert_eq!(order("What is a prompt string?", hits), [0, 1, 2, 3]);
    }

    #[test]
    fn a_symbol_is_found_as_printed_not_inside_a_longer_word() {
        assert!(holds("‘-F’ in ls.", "-F"));
        assert!(!holds("-Foo is not it", "-F"));
        assert!(holds("! ($!) Expands to the process id", "$!"));
        assert!(holds("long option ‘--bytes’", "--bytes"));
        assert!(!holds("the --bytes-per-line option", "--bytes"));
        assert!(holds("‘--bytes’, ‘-c’", "--bytes"));
        assert!(!holds("HISTFILE_SIZEX", "HISTFILE_SIZE"));
        // A long option as an option table prints it: its name in quotes.
        assert!(holds("‘bytes’ ‘-c’ in head, split, and tail.", "--bytes"));
        assert!(holds("'classify' '-F' in ls.", "--classify"));
        assert!(!holds("counts bytes in a file", "--bytes"));
        assert!(!holds("‘bytes-per-line’", "--bytes"));
    }
}
