//! Sentence embeddings with a BERT-family model on candle: all-MiniLM-L6-v2 (mean pooling) and
//! bge-small-en-v1.5 (CLS pooling, query instruction) or any BERT checkpoint laid out the same way
//! (config.json + model.safetensors + tokenizer.json in one folder). Output vectors are
//! L2-normalised, so a dot product is the cosine similarity.

mod bert;
mod fused;
mod packed;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

pub use bert::BertConfig;
pub use packed::FILE_NAME as PACKED_FILE_NAME;

/// How token vectors become one sentence vector; must match how the model was trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    Cls,
    Mean,
}

/// The query instruction bge-*-en-v1.5 models were trained with (not applied to passages).
pub const BGE_QUERY_INSTRUCTION: &str = "Represent this sentence for searching relevant passages: ";

/// What the e5 models were trained to read before a query and before a passage.
const E5_PREFIXES: (&str, &str) = ("query: ", "passage: ");

/// Whether `dir` holds an embedder Quire reads: a BERT folder's weights or a packed file.
pub fn is_model_folder(dir: &std::path::Path) -> bool {
    dir.join("model.safetensors").is_file() || packed::is_packed(&dir.join(packed::FILE_NAME))
}

/// Bytes the embedder's weights take once loaded: f32, but for a packed file's word table,
/// kept in its 4-bit blocks (0 when `dir` holds no model).
pub fn weights_in_memory(dir: &std::path::Path) -> u64 {
    match std::fs::metadata(dir.join("model.safetensors")) {
        Ok(m) => m.len(),
        Err(_) => packed::weights_in_memory(&dir.join(packed::FILE_NAME)).unwrap_or(0),
    }
}

/// Which forward pass embeds: Quire's fused one with its dense layers in 8-bit integers (the
/// default; where the CPU has no AVX-512 VNNI it runs in f32, as `Fused`), the fused one in
/// f32 (`QUIRE_EMBEDDER=f32`), or candle's tensor graph, kept as the reference both are
/// measured against (`QUIRE_EMBEDDER=candle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardPass {
    FusedInt8,
    Fused,
    Candle,
}

impl ForwardPass {
    /// The path `QUIRE_EMBEDDER` asks for (`candle`, `f32` or `int8`), else the int8 one.
    pub fn from_env() -> ForwardPass {
        match std::env::var("QUIRE_EMBEDDER").as_deref() {
            Ok("candle") => ForwardPass::Candle,
            Ok("f32") => ForwardPass::Fused,
            _ => ForwardPass::FusedInt8,
        }
    }

    /// Whether this CPU runs `FusedInt8` in integers (else it runs as `Fused`).
    pub fn int8_available() -> bool {
        quire_dense::int8::available()
    }
}

/// Sequences shorter than this many tokens run in f32 on the int8 pass too: with few tokens to
/// average over, int8's error shows (a one-word passage came to cosine 0.9989 to its f32
/// vector, full-size chunks to 0.9991-0.9999), and they cost little. Queries are among them.
const EXACT_BELOW_TOKENS: usize = 64;

enum Forward {
    Fused(fused::FusedBert, ForwardPass),
    Candle(bert::BertModel),
}

pub struct Embedder {
    forward: Forward,
    tokenizer: Tokenizer,
    pooling: Pooling,
    query_prefix: String,
    passage_prefix: String,
    dim: usize,
    max_tokens: usize,
    device: Device,
    name: String,
}

/// sentence-transformers' `1_Pooling/config.json`.
#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

impl Embedder {
    /// Loads a model folder for the forward pass `QUIRE_EMBEDDER` picks (`ForwardPass::from_env`).
    pub fn load(dir: &std::path::Path) -> Result<Embedder> {
        Embedder::load_with(dir, ForwardPass::from_env())
    }

    /// Loads a model folder: a BERT checkpoint (config.json, model.safetensors, tokenizer.json)
    /// or multilingual-e5-small packed in one file (`PACKED_FILE_NAME`). Pooling comes from
    /// `1_Pooling/config.json` when present, else from the model's family (bge: CLS, others:
    /// mean).
    pub fn load_with(dir: &std::path::Path, pass: ForwardPass) -> Result<Embedder> {
        let file = |name: &str| -> Result<PathBuf> {
            let p = dir.join(name);
            if !p.is_file() {
                bail!("{} is missing from the embedding model folder {}", name, dir.display());
            }
            Ok(p)
        };
        let device = Device::Cpu;
        let packed_file = dir.join(packed::FILE_NAME);
        if !dir.join("config.json").is_file() && packed::is_packed(&packed_file) {
            let packed = packed::load(&packed_file, &device)?;
            let word_table = fused::WordTable::Q4_0(packed.word_blocks);
            let parts = (packed.config, packed.model, packed.tokenizer, Some(word_table));
            return Embedder::assemble(dir, parts, Pooling::Mean, E5_PREFIXES, pass);
        }
        let config_text = std::fs::read_to_string(file("config.json")?)?;
        let config: BertConfig = serde_json::from_str(&config_text).context("config.json is not a BERT config")?;
        let family_hint =
            format!("{} {}", dir.display(), config.name_or_path.as_deref().unwrap_or("")).to_ascii_lowercase();
        let is_bge = family_hint.contains("bge");
        let pooling = match std::fs::read_to_string(dir.join("1_Pooling/config.json")) {
            Ok(text) => {
                let p: PoolingConfig = serde_json::from_str(&text)?;
                match (p.pooling_mode_cls_token, p.pooling_mode_mean_tokens) {
                    (true, _) => Pooling::Cls,
                    (false, true) => Pooling::Mean,
                    _ => bail!("unsupported pooling in 1_Pooling/config.json (Quire does CLS or mean)"),
                }
            }
            Err(_) if is_bge => Pooling::Cls,
            Err(_) => Pooling::Mean,
        };
        let prefixes = if family_hint.contains("e5-") {
            E5_PREFIXES
        } else if is_bge && family_hint.contains("-en") {
            (BGE_QUERY_INSTRUCTION, "")
        } else {
            ("", "")
        };
        let tokenizer = Tokenizer::from_file(file("tokenizer.json")?)
            .map_err(|e| anyhow::anyhow!("cannot read tokenizer.json: {e}"))?;
        let model = bert::BertModel::load(&file("model.safetensors")?, &config, &device)?;
        Embedder::assemble(dir, (config, model, tokenizer, None), pooling, prefixes, pass)
    }

    /// The embedder from a model read from its files (and, for the fused pass, the word
    /// embeddings in the form the file keeps them, where that is smaller than f32).
    fn assemble(
        dir: &std::path::Path,
        (config, model, mut tokenizer, word_table): (BertConfig, bert::BertModel, Tokenizer, Option<fused::WordTable>),
        pooling: Pooling,
        (query_prefix, passage_prefix): (&str, &str),
        pass: ForwardPass,
    ) -> Result<Embedder> {
        let max_tokens = config.max_position_embeddings.min(512);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: max_tokens, ..Default::default() }))
            .map_err(anyhow::Error::msg)?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            pad_id: config.pad_token_id,
            ..Default::default()
        }));

        let device = Device::Cpu;
        let forward = match pass {
            ForwardPass::FusedInt8 | ForwardPass::Fused => {
                let mut fused = fused::FusedBert::from_model(&model, pass == ForwardPass::FusedInt8)?;
                if let Some(table) = word_table {
                    fused = fused.with_word_table(table);
                }
                Forward::Fused(fused, pass)
            }
            ForwardPass::Candle => Forward::Candle(model),
        };
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(Embedder {
            dim: config.hidden_size,
            forward,
            tokenizer,
            pooling,
            query_prefix: query_prefix.into(),
            passage_prefix: passage_prefix.into(),
            max_tokens,
            device,
            name,
        })
    }

    /// The forward pass this embedder runs.
    pub fn forward_pass(&self) -> ForwardPass {
        match self.forward {
            Forward::Fused(_, pass) => pass,
            Forward::Candle(_) => ForwardPass::Candle,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// The model's tokenizer, for counting chunk sizes in the tokens the model sees.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Embeds passages (documents, chunks). Longer batches are split; order is kept.
    pub fn embed_passages(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        const BATCH: usize = 16;
        // Sorting by length keeps padding (wasted work) low inside each batch.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        let prefixed: Vec<String>;
        let texts: Vec<&str> = if self.passage_prefix.is_empty() {
            texts.to_vec()
        } else {
            prefixed = texts.iter().map(|t| format!("{}{t}", self.passage_prefix)).collect();
            prefixed.iter().map(String::as_str).collect()
        };
        for group in order.chunks(BATCH) {
            let batch: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
            for (&i, v) in group.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    /// Embeds a search query (with the model's query instruction, if it has one).
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        let text = format!("{}{}", self.query_prefix, query);
        Ok(self.embed_batch(&[text.as_str()])?.remove(0))
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let encodings =
            self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| anyhow::anyhow!("tokenizer failed: {e}"))?;
        match &self.forward {
            Forward::Fused(fused, _) => self.embed_fused(fused, &encodings),
            Forward::Candle(model) => self.embed_candle(model, &encodings),
        }
    }

    fn embed_fused(&self, fused: &fused::FusedBert, encodings: &[tokenizers::Encoding]) -> Result<Vec<Vec<f32>>> {
        // Each sequence without its padding (padding is on the right).
        let sequences: Vec<&[u32]> = encodings
            .iter()
            .map(|e| &e.get_ids()[..e.get_attention_mask().iter().filter(|&&m| m != 0).count()])
            .collect();
        // Short sequences (queries among them) in f32, the others as the pass says: each
        // sequence's vector still depends only on itself.
        let (short, long): (Vec<usize>, Vec<usize>) =
            (0..sequences.len()).partition(|&i| sequences[i].len() < EXACT_BELOW_TOKENS);
        let mut hidden = vec![Vec::new(); sequences.len()];
        for (group, exact) in [(short, true), (long, false)] {
            if group.is_empty() {
                continue;
            }
            let seqs: Vec<&[u32]> = group.iter().map(|&i| sequences[i]).collect();
            for (i, rows) in group.into_iter().zip(fused.forward(&seqs, exact)?) {
                hidden[i] = rows;
            }
        }
        let dim = self.dim;
        let vectors = hidden.into_iter().map(|rows| {
            let mut v: Vec<f32> = match self.pooling {
                Pooling::Cls => rows[..dim].to_vec(),
                Pooling::Mean => {
                    let n = (rows.len() / dim).max(1) as f32;
                    (0..dim).map(|d| rows.iter().skip(d).step_by(dim).sum::<f32>() / n).collect()
                }
            };
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|x| *x /= norm);
            v
        });
        Ok(vectors.collect())
    }

    fn embed_candle(&self, model: &bert::BertModel, encodings: &[tokenizers::Encoding]) -> Result<Vec<Vec<f32>>> {
        let ids: Vec<Vec<u32>> = encodings.iter().map(|e| e.get_ids().to_vec()).collect();
        let mask: Vec<Vec<u32>> = encodings.iter().map(|e| e.get_attention_mask().to_vec()).collect();
        let ids = Tensor::new(ids, &self.device)?;
        let mask = Tensor::new(mask, &self.device)?;
        let hidden = model.forward(&ids, &mask)?; // (batch, seq, dim)
        let pooled = match self.pooling {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
            Pooling::Mean => {
                let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let summed = hidden.broadcast_mul(&m)?.sum(1)?;
                summed.broadcast_div(&m.sum(1)?)?
            }
        };
        let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?;
        let normed = pooled.broadcast_div(&norm.clamp(1e-12, f64::MAX)?)?;
        Ok(normed.to_vec2::<f32>()?)
    }
}
