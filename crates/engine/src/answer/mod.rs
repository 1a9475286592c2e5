//! The answer, by job: the prompt that shows the model numbered sources (`prompt`), the JSON
//! schema that holds its output to `{"answer": …, "citations": [{"chunk": n, "quote": …}]}` with
//! `n` one of the retrieved sources and the reply it parses into (`format`), the extractor that
//! streams the answer text out of the JSON as it is generated (`stream`), the citations turned
//! into cited passages (`citing`), the checks that decide whether an answer is given
//! (`checks`), what a decline says (`decline`), and the question's language with Quire's own
//! words in it (`language`).

mod checks;
mod citing;
mod decline;
mod format;
mod language;
mod prompt;
mod stream;
#[cfg(test)]
mod testing;

pub use checks::{answer_confidence, contradicted_yes, supported};
pub(crate) use citing::cite;
pub use decline::{about_sources, declined_text, nearest_sentence, rest_of_decline, says_not_in_sources};
pub use format::{answer_schema, quotable_spans, RawAnswer, RawReply};
pub(crate) use language::language_of_passage;
pub use language::{
    answer_language_line, language_of, mostly_in_another_language, reads_the_same_in_every_language, Language, Words,
};
pub use prompt::{fit_passages, source_label, PASSAGE_TOKENS, SYSTEM_PROMPT};
pub use stream::AnswerTextStream;
