//! Choosing tokens from logits: the greedy argmax under a grammar mask, and sampling at a
//! temperature.

use rand::Rng;
use toktrie::SimpleVob;

pub(super) fn allowed(mask: Option<&SimpleVob>, token: usize) -> bool {
    mask.is_none_or(|m| token < m.len() && m.is_allowed(token as u32))
}

/// The first highest-scoring allowed token (ties go to the lower id, so it is deterministic).
pub fn argmax(row: &[f32], mask: Option<&SimpleVob>) -> u32 {
    let mut best = (0usize, f32::NEG_INFINITY);
    for (i, &v) in row.iter().enumerate() {
        if v > best.1 && allowed(mask, i) {
            best = (i, v);
        }
    }
    best.0 as u32
}

/// Softmax of `row / temperature` over the allowed tokens (others get 0).
pub fn probabilities(row: &[f32], mask: Option<&SimpleVob>, temperature: f32) -> Vec<f32> {
    let max =
        row.iter().enumerate().filter(|(i, _)| allowed(mask, *i)).map(|(_, v)| *v).fold(f32::NEG_INFINITY, f32::max);
    let mut p: Vec<f32> = row
        .iter()
        .enumerate()
        .map(|(i, v)| if allowed(mask, i) { ((v - max) / temperature).exp() } else { 0.0 })
        .collect();
    let sum: f32 = p.iter().sum();
    if sum > 0.0 {
        p.iter_mut().for_each(|v| *v /= sum);
    }
    p
}

/// Draws from an unnormalised distribution; `None` when it is all zeros.
pub fn sample(weights: &[f32], rng: &mut impl Rng) -> Option<u32> {
    let total: f32 = weights.iter().sum();
    if total <= 0.0 || !total.is_finite() {
        return None;
    }
    let mut x = rng.random::<f32>() * total;
    let mut last = None;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            if x < w {
                return Some(i as u32);
            }
            x -= w;
            last = Some(i as u32);
        }
    }
    last
}
