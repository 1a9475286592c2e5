"""Embeds the texts `quire bench embed` hands it with sentence-transformers, the library people
would otherwise use, and reports its speed and vectors for the side-by-side ratio.

    bash tools/setup-embed-reference.sh      # a venv of its own, not part of the app
    ~/.cache/quire/st-venv/bin/python tools/embed_reference.py MODEL_DIR TEXTS.jsonl OUT.json

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
    args = parser.parse_args()

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
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "vectors": vectors.tolist(),
        },
        open(args.out, "w"),
    )


if __name__ == "__main__":
    main()
