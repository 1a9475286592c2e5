//! The candle embedder against a reference vector computed by an independent NumPy
//! implementation (tools/reference_embedding.py), batching that does not change results, and
//! the fused forward pass against candle's tensor graph.

use quire_embed::{Embedder, ForwardPass, Pooling};

#[derive(serde::Deserialize)]
struct Reference {
    sentence: String,
    vector: Vec<f32>,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

fn embedder() -> Embedder {
    Embedder::load(&quire_testkit::model(&quire_models::MINILM)).unwrap()
}

#[test]
fn minilm_matches_the_reference_vector() {
    let reference: Reference = serde_json::from_str(include_str!("data/all-minilm-l6-v2.json")).unwrap();
    let e = embedder();
    assert_eq!(e.dim(), 384);
    assert_eq!(e.pooling(), Pooling::Mean);
    let v = &e.embed_passages(&[reference.sentence.as_str()]).unwrap()[0];
    assert_eq!(v.len(), reference.vector.len());
    let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "L2-normalised, got norm {norm}");
    let c = cosine(v, &reference.vector);
    assert!(c >= 0.999, "cosine to the reference {c}");
}

#[test]
fn padding_in_a_batch_does_not_change_vectors() {
    let e = embedder();
    let texts = [
        "short",
        "A much longer sentence about FASTA programs that search protein and DNA databases.",
        "medium length text here",
    ];
    let batch = e.embed_passages(&texts).unwrap();
    for (t, v) in texts.iter().zip(&batch) {
        let alone = &e.embed_passages(&[t]).unwrap()[0];
        assert!(cosine(alone, v) > 0.9999, "{t}: {}", cosine(alone, v));
    }
    // Related texts are closer than unrelated ones.
    let q = e.embed_query("searching protein databases").unwrap();
    assert!(cosine(&q, &batch[1]) > cosine(&q, &batch[0]));
}

#[test]
fn the_fused_pass_gives_candles_vectors() {
    let model = quire_testkit::model(&quire_models::MINILM);
    let fused = Embedder::load_with(&model, ForwardPass::Fused).unwrap();
    let candle = Embedder::load_with(&model, ForwardPass::Candle).unwrap();
    assert_eq!((fused.forward_pass(), candle.forward_pass()), (ForwardPass::Fused, ForwardPass::Candle));
    let long = "Smith-Waterman searches with ssearch36 are slower than fasta36 but rigorous. ".repeat(60);
    let texts = ["short", "medium length text about protein databases", long.as_str()];
    let (a, b) = (fused.embed_passages(&texts).unwrap(), candle.embed_passages(&texts).unwrap());
    for ((t, x), y) in texts.iter().zip(&a).zip(&b) {
        let c = cosine(x, y);
        assert!(c >= 0.99999, "{}: cosine {c}", &t[..t.len().min(30)]);
    }
    let q = "which program runs a rigorous search";
    assert!(cosine(&fused.embed_query(q).unwrap(), &candle.embed_query(q).unwrap()) >= 0.99999);
}
