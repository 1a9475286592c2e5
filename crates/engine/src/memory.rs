//! The memory budget: what the models and the index take or would take, against what this
//! process uses and what the machine has. Predictions come from file headers and sizes, so a
//! model that would not fit can be refused before it is loaded.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;
use ts_rs::TS;

use quire_llm::decoder::Placement;
use quire_llm::ModelFootprint;

/// Share of the machine's available memory a model may take before the app warns.
const FIT_SHARE: f64 = 0.9;

#[derive(Debug, Clone, Serialize, TS)]
pub struct ModelMemory {
    pub role: String,
    pub path: String,
    /// Predicted bytes of the weights in the computer's memory once loaded.
    #[ts(type = "number")]
    pub weights_bytes: u64,
    /// Predicted bytes of the weights in the GPU's own memory (`MemoryBudget::gpu`); where not
    /// 0, the KV cache and the kept prompt are there too.
    #[ts(type = "number")]
    pub gpu_bytes: u64,
    /// KV cache at `context_tokens` (0 for the embedder).
    #[ts(type = "number")]
    pub kv_cache_bytes: u64,
    pub loaded: bool,
    /// The last prompt, kept processed for a next one that begins the same way (a follow-up
    /// over the same passages): its tokens, and the bytes its cache holds between answers.
    pub kept_prompt_tokens: u32,
    #[ts(type = "number")]
    pub kept_prompt_bytes: u64,
}

#[derive(Debug, Clone, Serialize, TS)]
pub struct MemoryBudget {
    pub models: Vec<ModelMemory>,
    /// Context size the KV cache figures are given for: prompt with its sources plus the answer.
    pub context_tokens: u32,
    /// The knowledge base's folder on disk (LanceDB reads it through the page cache).
    #[ts(type = "number")]
    pub index_bytes: u64,
    /// Predicted resident memory of this process with the answer model loaded: what it used
    /// just before that model loaded (now, if it is not loaded yet) plus its predicted weights.
    #[ts(type = "number")]
    pub predicted_rss_bytes: u64,
    #[ts(type = "number")]
    pub process_rss_bytes: u64,
    #[ts(type = "number")]
    pub machine_total_bytes: u64,
    #[ts(type = "number")]
    pub machine_available_bytes: u64,
    /// The GPU the answer models run on, where it has memory of its own (CUDA); `None` where they
    /// run in the computer's memory (the CPU, Apple silicon).
    pub gpu: Option<GpuMemory>,
    /// Models that would not fit in the available memory if loaded now.
    pub warnings: Vec<String>,
}

/// A GPU's own memory, as it reports it.
#[derive(Debug, Clone, Serialize, TS)]
pub struct GpuMemory {
    /// "CUDA GPU".
    pub name: String,
    #[ts(type = "number")]
    pub total_bytes: u64,
    #[ts(type = "number")]
    pub free_bytes: u64,
}

/// The memory a model would be loaded into: the computer's, available now, and the GPU's own,
/// free now, where Quire's decoder runs on one.
#[derive(Debug, Clone, Copy)]
pub struct Room {
    pub available: u64,
    pub gpu_free: Option<u64>,
}

impl Room {
    /// The room now where models are placed as `placement` says.
    pub fn now(placement: &Placement) -> Room {
        Room::of(MemoryReading::now().machine_available_bytes, placement)
    }

    fn of(available: u64, placement: &Placement) -> Room {
        Room { available, gpu_free: placement.gpu_memory().map(|(free, _)| free) }
    }
}

/// What the process and the machine hold right now.
#[derive(Debug, Clone, Copy)]
pub struct MemoryReading {
    pub process_rss_bytes: u64,
    pub machine_total_bytes: u64,
    pub machine_available_bytes: u64,
}

impl MemoryReading {
    pub fn now() -> MemoryReading {
        use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System};
        let mut sys = System::new();
        sys.refresh_memory();
        let pid = sysinfo::get_current_pid().ok();
        let mut rss = 0;
        if let Some(pid) = pid {
            sys.refresh_processes_specifics(
                ProcessesToUpdate::Some(&[pid]),
                false,
                ProcessRefreshKind::nothing().with_memory(),
            );
            rss = sys.process(pid).map(|p| p.memory()).unwrap_or(0);
        }
        MemoryReading {
            process_rss_bytes: rss,
            machine_total_bytes: sys.total_memory(),
            machine_available_bytes: sys.available_memory(),
        }
    }
}

/// A model the budget accounts for, and whether it is in memory now.
pub struct BudgetedModel<'a> {
    pub role: &'a str,
    pub path: &'a Path,
    pub loaded: bool,
    /// Tokens and bytes of the prompt the model keeps processed (see `ModelMemory`).
    pub kept_prompt: (usize, usize),
}

/// The most resident memory this process has had (Linux: VmHWM; `None` where the OS does not
/// keep the figure in a place we read).
pub fn peak_rss_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let kb: u64 =
            status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Resident bytes of a BERT embedder's weights (`quire_embed::weights_in_memory`).
pub fn embedder_bytes(dir: &Path) -> u64 {
    quire_embed::weights_in_memory(dir)
}

/// Bytes of a folder's files, recursively.
pub fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => folder_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// A GGUF model in the models folder, as Settings offers it: its size on disk, what it takes in
/// memory with its KV cache at the budget's context, and whether that fits what is free.
#[derive(Debug, Clone, Serialize, TS)]
pub struct InstalledModel {
    pub path: String,
    /// The known model's name and quantization ("Qwen2.5-Coder-1.5B-Instruct, Q4_K_M"), else
    /// the file's name.
    pub name: String,
    #[ts(type = "number")]
    pub file_bytes: u64,
    #[ts(type = "number")]
    pub memory_bytes: u64,
    pub fits: bool,
}

/// The GGUF files in `models_dir`, by file name, against `available` bytes of memory; a file
/// whose header cannot be read is left out (Settings still takes any path typed).
pub fn installed_models(
    models_dir: &Path,
    context_tokens: u32,
    room: Room,
    placement: &Placement,
) -> Vec<InstalledModel> {
    let Ok(entries) = std::fs::read_dir(models_dir) else {
        return Vec::new();
    };
    let mut paths: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "gguf") && p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let f = ModelFootprint::of_gguf_on(&path, placement).ok()?;
            let memory_bytes = f.weights_bytes + f.gpu_weights_bytes + f.kv_bytes(context_tokens as u64);
            let known = quire_models::KNOWN_MODELS.iter().find(|m| m.location_in(models_dir) == path);
            let name = known.map_or_else(
                || path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                |m| m.description.split(" GGUF").next().unwrap_or(m.description).to_owned(),
            );
            Some(InstalledModel {
                path: path.display().to_string(),
                name,
                file_bytes: f.file_bytes,
                memory_bytes,
                fits: shortfall(&f, context_tokens, room).is_none(),
            })
        })
        .collect()
}

/// Where a model, with its KV cache at `context_tokens`, would take more than its share of
/// the memory free: the bytes it needs there, the bytes free, and which memory ("" for the
/// computer's, " of the GPU" for the GPU's own); `None` when it fits.
fn shortfall(f: &ModelFootprint, context_tokens: u32, room: Room) -> Option<(u64, u64, &'static str)> {
    let kv = f.kv_bytes(context_tokens as u64);
    let (in_ram, on_gpu) =
        if f.on_gpu() { (f.weights_bytes, f.gpu_weights_bytes + kv) } else { (f.weights_bytes + kv, 0) };
    let short = |needed: u64, free: u64| needed as f64 > free as f64 * FIT_SHARE;
    match room.gpu_free {
        Some(free) if on_gpu > 0 && short(on_gpu, free) => Some((on_gpu, free, " of the GPU")),
        _ => short(in_ram, room.available).then_some((in_ram, room.available, "")),
    }
}

/// A warning when a model, with its KV cache at `context_tokens`, would take more than its
/// share of the memory free (the GPU's own where it runs on one); `None` when it fits.
pub fn fit_warning(role: &str, path: &Path, f: &ModelFootprint, context_tokens: u32, room: Room) -> Option<String> {
    shortfall(f, context_tokens, room).map(|(needed, free, memory)| {
        format!(
            "the {role} model {} needs about {} MB{memory} but only {} MB are available: close other programs or pick a smaller model",
            path.display(),
            needed / 1_000_000,
            free / 1_000_000
        )
    })
}

/// Builds the budget. `rss_without_llm` is the process's resident memory without the answer
/// model (the embedder is loaded whenever a collection is open, so it is in there).
/// `placement`: where the answer models run (or would).
pub fn budget(
    rss_without_llm: u64,
    embedder_dir: &Path,
    llms: &[BudgetedModel<'_>],
    placement: &Placement,
    context_tokens: u32,
    index_dir: &Path,
    reading: MemoryReading,
) -> Result<MemoryBudget> {
    let gpu = placement.gpu_memory().map(|(free_bytes, total_bytes)| GpuMemory {
        name: placement.name().into(),
        total_bytes,
        free_bytes,
    });
    let room = Room { available: reading.machine_available_bytes, gpu_free: gpu.as_ref().map(|g| g.free_bytes) };
    let mut models = vec![ModelMemory {
        role: "embedder".into(),
        path: embedder_dir.display().to_string(),
        weights_bytes: embedder_bytes(embedder_dir),
        gpu_bytes: 0,
        kv_cache_bytes: 0,
        loaded: true,
        kept_prompt_tokens: 0,
        kept_prompt_bytes: 0,
    }];
    let mut warnings = Vec::new();
    for m in llms {
        match ModelFootprint::of_gguf_on(m.path, placement) {
            Ok(f) => {
                let kv = f.kv_bytes(context_tokens as u64);
                if !m.loaded {
                    warnings.extend(fit_warning(m.role, m.path, &f, context_tokens, room));
                }
                models.push(ModelMemory {
                    role: m.role.into(),
                    path: m.path.display().to_string(),
                    weights_bytes: f.weights_bytes,
                    gpu_bytes: f.gpu_weights_bytes,
                    kv_cache_bytes: kv,
                    loaded: m.loaded,
                    kept_prompt_tokens: m.kept_prompt.0 as u32,
                    kept_prompt_bytes: m.kept_prompt.1 as u64,
                });
            }
            Err(e) => warnings.push(format!("the {} model cannot be measured: {e:#}", m.role)),
        }
    }
    // Answer and draft models in memory (the embedder is in `rss_without_llm` already), with
    // the prompt they keep between answers where it is not in the GPU's memory.
    let loaded: u64 = models
        .iter()
        .filter(|m| m.loaded && m.role != "embedder")
        .map(|m| m.weights_bytes + if m.gpu_bytes > 0 { 0 } else { m.kept_prompt_bytes })
        .sum();
    let predicted = rss_without_llm + loaded;
    Ok(MemoryBudget {
        models,
        context_tokens,
        index_bytes: folder_bytes(index_dir),
        predicted_rss_bytes: predicted,
        process_rss_bytes: reading.process_rss_bytes,
        machine_total_bytes: reading.machine_total_bytes,
        machine_available_bytes: reading.machine_available_bytes,
        gpu,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings' list: the GGUF files of the folder by name, a known one by its name, with its
    /// file size and a verdict against the memory given; other files and unreadable GGUFs left out.
    #[test]
    fn installed_models_are_the_folders_readable_gguf_files() {
        let dir = tempfile::tempdir().unwrap();
        let tiny = quire_testkit::model(&quire_models::SMOLLM2);
        std::os::unix::fs::symlink(&tiny, quire_models::SMOLLM2.location_in(dir.path())).unwrap();
        std::os::unix::fs::symlink(&tiny, dir.path().join("another.gguf")).unwrap();
        std::fs::write(dir.path().join("broken.gguf"), b"not a model").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"text").unwrap();
        let on_cpu = |available| {
            installed_models(dir.path(), 1000, Room::of(available, &Placement::Kernels), &Placement::Kernels)
        };
        let plenty = on_cpu(1 << 40);
        let names: Vec<&str> = plenty.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["SmolLM2-135M-Instruct, Q4_1", "another.gguf"], "{plenty:?}");
        let file = std::fs::metadata(&tiny).unwrap().len();
        assert!(plenty.iter().all(|m| m.file_bytes == file && m.memory_bytes > file / 2 && m.fits), "{plenty:?}");
        let scarce = on_cpu(1_000_000);
        assert!(scarce.iter().all(|m| !m.fits), "{scarce:?}");
        let room = Room::of(1 << 40, &Placement::Kernels);
        assert!(installed_models(&dir.path().join("missing"), 1000, room, &Placement::Kernels).is_empty());
    }

    /// What a loaded model keeps between answers (its last prompt) is in the prediction; a
    /// model not loaded adds nothing.
    #[test]
    fn the_prediction_counts_the_kept_prompt_of_loaded_models() {
        let tiny = quire_testkit::model(&quire_models::SMOLLM2);
        let embedder = quire_testkit::model(&quire_models::MINILM);
        let reading =
            MemoryReading { process_rss_bytes: 500, machine_total_bytes: 1 << 40, machine_available_bytes: 1 << 39 };
        let index = tempfile::tempdir().unwrap();
        let predicted = |loaded: bool, kept_prompt: (usize, usize)| {
            let model = BudgetedModel { role: "target", path: &tiny, loaded, kept_prompt };
            budget(1_000, &embedder, &[model], &Placement::Kernels, 3000, index.path(), reading).unwrap()
        };
        let weights = predicted(true, (0, 0)).models[1].weights_bytes;
        assert_eq!(predicted(true, (0, 0)).predicted_rss_bytes, 1_000 + weights);
        let kept = predicted(true, (1400, 80_000_000));
        assert_eq!(kept.predicted_rss_bytes, 1_000 + weights + 80_000_000);
        assert_eq!((kept.models[1].kept_prompt_tokens, kept.models[1].kept_prompt_bytes), (1400, 80_000_000));
        assert_eq!(predicted(false, (0, 0)).predicted_rss_bytes, 1_000);
    }

    #[test]
    fn warns_when_weights_and_kv_pass_the_share_of_available_memory() {
        let f = ModelFootprint {
            architecture: "qwen2".into(),
            file_bytes: 0,
            weights_bytes: 800_000_000,
            gpu_weights_bytes: 0,
            kv_bytes_per_token: 10_000,
            context_length: 4096,
            layers: 1,
        };
        let path = Path::new("/m/x.gguf");
        let ram = |available| Room { available, gpu_free: None };
        // 800 MB + 1,000 tokens × 10 kB = 810 MB; 90 % of 1,000 MB is 900 MB: fits.
        assert_eq!(fit_warning("target", path, &f, 1_000, ram(1_000_000_000)), None);
        // 90 % of 880 MB is 792 MB: does not fit, and the message names role, file and sizes.
        let w = fit_warning("draft", path, &f, 1_000, ram(880_000_000)).unwrap();
        assert!(w.contains("draft model /m/x.gguf needs about 810 MB but only 880 MB"), "{w}");
    }

    /// On a GPU with memory of its own, the weights on it and the KV cache are held against the
    /// GPU's free memory, the rest against the computer's.
    #[test]
    fn a_model_on_a_gpu_is_held_against_the_gpus_memory() {
        let f = ModelFootprint {
            architecture: "qwen2".into(),
            file_bytes: 0,
            weights_bytes: 200_000_000,
            gpu_weights_bytes: 900_000_000,
            kv_bytes_per_token: 10_000,
            context_length: 4096,
            layers: 1,
        };
        let path = Path::new("/m/x.gguf");
        // 910 MB on the GPU against 90 % of 1,000 MB free there; 200 MB in 300 MB of RAM.
        let room = |available, gpu_free| Room { available, gpu_free: Some(gpu_free) };
        assert_eq!(fit_warning("target", path, &f, 1_000, room(300_000_000, 1_020_000_000)), None);
        let w = fit_warning("target", path, &f, 1_000, room(300_000_000, 1_000_000_000)).unwrap();
        assert!(w.contains("needs about 910 MB of the GPU but only 1000 MB"), "{w}");
        let w = fit_warning("target", path, &f, 1_000, room(200_000_000, 1 << 40)).unwrap();
        assert!(w.contains("needs about 200 MB but only 200 MB"), "{w}");
        // Held on the CPU, the same model would need all of it in RAM.
        let cpu = ModelFootprint { weights_bytes: 1_100_000_000, gpu_weights_bytes: 0, ..f };
        let w = fit_warning("target", path, &cpu, 1_000, room(1_200_000_000, 1 << 40)).unwrap();
        assert!(w.contains("needs about 1110 MB but only 1200 MB"), "{w}");
    }
}
