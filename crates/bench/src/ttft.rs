//! `quire bench ttft`: time to first token of RAG answers on this machine, in one run: a fresh
//! question (nothing kept), the first question after loading (the app processes the prompt
//! start all answers share when it loads the model: `Engine::prepare_llm`), a new question
//! after another (the chat template and instructions kept from the last prompt) and a
//! follow-up over the same passages (everything but the new question kept). Each answer of the
//! last three is checked token for token against the fresh run of the same prompt: the kept
//! prompt must change nothing. Then each answer is decoded plainly (no drafts) over its kept
//! prompt, for the decoding speed at the prompt's depth. Then llama.cpp's llama-bench processes
//! a prompt of the same length, and generates 128 tokens after a prompt of that length, on the
//! same file and threads in each of its CPU configurations, for the ratios to its best.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;

use quire_engine::EngineConfig;
use quire_eval::answers::load_answer_set;
use quire_llm::decoder::{Decoded, Decoder, Speculation};
use quire_llm::GenerationRequest;

/// What a person asks after an answer, over the passages already shown.
const FOLLOW_UP: &str = "Quote the sentence of the sources that says this, and say which document it is from.";

#[derive(Args)]
pub struct TtftArgs {
    /// Questions as for `quire eval answers` (JSONL with question, document, pages).
    #[arg(long, default_value = "tests/eval/sample-docs-answers.jsonl")]
    questions: PathBuf,
    /// Folder holding the questions' documents (default: the sample documents in ../shared).
    #[arg(long)]
    docs: Option<PathBuf>,
    /// Questions asked (the first N).
    #[arg(long, default_value_t = 5)]
    limit: usize,
    /// Show the model only the sentences of each passage that bear on the question, this
    /// many tokens per passage on average; 0 shows whole passages.
    #[arg(long, default_value_t = quire_engine::DEFAULT_FOCUS_TOKENS)]
    focus_tokens: usize,
    /// Answer model (name or GGUF path).
    #[arg(long, default_value = "qwen2.5-coder-1.5b")]
    model: String,
    /// llama.cpp's `llama-bench`, run after Quire on the same GGUF file, prompt length and
    /// thread count for the side-by-side ratio. Default: where `tools/build-llama-bench.sh`
    /// puts it, if it is there.
    #[arg(long)]
    llama_bench: Option<PathBuf>,
}

pub async fn run(args: TtftArgs) -> Result<()> {
    let cases: Vec<_> = load_answer_set(&args.questions)?.into_iter().take(args.limit).collect();
    anyhow::ensure!(cases.len() >= 2, "give at least 2 questions (--limit)");
    let mut config = EngineConfig::from_home()?;
    config.llm_path = quire_models::resolve(&args.model)?;
    let model_path = config.llm_path.clone();
    config.draft_path = None;
    config.focus_tokens = (args.focus_tokens > 0).then_some(args.focus_tokens);
    let docs = match &args.docs {
        Some(d) => d.clone(),
        None => crate::bench_inputs::default_docs()?,
    };
    println!(
        "machine: {} cores, {}, {} kernels; model {}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        crate::bench_inputs::cpu_name(),
        quire_llm::decoder::kernel_name(),
        config.llm_path.display()
    );
    let work = tempfile::tempdir().context("cannot make a temporary folder")?;
    let engine = crate::eval::open_with_documents(config, &cases, Some(&docs), work.path()).await?;
    let decoder = engine
        .llm()
        .await?
        .decoder()
        .context("this model runs on mistral.rs, which keeps no prompt in Quire; pick a qwen2 or llama GGUF")?;
    // The app's speculation, without the thermal back-off (figures of the machine, not its mood).
    let speculation = Speculation { respect_thermal: false, ..Speculation::default() };

    // The wait before the prompt, as `Engine::ask` has it: the search, then the focus choosing
    // the passages' sentences (embedding them) and the prompt written; a follow-up over the same
    // passages finds their sentences' meanings kept.
    let mut requests = Vec::new();
    let mut before = Vec::new();
    for case in &cases {
        let started = Instant::now();
        let hits = engine.retrieve(&case.question).await?;
        let search = started.elapsed();
        let started = Instant::now();
        let unmentioned = engine.unmentioned(&case.question, &hits).await?;
        let fresh = engine.answer_request(&case.question, &hits, &unmentioned);
        let building = started.elapsed();
        let started = Instant::now();
        let follow_up = engine.answer_request(FOLLOW_UP, &hits, &[]);
        before.push([search, building, started.elapsed()]);
        requests.push((fresh, follow_up));
    }
    // The first question again, after the others: its passages' sentences were embedded for it
    // before (kept), so only the question is.
    let again = {
        let hits = engine.retrieve(&cases[0].question).await?;
        let unmentioned = engine.unmentioned(&cases[0].question, &hits).await?;
        let started = Instant::now();
        engine.answer_request(&cases[0].question, &hits, &unmentioned);
        started.elapsed()
    };
    let mut rows: Vec<[Figure; 4]> = Vec::new();
    let mut different = Vec::new();
    println!(
        "\n{:>3} {:>7} {:>22} {:>22} {:>22} {:>22}",
        "", "prompt", "fresh", "first after loading", "after another question", "follow-up"
    );
    for (i, (question, follow_up)) in requests.iter().enumerate() {
        // After another question: the last prompt kept is the previous question's follow-up
        // (for the first question, the last question's), as when a person goes on to something
        // else.
        if i == 0 {
            run_one(decoder, &requests[requests.len() - 1].0, &speculation)?;
        }
        let after_other = run_one(decoder, question, &speculation)?;
        let follow = run_one(decoder, follow_up, &speculation)?;
        decoder.forget_prompt();
        let fresh = run_one(decoder, question, &speculation)?;
        // The app's first question: the model was loaded with the shared prompt start.
        decoder.forget_prompt();
        engine.prepare_llm().await?;
        let first = run_one(decoder, question, &speculation)?;
        decoder.forget_prompt();
        // Kept for the next question's "after another question".
        let fresh_follow = run_one(decoder, follow_up, &speculation)?;
        if after_other.tokens != fresh.tokens || first.tokens != fresh.tokens || follow.tokens != fresh_follow.tokens {
            different.push(cases[i].question.clone());
        }
        let row = [Figure::of(&fresh), Figure::of(&first), Figure::of(&after_other), Figure::of(&follow)];
        println!(
            "{:>3} {:>7} {:>22} {:>22} {:>22} {:>22}",
            i + 1,
            fresh.generation.stats.prompt_tokens,
            row[0].cell(),
            row[1].cell(),
            row[2].cell(),
            row[3].cell()
        );
        rows.push(row);
    }
    let mean = |k: usize, f: fn(&Figure) -> f64| rows.iter().map(|r| f(&r[k])).sum::<f64>() / rows.len() as f64;
    println!("\nmean time to first token over {} questions (prompt tokens processed, of the prompt):", rows.len());
    let names = ["fresh question", "first after loading", "after another question", "follow-up, same passages"];
    for (k, name) in names.iter().enumerate() {
        println!(
            "  {name:<26} {:>6.2} s   {:>6.0} of {:>6.0} tokens processed   {:>6.1} prompt tokens/s",
            mean(k, |f| f.ttft.as_secs_f64()),
            mean(k, |f| f.processed as f64),
            mean(k, |f| f.prompt as f64),
            mean(k, |f| f.prompt_tokens_per_sec as f64)
        );
    }
    let before_mean = |k: usize| before.iter().map(|b| b[k].as_secs_f64()).sum::<f64>() / before.len() as f64;
    println!(
        "\nbefore the prompt (mean): search {:.2} s; sentences chosen and prompt written {:.2} s \
         (a follow-up over the same passages: {:.2} s; the first question again, its sentences' \
         meanings kept: {:.2} s)",
        before_mean(0),
        before_mean(1),
        before_mean(2),
        again.as_secs_f64()
    );
    println!(
        "from the question to the first token (mean), everything included: fresh question {:.2} s, \
         first after loading {:.2} s, follow-up {:.2} s",
        before_mean(0) + before_mean(1) + mean(0, |f| f.ttft.as_secs_f64()),
        before_mean(0) + before_mean(1) + mean(1, |f| f.ttft.as_secs_f64()),
        before_mean(0) + before_mean(2) + mean(3, |f| f.ttft.as_secs_f64())
    );
    anyhow::ensure!(different.is_empty(), "a kept prompt changed the answer to: {different:?}");
    println!("every answer with a kept prompt equals the fresh run's, token for token");

    // Decoding: each fresh question again over its kept prompt, plainly and with the app's
    // speculation; the rate is the answer's tokens over the time after the first.
    let plain = Speculation::off();
    let (mut plain_time, mut plain_tokens, mut spec_time, mut spec_tokens) = (0.0, 0usize, 0.0, 0usize);
    for (i, (question, _)) in requests.iter().enumerate() {
        let speculative = run_one(decoder, question, &speculation)?;
        let plainly = run_one(decoder, question, &plain)?;
        anyhow::ensure!(
            plainly.tokens == speculative.tokens,
            "speculative decoding changed the answer to: {}",
            cases[i].question
        );
        for (d, time, tokens) in
            [(&plainly, &mut plain_time, &mut plain_tokens), (&speculative, &mut spec_time, &mut spec_tokens)]
        {
            let s = &d.generation.stats;
            *time += s.completion_tokens as f64 / f64::from(s.decode_tokens_per_sec).max(1e-9);
            *tokens += s.completion_tokens;
        }
    }
    let plain_rate = plain_tokens as f64 / plain_time.max(1e-9);
    let spec_rate = spec_tokens as f64 / spec_time.max(1e-9);
    println!(
        "decoding the answers ({} tokens, plain and speculative identical): plain {plain_rate:.1} tokens/s, \
         speculative {spec_rate:.1} tokens/s ({:.2}× plain)",
        plain_tokens,
        spec_rate / plain_rate
    );

    let prompt = mean(0, |f| f.prompt as f64).round() as usize;
    let quire_rate = mean(0, |f| f.prompt_tokens_per_sec as f64);
    match args.llama_bench.or_else(built_llama_bench) {
        Some(bench) => {
            let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            let configurations = llama_cpp_rates(&bench, &model_path, LlamaTest::Prompt(prompt), threads)?;
            let decoding = llama_cpp_rates(&bench, &model_path, LlamaTest::Decode { depth: prompt }, threads)?;
            println!("\nllama.cpp's configurations (llama-bench, {} runs each):", LLAMA_RUNS);
            println!("  {:<26} {:>17} {:>22}", "", format!("pp{prompt}"), format!("tg{LLAMA_DECODED} at depth {prompt}"));
            for ((configuration, rate), (_, decode)) in configurations.iter().zip(&decoding) {
                println!("  {configuration:<26} {rate:>10.1} tokens/s {decode:>15.1} tokens/s");
            }
            let llama = configurations.iter().map(|(_, rate)| *rate).fold(0.0, f64::max);
            let llama_decode = decoding.iter().map(|(_, rate)| *rate).fold(0.0, f64::max);
            println!("\nprompt processing, {prompt} tokens, {threads} threads, same GGUF file:");
            println!(
                "  Quire (fresh questions)  {quire_rate:>7.1} tokens/s   first token after {:>5.2} s",
                mean(0, |f| f.ttft.as_secs_f64())
            );
            println!(
                "  llama.cpp, its best      {llama:>7.1} tokens/s   (the prompt alone: {:.2} s)",
                prompt as f64 / llama
            );
            println!("  ratio Quire / llama.cpp  {:>7.2}", quire_rate / llama);
            println!("\ndecoding at a depth of {prompt} tokens, same file and threads:");
            println!("  Quire, plain             {plain_rate:>7.1} tokens/s   speculative {spec_rate:>7.1} tokens/s");
            println!("  llama.cpp, its best      {llama_decode:>7.1} tokens/s   ({LLAMA_DECODED} tokens generated)");
            println!(
                "  ratio Quire / llama.cpp  {:>7.2} plain, {:.2} speculative",
                plain_rate / llama_decode,
                spec_rate / llama_decode
            );
        }
        None => println!("\n(no llama-bench to compare with: build it with `bash tools/build-llama-bench.sh`, or pass --llama-bench)"),
    }
    Ok(())
}

/// Where `tools/build-llama-bench.sh` leaves llama-bench, if it did.
fn built_llama_bench() -> Option<PathBuf> {
    let dir = std::env::var_os("QUIRE_LLAMA_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/quire/llama.cpp")))?;
    let bin = dir.join("build/bin/llama-bench");
    bin.is_file().then_some(bin)
}

/// Runs of llama-bench per configuration (it reports their mean).
const LLAMA_RUNS: usize = 3;

/// Tokens llama-bench generates for its decoding figure.
const LLAMA_DECODED: usize = 128;

/// What llama-bench is asked to time.
#[derive(Clone, Copy)]
enum LlamaTest {
    /// A prompt of this many tokens processed.
    Prompt(usize),
    /// `LLAMA_DECODED` tokens generated after a prompt of `depth` tokens.
    Decode { depth: usize },
}

/// llama.cpp's rate (tokens/s, mean of `LLAMA_RUNS` runs) for `test` in each configuration
/// that changes it on a CPU: flash attention on and off, weights repacked for its CPU kernels
/// or not (which is faster depends on the CPU and the model), in that order. The ratio is
/// taken against the best.
fn llama_cpp_rates(
    bench: &std::path::Path,
    model: &std::path::Path,
    test: LlamaTest,
    threads: usize,
) -> Result<Vec<(String, f64)>> {
    let (prompt, generated, depth) = match test {
        LlamaTest::Prompt(prompt) => (prompt, 0, 0),
        LlamaTest::Decode { depth } => (0, LLAMA_DECODED, depth),
    };
    let output = std::process::Command::new(bench)
        .arg("-m")
        .arg(model)
        .args(["-p", &prompt.to_string(), "-n", &generated.to_string(), "-d", &depth.to_string()])
        .args(["-t", &threads.to_string()])
        .args(["-r", &LLAMA_RUNS.to_string(), "-fa", "on,off", "--repack", "0,1", "-o", "json"])
        .output()
        .with_context(|| format!("cannot run {}", bench.display()))?;
    anyhow::ensure!(
        output.status.success(),
        "{} failed: {}",
        bench.display(),
        String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
    );
    let runs: Vec<serde_json::Value> =
        serde_json::from_slice(&output.stdout).context("llama-bench's JSON output did not parse")?;
    let rates: Vec<(String, f64)> = runs
        .iter()
        .filter(|r| {
            r["n_prompt"].as_u64() == Some(prompt as u64)
                && r["n_gen"].as_u64() == Some(generated as u64)
                && r["n_depth"].as_u64().unwrap_or(0) == depth as u64
        })
        .filter_map(|r| {
            // llama-bench writes flash attention as a number (1 on, 0 off) and repack as a bool.
            let flash = match r["flash_attn"].as_i64() {
                Some(1) => "on",
                Some(0) => "off",
                _ => "?",
            };
            let repack = r["repack"].as_bool().map_or("?", |on| if on { "1" } else { "0" });
            Some((format!("-fa {flash} --repack {repack}"), r["avg_ts"].as_f64()?))
        })
        .collect();
    anyhow::ensure!(rates.len() == 4, "llama-bench reported {} of its 4 configurations", rates.len());
    Ok(rates)
}

fn run_one(decoder: &Decoder, request: &GenerationRequest, speculation: &Speculation) -> Result<Decoded> {
    tokio::task::block_in_place(|| decoder.generate(request, speculation, 0, |_| {}, || false))
}

struct Figure {
    ttft: Duration,
    prompt: usize,
    processed: usize,
    prompt_tokens_per_sec: f32,
}

impl Figure {
    fn of(d: &Decoded) -> Figure {
        let s = &d.generation.stats;
        Figure {
            ttft: s.time_to_first_token,
            prompt: s.prompt_tokens,
            processed: s.prompt_tokens - s.prompt_reused_tokens,
            prompt_tokens_per_sec: s.prompt_tokens_per_sec,
        }
    }

    fn cell(&self) -> String {
        format!("{:.2} s ({} new)", self.ttft.as_secs_f64(), self.processed)
    }
}
