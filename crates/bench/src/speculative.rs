//! `quire bench speculative`: plain and speculative decoding side by side, in one run, on the
//! same prompts and the same prompt caches — RAG answers to the sample-document questions
//! (retrieved passages, answer schema) and free-form chat. Prints tokens/s of each, their
//! ratio, tokens per target step and acceptance per draft source; `--check` fails unless every
//! greedy speculative reply equals the plain one and every answer parses with citations among
//! the retrieved passages.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use quire_engine::EngineConfig;
use quire_eval::answers::load_answer_set;
use quire_llm::decoder::{Decoded, DraftSource, Speculation, SOURCES};
use quire_llm::GenerationRequest;

#[derive(Args)]
pub struct SpeculativeArgs {
    /// Questions as for `quire eval answers` (JSONL with question, document, pages).
    #[arg(long, default_value = "tests/eval/sample-docs-answers.jsonl")]
    questions: PathBuf,
    /// Folder holding the questions' documents (default: the sample documents in ../shared).
    #[arg(long)]
    docs: Option<PathBuf>,
    /// Questions asked (the first N).
    #[arg(long, default_value_t = 30)]
    limit: usize,
    /// Free-form chat prompts (0 to 6).
    #[arg(long, default_value_t = 6)]
    chat: usize,
    /// Target model (name or GGUF path).
    #[arg(long, default_value = "qwen2.5-coder-1.5b")]
    model: String,
    /// Draft model (name or GGUF path, same tokenizer as the target); `none` for none.
    #[arg(long, default_value = "qwen2.5-coder-0.5b")]
    draft: String,
    /// Speculation variants, compared with plain decoding: `free` (grammar and prompt lookup,
    /// the app's default), `tree` (`free` with up to four lookup continuations a step, a tree),
    /// `draft` (the draft model at every step), `all` (every source, each step's source chosen
    /// by measured cost).
    #[arg(long, value_delimiter = ',', default_value = "free,draft,all")]
    modes: Vec<String>,
    /// Write every prompt's figures as JSON here.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Fail unless greedy speculative output equals plain output and every answer parses with
    /// citations among the retrieved passages.
    #[arg(long)]
    check: bool,
}

const CHAT_PROMPTS: [&str; 6] = [
    "Explain in a short paragraph how a hash table handles collisions.",
    "Write a Python function that returns the n-th Fibonacci number, with a docstring.",
    "What are three good habits for writing maintainable code? Answer in a numbered list.",
    "Describe the water cycle to a ten-year-old.",
    "Write a short email asking a colleague to review a pull request by Friday.",
    "Compare TCP and UDP in two or three sentences.",
];

fn mode(name: &str, has_draft: bool) -> Result<Speculation> {
    let base = Speculation { respect_thermal: false, ..Speculation::default() };
    Ok(match name {
        "free" => Speculation { model_drafts: false, ..base },
        // `free` with up to four lookup continuations a step verified as a tree.
        "tree" => Speculation { model_drafts: false, lookup_branches: 4, ..base },
        "draft" => {
            anyhow::ensure!(has_draft, "mode `draft` needs a draft model (--draft)");
            // Drafting at every step, so the figures are the draft model's own.
            Speculation { grammar_drafts: false, lookup_drafts: false, choose_by_cost: false, ..base }
        }
        "all" => base,
        other => bail!("unknown mode {other:?}: use free, tree, draft or all"),
    })
}

#[derive(Serialize, Default, Clone)]
struct Totals {
    tokens: usize,
    decode_secs: f64,
    steps: usize,
    tree_steps: usize,
    identical: usize,
    prompts: usize,
    proposed: [usize; 3],
    accepted: [usize; 3],
}

impl Totals {
    fn add(&mut self, d: &Decoded, identical: bool) {
        self.tokens += d.tokens.len();
        self.decode_secs += d.speculation.decode_secs as f64;
        self.steps += d.speculation.verify_steps;
        self.tree_steps += d.speculation.tree_steps;
        self.identical += identical as usize;
        self.prompts += 1;
        for (i, s) in SOURCES.iter().enumerate() {
            self.proposed[i] += d.speculation.source(*s).proposed;
            self.accepted[i] += d.speculation.source(*s).accepted;
        }
    }

    fn tokens_per_sec(&self) -> f64 {
        if self.decode_secs > 0.0 {
            self.tokens as f64 / self.decode_secs
        } else {
            0.0
        }
    }
}

#[derive(Serialize)]
struct PromptFigures {
    workload: &'static str,
    prompt: String,
    prompt_tokens: usize,
    modes: Vec<ModeFigures>,
}

#[derive(Serialize)]
struct ModeFigures {
    mode: String,
    tokens: usize,
    decode_secs: f32,
    tokens_per_sec: f32,
    verify_steps: usize,
    tree_steps: usize,
    identical_to_plain: bool,
    accepted: Vec<(DraftSource, usize, usize)>,
    text: String,
}

pub async fn run(args: SpeculativeArgs) -> Result<()> {
    let cases = load_answer_set(&args.questions)?;
    let mut config = EngineConfig::from_home()?;
    config.llm_path = quire_models::resolve(&args.model)?;
    config.draft_path = match args.draft.as_str() {
        "none" => None,
        d => Some(quire_models::resolve(d)?),
    };
    let modes: Vec<(String, Speculation)> =
        args.modes.iter().map(|m| Ok((m.clone(), mode(m, config.draft_path.is_some())?))).collect::<Result<_>>()?;
    let docs = match &args.docs {
        Some(d) => d.clone(),
        None => crate::bench_inputs::default_docs()?,
    };
    let asked: Vec<_> = cases.into_iter().take(args.limit).collect();
    println!(
        "machine: {} cores, {} kernels; target {}; draft {}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        quire_llm::decoder::kernel_name(),
        config.llm_path.display(),
        config.draft_path.as_ref().map(|d| d.display().to_string()).unwrap_or_else(|| "none".into())
    );
    let work = tempfile::tempdir().context("cannot make a temporary folder")?;
    let engine = crate::eval::open_with_documents(config, &asked, Some(&docs), work.path()).await?;
    let llm = engine.llm().await?;
    let decoder = llm.decoder().context(
        "this model runs on mistral.rs, which has no speculative decoding in Quire; pick a qwen2 or llama GGUF",
    )?;
    println!("decoder on {}", decoder.placement().name());
    let specs: Vec<Speculation> = modes.iter().map(|(_, s)| s.clone()).collect();

    let mut figures = Vec::new();
    let mut totals: Vec<[Totals; 2]> = vec![Default::default(); modes.len() + 1];
    let mut failures = Vec::new();
    let chat: Vec<GenerationRequest> = CHAT_PROMPTS
        .iter()
        .take(args.chat)
        .map(|p| GenerationRequest {
            system: "You are a helpful assistant.".into(),
            user: (*p).into(),
            schema: None,
            max_tokens: 128,
            temperature: None,
        })
        .collect();
    let mut work_items: Vec<(&'static str, String, GenerationRequest, usize)> = Vec::new();
    for case in &asked {
        let hits = engine.retrieve(&case.question).await?;
        let retrieved = hits.len();
        let unmentioned = engine.unmentioned(&case.question, &hits).await?;
        let request = engine.answer_request(&case.question, &hits, &unmentioned);
        work_items.push(("rag", case.question.clone(), request, retrieved));
    }
    for (request, prompt) in chat.into_iter().zip(CHAT_PROMPTS) {
        work_items.push(("chat", prompt.to_string(), request, 0));
    }

    let total = work_items.len();
    for (n, (workload, prompt, request, retrieved)) in work_items.into_iter().enumerate() {
        let runs = tokio::task::block_in_place(|| decoder.compare(&request, &specs, 0))?;
        let plain = &runs[0];
        let w = (workload == "chat") as usize;
        totals[0][w].add(plain, true);
        let mut line = format!(
            "[{:>2}/{total}] {workload:<4} {:>4} tok plain {:>5.1} tok/s",
            n + 1,
            plain.tokens.len(),
            plain.speculation.decode_tokens_per_sec
        );
        let mut mode_figures = vec![figures_of("plain", plain, true, decoder)];
        for (i, ((name, _), run)) in modes.iter().zip(&runs[1..]).enumerate() {
            let identical = run.tokens == plain.tokens;
            if !identical {
                failures.push(format!("{prompt}: mode {name} differs from plain decoding"));
            }
            totals[i + 1][w].add(run, identical);
            line.push_str(&format!(
                " | {name} {:>5.1} ({:.2}×, {:.1}/step){}",
                run.speculation.decode_tokens_per_sec,
                run.speculation.decode_tokens_per_sec / plain.speculation.decode_tokens_per_sec.max(1e-6),
                run.speculation.tokens_per_step(),
                if identical { "" } else { " DIFFERENT" }
            ));
            mode_figures.push(figures_of(name, run, identical, decoder));
        }
        if workload == "rag" {
            match check_answer(&plain.generation.text, retrieved) {
                Ok(()) => line.push_str(" | parses, cites retrieved"),
                Err(e) => {
                    line.push_str(&format!(" | {e}"));
                    failures.push(format!("{prompt}: {e}"));
                }
            }
        }
        println!("{line}");
        figures.push(PromptFigures {
            workload,
            prompt,
            prompt_tokens: plain.generation.stats.prompt_tokens,
            modes: mode_figures,
        });
    }

    for (w, workload) in ["RAG answers", "free-form chat"].iter().enumerate() {
        let plain = &totals[0][w];
        if plain.prompts == 0 {
            continue;
        }
        println!("\n{workload}: {} prompts, {} tokens each way", plain.prompts, plain.tokens);
        println!(
            "{:<8} {:>8} {:>9} {:>7} {:>11} {:>7} {:>10} {:>14} {:>14} {:>14}",
            "mode", "tok/s", "vs plain", "tokens", "tok/step", "trees", "identical", "grammar", "lookup", "draft model"
        );
        let names = std::iter::once("plain").chain(modes.iter().map(|(n, _)| n.as_str()));
        for (t, name) in totals.iter().map(|t| &t[w]).zip(names) {
            let share = |i: usize| {
                if t.proposed[i] == 0 {
                    "-".to_string()
                } else {
                    format!(
                        "{}/{} {:.0}%",
                        t.accepted[i],
                        t.proposed[i],
                        100.0 * t.accepted[i] as f64 / t.proposed[i] as f64
                    )
                }
            };
            println!(
                "{:<8} {:>8.2} {:>8.2}× {:>7} {:>11.2} {:>7} {:>7}/{:<2} {:>14} {:>14} {:>14}",
                name,
                t.tokens_per_sec(),
                t.tokens_per_sec() / plain.tokens_per_sec().max(1e-9),
                t.tokens,
                t.tokens as f64 / t.steps.max(1) as f64,
                t.tree_steps,
                t.identical,
                t.prompts,
                share(0),
                share(1),
                share(2)
            );
        }
    }
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_vec_pretty(&figures)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("\nreport written to {}", path.display());
    }
    if args.check && !failures.is_empty() {
        bail!("{} check(s) failed:\n  {}", failures.len(), failures.join("\n  "));
    }
    Ok(())
}

fn figures_of(mode: &str, d: &Decoded, identical: bool, decoder: &quire_llm::decoder::Decoder) -> ModeFigures {
    ModeFigures {
        mode: mode.to_string(),
        tokens: d.tokens.len(),
        decode_secs: d.speculation.decode_secs,
        tokens_per_sec: d.speculation.decode_tokens_per_sec,
        verify_steps: d.speculation.verify_steps,
        tree_steps: d.speculation.tree_steps,
        identical_to_plain: identical,
        accepted: SOURCES
            .iter()
            .map(|s| (*s, d.speculation.source(*s).accepted, d.speculation.source(*s).proposed))
            .collect(),
        text: decoder.text().decode(&d.tokens).unwrap_or_default(),
    }
}

/// The answer parses as the schema's JSON and cites only sources 1..=retrieved.
fn check_answer(text: &str, retrieved: usize) -> Result<()> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| anyhow::anyhow!("does not parse: {e}"))?;
    let citations = value["citations"].as_array().context("no citations list")?;
    anyhow::ensure!(value["answer"].is_string(), "no answer text");
    for c in citations {
        let n = c["chunk"].as_u64().context("a citation without a source number")?;
        anyhow::ensure!((1..=retrieved as u64).contains(&n), "cites source {n} of {retrieved} retrieved");
    }
    Ok(())
}
