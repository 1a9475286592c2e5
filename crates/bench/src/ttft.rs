//! `quire bench ttft`: time to first token of RAG answers on this machine, in one run: a fresh
//! question (nothing kept), the first question after loading (the app processes the prompt
//! start all answers share when it loads the model: `Engine::prepare_llm`), a new question
//! after another (the chat template and instructions kept from the last prompt) and a
//! follow-up over the same passages (everything but the new question kept). Each answer of the
//! last three is checked token for token against the fresh run of the same prompt: the kept
//! prompt must change nothing. Then each answer is decoded plainly (no drafts) over its kept
//! prompt, for the decoding speed at the prompt's depth. Then llama.cpp's llama-bench processes
//! a prompt of the same length, and generates 128 tokens after a prompt of that length, on the
//! same file and threads in each of its CPU configurations; its best of each then runs in
//! rounds alternated with Quire's own fresh prompt and plain decoding (the machine's speed
//! drifts within a run), and the median of the rounds' ratios is the figure.

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
    /// Rounds of Quire (a fresh prompt, then its answer decoded plainly) then llama.cpp at its
    /// best configuration, back to back: the machine's speed drifts within a run, so each
    /// round's ratios are printed and their medians are the figures.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
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
    // The whole answer as the app gives its first question (the app's speculation): measured,
    // and at the same pace for an answer of `WHOLE_ANSWER` tokens.
    let (first_tokens, first_total, first_ttft) =
        (mean(1, |f| f.tokens as f64), mean(1, |f| f.total.as_secs_f64()), mean(1, |f| f.ttft.as_secs_f64()));
    let before_prompt = before_mean(0) + before_mean(1);
    let per_token = (first_total - first_ttft) / (first_tokens - 1.0).max(1.0);
    println!(
        "the whole answer from the question (mean, first after loading): {first_tokens:.0} tokens in {:.2} s; \
         {WHOLE_ANSWER} tokens at this pace {:.2} s",
        before_prompt + first_total,
        before_prompt + first_ttft + per_token * (WHOLE_ANSWER - 1) as f64
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
    let Some(bench) = args.llama_bench.or_else(built_llama_bench) else {
        println!("\n(no llama-bench to compare with: build it with `bash tools/build-llama-bench.sh`, or pass --llama-bench)");
        return Ok(());
    };
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let llama = Llama { bench: &bench, model: &model_path, threads };
    let configurations = llama.rates(LlamaTest::Prompt(prompt), &ALL_CONFIGURATIONS, LLAMA_RUNS)?;
    let decoding = llama.rates(LlamaTest::Decode { depth: prompt }, &ALL_CONFIGURATIONS, LLAMA_RUNS)?;
    println!("\nllama.cpp's configurations (llama-bench, {LLAMA_RUNS} runs each):");
    println!("  {:<26} {:>17} {:>22}", "", format!("pp{prompt}"), format!("tg{LLAMA_DECODED} at depth {prompt}"));
    for ((configuration, rate), (_, decode)) in configurations.iter().zip(&decoding) {
        println!("  {:<26} {rate:>10.1} tokens/s {decode:>15.1} tokens/s", configuration.to_string());
    }
    let best = |rates: &[(Configuration, f64)]| *rates.iter().max_by(|a, b| a.1.total_cmp(&b.1)).expect("4 rates");
    let (best_prompt, best_decode) = (best(&configurations), best(&decoding));
    println!(
        "\nrounds, llama.cpp at its best ({} for the prompt, {} for decoding), {threads} threads, same GGUF file:",
        best_prompt.0, best_decode.0
    );
    let (mut prompt_ratios, mut decode_ratios, mut their_decodes) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..args.rounds.max(1) {
        // A fresh question's prompt, every token processed, then its answer decoded plainly.
        decoder.forget_prompt();
        let ours = run_one(decoder, &requests[round % requests.len()].0, &plain)?;
        let s = &ours.generation.stats;
        let (our_prompt, our_decode) = (f64::from(s.prompt_tokens_per_sec), f64::from(s.decode_tokens_per_sec));
        let their_prompt = llama.rates(LlamaTest::Prompt(prompt), &[best_prompt.0], ROUND_RUNS)?[0].1;
        let their_decode = llama.rates(LlamaTest::Decode { depth: prompt }, &[best_decode.0], ROUND_RUNS)?[0].1;
        println!(
            "  round {}: prompt Quire {our_prompt:>6.1} ({} tokens), llama.cpp {their_prompt:>6.1} tokens/s: {:.2}; \
             plain decoding Quire {our_decode:>5.1}, llama.cpp {their_decode:>5.1} tokens/s: {:.2}",
            round + 1,
            s.prompt_tokens,
            our_prompt / their_prompt,
            our_decode / their_decode
        );
        prompt_ratios.push(our_prompt / their_prompt);
        decode_ratios.push(our_decode / their_decode);
        their_decodes.push(their_decode);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let rounds = prompt_ratios.len();
    println!(
        "\nratio Quire / llama.cpp at its best, median of {rounds} rounds: prompt processing {:.2}, plain decoding {:.2}",
        median(prompt_ratios),
        median(decode_ratios)
    );
    let their_decode = median(their_decodes);
    println!(
        "speculative decoding (the answers above, {spec_rate:.1} tokens/s) against llama.cpp's median round ({their_decode:.1} tokens/s): {:.2}",
        spec_rate / their_decode
    );
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

/// Runs of llama-bench per configuration in its sweep of the four (it reports their mean).
const LLAMA_RUNS: usize = 3;

/// Runs of llama-bench in each alternated round, at its best configuration.
const ROUND_RUNS: usize = 2;

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

/// A llama.cpp configuration that changes its speed on a CPU: flash attention on or off,
/// weights repacked for its CPU kernels or not (which is faster depends on the CPU and the
/// model).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Configuration {
    flash: bool,
    repack: bool,
}

impl std::fmt::Display for Configuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "-fa {} --repack {}", if self.flash { "on" } else { "off" }, u8::from(self.repack))
    }
}

/// The four, in the order they are printed.
const ALL_CONFIGURATIONS: [Configuration; 4] = [
    Configuration { flash: true, repack: false },
    Configuration { flash: false, repack: false },
    Configuration { flash: true, repack: true },
    Configuration { flash: false, repack: true },
];

/// llama-bench on one GGUF file and thread count.
struct Llama<'a> {
    bench: &'a std::path::Path,
    model: &'a std::path::Path,
    threads: usize,
}

impl Llama<'_> {
    /// llama.cpp's rate (tokens/s, mean of `runs` runs) for `test` in each of `configurations`,
    /// in their order.
    fn rates(
        &self,
        test: LlamaTest,
        configurations: &[Configuration],
        runs: usize,
    ) -> Result<Vec<(Configuration, f64)>> {
        let (prompt, generated, depth) = match test {
            LlamaTest::Prompt(prompt) => (prompt, 0, 0),
            LlamaTest::Decode { depth } => (0, LLAMA_DECODED, depth),
        };
        // llama-bench runs every combination of the values given: those of the configurations
        // asked for, the others dropped below.
        let values = |on: fn(&Configuration) -> bool, yes: &str, no: &str| {
            let mut v: Vec<&str> = Vec::new();
            for c in configurations {
                let value = if on(c) { yes } else { no };
                if !v.contains(&value) {
                    v.push(value);
                }
            }
            v.join(",")
        };
        let output = std::process::Command::new(self.bench)
            .arg("-m")
            .arg(self.model)
            .args(["-p", &prompt.to_string(), "-n", &generated.to_string(), "-d", &depth.to_string()])
            .args(["-t", &self.threads.to_string(), "-r", &runs.to_string(), "-o", "json"])
            .args(["-fa", &values(|c| c.flash, "on", "off"), "--repack", &values(|c| c.repack, "1", "0")])
            .output()
            .with_context(|| format!("cannot run {}", self.bench.display()))?;
        anyhow::ensure!(
            output.status.success(),
            "{} failed: {}",
            self.bench.display(),
            String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or("")
        );
        let reported: Vec<serde_json::Value> =
            serde_json::from_slice(&output.stdout).context("llama-bench's JSON output did not parse")?;
        let rate = |c: &Configuration| {
            reported.iter().find_map(|r| {
                // llama-bench writes flash attention as a number (1 on, 0 off) and repack as a bool.
                let same = r["n_prompt"].as_u64() == Some(prompt as u64)
                    && r["n_gen"].as_u64() == Some(generated as u64)
                    && r["n_depth"].as_u64().unwrap_or(0) == depth as u64
                    && r["flash_attn"].as_i64() == Some(i64::from(c.flash))
                    && r["repack"].as_bool() == Some(c.repack);
                same.then(|| r["avg_ts"].as_f64()).flatten()
            })
        };
        configurations
            .iter()
            .map(|c| rate(c).map(|r| (*c, r)).with_context(|| format!("llama-bench reported nothing for {c}")))
            .collect()
    }
}

fn run_one(decoder: &Decoder, request: &GenerationRequest, speculation: &Speculation) -> Result<Decoded> {
    tokio::task::block_in_place(|| decoder.generate(request, speculation, 0, |_| {}, || false))
}

/// The length of answer the goal for whole answers is set for (about 100 tokens).
const WHOLE_ANSWER: usize = 100;

struct Figure {
    ttft: Duration,
    /// From the start of the answer to its last token, and how many tokens it has.
    total: Duration,
    tokens: usize,
    prompt: usize,
    processed: usize,
    prompt_tokens_per_sec: f32,
}

impl Figure {
    fn of(d: &Decoded) -> Figure {
        let s = &d.generation.stats;
        Figure {
            ttft: s.time_to_first_token,
            total: s.total_time,
            tokens: s.completion_tokens,
            prompt: s.prompt_tokens,
            processed: s.prompt_tokens - s.prompt_reused_tokens,
            prompt_tokens_per_sec: s.prompt_tokens_per_sec,
        }
    }

    fn cell(&self) -> String {
        format!("{:.2} s ({} new)", self.ttft.as_secs_f64(), self.processed)
    }
}
