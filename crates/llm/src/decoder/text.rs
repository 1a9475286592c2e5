//! The tokenizer and chat template a GGUF file carries, rebuilt for Quire's own decoder, and
//! the grammar environment (llguidance) over that tokenizer.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use candle_core::quantized::gguf_file::{Content, Value};
use llguidance::ParserFactory;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::BPE;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, PreTokenizerWrapper, SplitDelimiterBehavior, Tokenizer};

/// Qwen2's pre-tokenizer split (from its tokenizer.json): words, single digits, punctuation
/// runs, newlines and spaces.
const QWEN2_SPLIT: &str =
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Names end-of-turn tokens go by across model families.
const STOP_NAMES: [&str; 4] = ["<|im_end|>", "<|endoftext|>", "<|eot_id|>", "</s>"];

pub struct ChatText {
    pub tokenizer: Tokenizer,
    template: String,
    bos: String,
    eos: String,
    /// Tokens that end the reply.
    pub stop: Vec<u32>,
}

fn strings(content: &Content, key: &str) -> Result<Vec<String>> {
    let values = content.metadata.get(key).with_context(|| format!("the model file has no {key}"))?.to_vec()?;
    values.iter().map(|v| Ok(v.to_string()?.clone())).collect()
}

impl ChatText {
    pub fn load(path: &Path) -> Result<ChatText> {
        let (content, _) = super::transformer::open_gguf(path)?;
        ChatText::from_gguf(path, &content)
    }

    /// The tokenizer and chat template from a GGUF header (`path` names the file in errors).
    pub fn from_gguf(path: &Path, content: &Content) -> Result<ChatText> {
        let model = content.metadata.get("tokenizer.ggml.model").map(|v| v.to_string().cloned()).transpose()?;
        if model.as_deref() != Some("gpt2") {
            bail!(
                "{} has a {} tokenizer; Quire's decoder reads byte-level BPE (gpt2) tokenizers",
                path.display(),
                model.as_deref().unwrap_or("missing")
            );
        }
        let tokens = strings(content, "tokenizer.ggml.tokens")?;
        let merges = strings(content, "tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| {
                m.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())).ok_or_else(|| anyhow!("bad merge {m:?}"))
            })
            .collect::<Result<Vec<_>>>()?;
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v.to_vec()?.iter().map(|t| t.to_i32()).collect::<candle_core::Result<_>>()?,
            None => Vec::new(),
        };
        let vocab: tokenizers::models::bpe::Vocab =
            tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
        let bpe = BPE::builder().vocab_and_merges(vocab, merges).build().map_err(|e| anyhow!("{e}"))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let pre = content.metadata.get("tokenizer.ggml.pre").and_then(|v| v.to_string().ok()).cloned();
        let pre_tokenizer = if pre.as_deref() == Some("qwen2") {
            let split =
                Split::new(SplitPattern::Regex(QWEN2_SPLIT.to_string()), SplitDelimiterBehavior::Isolated, false)
                    .map_err(|e| anyhow!("{e}"))?;
            PreTokenizerWrapper::Sequence(Sequence::new(vec![
                PreTokenizerWrapper::Split(split),
                PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, false, false)),
            ]))
        } else {
            // GPT-2's own split, built into the byte-level pre-tokenizer.
            PreTokenizerWrapper::ByteLevel(ByteLevel::new(false, false, true))
        };
        tokenizer.with_pre_tokenizer(Some(pre_tokenizer));
        tokenizer.with_decoder(Some(ByteLevelDecoder::new(false, false, false)));
        // Control and user-defined tokens (<|im_start|>, …) are matched whole in the text.
        let special: Vec<AddedToken> = tokens
            .iter()
            .zip(&types)
            .filter(|(_, &t)| t == 3 || t == 4)
            .map(|(token, _)| AddedToken::from(token.clone(), true))
            .collect();
        tokenizer.add_special_tokens(&special);

        let token_id = |key: &str| content.metadata.get(key).and_then(|v| v.to_u32().ok());
        let name_of = |id: Option<u32>| id.and_then(|i| tokens.get(i as usize)).cloned().unwrap_or_default();
        let eos_id = token_id("tokenizer.ggml.eos_token_id");
        let mut stop: Vec<u32> = eos_id.into_iter().collect();
        for name in STOP_NAMES {
            if let Some(&id) = tokenizer.get_vocab(true).get(name) {
                if !stop.contains(&id) {
                    stop.push(id);
                }
            }
        }
        let template = match content.metadata.get("tokenizer.chat_template") {
            Some(Value::String(s)) => s.clone(),
            _ => bail!("{} has no chat template", path.display()),
        };
        Ok(ChatText {
            tokenizer,
            template,
            bos: name_of(token_id("tokenizer.ggml.bos_token_id")),
            eos: name_of(eos_id),
            stop,
        })
    }

    /// The prompt's tokens: system and user message in the model's chat template, ready for
    /// the assistant's reply.
    pub fn prompt(&self, system: &str, user: &str) -> Result<Vec<u32>> {
        let mut env = minijinja::Environment::new();
        env.add_template("chat", &self.template).context("the model's chat template does not parse")?;
        let messages = [
            HashMap::from([("role", "system"), ("content", system)]),
            HashMap::from([("role", "user"), ("content", user)]),
        ];
        let text = env
            .get_template("chat")?
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => self.bos,
                eos_token => self.eos,
            })
            .context("cannot apply the model's chat template")?;
        self.encode(&text)
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self.tokenizer.encode(text, false).map_err(|e| anyhow!("cannot tokenize: {e}"))?;
        Ok(encoding.get_ids().to_vec())
    }

    pub fn decode(&self, tokens: &[u32]) -> Result<String> {
        self.tokenizer.decode(tokens, false).map_err(|e| anyhow!("cannot detokenize: {e}"))
    }

    /// The grammar engine's view of this tokenizer, padded to the model's vocabulary.
    pub fn grammar_factory(&self, model_vocab: usize) -> Result<Arc<ParserFactory>> {
        let mut bytes = toktrie_hf_tokenizers::ByteTokenizer::from_tokenizer(self.tokenizer.clone())?;
        bytes.set_eos_tokens(&self.stop);
        let env = bytes.into_tok_env(Some(model_vocab.max(self.tokenizer.get_vocab_size(true))))?;
        Ok(Arc::new(ParserFactory::new_simple(&env)?))
    }
}

/// Turns a growing token list into text pieces, holding back bytes of a character that is
/// not complete yet.
#[derive(Default)]
pub struct TextStream {
    sent: usize,
}

impl TextStream {
    pub fn next(&mut self, text: &ChatText, tokens: &[u32]) -> Result<Option<String>> {
        let all = text.decode(tokens)?;
        if all.ends_with('\u{FFFD}') || all.len() <= self.sent || !all.is_char_boundary(self.sent) {
            return Ok(None);
        }
        let piece = all[self.sent..].to_string();
        self.sent = all.len();
        Ok(Some(piece))
    }
}
