//! The network read from the model file's operators, each checked to be what the network has
//! next, so another model is refused rather than misread.

use anyhow::{bail, ensure, Context, Result};

use crate::graph::{name, Constant, Kind, Operator};

use super::{Block, Conv, Depthwise, Encoder, Excitation, Layer, Neck, Norm, Recognizer, Stem};

/// The operators in order, read one at a time, each checked to be what the network has next.
pub(super) struct Ops<'a> {
    pub(super) ops: &'a [Operator],
    pub(super) at: usize,
}

impl<'a> Ops<'a> {
    fn peek(&self) -> Option<&'a Operator> {
        self.ops.get(self.at)
    }

    fn next(&mut self, kind: Kind) -> Result<&'a Operator> {
        let op = self.peek().context("the model ends early")?;
        if op.kind != kind {
            bail!("found {} where {} was expected", name(op.kind), name(kind));
        }
        self.at += 1;
        Ok(op)
    }

    fn next_is(&self, kind: Kind) -> bool {
        self.peek().is_some_and(|op| op.kind == kind)
    }

    /// The shape operators between the parts the network reads (their effect is built in).
    fn skip_plumbing(&mut self) {
        const PLUMBING: [Kind; 7] =
            [Kind::Shape, Kind::Slice, Kind::Squeeze, Kind::Unsqueeze, Kind::Concat, Kind::Reshape, Kind::Transpose];
        while self.peek().is_some_and(|op| PLUMBING.contains(&op.kind)) {
            self.at += 1;
        }
    }

    /// A convolution's weight and attributes, and the bias added after it.
    fn conv_with_bias(&mut self) -> Result<(&'a Operator, Vec<f32>)> {
        let conv = self.next(Kind::Conv)?;
        let channels = conv.constant(1)?.shape[0];
        let add = self.next(Kind::Add)?;
        let bias = add.the_constant()?;
        ensure!(bias.values.len() == channels, "a bias of {} values for {channels} channels", bias.values.len());
        Ok((conv, bias.values.clone()))
    }

    /// Layer norm as the exported graph spells it: mean, subtract, square, mean, add ε,
    /// square root, divide, scale, shift.
    fn norm(&mut self) -> Result<Norm> {
        self.next(Kind::ReduceMean)?;
        self.next(Kind::Sub)?;
        let square = self.next(Kind::Pow)?;
        ensure!(square.the_constant()?.values == [2.0], "layer norm squares");
        self.next(Kind::ReduceMean)?;
        let epsilon = self.next(Kind::Add)?.the_constant()?.values[0];
        self.next(Kind::Sqrt)?;
        self.next(Kind::Div)?;
        let gain = self.next(Kind::Mul)?.the_constant()?.values.clone();
        let bias = self.next(Kind::Add)?.the_constant()?.values.clone();
        Ok(Norm { gain, bias, epsilon })
    }

    /// `MatMul` by a constant `[inputs][outputs]` then `Add` of a bias, as a layer.
    fn linear(&mut self) -> Result<Layer> {
        let weight = self.next(Kind::MatMul)?.the_constant()?;
        let bias = self.next(Kind::Add)?.the_constant()?.values.clone();
        let &[inputs, outputs] = &weight.shape[..] else { bail!("a matrix of shape {:?}", weight.shape) };
        Ok(Layer::new(by_output(&weight.values, inputs, outputs), bias, outputs, inputs, false))
    }

    fn swish(&mut self) -> Result<()> {
        self.next(Kind::Sigmoid)?;
        self.next(Kind::Mul)?;
        Ok(())
    }

    /// A convolution without bias followed by batch norm and swish, batch norm folded in.
    fn conv_norm_swish(&mut self) -> Result<(&'a Operator, Vec<f32>, Vec<f32>)> {
        let conv = self.next(Kind::Conv)?;
        let norm = self.next(Kind::BatchNormalization)?;
        let [gamma, beta, mean, variance] = [1, 2, 3, 4].map(|i| norm.constant(i).map(|c| &c.values));
        let (gamma, beta, mean, variance) = (gamma?, beta?, mean?, variance?);
        let scale: Vec<f32> = gamma.iter().zip(variance).map(|(g, v)| g / (v + norm.attrs.epsilon).sqrt()).collect();
        let shift = beta.iter().zip(mean).zip(&scale).map(|((b, m), s)| b - m * s).collect();
        self.swish()?;
        Ok((conv, scale, shift))
    }
}

fn pads(op: &Operator, kernel: (usize, usize)) -> Result<[usize; 4]> {
    if op.attrs.same {
        // SAME_UPPER with stride 1: the kernel's extra row and column go after.
        return Ok([(kernel.0 - 1) / 2, (kernel.1 - 1) / 2, kernel.0 / 2, kernel.1 / 2]);
    }
    match op.attrs.pads[..] {
        [] => Ok([0; 4]),
        [top, left, bottom, right] => Ok([top, left, bottom, right]),
        _ => bail!("padding {:?}", op.attrs.pads),
    }
}

fn strides(op: &Operator) -> Result<(usize, usize)> {
    match op.attrs.strides[..] {
        [] => Ok((1, 1)),
        [sy, sx] => Ok((sy, sx)),
        _ => bail!("strides {:?}", op.attrs.strides),
    }
}

/// A matrix stored `[inputs][outputs]` (ONNX's `MatMul` by a constant) as a layer's
/// `[outputs][inputs]`.
fn by_output(weight: &[f32], inputs: usize, outputs: usize) -> Vec<f32> {
    let mut laid_out = vec![0f32; inputs * outputs];
    for i in 0..inputs {
        for o in 0..outputs {
            laid_out[o * inputs + i] = weight[i * outputs + o];
        }
    }
    laid_out
}

/// A convolution's kernel `[out][in][ky][kx]` as a layer's rows over patches laid out
/// `[ky][kx][in]` (what `conv` gathers).
pub(super) fn by_patch(weight: &[f32], outputs: usize, inputs: usize, (kh, kw): (usize, usize)) -> Vec<f32> {
    let patch = kh * kw * inputs;
    let mut laid_out = vec![0f32; outputs * patch];
    for o in 0..outputs {
        for i in 0..inputs {
            for ky in 0..kh {
                for kx in 0..kw {
                    laid_out[o * patch + (ky * kw + kx) * inputs + i] = weight[((o * inputs + i) * kh + ky) * kw + kx];
                }
            }
        }
    }
    laid_out
}

/// A depthwise kernel `[c][tap]` laid out `[tap][c]` (what `depthwise` reads), each channel's
/// weights times its `scale` (a folded norm) where given.
pub(super) fn by_tap(weight: &[f32], channels: usize, taps: usize, scale: Option<&[f32]>) -> Vec<f32> {
    let mut laid_out = vec![0f32; taps * channels];
    for c in 0..channels {
        let s = scale.map_or(1.0, |s| s[c]);
        for k in 0..taps {
            laid_out[k * channels + c] = weight[c * taps + k] * s;
        }
    }
    laid_out
}

/// A full convolution `[out][in][ky][kx]` as a layer over patches laid out `[ky][kx][in]`.
fn full_conv(op: &Operator, bias: Vec<f32>, int8: bool) -> Result<Conv> {
    let weight: &Constant = op.constant(1)?;
    let &[outputs, inputs, kh, kw] = &weight.shape[..] else { bail!("a kernel of shape {:?}", weight.shape) };
    ensure!(op.attrs.groups <= 1, "a grouped convolution where a full one was expected");
    let laid_out = by_patch(&weight.values, outputs, inputs, (kh, kw));
    let (stride, pads) = (strides(op)?, pads(op, (kh, kw))?);
    Ok(Conv { layer: Layer::new(laid_out, bias, outputs, kh * kw * inputs, int8), kernel: (kh, kw), stride, pads })
}

/// A 1×1 convolution as a layer; `scale` multiplies each output's weights (a folded norm).
fn one_by_one(op: &Operator, bias: Vec<f32>, scale: Option<&[f32]>, int8: bool) -> Result<Layer> {
    let weight = op.constant(1)?;
    let &[outputs, inputs, 1, 1] = &weight.shape[..] else { bail!("a 1×1 kernel of shape {:?}", weight.shape) };
    ensure!(op.attrs.groups <= 1 && strides(op)? == (1, 1), "a 1×1 convolution with groups or strides");
    let mut values = weight.values.clone();
    if let Some(scale) = scale {
        for (row, s) in values.chunks_exact_mut(inputs).zip(scale) {
            row.iter_mut().for_each(|v| *v *= s);
        }
    }
    Ok(Layer::new(values, bias, outputs, inputs, int8))
}

fn depthwise_conv(op: &Operator, bias: Vec<f32>, scale: Option<&[f32]>) -> Result<Depthwise> {
    let weight = op.constant(1)?;
    let &[channels, 1, kh, kw] = &weight.shape[..] else { bail!("a depthwise kernel of shape {:?}", weight.shape) };
    ensure!(
        op.attrs.groups == channels,
        "a depthwise convolution of {} groups for {channels} channels",
        op.attrs.groups
    );
    let laid_out = by_tap(&weight.values, channels, kh * kw, scale);
    let (stride, pads) = (strides(op)?, pads(op, (kh, kw))?);
    // What `depthwise` runs: a step of 1 across, padding narrower than the kernel.
    ensure!(
        stride.1 == 1 && pads[1] < kw && pads[3] < kw,
        "a depthwise convolution stepping {stride:?}, padded {pads:?}"
    );
    Ok(Depthwise { weight: laid_out, bias, kernel: (kh, kw), stride, pads })
}

pub(super) fn build(ops: &mut Ops, int8: bool) -> Result<Recognizer> {
    // The stem's layers stay in f32: with 24 to 96 outputs a row, quantizing each row costs
    // what 8-bit products save (measured: no faster).
    let stem_conv = |ops: &mut Ops, int8: bool| -> Result<Conv> {
        let (op, bias) = ops.conv_with_bias()?;
        ops.next(Kind::Relu)?;
        full_conv(op, bias, int8)
    };
    let first = stem_conv(ops, false)?;
    let left = stem_conv(ops, false)?;
    let right = stem_conv(ops, false)?;
    let pool = ops.next(Kind::MaxPool)?;
    ensure!(pool.attrs.kernel == [2, 2] && pool.attrs.same, "the stem's pool is 2×2, same size");
    ops.next(Kind::Concat)?;
    let joined = stem_conv(ops, false)?;
    let (op, bias) = ops.conv_with_bias()?;
    ops.next(Kind::Relu)?;
    let widen = one_by_one(op, bias, None, false)?;
    let stem = Stem { first, left, right, joined, widen };

    let mut blocks = Vec::new();
    while ops.next_is(Kind::Conv) {
        let (op, bias) = ops.conv_with_bias()?;
        let depthwise = depthwise_conv(op, bias, None)?;
        let excitation = if ops.next_is(Kind::ReduceMean) {
            let mean = ops.next(Kind::ReduceMean)?;
            ensure!(mean.attrs.axes == [2, 3], "the excitation averages over the map");
            let (op, bias) = ops.conv_with_bias()?;
            let reduce = one_by_one(op, bias, None, false)?;
            ops.next(Kind::Relu)?;
            let (op, bias) = ops.conv_with_bias()?;
            let expand = one_by_one(op, bias, None, false)?;
            let hard = ops.next(Kind::HardSigmoid)?;
            ops.next(Kind::Mul)?;
            Some(Excitation { reduce, expand, alpha: hard.attrs.alpha, beta: hard.attrs.beta })
        } else {
            None
        };
        let (op, bias) = ops.conv_with_bias()?;
        let up = one_by_one(op, bias, None, int8)?;
        // GELU: x / √2, erf, + 1, × x, × ½.
        let divide = ops.next(Kind::Div)?;
        ensure!((divide.the_constant()?.values[0] - std::f32::consts::SQRT_2).abs() < 1e-6, "GELU divides by √2");
        for kind in [Kind::Erf, Kind::Add, Kind::Mul, Kind::Mul] {
            ops.next(kind)?;
        }
        let (op, bias) = ops.conv_with_bias()?;
        let down = one_by_one(op, bias, None, int8)?;
        let residual = ops.peek().is_some_and(|op| op.kind == Kind::Add && op.all_values());
        if residual {
            ops.next(Kind::Add)?;
            ensure!(down.outputs == depthwise.bias.len(), "a residual across a change of channels");
        }
        blocks.push(Block { depthwise, excitation, up, down, residual });
    }
    let pool = ops.next(Kind::AveragePool)?;
    ensure!(pool.attrs.kernel == [3, 2] && pool.attrs.strides == [3, 2], "the last pool is 3 × 2");

    let (op, scale, shift) = ops.conv_norm_swish()?;
    let shortcut = one_by_one(op, shift, Some(&scale), int8)?;
    let (op, scale, shift) = ops.conv_norm_swish()?;
    let mix_in = one_by_one(op, shift, Some(&scale), int8)?;
    let (op, scale, shift) = ops.conv_norm_swish()?;
    let mix_along = depthwise_conv(op, shift, Some(&scale))?;
    ops.next(Kind::Add)?;
    ops.skip_plumbing();
    let mut encoders = Vec::new();
    let norm = loop {
        let norm = ops.norm()?;
        if !ops.next_is(Kind::MatMul) {
            break norm;
        }
        let qkv = ops.linear()?;
        let split = ops.next(Kind::Reshape)?.the_constant()?;
        let &[_, _, parts, heads, head_size] = &split.values[..] else {
            bail!("the attention's split {:?}", split.values)
        };
        ensure!(parts == 3.0, "the attention's split {:?}", split.values);
        let (heads, head_size) = (heads as usize, head_size as usize);
        ensure!(heads * head_size == qkv.inputs && qkv.outputs == 3 * qkv.inputs, "heads of {head_size} × {heads}");
        ops.skip_plumbing();
        let scale = ops.next(Kind::Mul)?.the_constant()?.values[0];
        ensure!(ops.next(Kind::Add)?.the_constant()?.values == [0.0], "the queries are only scaled");
        ops.skip_plumbing();
        ops.next(Kind::MatMul)?;
        ops.next(Kind::Softmax)?;
        ops.next(Kind::MatMul)?;
        ops.skip_plumbing();
        let projection = ops.linear()?;
        ops.next(Kind::Add)?;
        let mlp_norm = ops.norm()?;
        let mlp_up = ops.linear()?;
        ops.swish()?;
        let mlp_down = ops.linear()?;
        ops.next(Kind::Add)?;
        encoders.push(Encoder { attention_norm: norm, qkv, heads, scale, projection, mlp_norm, mlp_up, mlp_down });
    };
    ops.skip_plumbing();
    ops.next(Kind::Add)?;
    ops.skip_plumbing();
    let weight = ops.next(Kind::MatMul)?.the_constant()?;
    let bias = ops.next(Kind::Add)?.the_constant()?.values.clone();
    ops.next(Kind::Softmax)?;
    let &[inputs, classes] = &weight.shape[..] else { bail!("a head of shape {:?}", weight.shape) };
    ensure!(inputs == 120 && encoders.iter().all(|e| e.qkv.inputs == inputs), "a head over {inputs} features");
    let head = Layer::new(by_output(&weight.values, inputs, classes), bias, classes, inputs, int8);
    ensure!(ops.peek().is_none(), "operators after the head");
    Ok(Recognizer { stem, blocks, neck: Neck { shortcut, mix_in, mix_along, encoders, norm }, head })
}
