//! Ingestion into a real LanceDB on disk with the real embedder: re-ingesting replaces instead
//! of duplicating, changed files are re-indexed, bad files are reported by name and skipped.

mod common;

use quire_engine::{Cancel, Engine, EngineConfig, Event, FileOutcome, SearchMode};

async fn engine(data: &std::path::Path) -> Engine {
    engine_reading_ahead(data, true).await
}

async fn engine_reading_ahead(data: &std::path::Path, read_ahead: bool) -> Engine {
    let config =
        EngineConfig { top_k: 4, max_answer_tokens: 256, read_ahead, ..common::tiny_config(data, "test passphrase") };
    Engine::open(config).await.unwrap()
}

/// What a collection holds, by file path: each chunk's place, text and vector.
async fn stored(engine: &Engine) -> Vec<(String, Vec<(u32, Option<u32>, u64, u64, String, Vec<f32>)>)> {
    let mut out = Vec::new();
    for doc in engine.documents().await.unwrap() {
        let mut chunks: Vec<_> = engine
            .knowledge_base()
            .chunk_records_of(&doc.doc_id)
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.seq, c.page, c.start, c.end, c.text, c.vector))
            .collect();
        chunks.sort_by_key(|c| c.0);
        out.push((doc.path, chunks));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn reading_ahead_stores_what_one_file_after_another_stores() {
    // Good files between bad ones: the next file is read while this one is embedded, whatever
    // either turns out to be.
    let docs = quire_testkit::copy_samples(&["bad", "markdown"]);
    let paths = vec![docs.path().to_path_buf()];
    let mut runs = Vec::new();
    for read_ahead in [true, false] {
        let data = tempfile::tempdir().unwrap();
        let engine = engine_reading_ahead(data.path(), read_ahead).await;
        let mut started = Vec::new();
        let report = engine
            .ingest(
                &paths,
                &mut |e| {
                    if let quire_engine::Event::FileStarted { path } = e {
                        started.push(path);
                    }
                },
                &Cancel::new(),
            )
            .await
            .unwrap();
        let outcomes: Vec<(String, String)> = report.files.iter().map(|(p, o)| (p.clone(), format!("{o:?}"))).collect();
        runs.push((started, outcomes, stored(&engine).await));
    }
    let (ahead, one_by_one) = (&runs[0], &runs[1]);
    assert_eq!(ahead.0.len(), 8, "every file started: {:?}", ahead.0);
    assert_eq!(ahead.0, one_by_one.0, "files start in the same order");
    assert_eq!(ahead.1, one_by_one.1, "the same outcome for each file, in the same order");
    assert_eq!(ahead.2.len(), 4, "latin1.txt and the three READMEs are stored");
    assert_eq!(ahead.2, one_by_one.2, "the same chunks and vectors");
}

#[tokio::test(flavor = "multi_thread")]
async fn reingest_keeps_row_counts_and_edits_replace_chunks() {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    let paths = vec![docs.path().to_path_buf()];

    let first = engine.ingest(&paths, &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!(first.count(|o| matches!(o, FileOutcome::Indexed { .. })), 3, "{first:?}");
    let rows = engine.knowledge_base().chunk_count().await.unwrap();
    assert_eq!(rows, first.chunks());
    assert_eq!(engine.documents().await.unwrap().len(), 3);

    // Same files again: nothing re-embedded, nothing duplicated.
    let second = engine.ingest(&paths, &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!(second.count(|o| *o == FileOutcome::Unchanged), 3, "{second:?}");
    assert_eq!(engine.knowledge_base().chunk_count().await.unwrap(), rows);

    // An edited file replaces its own chunks only.
    let tokio_md = docs.path().join("markdown/tokio-README.md");
    let mut text = std::fs::read_to_string(&tokio_md).unwrap();
    text.push_str("\n\nQuire marker paragraph: the zebrafish owl protocol.\n");
    std::fs::write(&tokio_md, text).unwrap();
    let third = engine.ingest(&paths, &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!(third.count(|o| matches!(o, FileOutcome::Indexed { .. })), 1, "{third:?}");
    let docs_now = engine.documents().await.unwrap();
    assert_eq!(docs_now.len(), 3);
    assert_eq!(
        engine.knowledge_base().chunk_count().await.unwrap(),
        docs_now.iter().map(|d| d.chunks as usize).sum::<usize>()
    );
    let hits = engine.search("zebrafish owl protocol", SearchMode::Bm25, 3).await.unwrap();
    assert!(hits[0].text.contains("zebrafish owl"), "{:?}", hits[0].text);

    // Removing a document removes its chunks.
    assert!(engine.remove(&tokio_md).await.unwrap());
    assert_eq!(engine.documents().await.unwrap().len(), 2);
    assert!(engine
        .search("zebrafish owl protocol", SearchMode::Bm25, 3)
        .await
        .unwrap()
        .iter()
        .all(|h| !h.text.contains("zebrafish")));
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_files_are_reported_by_name_and_good_ones_indexed() {
    let docs = quire_testkit::copy_samples(&["bad", "markdown/notify-README.md"]);
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    let report = engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
    let failed: Vec<String> = report
        .failed()
        .iter()
        .map(|(p, _)| std::path::Path::new(p).file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut failed_sorted = failed.clone();
    failed_sorted.sort();
    assert_eq!(failed_sorted, ["binary.md", "empty.txt", "header-only.pdf", "truncated.pdf"], "{report:?}");
    for (_, reason) in report.failed() {
        assert!(!reason.is_empty());
    }
    let indexed: Vec<&str> = report
        .files
        .iter()
        .filter(|(_, o)| matches!(o, FileOutcome::Indexed { .. }))
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(indexed.len(), 2, "latin1.txt and the README: {indexed:?}");
    assert!(indexed.iter().any(|p| p.ends_with("latin1.txt")));
}

/// An engine in `data` holding the markdown samples, answering with the tiny model in 3 passages.
async fn answering_the_markdown_samples(data: &std::path::Path, max_answer_tokens: usize) -> Engine {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let config = EngineConfig {
        top_k: 3,
        max_answer_tokens,
        // The tiny model declines nearly everything: these tests are about streaming, citing
        // and follow-ups, so its every reply is an answer.
        declines: false,
        ..EngineConfig::new(
            data.to_path_buf(),
            quire_testkit::model(&quire_models::MINILM),
            quire_testkit::model(&quire_models::SMOLLM2),
            quire_engine::KeyAccess::passphrase("test passphrase"),
        )
    };
    let engine = Engine::open(config).await.unwrap();
    engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
    engine
}

#[tokio::test(flavor = "multi_thread")]
async fn answers_stream_in_pieces_and_cite_only_retrieved_chunks() {
    let data = tempfile::tempdir().unwrap();
    let engine = answering_the_markdown_samples(data.path(), 200).await;

    let mut events = Vec::new();
    let answer = engine
        .ask("Which crate watches the file system for changes?", &mut |e| events.push(e), &Cancel::new())
        .await
        .unwrap();
    assert!(matches!(events.first(), Some(Event::Retrieved { sources }) if sources.len() == 3));
    // Then the prompt's progress, up to the whole prompt, before the first word.
    let first_delta = events.iter().position(|e| matches!(e, Event::AnswerDelta { .. })).unwrap();
    let prompt: Vec<(u32, u32)> = events[..first_delta]
        .iter()
        .filter_map(|e| match e {
            Event::PromptProgress { done, total } => Some((*done, *total)),
            _ => None,
        })
        .collect();
    let total = answer.stats.prompt_tokens as u32;
    assert!(
        prompt.len() >= 2 && prompt.first() == Some(&(0, total)) && prompt.last() == Some(&(total, total)),
        "{prompt:?}"
    );
    assert!(
        !events[first_delta..].iter().any(|e| matches!(e, Event::PromptProgress { .. })),
        "prompt progress after the first word"
    );
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::AnswerDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(deltas.len() > 1, "the answer arrives in several pieces: {deltas:?}");
    assert_eq!(deltas.concat(), answer.text, "the streamed text is the answer");
    assert!(matches!(events.last(), Some(Event::AnswerFinished)));
    // The tiny model may decline (its answers often rest on nothing): a decline cites nothing.
    assert_eq!(answer.citations.is_empty(), answer.declined.is_some(), "{answer:?}");
    let retrieved: Vec<&str> = answer.sources.iter().map(|s| s.chunk_id.as_str()).collect();
    for c in &answer.citations {
        assert!(retrieved.contains(&c.chunk_id.as_str()), "{} not retrieved", c.chunk_id);
        assert!(answer.sources.iter().any(|s| s.chunk_id == c.chunk_id && s.text == c.passage));
        // The schema ties each quote to the passage it names: even the tiny model quotes it
        // word for word.
        assert!(c.quote_range.is_some(), "quote {:?} is in passage {}: {:?}", c.quote, c.number, c.passage);
    }

    // Asked again, the same passages come back and the processed prompt is reused: only its
    // last token runs again, the answer is the same, and the memory budget counts what is kept.
    let again =
        engine.ask("Which crate watches the file system for changes?", &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!(again.stats.prompt_reused_tokens + 1, again.stats.prompt_tokens, "{:?}", again.stats);
    assert_eq!((again.text.as_str(), again.raw.as_str()), (answer.text.as_str(), answer.raw.as_str()));
    let budget = engine.memory_budget(None).unwrap();
    let target = budget.models.iter().find(|m| m.role == "target").unwrap();
    assert_eq!(target.kept_prompt_tokens as usize, again.stats.prompt_tokens - 1);
    assert!(target.kept_prompt_bytes > 0, "{target:?}");
}

/// The words of a question that no document holds are found (the shown passages first, then
/// one keyword lookup each), for the prompt to name: the model is told the sources cannot say.
#[tokio::test(flavor = "multi_thread")]
async fn words_no_document_holds_are_found() {
    let data = tempfile::tempdir().unwrap();
    let engine = answering_the_markdown_samples(data.path(), 64).await;
    let question = "Does notify watch files on Solaris, and does Tokio's runtime run on Solaris?";
    let hits = engine.retrieve(question).await.unwrap();
    assert_eq!(engine.unmentioned(question, &hits).await.unwrap(), ["Solaris"]);
    // Words held by a document the passages shown do not come from still count as held.
    let hits = engine.retrieve("inotify backends").await.unwrap();
    assert!(engine.unmentioned("Which keyring stores secrets on macOS?", &hits).await.unwrap().is_empty());
    let prompt = engine.answer_request("Does it run on Solaris?", &hits, &["Solaris".into()]).user;
    assert!(prompt.ends_with("None of the sources mentions: Solaris.\nQuestion: Does it run on Solaris?"), "{prompt}");
}

/// A word of a German question held by a passage in another form ("Heizungsanlagen",
/// "Heizungsanlage") is held, a German stop word ("und") says nothing, and a word no passage
/// holds in any form is named.
#[tokio::test(flavor = "multi_thread")]
async fn words_of_a_german_question_are_held_in_any_form_a_passage_says_them() {
    let docs = tempfile::tempdir().unwrap();
    std::fs::write(
        docs.path().join("heizung.md"),
        "# Heizung\n\nDie Heizungsanlage wurde im März vom Fachbetrieb gewartet.\n",
    )
    .unwrap();
    std::fs::write(docs.path().join("boiler.md"), "# Boiler\n\nThe boiler was serviced in March.\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
    let question = "Wann werden die Heizungsanlagen gewartet, und wer prüft die Solaranlage?";
    let hits = engine.retrieve(question).await.unwrap();
    let unmentioned = engine.unmentioned(question, &hits).await.unwrap();
    // (Question words these two notes lack, "Wann", "wer", "prüft", are named too: a library of
    // German documents holds them.)
    assert!(unmentioned.iter().any(|w| w == "Solaranlage"), "{unmentioned:?}");
    assert!(!unmentioned.iter().any(|w| w == "Heizungsanlagen" || w == "gewartet" || w == "und"), "{unmentioned:?}");
    // A name written against Japanese without a space is a word of its own; the Japanese
    // letters, which part into no words without a dictionary, are named as none. (Over these
    // notes in other languages, only names that read the same in every language are looked for.)
    let question = "PV-Anlageは何年に点検されますか？";
    let hits = engine.retrieve(question).await.unwrap();
    assert_eq!(engine.unmentioned(question, &hits).await.unwrap(), ["PV-Anlage"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_events_follow_each_file_and_cancel_stops_between_files() {
    let docs = quire_testkit::copy_samples(&["markdown"]);
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    let cancel = Cancel::new();
    let mut events = Vec::new();
    let stopper = cancel.clone();
    let report = engine
        .ingest(
            &[docs.path().to_path_buf()],
            &mut |e| {
                // Cancel as soon as the first file is embedded: it is kept (work done), the other
                // two are not touched.
                if matches!(e, Event::FileProgress { stage: quire_engine::FileStage::Storing, .. }) {
                    stopper.cancel();
                }
                events.push(e);
            },
            &cancel,
        )
        .await
        .unwrap();
    assert_eq!(report.files.len(), 1, "{report:?}");
    assert_eq!(engine.documents().await.unwrap().len(), 1);
    // The two untouched files are marked cancelled in the queue, not left for a resume.
    assert!(engine.pending_files().is_empty(), "{:?}", engine.pending_files());
    let cancelled = engine.job_list().into_iter().filter(|j| j.state == quire_engine::JobState::Cancelled).count();
    assert_eq!(cancelled, 2);
    match &events[0] {
        Event::IngestStarted { files } => {
            assert_eq!(files.len(), 3);
            assert!(files.iter().all(|f| f.bytes > 0), "{files:?}");
        }
        e => panic!("first event {e:?}"),
    }
    let stages: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::FileProgress { stage, .. } => Some(*stage),
            _ => None,
        })
        .collect();
    use quire_engine::FileStage::*;
    assert_eq!(stages.first(), Some(&Reading));
    for stage in [Chunking, Embedding, Storing] {
        assert!(stages.contains(&stage), "{stage:?} reported: {stages:?}");
    }
    assert!(
        matches!(events.last(), Some(Event::IngestFinished { cancelled: true, indexed: 1, .. })),
        "{:?}",
        events.last()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_answer_ends_with_the_cancelled_error() {
    let docs = quire_testkit::copy_samples(&["markdown/notify-README.md"]);
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
    let cancel = Cancel::new();
    let stopper = cancel.clone();
    let mut deltas = 0;
    let err = engine
        .ask(
            "What does notify watch?",
            &mut |e| {
                if matches!(e, Event::AnswerDelta { .. }) {
                    deltas += 1;
                    stopper.cancel();
                }
            },
            &cancel,
        )
        .await
        .unwrap_err();
    assert!(err.is::<quire_engine::Cancelled>(), "{err:#}");
    // Generation stops at the next token: a couple of pieces at most, not the whole answer.
    assert!((1..=3).contains(&deltas), "{deltas} deltas after cancelling");
}

/// Ingests `paths` once and returns what became of the first file.
async fn first_file_outcome(engine: &quire_engine::Engine, paths: &[std::path::PathBuf]) -> FileOutcome {
    engine.ingest(paths, &mut |_| {}, &Cancel::new()).await.unwrap().files[0].1.clone()
}

/// Sets `file`'s modification time, as an edit or a copy keeping times would.
fn set_modified(file: &std::path::Path, time: std::time::SystemTime) {
    std::fs::File::options().write(true).open(file).unwrap().set_modified(time).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn unchanged_files_are_known_by_size_and_time_without_being_read() {
    use std::time::{Duration, SystemTime};
    let docs = quire_testkit::copy_samples(&["markdown/notify-README.md"]);
    let file = docs.path().join("markdown/notify-README.md");
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    set_modified(&file, an_hour_ago);
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    let paths = [docs.path().to_path_buf()];
    let first = first_file_outcome(&engine, &paths).await;
    assert!(matches!(first, FileOutcome::Indexed { .. }));

    // Same size and time, other bytes: taken as unchanged, so the file was not read. (The
    // trade-off every sync tool makes; a real edit moves the time.)
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replacen("notify", "NOTIFY", 1)).unwrap();
    set_modified(&file, an_hour_ago);
    let second = first_file_outcome(&engine, &paths).await;
    assert_eq!(second, FileOutcome::Unchanged);

    // A new time: read, hashed, re-indexed.
    set_modified(&file, SystemTime::now() - Duration::from_secs(60));
    let third = first_file_outcome(&engine, &paths).await;
    assert!(matches!(third, FileOutcome::Indexed { .. }), "{third:?}");

    // Touched only: unchanged, and the new time is recorded so the next scan skips the read.
    let touched = SystemTime::now() - Duration::from_secs(30);
    set_modified(&file, touched);
    let fourth = first_file_outcome(&engine, &paths).await;
    assert_eq!(fourth, FileOutcome::Unchanged);
    let stored = &engine.documents().await.unwrap()[0];
    let touched_ms = touched.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    assert_eq!(stored.modified_ms, touched_ms);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_that_failed_for_its_bytes_is_not_read_again_until_it_changes() {
    use std::time::{Duration, SystemTime};
    let docs = tempfile::tempdir().unwrap();
    let file = docs.path().join("notes.md");
    let binary: Vec<u8> = (0..64u8).cycle().take(600).collect();
    std::fs::write(&file, &binary).unwrap();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    set_modified(&file, an_hour_ago);
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    let paths = [docs.path().to_path_buf()];
    let refused = FileOutcome::Failed { reason: "this is a binary file, not text".into() };
    let first = first_file_outcome(&engine, &paths).await;
    assert_eq!(first, refused);

    // Text of the same size under the same time: still the failure, so the file was not read
    // again (a photo without text is not OCR'd at every start, a damaged PDF not parsed up to
    // its time limit). Remembered across a restart, in the queue on disk.
    std::fs::write(&file, "a".repeat(binary.len())).unwrap();
    set_modified(&file, an_hour_ago);
    drop(engine);
    let engine = self::engine(data.path()).await;
    let second = first_file_outcome(&engine, &paths).await;
    assert_eq!(second, refused);

    // A new time: read again, and indexed.
    set_modified(&file, SystemTime::now() - Duration::from_secs(60));
    let third = first_file_outcome(&engine, &paths).await;
    assert!(matches!(third, FileOutcome::Indexed { .. }), "{third:?}");
}

/// The reranking hook: with a reranker installed, `retrieve` hands it the hybrid candidates and
/// shows its order, cut to `top_k`; without one, hybrid search's order.
#[tokio::test(flavor = "multi_thread")]
async fn a_reranker_reorders_what_the_model_is_shown() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    struct NotifyFirst(AtomicUsize);
    impl quire_engine::Rerank for NotifyFirst {
        fn rerank(
            &self,
            _question: &str,
            mut hits: Vec<quire_engine::SearchHit>,
        ) -> anyhow::Result<Vec<quire_engine::SearchHit>> {
            self.0.store(hits.len(), Ordering::SeqCst);
            hits.sort_by_key(|h| !h.path.ends_with("notify-README.md"));
            Ok(hits)
        }
    }
    struct Broken;
    impl quire_engine::Rerank for Broken {
        fn rerank(&self, _: &str, _: Vec<quire_engine::SearchHit>) -> anyhow::Result<Vec<quire_engine::SearchHit>> {
            anyhow::bail!("no cross-encoder here")
        }
    }

    let docs = quire_testkit::copy_samples(&["markdown"]);
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
    let question = "What is Tokio's minimum supported Rust version?";
    let plain = engine.retrieve(question).await.unwrap();
    assert_eq!(plain.len(), 4);
    assert!(plain[0].path.ends_with("tokio-README.md"), "{:?}", plain[0].path);

    let reranker = Arc::new(NotifyFirst(AtomicUsize::new(0)));
    engine.set_reranker(Some(reranker.clone()));
    let reranked = engine.retrieve(question).await.unwrap();
    let chunks = engine.knowledge_base().chunk_count().await.unwrap();
    assert_eq!(reranker.0.load(Ordering::SeqCst), quire_engine::RERANK_CANDIDATES.min(chunks));
    assert_eq!(reranked.len(), 4);
    assert!(reranked[0].path.ends_with("notify-README.md"), "{:?}", reranked[0].path);

    engine.set_reranker(Some(Arc::new(Broken)));
    let err = format!("{:#}", engine.retrieve(question).await.unwrap_err());
    assert!(err.contains("reranker failed") && err.contains("no cross-encoder"), "{err}");
    engine.set_reranker(None);
    let again = engine.retrieve(question).await.unwrap();
    assert_eq!(
        again.iter().map(|h| &h.chunk_id).collect::<Vec<_>>(),
        plain.iter().map(|h| &h.chunk_id).collect::<Vec<_>>()
    );
}

/// A 20 MB Markdown line with no space (one "word" the embedder's tokenizer counts as a single
/// token) becomes chunks of at most 500 embedder tokens and `MAX_CHUNK_BYTES`, and a question
/// that retrieves them is answered (before, it was one chunk, and the answer died on a prompt of
/// millions of tokens).
#[tokio::test(flavor = "multi_thread")]
async fn a_giant_line_is_chunked_within_bounds_and_answers_still_work() {
    let docs = tempfile::tempdir().unwrap();
    let line: String =
        (0..20_000_000u32).map(|i| (b'a' + ((i.wrapping_mul(2654435761) >> 27) % 26) as u8) as char).collect();
    std::fs::write(docs.path().join("giant.md"), &line).unwrap();
    let data = tempfile::tempdir().unwrap();
    let engine = engine(data.path()).await;
    let report = engine.ingest(&[docs.path().to_path_buf()], &mut |_| {}, &Cancel::new()).await.unwrap();
    assert_eq!(report.count(|o| matches!(o, FileOutcome::Indexed { .. })), 1, "{report:?}");
    let doc = &engine.documents().await.unwrap()[0];
    let chunks = engine.knowledge_base().chunk_records_of(&doc.doc_id).await.unwrap();
    assert!(chunks.len() > 2_000, "{} chunks", chunks.len());
    // Counted in full, as the chunker counts (the embedder's own copy truncates at 512).
    let mut tokenizer = engine.embedder().tokenizer().clone();
    tokenizer.with_truncation(None).unwrap();
    tokenizer.with_padding(None);
    for c in &chunks {
        assert!(c.text.len() <= quire_ingest::MAX_CHUNK_BYTES, "chunk {}: {} bytes", c.seq, c.text.len());
        assert!(c.tokens as usize <= quire_ingest::CHUNK_TOKENS, "chunk {}: {} tokens", c.seq, c.tokens);
        assert_eq!(&line[c.start as usize..c.end as usize], c.text);
        let counted = tokenizer.encode(c.text.as_str(), false).unwrap().len();
        assert!(counted <= quire_ingest::CHUNK_TOKENS, "chunk {}: {counted} tokens", c.seq);
    }
    let answer = engine.ask("What is in giant.md?", &mut |_| {}, &Cancel::new()).await.unwrap();
    assert!(answer.sources.iter().all(|s| s.path.ends_with("giant.md")));
    assert!(answer.stats.prompt_tokens < 8_000, "a prompt of {} tokens", answer.stats.prompt_tokens);
}

/// A follow-up that points back ("Which platforms does it support?" after "What is
/// keyring-rs?") is searched together with the question before it, so it finds that question's
/// document where the bare follow-up finds another; and the model is shown the earlier turn
/// after the sources, before the question.
#[tokio::test(flavor = "multi_thread")]
async fn a_follow_up_is_searched_and_answered_in_its_conversation() {
    let data = tempfile::tempdir().unwrap();
    // Room for the list of platforms the prompt asks for (all of them).
    let engine = answering_the_markdown_samples(data.path(), 400).await;
    let (first, follow_up) = ("What is keyring-rs?", "Which platforms does it support?");
    let file = |path: &str| std::path::Path::new(path).file_name().unwrap().to_string_lossy().into_owned();
    // Alone, the follow-up finds another README: what the conversation has to change.
    let bare = engine.retrieve(follow_up).await.unwrap();
    assert_ne!(file(&bare[0].path), "keyring-README.md", "the bare follow-up already finds keyring");

    let answer = engine.ask(first, &mut |_| {}, &Cancel::new()).await.unwrap();
    let earlier = [quire_engine::Turn { question: first.into(), answer: answer.text.clone() }];
    let mut found = Vec::new();
    let followed = engine
        .ask_following(
            &earlier,
            follow_up,
            &mut |e| {
                if let Event::Retrieved { sources } = e {
                    found = sources.iter().map(|s| file(&s.path)).collect();
                }
            },
            &Cancel::new(),
        )
        .await
        .unwrap();
    assert_eq!(found.first().map(String::as_str), Some("keyring-README.md"), "{found:?}");
    assert_eq!(followed.question, follow_up);
    // The engine keeps the history itself (the app, the CLI and the local API alike): both
    // exchanges, in order, with the passages each answer was written from.
    let kept = engine.history().load().unwrap();
    let asked: Vec<&str> = kept.iter().map(|e| e.question.as_str()).collect();
    assert_eq!(asked, [first, follow_up]);
    assert_eq!(kept[1].answer, followed.text);
    assert_eq!(kept[1].sources, followed.sources);

    let hits = engine.retrieve(&quire_engine::conversation::search_text(&earlier, follow_up)).await.unwrap();
    let prompt = engine.answer_request_following(&earlier, follow_up, &hits, &[]).user;
    let shown: String = answer.text.trim().chars().take(40).collect();
    let turn = format!("Earlier in this conversation:\nQ: {first}\nA: {shown}");
    let (sources, rest) = prompt.split_once(&turn).unwrap_or_else(|| panic!("no earlier turn in {prompt:?}"));
    assert!(sources.starts_with("Sources:") && sources.contains("keyring-README.md"), "{prompt}");
    assert!(rest.ends_with(&format!("Question: {follow_up}")), "{prompt}");
}
