//! `quire bench kv`: the CPU decoder's KV cache in f32 and in 8 bits side by side, after prompts
//! of several depths (the sample documents' text): bytes a token, the cache's size, decoding's
//! tokens/s (each depth's two precisions in alternated rounds, their raw figures beside the
//! medians), and how near the 8-bit cache's next-token distributions are to f32's.

use std::time::Instant;

use anyhow::Result;
use clap::Args;
use quire_llm::decoder::{ChatText, KvPrecision, Transformer};

#[derive(Args)]
pub struct KvArgs {
    /// Answer model (name or GGUF path).
    #[arg(long, default_value = "qwen2.5-coder-1.5b")]
    model: String,
    /// Prompt lengths, in tokens, before decoding is timed.
    #[arg(long, value_delimiter = ',', default_value = "1024,4096,16384")]
    depths: Vec<usize>,
    /// Tokens decoded (one at a time, greedy) after each prompt.
    #[arg(long, default_value_t = 32)]
    decode_tokens: usize,
    /// Rounds per depth, each running both precisions (their order alternating).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
}

/// The prompt: the sample documents' text (Markdown and PDFs, as ingestion reads them), one
/// after another, repeated if the depth asks for more.
fn prompt_tokens(text: &ChatText, depth: usize) -> Result<Vec<u32>> {
    let docs = crate::bench_inputs::default_docs()?;
    let (mut files, _) = quire_engine::discover_files(&[docs], false);
    files.sort();
    let mut tokens = Vec::new();
    for file in files {
        if let Ok(doc) = quire_ingest::load_file(&file) {
            for page in doc.pages {
                tokens.extend(text.encode(&page.text)?);
            }
        }
        if tokens.len() >= depth {
            break;
        }
    }
    anyhow::ensure!(!tokens.is_empty(), "the sample documents hold no text");
    Ok(tokens.iter().copied().cycle().take(depth).collect())
}

/// How near the 8-bit cache's next-token distributions are to f32's over `prompt`, the two run
/// side by side 512 tokens at a time: the share of positions whose most likely token is the
/// same, and the mean KL divergence of the 8-bit distribution from f32's (nats).
fn fidelity(model: &Transformer, prompt: &[u32]) -> Result<(f64, f64)> {
    let vocab = model.config.vocab;
    let mut wide = model.new_cache_in(KvPrecision::F32, prompt.len());
    let mut narrow = model.new_cache_in(KvPrecision::Int8, prompt.len());
    let (mut same, mut kl) = (0usize, 0f64);
    for part in prompt.chunks(512) {
        let a = model.forward(part, &mut wide, 0)?;
        let b = model.forward(part, &mut narrow, 0)?;
        for (p, q) in a.chunks(vocab).zip(b.chunks(vocab)) {
            same += usize::from(argmax(p) == argmax(q));
            let (lp, lq) = (log_softmax(p), log_softmax(q));
            kl += lp.iter().zip(&lq).map(|(x, y)| x.exp() * (x - y)).sum::<f64>();
        }
    }
    Ok((same as f64 / prompt.len() as f64, kl / prompt.len() as f64))
}

fn argmax(row: &[f32]) -> u32 {
    row.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i as u32)
}

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let top = row.iter().fold(f32::MIN, |m, &x| m.max(x)) as f64;
    let sum: f64 = row.iter().map(|&x| (x as f64 - top).exp()).sum();
    row.iter().map(|&x| x as f64 - top - sum.ln()).collect()
}

pub fn run(args: KvArgs) -> Result<()> {
    let path = quire_models::resolve(&args.model)?;
    let (content, mut reader) = quire_llm::decoder::open_gguf(&path)?;
    let model = Transformer::from_gguf(&path, &content, &mut reader)?;
    let text = ChatText::from_gguf(&path, &content)?;
    println!(
        "machine: {} cores, {}; model {}; {} tokens decoded after each prompt",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        crate::bench_inputs::cpu_name(),
        path.file_name().unwrap_or_default().to_string_lossy(),
        args.decode_tokens
    );
    let precisions = [KvPrecision::F32, KvPrecision::Int8];
    println!(
        "{:>7} {:>6} {:>12} {:>10} {:>12}  raw tok/s per round",
        "depth", "cache", "bytes/token", "cache MB", "decode tok/s"
    );
    for &depth in &args.depths {
        let prompt = prompt_tokens(&text, depth)?;
        let mut speeds: Vec<Vec<f64>> = vec![Vec::new(); precisions.len()];
        let mut bytes = vec![0usize; precisions.len()];
        let mut continuations: Vec<Vec<u32>> = vec![Vec::new(); precisions.len()];
        for round in 0..args.rounds {
            let mut order: Vec<usize> = (0..precisions.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let mut cache = model.new_cache_in(precisions[i], depth + args.decode_tokens);
                let mut logits = Vec::new();
                for part in prompt.chunks(512) {
                    logits = model.forward(part, &mut cache, part.len() - 1)?;
                }
                let mut next = argmax(&logits);
                let mut decoded = Vec::with_capacity(args.decode_tokens);
                let t = Instant::now();
                for _ in 0..args.decode_tokens {
                    decoded.push(next);
                    next = argmax(&model.forward(&[next], &mut cache, 0)?);
                }
                speeds[i].push(args.decode_tokens as f64 / t.elapsed().as_secs_f64());
                bytes[i] = cache.bytes();
                continuations[i] = decoded;
            }
        }
        for (i, precision) in precisions.iter().enumerate() {
            let mut sorted = speeds[i].clone();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[sorted.len() / 2];
            let raw: Vec<String> = speeds[i].iter().map(|s| format!("{s:.2}")).collect();
            println!(
                "{depth:>7} {:>6} {:>12} {:>10.1} {median:>12.2}  {}",
                precision.name(),
                bytes[i] / cache_positions(depth + args.decode_tokens),
                bytes[i] as f64 / 1e6,
                raw.join(" ")
            );
        }
        let same = continuations[0].iter().zip(&continuations[1]).take_while(|(a, b)| a == b).count();
        let (agree, kl) = fidelity(&model, &prompt)?;
        println!(
            "{depth:>7} 8-bit against f32: the greedy continuation the same for its first {same} of {} tokens; \
             over the prompt the most likely next token the same at {:.2} % of positions, KL {kl:.5} nats",
            args.decode_tokens,
            100.0 * agree
        );
    }
    Ok(())
}

/// Positions a cache for `tokens` holds (a whole number of key blocks).
fn cache_positions(tokens: usize) -> usize {
    tokens.next_multiple_of(quire_llm::decoder::KEY_BLOCK)
}
