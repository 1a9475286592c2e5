"""Computes a reference sentence embedding with an independent NumPy implementation of BERT.

The Rust embedder (candle) is tested against the vector this writes: two implementations that
share nothing but the weights and the tokenizer must agree (cosine >= 0.999).

    pip install numpy tokenizers safetensors
    python3 tools/reference_embedding.py MODEL_DIR "sentence" > crates/embed/tests/data/NAME.json
"""
import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def main(model_dir, sentence):
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in load_file(os.path.join(model_dir, "model.safetensors")).items()}
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    ids = np.array(tok.encode(sentence).ids)
    eps = cfg.get("layer_norm_eps", 1e-12)
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = h // heads
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)] + w["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    lin = lambda t, name: t @ w[name + ".weight"].T + w[name + ".bias"]
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (lin(x, p + f"attention.self.{n}").reshape(len(ids), heads, hd).transpose(1, 0, 2) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(len(ids), h)
        x = layer_norm(lin(ctx, p + "attention.output.dense") + x, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        ff = gelu(lin(x, p + "intermediate.dense"))
        x = layer_norm(lin(ff, p + "output.dense") + x, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    pool = json.load(open(os.path.join(model_dir, "1_Pooling/config.json")))
    v = x[0] if pool.get("pooling_mode_cls_token") else x.mean(0)
    v = v / np.linalg.norm(v)
    json.dump({"model": os.path.basename(os.path.normpath(model_dir)), "sentence": sentence, "tokens": len(ids), "vector": [round(float(f), 7) for f in v]}, sys.stdout)
    print()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
