//! What the answer modules' tests share.

use quire_index::SearchHit;

use crate::Citation;

pub(super) fn source(text: &str) -> SearchHit {
    SearchHit { chunk_id: "c".into(), text: text.into(), ..Default::default() }
}

pub(super) fn cited(quote: &str) -> Citation {
    Citation {
        number: 1,
        chunk_id: "c".into(),
        path: "/d/fasta_guide.pdf".into(),
        page: Some(3),
        quote: quote.into(),
        quote_range: None,
        passage: String::new(),
    }
}

/// Words, lowercased, as the terms of the test (the index's analyser does more).
pub(super) fn words(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}
