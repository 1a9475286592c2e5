//! Tables of contents and indexes: passages that point to pages rather than say anything
//! ("TMPDIR environment variable . . . . . . 8"). Keyword search loves them (every heading's
//! words, packed), and a small model copies their lines as quotes; the page they point to is
//! the one to answer from. Among the passages search ranked they go last. No I/O: text in,
//! order out.

use crate::SearchHit;

/// Whether `text` is mostly a listing of entries with dot leaders: at least a third of its
/// words are runs of dots (". . . . 8" prints each dot as a word), and there are enough words
/// for that share to mean something.
pub fn is_contents_listing(text: &str) -> bool {
    let (mut words, mut leaders) = (0usize, 0usize);
    for word in text.split_whitespace() {
        words += 1;
        if word.chars().all(|c| matches!(c, '.' | '·' | '…')) {
            leaders += 1;
        }
    }
    words >= 20 && 3 * leaders >= words
}

/// `hits` in their order, except that tables of contents and indexes come after the rest (a
/// stable sort: each group keeps search's order).
pub fn after_content(mut hits: Vec<SearchHit>) -> Vec<SearchHit> {
    hits.sort_by_cached_key(|h| is_contents_listing(&h.text));
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::literals::tests::hit;

    const INDEX: &str = "T table of long options . . . . . . . . . . . . . 15 temporary files . . . . . . . . . . . . \
        . . . . . 8 TMPDIR environment variable . . . . . . . . . . . . . 8 trademarks . . . . . . . . 3";
    const CONTENTS: &str = "7.2.3 Variables for Specifying Commands . . . . . . . . . . . . 60 7.2.4 DESTDIR: \
        Support for Staged Installs . . . . . . . . . . 61 7.2.5 Variables for Installation Directories . . . . 62";
    const PAGE: &str = "If you make temporary files, check the TMPDIR environment variable; if that variable is \
        defined, use the specified directory instead of /tmp. In C, you can avoid this problem . . . by using \
        mkstemps.";

    #[test]
    fn an_index_or_a_table_of_contents_is_a_listing_and_prose_is_not() {
        assert!(is_contents_listing(INDEX));
        assert!(is_contents_listing(CONTENTS));
        assert!(!is_contents_listing(PAGE), "an ellipsis in prose");
        assert!(!is_contents_listing(". . . . . ."), "too short to say");
        assert!(!is_contents_listing("cd . && ls . && make -C . all && echo . done with all of the files here now"));
    }

    #[test]
    fn listings_go_after_the_pages_they_point_to_in_searchs_order() {
        let hits = vec![hit(0, INDEX), hit(1, PAGE), hit(2, CONTENTS), hit(3, "Temporary files go in /tmp.")];
        let order: Vec<u32> = after_content(hits).iter().map(|h| h.seq).collect();
        assert_eq!(order, [1, 3, 0, 2]);
    }
}
