//! Quire's own decoder on the real tiny model (SmolLM2-135M): it answers sensibly, its cache
//! cuts back exactly, speculative greedy output equals plain output, grammar-held output
//! parses, and speculative sampling keeps the target's distribution.

use std::collections::HashMap;

use candle_core::Device;
use quire_llm::decoder::{
    Cache, Decoder, DeviceTransformer, KvPrecision, Network, Placement, Speculation, Transformer,
};
use quire_llm::{GenerationRequest, Progress};

fn tiny() -> std::path::PathBuf {
    quire_testkit::model(&quire_models::SMOLLM2)
}

fn request(user: &str, max_tokens: usize) -> GenerationRequest {
    GenerationRequest {
        system: "You are a helpful assistant.".into(),
        user: user.into(),
        schema: None,
        max_tokens,
        temperature: None,
    }
}

#[test]
fn the_tiny_model_answers_a_plain_question() {
    let decoder = Decoder::load(&tiny(), None).unwrap();
    let out = decoder
        .generate(
            &request("What is the capital of France? Answer in one word.", 12),
            &Speculation::off(),
            0,
            |_| {},
            || false,
        )
        .unwrap();
    assert!(out.generation.text.contains("Paris"), "{:?}", out.generation.text);
    assert!(out.generation.stats.prompt_tokens > 10);
}

/// The wait before the first word is the prompt: its progress is reported block by block,
/// climbing to the whole prompt before any text, and watching it changes nothing.
#[test]
fn the_prompt_reports_its_progress_before_the_first_text() {
    let decoder = Decoder::load(&tiny(), None).unwrap();
    // Long enough for several prompt blocks.
    let passage = "The heron nests by the north pond every spring, and the kingfisher waits. ".repeat(60);
    let req = request(&format!("{passage}\nWhere does the heron nest?"), 8);
    let mut seen: Vec<Result<(usize, usize), String>> = Vec::new();
    let watched = decoder
        .generate(
            &req,
            &Speculation::off(),
            0,
            |p| match p {
                Progress::Prompt { done, total } => seen.push(Ok((done, total))),
                Progress::Text(t) => seen.push(Err(t.to_string())),
            },
            || false,
        )
        .unwrap();
    let prompt: Vec<(usize, usize)> = seen.iter().map_while(|e| e.clone().ok()).collect();
    let total = watched.generation.stats.prompt_tokens;
    assert!(total > 600, "a prompt of {total} tokens");
    assert_eq!(prompt.first(), Some(&(0, total)), "{prompt:?}");
    assert_eq!(prompt.last(), Some(&(total, total)), "{prompt:?}");
    assert!(prompt.len() >= 4 && prompt.windows(2).all(|w| w[0].0 < w[1].0 && w[1].1 == total), "{prompt:?}");
    let text: String =
        seen[prompt.len()..].iter().map(|e| e.clone().expect_err("prompt progress after the text began")).collect();
    assert_eq!(text, watched.generation.text);
    let unwatched = decoder.generate(&req, &Speculation::off(), 0, |_| {}, || false).unwrap();
    assert_eq!(unwatched.generation.text, watched.generation.text);
}

/// In either precision of the cache (what speculation rests on: a rejected draft cut back, a
/// batch and one token at a time giving the same bits).
#[test]
fn cutting_the_cache_back_gives_the_logits_of_a_fresh_run() {
    let model = Transformer::load(&tiny()).unwrap();
    let tokens: Vec<u32> = (100..140).collect();
    for precision in [KvPrecision::F32, KvPrecision::Int8] {
        let mut fresh = model.new_cache_in(precision, 64);
        let expected = model.forward(&tokens, &mut fresh, 39).unwrap();

        let mut cache = model.new_cache_in(precision, 64);
        model.forward(&tokens[..30], &mut cache, usize::MAX).unwrap();
        // Rejected drafts: run five wrong tokens, then cut them off.
        model.forward(&[7, 7, 7, 7, 7], &mut cache, 0).unwrap();
        cache.truncate(30);
        assert_eq!(cache.len(), 30);
        // The rest in one batch: the last token's logits equal the fresh single run bit for bit.
        let again = model.forward(&tokens[30..], &mut cache, 9).unwrap();
        assert_eq!(again, expected, "{precision:?}");
        // And one token at a time gives the same again.
        cache.truncate(39);
        let single = model.forward(&tokens[39..], &mut cache, 0).unwrap();
        assert_eq!(single, expected, "{precision:?}");
    }
}

/// The 8-bit cache against the f32 one over the same text: the logits near, the next token the
/// same nearly everywhere, in about a quarter of the memory (the rows' bytes and their scales).
#[test]
fn an_eight_bit_cache_stays_near_the_f32_cache_in_a_quarter_of_the_memory() {
    let path = tiny();
    let (content, mut reader) = quire_llm::decoder::open_gguf(&path).unwrap();
    let model = Transformer::from_gguf(&path, &content, &mut reader).unwrap();
    let text = quire_llm::decoder::ChatText::from_gguf(&path, &content).unwrap();
    let tokens = text
        .encode("The heron nests by the north pond every spring, and the kingfisher waits by the weir for small fish. In autumn both birds move south along the river, past the mill and the old stone bridge, and the pond freezes over by the first week of December.")
        .unwrap();
    let vocab = model.config.vocab;
    let (mut wide, mut narrow) =
        (model.new_cache_in(KvPrecision::F32, 128), model.new_cache_in(KvPrecision::Int8, 128));
    let f32_logits = model.forward(&tokens, &mut wide, 0).unwrap();
    let int8_logits = model.forward(&tokens, &mut narrow, 0).unwrap();
    let spread = f32_logits.iter().map(|v| v.abs()).fold(0f32, f32::max);
    let mean = f32_logits.iter().zip(&int8_logits).map(|(a, b)| (a - b).abs()).sum::<f32>() / f32_logits.len() as f32;
    let best = |row: &[f32]| row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
    let agree = (0..tokens.len())
        .filter(|&t| best(&f32_logits[t * vocab..(t + 1) * vocab]) == best(&int8_logits[t * vocab..(t + 1) * vocab]))
        .count();
    eprintln!(
        "8-bit cache: logits differ by {:.3} % of their range on average; next token the same at {agree} of {}",
        100.0 * mean / spread,
        tokens.len()
    );
    assert!(mean < 0.01 * spread, "the 8-bit cache moves the logits by {mean} on average (range {spread})");
    assert!(agree * 10 >= tokens.len() * 9, "the next token agrees at {agree} of {} positions", tokens.len());
    // SmolLM2's heads are 64 wide: 64 bytes and two 4-byte scales a row against 256.
    assert_eq!(narrow.bytes() * 256, wide.bytes() * 72);
}

#[test]
fn a_cache_moved_to_other_buffers_gives_the_same_logits() {
    let model = Transformer::load(&tiny()).unwrap();
    let tokens: Vec<u32> = (200..260).collect();
    for precision in [KvPrecision::F32, KvPrecision::Int8] {
        let mut fresh = model.new_cache_in(precision, 64);
        let expected = model.forward(&tokens, &mut fresh, 59).unwrap();
        for room in [60, 64, 100, 200] {
            let mut cache = model.new_cache_in(precision, 64);
            model.forward(&tokens[..41], &mut cache, usize::MAX).unwrap();
            let mut moved = cache.with_room(room);
            assert_eq!((moved.len(), moved.capacity() >= room), (41, true));
            assert_eq!(moved.precision(), precision);
            let logits = model.forward(&tokens[41..], &mut moved, 18).unwrap();
            assert_eq!(logits, expected, "{precision:?}, room {room}");
        }
    }
}

/// A follow-up that begins like the last prompt (same instructions and passages, another
/// question) reuses what was processed and gets the reply a fresh run gives, token for token;
/// an unrelated prompt reuses only the chat template's start.
#[test]
fn a_kept_prompt_is_reused_exactly() {
    let decoder = Decoder::load(&tiny(), Some(&tiny())).unwrap();
    let passages =
        "Sources:\n\n[1] The heron nests by the north pond every spring; the kingfisher waits by the weir.\n\n"
            .repeat(12);
    let ask = |question: &str| request(&format!("{passages}Question: {question}"), 24);
    let first = decoder.generate(&ask("Where does the heron nest?"), &Speculation::off(), 0, |_| {}, || false).unwrap();
    assert_eq!(first.generation.stats.prompt_reused_tokens, 0);
    assert!(decoder.kept_prompt().0 + 1 == first.generation.stats.prompt_tokens && decoder.kept_prompt().1 > 0);

    for speculation in [Speculation::off(), Speculation::default()] {
        let follow_up = ask("What does the kingfisher do?");
        decoder.generate(&ask("Where does the heron nest?"), &Speculation::off(), 0, |_| {}, || false).unwrap();
        let mut first_progress = None;
        let reused = decoder
            .generate(
                &follow_up,
                &speculation,
                0,
                |p| {
                    if let Progress::Prompt { done, .. } = p {
                        first_progress.get_or_insert(done);
                    }
                },
                || false,
            )
            .unwrap();
        let stats = &reused.generation.stats;
        let question_tokens = 24;
        assert!(
            stats.prompt_reused_tokens + question_tokens > stats.prompt_tokens
                && stats.prompt_reused_tokens < stats.prompt_tokens,
            "{stats:?}"
        );
        assert_eq!(first_progress, Some(stats.prompt_reused_tokens), "progress starts at what was reused");
        decoder.forget_prompt();
        assert_eq!(decoder.kept_prompt(), (0, 0));
        let fresh = decoder.generate(&follow_up, &speculation, 0, |_| {}, || false).unwrap();
        assert_eq!(fresh.generation.stats.prompt_reused_tokens, 0);
        assert_eq!(reused.tokens, fresh.tokens, "a reused prompt changed the reply");
    }

    let other = decoder.generate(&request("Name a colour.", 8), &Speculation::off(), 0, |_| {}, || false).unwrap();
    let reused = other.generation.stats.prompt_reused_tokens;
    assert!(reused > 0 && reused < 30, "only the chat template's start is shared: {reused}");
}

#[test]
fn a_warmed_model_reuses_the_shared_prompt_start_exactly() {
    let decoder = Decoder::load(&tiny(), None).unwrap();
    let system = "You are a helpful assistant.";
    let question = request("Sources:\n\n[1] (heron.txt)\nThe heron nests by the north pond.\n\nQuestion: Where?", 16);
    let fresh = decoder.generate(&question, &Speculation::default(), 0, |_| {}, || false).unwrap();
    decoder.forget_prompt();

    let warmed = decoder.warm(system, "Sources:\n\n[1] (").unwrap();
    assert!(warmed > 0 && decoder.kept_prompt().0 == warmed, "the warmed start is kept: {warmed}");
    assert_eq!(decoder.warm(system, "Sources:\n\n[1] (").unwrap(), 0, "a kept prompt is not processed again");
    let first = decoder.generate(&question, &Speculation::default(), 0, |_| {}, || false).unwrap();
    let reused = first.generation.stats.prompt_reused_tokens;
    // The template, the instructions and the turn's opening, all of it; the passage is new.
    assert_eq!(reused, warmed);
    assert_eq!(first.tokens, fresh.tokens, "the warmed start changed the reply");
}

#[test]
fn speculative_greedy_output_equals_plain_output_with_and_without_a_grammar() {
    // The tiny model drafts for itself here (same tokenizer, as a draft must); the point is
    // the mechanics: drafts from all three sources, rejections, cache cut-backs.
    speculative_equals_plain(&Decoder::load_on(&tiny(), Some(&tiny()), Placement::Kernels).unwrap());
}

/// The GPU code path (candle tensors, the device's KV cache), on candle's CPU device: greedy
/// speculation gives plain decoding's output there too.
#[test]
fn speculative_greedy_output_equals_plain_output_on_the_candle_path() {
    let decoder = Decoder::load_on(&tiny(), Some(&tiny()), Placement::Candle(Device::Cpu)).unwrap();
    assert!(matches!(decoder.target(), Network::Device(_)));
    speculative_equals_plain(&decoder);
}

fn speculative_equals_plain(decoder: &Decoder) {
    let schema = serde_json::json!({
        "x-guidance": { "whitespace_flexible": false },
        "type": "object",
        "properties": {
            "answer": { "type": "string", "maxLength": 200 },
            "citations": { "type": "array", "maxItems": 2, "items": {
                "type": "object",
                "properties": {
                    "quote": { "type": "string", "enum": ["The Rhine flows through Basel.", "Basel lies on the Rhine in Switzerland."] },
                    "chunk": { "type": "integer", "const": 1 }
                },
                "required": ["quote", "chunk"], "additionalProperties": false
            }}
        },
        "required": ["answer", "citations"], "additionalProperties": false
    });
    let prompts = [
        ("Sources:\n[1] Basel lies on the Rhine in Switzerland. The Rhine flows through Basel.\n\nQuestion: Which river flows through Basel?", Some(schema.clone())),
        ("List the days of the week, Monday to Sunday, separated by commas.", None),
        ("Repeat this sentence twice: the quick brown fox jumps over the lazy dog.", None),
    ];
    let mut drafted = HashMap::new();
    let mut tree_steps = 0;
    for (user, schema) in prompts {
        let mut req = request(user, 120);
        req.schema = schema.clone();
        // The default (chains of drafts) and trees of the lookup's continuations.
        let chain = Speculation { respect_thermal: false, ..Speculation::default() };
        let tree = Speculation { lookup_branches: 4, ..chain.clone() };
        let runs = decoder.compare(&req, &[chain, tree], 0).unwrap();
        let plain = &runs[0];
        let out = &runs[2];
        assert_eq!(runs[1].tokens, plain.tokens, "{user}: chains differ from plain decoding");
        assert_eq!(runs[1].speculation.tree_steps, 0, "one continuation a step makes chains");
        let stats = &out.speculation;
        assert_eq!(out.tokens, plain.tokens, "{user}: {:?}\nvs plain {:?}", out.generation.text, plain.generation.text);
        // How sure the model was of each token (the answer's confidence) does not depend on
        // which step took it: drafts verified in a batch get the bits a step of one gives.
        let sure = &plain.generation.token_probabilities;
        assert_eq!(sure.len(), plain.tokens.len());
        assert!(sure.iter().all(|t| t.probability > 0.0 && t.probability <= 1.0), "{sure:?}");
        assert_eq!(sure.last().map(|t| t.end), Some(plain.generation.text.len()), "the tokens end where the text does");
        assert!(sure.windows(2).all(|w| w[0].end <= w[1].end));
        assert_eq!(&out.generation.token_probabilities, sure, "{user}: the speculative run's probabilities differ");
        let steps = plain.speculation.verify_steps;
        assert!(
            steps == plain.tokens.len() || steps == plain.tokens.len() + 1,
            "plain decoding runs one step per token"
        );
        assert!(stats.verify_steps < out.tokens.len(), "{user}: no step took more than one token ({stats:?})");
        if schema.is_some() {
            let value: serde_json::Value =
                serde_json::from_str(&out.generation.text).unwrap_or_else(|e| panic!("{e}: {}", out.generation.text));
            assert!(value["citations"].as_array().is_some());
        }
        for source in quire_llm::decoder::SOURCES {
            *drafted.entry(source).or_insert(0) += stats.source(source).proposed;
        }
        tree_steps += stats.tree_steps;
    }
    for source in quire_llm::decoder::SOURCES {
        assert!(drafted[&source] > 0, "no drafts from {source:?}: {drafted:?}");
    }
    // Quire's kernels verified trees of the prompt lookup's continuations on the way (the
    // repeated sentence and the listed days go on differently from their earlier copies);
    // candle's path verifies chains.
    if decoder.target().verifies_trees() {
        assert!(tree_steps > 0, "no step verified a tree");
    } else {
        assert_eq!(tree_steps, 0);
    }
}

/// Two-sample chi-square test of homogeneity; categories with fewer than 10 expected
/// observations are pooled. Returns (statistic, degrees of freedom).
fn chi_square(a: &HashMap<Vec<u32>, usize>, b: &HashMap<Vec<u32>, usize>) -> (f64, usize) {
    let (na, nb) = (a.values().sum::<usize>() as f64, b.values().sum::<usize>() as f64);
    let mut keys: Vec<&Vec<u32>> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let mut pooled = (0.0, 0.0);
    for k in keys {
        let (x, y) = (*a.get(k).unwrap_or(&0) as f64, *b.get(k).unwrap_or(&0) as f64);
        if (x + y) * na.min(nb) / (na + nb) < 10.0 {
            pooled.0 += x;
            pooled.1 += y;
        } else {
            cells.push((x, y));
        }
    }
    if pooled.0 + pooled.1 > 0.0 {
        cells.push(pooled);
    }
    let mut stat = 0.0;
    for (x, y) in &cells {
        let total = x + y;
        let (ea, eb) = (total * na / (na + nb), total * nb / (na + nb));
        stat += (x - ea).powi(2) / ea + (y - eb).powi(2) / eb;
    }
    (stat, cells.len().saturating_sub(1))
}

/// The chi-square distribution's 99th percentile (Wilson–Hilferty).
fn chi_square_99(df: usize) -> f64 {
    let k = df as f64;
    let z = 2.326_348;
    k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
}

#[test]
fn speculative_sampling_keeps_the_targets_distribution() {
    // The draft samples hotter than the target, so its proposals differ in distribution from
    // the target's and the rejection rule has work to do.
    let decoder = Decoder::load(&tiny(), Some(&tiny())).unwrap();
    // Two tokens: the first comes from the prompt's logits, the second is drafted (by the draft
    // model, the lookup or nobody) and verified, so its distribution is what the rule must keep.
    let mut req = request("Name one colour of the rainbow.", 2);
    req.system = "Answer in one word.".into();
    req.temperature = Some(0.8);
    let speculation = Speculation {
        draft_temperature: Some(1.6),
        min_draft_probability: 0.0,
        respect_thermal: false,
        // Draft at every step, whatever it costs: the rule is what is tested.
        choose_by_cost: false,
        lookup_drafts: false,
        ..Speculation::default()
    };
    let (mut plain, mut spec) = (HashMap::new(), HashMap::new());
    let mut model_rejections = 0;
    for i in 0..600u64 {
        // Plain and speculative draws of one prompt cache, independent seeds (2i, 2i + 1).
        let runs = decoder.compare(&req, std::slice::from_ref(&speculation), 2 * i).unwrap();
        *plain.entry(runs[0].tokens.clone()).or_insert(0usize) += 1;
        let s = &runs[1];
        model_rejections += s.speculation.model.proposed - s.speculation.model.accepted;
        *spec.entry(s.tokens.clone()).or_insert(0usize) += 1;
    }
    assert!(model_rejections > 20, "the rejection rule was hardly exercised ({model_rejections})");
    let (stat, df) = chi_square(&plain, &spec);
    assert!(df >= 3, "too few distinct outputs to compare: {plain:?}");
    assert!(
        stat < chi_square_99(df),
        "chi-square {stat:.1} ≥ {:.1} (df {df}): distributions differ",
        chi_square_99(df)
    );
    eprintln!(
        "chi-square {stat:.2} < {:.2} (df {df}); model drafts rejected {model_rejections} times",
        chi_square_99(df)
    );
}

#[test]
fn the_chi_square_check_itself_rejects_different_distributions() {
    let a: HashMap<Vec<u32>, usize> = [(vec![1], 300), (vec![2], 200), (vec![3], 100)].into();
    let b: HashMap<Vec<u32>, usize> = [(vec![1], 200), (vec![2], 200), (vec![3], 200)].into();
    let (stat, df) = chi_square(&a, &b);
    assert_eq!(df, 2);
    assert!(stat > chi_square_99(df));
    let (same, _) = chi_square(&a, &a);
    assert!(same < 1e-9);
    // Wilson–Hilferty against table values: χ²(0.99; 2) = 9.21, χ²(0.99; 10) = 23.21.
    assert!((chi_square_99(2) - 9.21).abs() < 0.15 && (chi_square_99(10) - 23.21).abs() < 0.1);
}

/// Prompt processing of the default model on this machine: a RAG-sized prompt (656 new tokens
/// after 118 kept, as `quire bench ttft` with focused passages) in the decoder's blocks of 256,
/// three runs, then a follow-up's 23 tokens after it, then 32 steps of plain decoding and a
/// verification pass of each size; prints the rates. For profiling
/// kernels (`perf record` on this test).
#[test]
#[ignore = "a measurement: cargo test --release --test decoder prompt_speed -- --ignored --nocapture"]
fn prompt_speed() {
    let model = Transformer::load(&quire_testkit::model(&quire_models::QWEN_1_5B)).unwrap();
    let tokens: Vec<u32> = (0..774u32).map(|i| 1000 + i * 7919 % 30000).collect();
    let (kept, total) = (118, tokens.len());
    let mut cache = model.new_cache(total + 32);
    model.forward(&tokens[..kept], &mut cache, usize::MAX).unwrap();
    let mut last = Vec::new();
    for run in 0..3 {
        cache.truncate(kept);
        let start = std::time::Instant::now();
        for block in tokens[kept..total - 1].chunks(256) {
            model.forward(block, &mut cache, usize::MAX).unwrap();
        }
        let logits = model.forward(&tokens[total - 1..], &mut cache, 0).unwrap();
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "run {run}: {} tokens in {seconds:.2} s, {:.1} tokens/s",
            total - kept,
            (total - kept) as f64 / seconds
        );
        // Every run the same logits: the measurement measures the same work.
        assert!(last.is_empty() || last == logits);
        last = logits;
    }
    // A follow-up's new tokens after the whole prompt.
    for run in 0..3 {
        cache.truncate(total);
        let start = std::time::Instant::now();
        model.forward(&tokens[..22], &mut cache, usize::MAX).unwrap();
        model.forward(&tokens[22..23], &mut cache, 0).unwrap();
        println!("follow-up {run}: 23 tokens in {:.2} s", start.elapsed().as_secs_f64());
    }
    // Plain decoding's steps: one token at a time after the whole prompt.
    for run in 0..3 {
        cache.truncate(total);
        let start = std::time::Instant::now();
        for t in 0..32 {
            model.forward(&tokens[t..t + 1], &mut cache, 0).unwrap();
        }
        println!("decode {run}: 32 tokens one at a time, {:.2} tokens/s", 32.0 / start.elapsed().as_secs_f64());
    }
    for m in [1, 2, 4, 5, 6, 8, 12] {
        cache.truncate(total);
        let start = std::time::Instant::now();
        model.forward(&tokens[..m], &mut cache, 0).unwrap();
        println!("verify {m}: {:.3} s", start.elapsed().as_secs_f64());
    }
}

/// The candle network computes what the CPU kernels do (within the rounding of other kernels),
/// and in verify-sized passes gives a token the same logits whatever pass it is in, padded to
/// a fixed width (as on GPUs) or not, after its cache was cut back and after it moved to larger
/// tensors.
#[test]
fn the_candle_network_matches_the_cpu_kernels_and_does_not_depend_on_batching() {
    let path = tiny();
    let (content, mut reader) = quire_llm::decoder::open_gguf(&path).unwrap();
    let cpu = Transformer::from_gguf(&path, &content, &mut reader).unwrap();
    let text = quire_llm::decoder::ChatText::from_gguf(&path, &content).unwrap();
    let tokens = text
        .encode("The heron nests by the north pond every spring, and the kingfisher waits by the weir for small fish. In autumn both birds move south along the river, past the mill and the old stone bridge.")
        .unwrap()[..40]
        .to_vec();
    let vocab = cpu.config.vocab;
    // candle's CPU device keeps its cache in f32: compared with the kernels' f32 cache.
    let expected = cpu.forward(&tokens, &mut cpu.new_cache_in(KvPrecision::F32, 64), 0).unwrap();
    let best = |row: &[f32]| row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
    let same = |a: &[f32], b: &[f32], what: &str| {
        let worst = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0f32, f32::max);
        assert!(a.len() == b.len() && worst == 0.0, "{what}: logits differ by up to {worst}");
    };

    for width in [None, Some(8)] {
        let device = DeviceTransformer::from_gguf(&path, &content, &mut reader, &Device::Cpu).unwrap();
        let network = Network::Device(device.with_fixed_width(width));
        assert_eq!(network.config().vocab, vocab);
        let all = network.forward(&tokens, &mut network.new_cache(64).unwrap(), 0).unwrap();
        let worst = all.iter().zip(&expected).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        let mean = all.iter().zip(&expected).map(|(a, b)| (a - b).abs()).sum::<f32>() / all.len() as f32;
        let spread = expected.iter().map(|v| v.abs()).fold(0f32, f32::max);
        // Both quantize activations to 8 bits, in other kernels: measured 0.6 % of the logits'
        // range on average, 4 % at worst (candle with f32 weights differs from both more).
        assert!(
            mean < 0.01 * spread && worst < 0.08 * spread,
            "candle differs from the CPU kernels by {mean} on average, {worst} at worst (logits up to {spread})"
        );
        let agree = (0..tokens.len())
            .filter(|&t| best(&all[t * vocab..(t + 1) * vocab]) == best(&expected[t * vocab..(t + 1) * vocab]))
            .count();
        assert!(agree * 10 >= tokens.len() * 9, "the next token agrees at {agree} of {} positions", tokens.len());

        // After 24 tokens: 16 in one verify-sized pass; the same in passes of 4, 1, 3 and 8,
        // cut back to 36 and redone, cut back to 34 in a copy moved to larger tensors.
        let mut cache: Cache = network.new_cache(64).unwrap();
        network.forward(&tokens[..24], &mut cache, 24).unwrap();
        let mut at_once = cache.clone();
        let sixteen = network.forward(&tokens[24..40], &mut at_once, 0).unwrap();
        network.forward(&tokens[24..28], &mut cache, 4).unwrap();
        let one = network.forward(&tokens[28..29], &mut cache, 0).unwrap();
        let three = network.forward(&tokens[29..32], &mut cache, 0).unwrap();
        network.forward(&tokens[32..40], &mut cache, 8).unwrap();
        cache.truncate(36);
        let redone = network.forward(&tokens[36..40], &mut cache, 0).unwrap();
        let mut moved = cache.clone().with_room(200).unwrap();
        assert!(moved.capacity() >= 200 && moved.len() == 40);
        moved.truncate(34);
        let after_move = network.forward(&tokens[34..36], &mut moved, 0).unwrap();
        let row = |from: usize, to: usize| &sixteen[(from - 24) * vocab..(to - 24) * vocab];
        same(&one, row(28, 29), &format!("width {width:?}: a pass of 1"));
        same(&three, row(29, 32), &format!("width {width:?}: a pass of 3"));
        same(&redone, row(36, 40), &format!("width {width:?}: after a cut-back"));
        same(&after_move, row(34, 36), &format!("width {width:?}: after a move"));
    }
}

/// A Q4_K_M model (Qwen2.5-Coder-0.5B: its matrices in Q4_K and Q6_K, the kernels' own
/// formats, where the tiny model's are widened to Q8_0): a 48-token prompt through the panels
/// and the same tokens one at a time through the tiles give the same last logits, and their
/// bits are the ones recorded on x86-64 (AVX-512 VNNI; with the f32 cache 2026-12-05, with the
/// 8-bit cache 2026-12-07). Every kernel set gives them: `QUIRE_KERNELS=avx2` or `portable`
/// here, NEON under qemu (tools/test-aarch64.sh).
#[test]
#[ignore = "full tier (scripts/test.sh --full): the 0.5B model"]
fn a_q4_k_m_model_gives_the_recorded_logits_by_panels_and_by_tiles() {
    let model = Transformer::load(&quire_testkit::model(&quire_models::QWEN_0_5B)).unwrap();
    let tokens: Vec<u32> = (0..48).map(|i| 1000 + i * 37).collect();
    for (precision, recorded) in [(KvPrecision::F32, 12481446713971128534u64), (KvPrecision::Int8, INT8_DIGEST)] {
        let mut cache = model.new_cache_in(precision, 64);
        let batched = model.forward(&tokens, &mut cache, 47).unwrap();
        let mut cache = model.new_cache_in(precision, 64);
        for t in &tokens[..47] {
            model.forward(&[*t], &mut cache, usize::MAX).unwrap();
        }
        let alone = model.forward(&tokens[47..], &mut cache, 0).unwrap();
        assert!(batched.iter().zip(&alone).all(|(a, b)| a.to_bits() == b.to_bits()), "panels and tiles differ");
        let digest =
            batched.iter().fold(0xcbf29ce484222325u64, |h, v| (h ^ v.to_bits() as u64).wrapping_mul(0x100000001b3));
        let best = batched.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).unwrap().0;
        let (kernels, cache) = (quire_llm::decoder::kernel_name(), precision.name());
        println!("kernels {kernels}, {cache} cache: logits digest {digest}, best token {best}");
        assert_eq!(digest, recorded, "the logits' bits differ from x86-64's ({cache} cache)");
    }
}

/// The logits' digest of the test above with the 8-bit cache, as x86-64 gives it.
const INT8_DIGEST: u64 = 4472693488319759;

/// A tree of drafts verified in one pass (what tree speculation rests on): every token gets
/// the logits its branch gets run alone as a chain, bit for bit, in either precision of the
/// cache; the accepted branch kept (its rows moved next to the cache) goes on as a fresh run.
#[test]
fn a_tree_of_drafts_gives_each_branch_the_logits_of_its_chain() {
    tree_gives_each_branch_its_chain(&Transformer::load(&tiny()).unwrap());
}

/// The same on the 0.5B Q4_K_M model (its Q4_K and Q6_K kernels, 2 KV heads for 14 query heads).
#[test]
#[ignore = "full tier (scripts/test.sh --full): the 0.5B model"]
fn a_tree_of_drafts_on_the_half_billion_model_gives_each_branch_its_chain() {
    tree_gives_each_branch_its_chain(&Transformer::load(&quire_testkit::model(&quire_models::QWEN_0_5B)).unwrap());
}

fn tree_gives_each_branch_its_chain(model: &Transformer) {
    let vocab = model.config.vocab;
    let prompt: Vec<u32> = (300..321).collect();
    // 0 ─ 1 ─ 2 ─ 3          the first chain
    //   │   └ 4 ─ 5          a branch after token 1
    //   └ 6 ─ 7 ─ 8          a branch from the root, 19 tokens on: past a key block's end
    //             └ … 9..=20
    let tokens: Vec<u32> = (0..21).map(|i| 500 + 11 * i).collect();
    let mut parents = vec![0, 1, 2, 1, 4, 0, 6, 7];
    parents.extend(8..20);
    let path = |mut n: usize| {
        let mut path = vec![n];
        while n > 0 {
            n = parents[n - 1];
            path.push(n);
        }
        path.reverse();
        path
    };
    for precision in [KvPrecision::F32, KvPrecision::Int8] {
        let mut cache = model.new_cache_in(precision, 96);
        model.forward(&prompt, &mut cache, usize::MAX).unwrap();
        let mut tree = cache.clone();
        let logits = model.forward_tree(&tokens, &parents, &mut tree, 0).unwrap();
        assert_eq!(tree.len(), prompt.len() + tokens.len());
        for n in 0..tokens.len() {
            let branch: Vec<u32> = path(n).iter().map(|&i| tokens[i]).collect();
            let mut alone = cache.clone();
            let chain = model.forward(&branch, &mut alone, branch.len() - 1).unwrap();
            assert!(
                chain.iter().zip(&logits[n * vocab..(n + 1) * vocab]).all(|(a, b)| a.to_bits() == b.to_bits()),
                "{precision:?}: token {n} of the tree differs from its branch run alone"
            );
        }
        // Keep the branch 0-6-7-8-9, then go on: a fresh run of the prompt and that branch.
        let kept = [0, 6, 7, 8, 9];
        let slots: Vec<usize> = kept.iter().map(|&i| prompt.len() + i).collect();
        tree.keep_branch(prompt.len(), &slots);
        assert_eq!(tree.len(), prompt.len() + kept.len());
        let next = [42, 43, 44];
        let after_tree = model.forward(&next, &mut tree, 0).unwrap();
        let mut fresh = model.new_cache_in(precision, 96);
        let mut whole = prompt.clone();
        whole.extend(kept.iter().map(|&i| tokens[i]));
        whole.extend(next);
        let expected = model.forward(&whole, &mut fresh, whole.len() - next.len()).unwrap();
        assert_eq!(after_tree, expected, "{precision:?}: the kept branch goes on as a fresh run");
    }
}
