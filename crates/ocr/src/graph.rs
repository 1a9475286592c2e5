//! The operators of a `.rten` model file in the order it lists them, with their constant
//! inputs' values: what `network` builds the recognizer from. Read with `rten-model-file`
//! (the format's own schema); `Identity` operators, which only rename, are left out.

use anyhow::{bail, Context, Result};
use rten_model_file::header::Header;
use rten_model_file::schema as fb;

pub(crate) use fb::OperatorType as Kind;

/// One operator: its kind, its inputs (constants with their values) and the attributes the
/// recognizer's operators have.
pub(crate) struct Operator {
    pub kind: Kind,
    pub inputs: Vec<Input>,
    pub attrs: Attrs,
}

pub(crate) enum Input {
    /// A value computed by another operator (or the model's input).
    Value,
    Constant(Constant),
}

pub(crate) struct Constant {
    pub shape: Vec<usize>,
    /// The values as f32 (integer constants converted: they are shapes and axes here).
    pub values: Vec<f32>,
}

/// The attributes of the kinds the recognizer has; zeros and empty lists elsewhere.
#[derive(Default)]
pub(crate) struct Attrs {
    /// Convolutions and pools: `[top, left, bottom, right]`, empty when `same` pads.
    pub pads: Vec<usize>,
    pub strides: Vec<usize>,
    pub kernel: Vec<usize>,
    pub groups: usize,
    /// ONNX's `SAME_UPPER`: the padding goes at the end where it is odd.
    pub same: bool,
    pub epsilon: f32,
    pub alpha: f32,
    pub beta: f32,
    pub axes: Vec<i32>,
}

impl Operator {
    /// The constant input at `index`, or an error naming what was expected.
    pub fn constant(&self, index: usize) -> Result<&Constant> {
        match self.inputs.get(index) {
            Some(Input::Constant(c)) => Ok(c),
            _ => bail!("{} has no constant input {index}", name(self.kind)),
        }
    }

    /// The constant input wherever it is (operators with one constant and one value).
    pub fn the_constant(&self) -> Result<&Constant> {
        self.inputs
            .iter()
            .find_map(|i| match i {
                Input::Constant(c) => Some(c),
                Input::Value => None,
            })
            .with_context(|| format!("{} has no constant input", name(self.kind)))
    }

    /// Whether every input is a computed value (an addition of two branches, not a bias).
    pub fn all_values(&self) -> bool {
        self.inputs.iter().all(|i| matches!(i, Input::Value))
    }
}

pub(crate) fn name(kind: Kind) -> &'static str {
    kind.variant_name().unwrap_or("an unknown operator")
}

/// The operators of the model in `bytes` (a whole `.rten` file), in the file's order.
pub(crate) fn operators(bytes: &[u8]) -> Result<Vec<Operator>> {
    let header = Header::from_buf(bytes).map_err(|e| anyhow::anyhow!("not a .rten model file: {e:?}"))?;
    let graph_bytes = bytes
        .get(header.model_offset as usize..(header.model_offset + header.model_len) as usize)
        .context("the model file is cut short")?;
    let options = flatbuffers::VerifierOptions { max_tables: 10_000_000, ..Default::default() };
    let model = fb::root_as_model_with_opts(&options, graph_bytes).context("the model's graph does not parse")?;
    let nodes = model.graph().nodes().context("the model's graph has no nodes")?;
    let tensor_data = bytes.get(header.tensor_data_offset as usize..).context("the model file is cut short")?;
    let mut operators = Vec::new();
    for node in nodes.iter() {
        let Some(op) = node.data_as_operator_node() else { continue };
        if op.type_() == Kind::Identity {
            continue;
        }
        let mut inputs = Vec::new();
        for index in op.inputs().into_iter().flatten() {
            let constant = usize::try_from(index).ok().and_then(|i| nodes.get(i).data_as_constant_node());
            inputs.push(match constant {
                Some(c) => Input::Constant(constant_values(&c, tensor_data)?),
                None => Input::Value,
            });
        }
        operators.push(Operator { kind: op.type_(), inputs, attrs: attrs(&op) });
    }
    Ok(operators)
}

fn constant_values(node: &fb::ConstantNode, tensor_data: &[u8]) -> Result<Constant> {
    let shape: Vec<usize> = node.shape().iter().map(|d| d as usize).collect();
    let count: usize = shape.iter().product();
    let values: Vec<f32> = if let Some(offset) = node.data_offset() {
        let bytes = tensor_data
            .get(offset as usize..offset as usize + 4 * count)
            .context("a constant lies outside the model file")?;
        match node.dtype() {
            Some(fb::ConstantDataType::Int32) => {
                bytes.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap()) as f32).collect()
            }
            Some(fb::ConstantDataType::Float32) | None => {
                bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
            }
            Some(other) => bail!("a constant of type {other:?}, which the recognizer does not have"),
        }
    } else if let Some(data) = node.data_as_float_data() {
        data.data().iter().collect()
    } else if let Some(data) = node.data_as_int_32_data() {
        data.data().iter().map(|v| v as f32).collect()
    } else {
        bail!("a constant of a type the recognizer does not have")
    };
    anyhow::ensure!(values.len() == count, "a constant holds {} values for shape {shape:?}", values.len());
    Ok(Constant { shape, values })
}

fn attrs(op: &fb::OperatorNode) -> Attrs {
    let list =
        |v: Option<flatbuffers::Vector<'_, u32>>| v.map(|v| v.iter().map(|x| x as usize).collect()).unwrap_or_default();
    let mut a = Attrs::default();
    if let Some(c) = op.attrs_as_conv_attrs() {
        (a.pads, a.strides, a.groups) = (list(c.pads()), list(c.strides()), c.groups() as usize);
        a.same = c.auto_pad() == fb::AutoPad::Same;
    } else if let Some(p) = op.attrs_as_max_pool_attrs() {
        (a.pads, a.strides, a.kernel) = (list(p.pads()), list(p.strides()), list(Some(p.kernel_size())));
        a.same = p.auto_pad() == fb::AutoPad::Same;
    } else if let Some(p) = op.attrs_as_average_pool_attrs() {
        (a.pads, a.strides, a.kernel) = (list(p.pads()), list(p.strides()), list(Some(p.kernel_size())));
        a.same = p.auto_pad() == fb::AutoPad::Same;
    } else if let Some(b) = op.attrs_as_batch_normalization_attrs() {
        a.epsilon = b.epsilon();
    } else if let Some(h) = op.attrs_as_hard_sigmoid_attrs() {
        (a.alpha, a.beta) = (h.alpha(), h.beta());
    } else if let Some(r) = op.attrs_as_reduce_mean_attrs() {
        a.axes = r.axes().map(|v| v.iter().collect()).unwrap_or_default();
    }
    a
}
