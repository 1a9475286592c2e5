//! `quire bench sustained`: RAG questions answered back to back, the way the app answers them
//! (`Engine::ask`: retrieval, the prompt, speculation with its thermal back-off), for at least
//! ten minutes and forty answers, so the figures show what a long session gets and not what a
//! cold machine promises. Each answer prints when it ended, its first word, its decoding speed,
//! tokens per target step, and what the OS said of the machine then (thermal pressure, the
//! speculation's throttle it led to, the CPU's clock and temperature where reported); the end
//! compares the first and the last minutes.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use quire_engine::{Cancel, EngineConfig};
use quire_eval::answers::load_answer_set;
use quire_llm::thermal::{PowerState, Pressure, Readings, Throttle};

#[derive(Args)]
pub struct SustainedArgs {
    /// Questions as for `quire eval answers` (JSONL with question, document, pages), asked in
    /// turn and again from the first when all were asked.
    #[arg(long, default_value = "tests/eval/sample-docs-answers.jsonl")]
    questions: PathBuf,
    /// Folder holding the questions' documents (default: the sample documents in ../shared).
    #[arg(long)]
    docs: Option<PathBuf>,
    /// Run at least this long.
    #[arg(long, default_value_t = 10.0)]
    minutes: f64,
    /// And at least this many answers.
    #[arg(long, default_value_t = 40)]
    answers: usize,
    /// Answer model (name or GGUF path); the draft model is the configuration's, as in the app.
    #[arg(long, default_value = "qwen2.5-coder-1.5b")]
    model: String,
    /// Write every answer's figures as JSON here.
    #[arg(long)]
    report: Option<PathBuf>,
}

/// One answer's figures.
#[derive(Serialize)]
struct Row {
    /// Seconds from the start of the run to the end of this answer.
    at_secs: f64,
    question: String,
    first_word_secs: f64,
    tokens: usize,
    /// Reply tokens per second of decoding.
    tokens_per_sec: f32,
    /// Tokens per target forward pass (1 without speculation).
    tokens_per_step: f32,
    declined: bool,
    /// The machine's state the decoder read for this answer, and what speculation did about it.
    pressure: Option<Pressure>,
    on_battery: bool,
    power_saver: bool,
    model_drafts: bool,
    max_k_divisor: usize,
    readings: Readings,
}

pub async fn run(args: SustainedArgs) -> Result<()> {
    let cases = load_answer_set(&args.questions)?;
    anyhow::ensure!(!cases.is_empty(), "{} holds no questions", args.questions.display());
    anyhow::ensure!(args.minutes > 0.0 && args.answers > 0, "give --minutes and --answers above 0");
    let mut config = EngineConfig::from_home()?;
    config.llm_path = quire_models::resolve(&args.model)?;
    let docs = match &args.docs {
        Some(d) => d.clone(),
        None => crate::bench_inputs::default_docs()?,
    };
    let work = tempfile::tempdir().context("cannot make a temporary folder")?;
    let engine = crate::eval::open_with_documents(config, &cases, Some(&docs), work.path()).await?;
    engine.prepare_llm().await?;
    println!(
        "machine: {} cores, {}, {} kernels; model {}, draft {}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        crate::bench_inputs::cpu_name(),
        quire_llm::decoder::kernel_name(),
        engine.config().llm_path.display(),
        engine.config().draft_path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "none".into()),
    );
    println!(
        "answering {} questions in turn for at least {} minutes and {} answers\n",
        cases.len(),
        args.minutes,
        args.answers
    );
    println!(
        "{:>4} {:>7} {:>11} {:>7} {:>8} {:>10}  {:<9} {:<15} {:>8} {:>6}",
        "#", "at s", "first word", "tokens", "tok/s", "tok/step", "pressure", "speculation", "CPU MHz", "°C"
    );
    let started = Instant::now();
    let mut rows: Vec<Row> = Vec::new();
    let cancel = Cancel::new();
    while rows.len() < args.answers || started.elapsed().as_secs_f64() < args.minutes * 60.0 {
        let case = &cases[rows.len() % cases.len()];
        let answer = engine
            .ask(&case.question, &mut |_| {}, &cancel)
            .await
            .with_context(|| format!("answering {:?}", case.question))?;
        let readings = Readings::read();
        let power = answer.speculation.as_ref().and_then(|s| s.power);
        let throttle = Throttle::for_state(power.unwrap_or(PowerState::UNKNOWN));
        let (tokens_per_sec, tokens_per_step) = match &answer.speculation {
            Some(s) => (s.decode_tokens_per_sec, s.tokens_per_step()),
            None => (answer.stats.decode_tokens_per_sec, 1.0),
        };
        let row = Row {
            at_secs: started.elapsed().as_secs_f64(),
            question: case.question.clone(),
            first_word_secs: answer.timing.first_word.as_secs_f64(),
            tokens: answer.stats.completion_tokens,
            tokens_per_sec,
            tokens_per_step,
            declined: answer.declined.is_some(),
            pressure: power.map(|p| p.pressure),
            on_battery: power.is_some_and(|p| p.on_battery),
            power_saver: power.is_some_and(|p| p.power_saver),
            model_drafts: throttle.model_drafts,
            max_k_divisor: throttle.max_k_divisor,
            readings,
        };
        println!(
            "{:>4} {:>7.0} {:>10.2}s {:>7} {:>8.1} {:>10.2}  {:<9} {:<15} {:>8} {:>6}",
            rows.len() + 1,
            row.at_secs,
            row.first_word_secs,
            row.tokens,
            row.tokens_per_sec,
            row.tokens_per_step,
            row.pressure.map(|p| format!("{p:?}").to_lowercase()).unwrap_or_else(|| "-".into()),
            throttle_said(&row),
            shown(row.readings.cpu_mhz, 0),
            shown(row.readings.temperature_c, 1),
        );
        rows.push(row);
    }
    summarize(&rows);
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("figures of every answer written to {}", path.display());
    }
    Ok(())
}

/// What speculation was allowed for an answer, in a few words.
fn throttle_said(row: &Row) -> String {
    match (row.model_drafts, row.max_k_divisor) {
        (true, 1) => "full".into(),
        (true, d) => format!("drafts ÷{d}"),
        (false, d) => format!("no model ÷{d}"),
    }
}

fn shown(value: Option<f32>, decimals: usize) -> String {
    value.map(|v| format!("{v:.decimals$}")).unwrap_or_else(|| "-".into())
}

/// The run's first and last parts side by side (a fifth of its answers each, at least one), and
/// how many answers ran under each throttle.
fn summarize(rows: &[Row]) {
    let part = (rows.len() / 5).max(1);
    let mean = |rows: &[Row], f: &dyn Fn(&Row) -> f64| rows.iter().map(f).sum::<f64>() / rows.len().max(1) as f64;
    let (first, last) = (&rows[..part], &rows[rows.len() - part..]);
    let speed = |r: &Row| r.tokens_per_sec as f64;
    let wait = |r: &Row| r.first_word_secs;
    let total_secs = rows.last().map(|r| r.at_secs).unwrap_or(0.0);
    println!("\n{} answers in {:.1} minutes", rows.len(), total_secs / 60.0);
    println!(
        "first {part} answers: {:.1} tok/s, first word {:.2} s; last {part}: {:.1} tok/s, first word {:.2} s; \
         the last part's speed is {:.0} % of the first's",
        mean(first, &speed),
        mean(first, &wait),
        mean(last, &speed),
        mean(last, &wait),
        100.0 * mean(last, &speed) / mean(first, &speed).max(f64::EPSILON)
    );
    // The same question asked again later: its speed then over its speed the first time (the
    // parts above hold different questions).
    let mut again: Vec<(f64, f64)> = Vec::new();
    for (i, later) in rows.iter().enumerate() {
        if let Some(first) = rows[..i].iter().find(|r| r.question == later.question) {
            if !rows[i + 1..].iter().any(|r| r.question == later.question) {
                again.push((
                    later.tokens_per_sec as f64 / first.tokens_per_sec.max(f32::EPSILON) as f64,
                    later.at_secs - first.at_secs,
                ));
            }
        }
    }
    if !again.is_empty() {
        let mut ratios: Vec<f64> = again.iter().map(|(r, _)| *r).collect();
        ratios.sort_by(f64::total_cmp);
        println!(
            "{} questions asked again, {:.1} minutes later on average: the later speed is {:.0} % of the first (median)",
            again.len(),
            again.iter().map(|(_, d)| d).sum::<f64>() / again.len() as f64 / 60.0,
            100.0 * ratios[ratios.len() / 2]
        );
    }
    let mut throttles: Vec<(String, usize)> = Vec::new();
    for r in rows {
        let said = throttle_said(r);
        match throttles.iter_mut().find(|(t, _)| *t == said) {
            Some((_, n)) => *n += 1,
            None => throttles.push((said, 1)),
        }
    }
    let throttles: Vec<String> = throttles.iter().map(|(t, n)| format!("{t}: {n}")).collect();
    println!("speculation per answer: {}", throttles.join(", "));
    let reported = |f: &dyn Fn(&Readings) -> Option<f32>| -> Option<(f32, f32)> {
        let values: Vec<f32> = rows.iter().filter_map(|r| f(&r.readings)).collect();
        let lo = values.iter().copied().reduce(f32::min)?;
        Some((lo, values.iter().copied().fold(lo, f32::max)))
    };
    match reported(&|r| r.cpu_mhz) {
        Some((lo, hi)) => println!("CPU clock {lo:.0}–{hi:.0} MHz"),
        None => println!("CPU clock: not reported by this OS"),
    }
    match reported(&|r| r.temperature_c) {
        Some((lo, hi)) => println!("temperature {lo:.1}–{hi:.1} °C"),
        None => println!("temperature: not reported by this OS (no thermal zone)"),
    }
}
