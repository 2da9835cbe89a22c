#include "engine/onnx_export.hpp"

#include <algorithm>

#include <cmath>
#include <functional>
#include <set>

#include "core/error.hpp"
#include "core/ops/halo.hpp"
#include "engine/checkpoint_model.hpp"
#include "engine/model_graph.hpp"

namespace dtrain {
namespace {

using Ints = std::vector<int64_t>;

void set_attribute(onnx::NodeProto& node, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void set_attribute(onnx::NodeProto& node, const std::string& name, float value) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

void set_attribute(onnx::NodeProto& node, const std::string& name, const Ints& values) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (const int64_t v : values) a->add_ints(v);
}

// A tensor's type: element type and shape, the batch axis named N (any size).
void set_type(onnx::ValueInfoProto& info, const std::string& name, int element_type, const Shape& shape) {
  info.set_name(name);
  onnx::TypeProto_Tensor* tensor = info.mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(element_type);
  onnx::TensorShapeProto* dims = tensor->mutable_shape();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i == 0) dims->add_dim()->set_dim_param("N");
    else dims->add_dim()->set_dim_value(shape[i]);
  }
}

// Emits the graph. Tensor names: the model's input "input"; a layer's output its name ("dense1",
// "res1/conv_a"); the steps inside a layer and constants made for it "LAYER:what" (':' is in no layer name);
// the checkpoint's variables by their paths.
class GraphWriter {
 public:
  GraphWriter(const OnnxExportInput& input, onnx::GraphProto& graph) : input_(input), graph_(graph) {}

  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                   const std::function<void(onnx::NodeProto&)>& attributes = {}) {
    onnx::NodeProto* n = graph_.add_node();
    n->set_op_type(op);
    n->set_name(output);
    for (const std::string& i : inputs) n->add_input(i);
    n->add_output(output);
    if (attributes) attributes(*n);
    return output;
  }

  std::string constant(const std::string& name, const Shape& shape, const std::vector<float>& values) {
    DTRAIN_CHECK(int64_t(values.size()) == num_elements(shape), "[export] constant {} of shape {} has {} values", name,
                 shape_string(shape), values.size());
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (const int64_t d : shape) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    return name;
  }

  std::string constant_ints(const std::string& name, const Ints& values) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(values.size()));
    for (const int64_t v : values) t->add_int64_data(v);
    return name;
  }

  std::string scalar(const std::string& name, float value) { return constant(name, {}, {value}); }

  std::string constant_bools(const std::string& name, const Shape& shape, const std::vector<bool>& values) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::BOOL);
    for (const int64_t d : shape) t->add_dims(d);
    for (const bool v : values) t->add_int32_data(v ? 1 : 0);
    return name;
  }

  // A variable of the checkpoint, as an initializer named by its path (once), in `shape` (its own
  // shape or another of as many elements: a row-major reshape).
  std::string variable(const std::string& path, const Shape& shape) {
    const NamedValues& v = values(path);
    DTRAIN_CHECK(num_elements(shape) == num_elements(v.shape), "[export] variable {} of shape {} read as {}", path,
                 shape_string(v.shape), shape_string(shape));
    if (!written_.insert(path).second) return path;
    return constant(path, shape, v.values);
  }
  std::string variable(const std::string& path) { return variable(path, values(path).shape); }

  const NamedValues& values(const std::string& path) const {
    const auto found = std::find_if(input_.variables.begin(), input_.variables.end(),
                                    [&](const NamedValues& v) { return v.name == path; });
    DTRAIN_CHECK(found != input_.variables.end(), "[export] the checkpoint's values lack variable {}", path);
    return *found;
  }

 private:
  const OnnxExportInput& input_;
  onnx::GraphProto& graph_;
  std::set<std::string> written_;
};

[[noreturn]] void refuse(const LayerConfig& layer, const std::string& why) {
  throw UsageError(fmt::format("[export] layer '{}' (kind {}) cannot be exported to ONNX: {}", layer.name,
                               to_string(layer.kind), why));
}

// What dtrain's ForwardContext carries from layer to layer at inference: the token ids [B, T] (int64) an
// embedding with mask_zero saw, which attention reads and a global average pool reads and ends.
struct LayerContext {
  std::string padding_ids;  // "" when no mask is on
};

// [B, T] ids -> whether each is padding (id 0), as bool.
std::string padding_of(GraphWriter& g, const std::string& ids, const std::string& name) {
  return g.node("Equal", {ids, g.constant_ints(name + ":zero_id", {0})}, name + ":is_padding");
}

std::string activation(GraphWriter& g, Activation kind, const std::string& x, const std::string& output) {
  switch (kind) {
    case Activation::none: return g.node("Identity", {x}, output);
    case Activation::relu: return g.node("Relu", {x}, output);
    case Activation::sigmoid: return g.node("Sigmoid", {x}, output);
    case Activation::tanh: return g.node("Tanh", {x}, output);
    case Activation::softmax:
      return g.node("Softmax", {x}, output, [](onnx::NodeProto& n) { set_attribute(n, "axis", int64_t(-1)); });
    case Activation::gelu: {  // the exact form, as dtrain's kernel: 0.5 x (1 + erf(x / sqrt 2)); opset 17 has no Gelu
      const std::string erf = g.node("Erf", {g.node("Mul", {x, g.scalar(output + ":1/sqrt2", 0.70710678118654752f)},
                                                    output + ":scaled")},
                                     output + ":erf");
      const std::string one_plus = g.node("Add", {erf, g.scalar(output + ":one", 1.0f)}, output + ":1+erf");
      const std::string half_x = g.node("Mul", {x, g.scalar(output + ":half", 0.5f)}, output + ":x/2");
      return g.node("Mul", {half_x, one_plus}, output);
    }
  }
  throw Error("[export] unknown activation");
}

// NHWC (dtrain's images) <-> NCHW (ONNX's Conv and pools).
std::string to_nchw(GraphWriter& g, const std::string& x, const std::string& name) {
  return g.node("Transpose", {x}, name + ":nchw", [](onnx::NodeProto& n) { set_attribute(n, "perm", Ints{0, 3, 1, 2}); });
}
std::string to_nhwc(GraphWriter& g, const std::string& x, const std::string& output) {
  return g.node("Transpose", {x}, output, [](onnx::NodeProto& n) { set_attribute(n, "perm", Ints{0, 2, 3, 1}); });
}

// ONNX's pads [h_begin, w_begin, h_end, w_end] for a window over an NHWC input of `in` making `out`: none for
// valid, TensorFlow's same padding (the odd one at the end) as dtrain's kernels pad.
Ints window_pads(const Shape& in, const Shape& out, int64_t kh, int64_t kw, int64_t sh, int64_t sw, PaddingKind padding) {
  if (padding == PaddingKind::valid) return {0, 0, 0, 0};
  const int64_t total_h = std::max<int64_t>((out[1] - 1) * sh + kh - in[1], 0);
  const int64_t total_w = std::max<int64_t>((out[2] - 1) * sw + kw - in[2], 0);
  return {total_h / 2, total_w / 2, total_h - total_h / 2, total_w - total_w / 2};
}

// Keras' MultiHeadAttention as self-attention (see core/nn/layers.hpp), its kernels reshaped to matrices.
std::string attention(GraphWriter& g, const LayerConfig& layer, const std::string& x, const Shape& in,
                      const LayerContext& context) {
  const AttentionConfig& a = layer.attention;
  const std::string& name = layer.name;
  const int64_t features = in[2], length = in[1], heads = a.num_heads, key_dim = a.key_dim;
  const int64_t value_dim = a.value_dim > 0 ? a.value_dim : a.key_dim;
  const int64_t output = a.output_shape > 0 ? a.output_shape : features;
  // [B, T, F] -> [B, H, T, D]
  auto project = [&](const std::string& sub, int64_t dim) {
    const std::string prefix = name + "/" + sub;
    std::string y = g.node("MatMul", {x, g.variable(prefix + "/kernel", {features, heads * dim})}, name + ":" + sub);
    if (a.use_bias) y = g.node("Add", {y, g.variable(prefix + "/bias", {heads * dim})}, name + ":" + sub + "+bias");
    y = g.node("Reshape", {y, g.constant_ints(name + ":" + sub + "_shape", {0, 0, heads, dim})}, name + ":" + sub + "_heads");
    return g.node("Transpose", {y}, name + ":" + sub + "_bhtd",
                  [](onnx::NodeProto& n) { set_attribute(n, "perm", Ints{0, 2, 1, 3}); });
  };
  const std::string q = project("query", key_dim), k = project("key", key_dim), v = project("value", value_dim);
  const std::string q_scaled =
      g.node("Mul", {q, g.scalar(name + ":scale", float(1.0 / std::sqrt(double(key_dim))))}, name + ":query_scaled");
  const std::string k_t =
      g.node("Transpose", {k}, name + ":key_t", [](onnx::NodeProto& n) { set_attribute(n, "perm", Ints{0, 1, 3, 2}); });
  std::string scores = g.node("MatMul", {q_scaled, k_t}, name + ":scores");  // [B, H, T, T]
  // The hidden scores, as dtrain's kernels hide them: a key after its query (causal), a padding key or query
  // (mask_zero's ids). Their scores are replaced by -1e9 (a row with every key hidden is then uniform), and
  // with dropout > 0 (Keras' explicit path) their probabilities by 0.
  std::string hidden;
  if (a.causal) {
    std::vector<bool> later(size_t(length * length), false);
    for (int64_t i = 0; i < length; ++i)
      for (int64_t j = i + 1; j < length; ++j) later[size_t(i * length + j)] = true;
    hidden = g.constant_bools(name + ":causal_mask", {length, length}, later);
  }
  if (!context.padding_ids.empty()) {
    const std::string padding = padding_of(g, context.padding_ids, name);
    const std::string keys = g.node("Unsqueeze", {padding, g.constant_ints(name + ":key_axes", {1, 2})}, name + ":padding_keys");
    const std::string queries =
        g.node("Unsqueeze", {padding, g.constant_ints(name + ":query_axes", {1, 3})}, name + ":padding_queries");
    const std::string either = g.node("Or", {keys, queries}, name + ":padding_mask");  // [B, 1, T, T]
    hidden = hidden.empty() ? either : g.node("Or", {either, hidden}, name + ":mask");
  }
  if (!hidden.empty())
    scores = g.node("Where", {hidden, g.scalar(name + ":hidden_score", -1e9f), scores}, name + ":masked_scores");
  std::string probabilities =
      g.node("Softmax", {scores}, name + ":probabilities", [](onnx::NodeProto& n) { set_attribute(n, "axis", int64_t(-1)); });
  if (!hidden.empty() && a.dropout > 0)
    probabilities = g.node("Where", {hidden, g.scalar(name + ":hidden_probability", 0.0f), probabilities},
                           name + ":masked_probabilities");
  std::string y = g.node("MatMul", {probabilities, v}, name + ":heads");  // [B, H, T, V]
  y = g.node("Transpose", {y}, name + ":heads_bthv", [](onnx::NodeProto& n) { set_attribute(n, "perm", Ints{0, 2, 1, 3}); });
  y = g.node("Reshape", {y, g.constant_ints(name + ":heads_shape", {0, 0, heads * value_dim})}, name + ":heads_flat");
  y = g.node("MatMul", {y, g.variable(name + "/attention_output/kernel", {heads * value_dim, output})},
             a.use_bias ? name + ":output" : name);
  if (a.use_bias) y = g.node("Add", {y, g.variable(name + "/attention_output/bias", {output})}, name);
  return y;
}

// Emits one layer; returns its output's name (the layer's name).
std::string emit_layer(GraphWriter& g, const LayerConfig& layer, const std::vector<std::string>& xs,
                       const std::vector<Shape>& ins, const Shape& out, LayerContext& context) {
  const std::string& name = layer.name;
  const std::string& x = xs.front();
  const Shape& in = ins.front();
  switch (layer.kind) {
    case LayerKind::dense: {
      const DenseConfig& d = layer.dense;
      std::string y = g.node("MatMul", {x, g.variable(name + "/kernel")}, name + ":matmul");
      if (d.use_bias) y = g.node("Add", {y, g.variable(name + "/bias")}, name + ":bias_add");
      return activation(g, d.activation, y, name);
    }
    case LayerKind::conv2d: {
      const Conv2dConfig& c = layer.conv2d;
      // Keras' kernel [kh, kw, cin, filters] -> ONNX's [filters, cin, kh, kw]
      const NamedValues& kernel = g.values(name + "/kernel");
      const int64_t kh = kernel.shape[0], kw = kernel.shape[1], cin = kernel.shape[2], filters = kernel.shape[3];
      std::vector<float> w(kernel.values.size());
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j)
          for (int64_t ci = 0; ci < cin; ++ci)
            for (int64_t f = 0; f < filters; ++f)
              w[size_t(((f * cin + ci) * kh + i) * kw + j)] = kernel.values[size_t(((i * kw + j) * cin + ci) * filters + f)];
      std::vector<std::string> inputs{to_nchw(g, x, name), g.constant(name + ":kernel_oihw", {filters, cin, kh, kw}, w)};
      if (c.use_bias) inputs.push_back(g.variable(name + "/bias"));
      const Ints pads = window_pads(in, out, kh, kw, c.strides[0], c.strides[1], c.padding);
      const std::string y = g.node("Conv", inputs, name + ":conv", [&](onnx::NodeProto& n) {
        set_attribute(n, "kernel_shape", Ints{kh, kw});
        set_attribute(n, "strides", Ints{c.strides[0], c.strides[1]});
        set_attribute(n, "pads", pads);
      });
      if (c.activation == Activation::none) return to_nhwc(g, y, name);
      return activation(g, c.activation, to_nhwc(g, y, name + ":nhwc"), name);
    }
    case LayerKind::max_pool2d:
    case LayerKind::avg_pool2d: {
      const Pool2dConfig& p = layer.pool2d;
      const bool max = layer.kind == LayerKind::max_pool2d;
      const Ints pads = window_pads(in, out, p.pool_size[0], p.pool_size[1], p.strides[0], p.strides[1], p.padding);
      // Padding is no data: a max ignores it, an average counts only the real positions (as dtrain's kernels).
      const std::string y = g.node(max ? "MaxPool" : "AveragePool", {to_nchw(g, x, name)}, name + ":pool", [&](onnx::NodeProto& n) {
        set_attribute(n, "kernel_shape", Ints{p.pool_size[0], p.pool_size[1]});
        set_attribute(n, "strides", Ints{p.strides[0], p.strides[1]});
        set_attribute(n, "pads", pads);
        if (!max) set_attribute(n, "count_include_pad", int64_t(0));
      });
      return to_nhwc(g, y, name);
    }
    case LayerKind::flatten:
      return g.node("Flatten", {x}, name, [](onnx::NodeProto& n) { set_attribute(n, "axis", int64_t(1)); });
    case LayerKind::global_average_pool: {
      if (in.size() == 3 && !context.padding_ids.empty()) {  // the mean over the steps whose id is not 0; ends the mask
        const std::string kept = g.node(
            "Cast", {g.node("Not", {padding_of(g, context.padding_ids, name)}, name + ":kept")}, name + ":kept_float",
            [](onnx::NodeProto& n) { set_attribute(n, "to", int64_t(onnx::TensorProto::FLOAT)); });
        const std::string steps = g.constant_ints(name + ":steps_axis", {1});
        const std::string count = g.node("ReduceSum", {kept, steps}, name + ":count",
                                         [](onnx::NodeProto& n) { set_attribute(n, "keepdims", int64_t(1)); });
        const std::string weights = g.node("Div", {kept, count}, name + ":weights");  // a row of padding only: NaN, as dtrain
        const std::string spread =
            g.node("Unsqueeze", {weights, g.constant_ints(name + ":features_axis", {2})}, name + ":weights_btd");
        context.padding_ids.clear();
        return g.node("ReduceSum", {g.node("Mul", {x, spread}, name + ":weighted"), steps}, name,
                      [](onnx::NodeProto& n) { set_attribute(n, "keepdims", int64_t(0)); });
      }
      // [N, H, W, C] -> [N, C]; [N, T, D] -> [N, D]
      const Ints axes = in.size() == 4 ? Ints{1, 2} : Ints{1};
      return g.node("ReduceMean", {x}, name, [&](onnx::NodeProto& n) {
        set_attribute(n, "axes", axes);
        set_attribute(n, "keepdims", int64_t(0));
      });
    }
    case LayerKind::dropout:
    case LayerKind::relayout: return g.node("Identity", {x}, name);  // inference: no dropout; one device: no layout
    case LayerKind::relu: return activation(g, Activation::relu, x, name);
    case LayerKind::softmax: return activation(g, Activation::softmax, x, name);
    case LayerKind::sigmoid: return activation(g, Activation::sigmoid, x, name);
    case LayerKind::tanh: return activation(g, Activation::tanh, x, name);
    case LayerKind::gelu: return activation(g, Activation::gelu, x, name);
    case LayerKind::batch_norm: {
      const BatchNormConfig& bn = layer.batch_norm;
      std::string y;
      if (bn.parameter_free) {  // statistics of the batch given (per feature; images per channel over N, H, W)
        const Ints axes = in.size() == 4 ? Ints{0, 1, 2} : Ints{0};
        auto mean_over_batch = [&](const std::string& v, const std::string& output) {
          return g.node("ReduceMean", {v}, output, [&](onnx::NodeProto& n) {
            set_attribute(n, "axes", axes);
            set_attribute(n, "keepdims", int64_t(1));
          });
        };
        const std::string centered = g.node("Sub", {x, mean_over_batch(x, name + ":mean")}, name + ":centered");
        const std::string variance =
            mean_over_batch(g.node("Mul", {centered, centered}, name + ":squares"), name + ":variance");
        const std::string root = g.node(
            "Sqrt", {g.node("Add", {variance, g.scalar(name + ":epsilon", float(bn.epsilon))}, name + ":variance+eps")},
            name + ":std");
        y = g.node("Mul", {centered, g.node("Reciprocal", {root}, name + ":rstd")}, name + ":normalized");
      } else {  // Keras at inference: the moving statistics; 1 / sqrt(variance + epsilon) as dtrain's rsqrt
        const NamedValues& variance = g.values(name + "/moving_variance");
        std::vector<float> rstd(variance.values.size());
        const float epsilon = float(bn.epsilon);
        for (size_t i = 0; i < rstd.size(); ++i) rstd[i] = 1.0f / std::sqrt(variance.values[i] + epsilon);
        const std::string centered = g.node("Sub", {x, g.variable(name + "/moving_mean")}, name + ":centered");
        y = g.node("Mul", {centered, g.constant(name + ":rstd", variance.shape, rstd)}, name + ":normalized");
      }
      if (bn.scale && !bn.parameter_free) y = g.node("Mul", {y, g.variable(name + "/gamma")}, name + ":scaled");
      if (bn.center && !bn.parameter_free) y = g.node("Add", {y, g.variable(name + "/beta")}, name + ":centered_out");
      return g.node("Identity", {y}, name);
    }
    case LayerKind::layer_norm: {
      const LayerNormConfig& ln = layer.layer_norm;
      const int64_t features = in.back();
      const std::string scale =
          ln.scale ? g.variable(name + "/gamma") : g.constant(name + ":ones", {features}, std::vector<float>(size_t(features), 1.0f));
      std::vector<std::string> inputs{x, scale};
      if (ln.center) inputs.push_back(g.variable(name + "/beta"));
      return g.node("LayerNormalization", inputs, name, [&](onnx::NodeProto& n) {
        set_attribute(n, "axis", int64_t(-1));
        set_attribute(n, "epsilon", float(ln.epsilon));
      });
    }
    case LayerKind::embedding:
      if (layer.embedding.mask_zero) context.padding_ids = x;  // the ids, for the attention and pooling after it
      return g.node("Gather", {g.variable(name + "/embeddings"), x}, name,
                    [](onnx::NodeProto& n) { set_attribute(n, "axis", int64_t(0)); });
    case LayerKind::position_embedding: return g.node("Add", {x, g.variable(name + "/embeddings")}, name);
    case LayerKind::multi_head_attention: return attention(g, layer, x, in, context);
    case LayerKind::add: return g.node("Sum", xs, name);
    case LayerKind::subtract: return g.node("Sub", {xs[0], xs[1]}, name);
    case LayerKind::multiply: {
      std::string y = xs[0];
      for (size_t i = 1; i < xs.size(); ++i)
        y = g.node("Mul", {y, xs[i]}, i + 1 == xs.size() ? name : fmt::format("{}:product{}", name, i));
      return y;
    }
    case LayerKind::average: {  // dtrain's: the sum, then times 1/n
      const std::string sum = g.node("Sum", xs, name + ":sum");
      return g.node("Mul", {sum, g.scalar(name + ":1/n", 1.0f / float(xs.size()))}, name);
    }
    case LayerKind::concatenate:
      return g.node("Concat", xs, name, [&](onnx::NodeProto& n) { set_attribute(n, "axis", int64_t(layer.concatenate.axis)); });
    case LayerKind::block: break;  // expanded by model_graph
  }
  refuse(layer, "no ONNX form");
}

bool takes_ids(LayerKind kind) { return kind == LayerKind::embedding; }

}  // namespace

bool onnx_input_is_ids(const Config& config) {
  return is_text(config.data.dataset) && config.data.vectorizer.mode == "int";
}

onnx::ModelProto onnx_model(const OnnxExportInput& input) {
  const Config& config = input.config;
  const nn::Model& model = input.model;
  const ModelGraph graph = model_graph(config);
  onnx::ModelProto proto;
  proto.set_ir_version(kOnnxIrVersion);
  proto.set_producer_name("dtrain");
  proto.set_producer_version("0.1");
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  for (const auto& [key, value] : input.metadata) {
    onnx::StringStringEntryProto* entry = proto.add_metadata_props();
    entry->set_key(key);
    entry->set_value(value);
  }
  onnx::GraphProto& onnx_graph = *proto.mutable_graph();
  onnx_graph.set_name("dtrain");
  GraphWriter g(input, onnx_graph);

  Shape input_shape{1};
  for (const int64_t d : config.data.example_shape()) input_shape.push_back(d);
  const std::vector<Shape> shapes = model.layer_shapes(input_shape);
  const bool ids = onnx_input_is_ids(config);
  set_type(*onnx_graph.add_input(), "input", ids ? onnx::TensorProto::INT64 : onnx::TensorProto::FLOAT, input_shape);

  // The model's input as its layers take it: floats (scaled as its data set scales them) or int64 ids.
  std::string float_input, ids_input;
  auto model_input = [&](bool want_ids) -> std::string {
    if (want_ids) {
      if (ids_input.empty())
        ids_input = ids ? "input" : g.node("Cast", {"input"}, "input:ids", [](onnx::NodeProto& n) {
          set_attribute(n, "to", int64_t(onnx::TensorProto::INT64));
        });
      return ids_input;
    }
    if (float_input.empty()) {
      if (ids) {
        float_input = g.node("Cast", {"input"}, "input:float",
                             [](onnx::NodeProto& n) { set_attribute(n, "to", int64_t(onnx::TensorProto::FLOAT)); });
      } else {
        float divide_by = 0;  // as engine/predict_rows.hpp and the data sources read raw values
        if (config.data.dataset == Dataset::mnist || config.data.dataset == Dataset::image_folder) divide_by = 255.0f;
        if (config.data.dataset == Dataset::arrays) divide_by = float(config.data.arrays.divide_by);
        float_input = divide_by != 0 ? g.node("Div", {"input", g.scalar("input:divide_by", divide_by)}, "input:scaled")
                                     : std::string("input");
      }
    }
    return float_input;
  };

  const auto& nodes = model.nodes();
  LayerContext context;
  for (const int index : model.order()) {
    const nn::Model::Node& node = nodes[size_t(index)];
    const LayerConfig& layer = graph.layer(node.layer->name()).layer;
    std::vector<std::string> xs;
    std::vector<Shape> ins;
    for (const int from : node.inputs) {
      if (from == nn::Model::kInputNode) {
        xs.push_back(model_input(takes_ids(layer.kind)));
        ins.push_back(input_shape);
      } else {
        // Only the model's input is ever ids: an embedding after another layer casts its floats.
        const std::string& previous = nodes[size_t(from)].layer->name();
        xs.push_back(takes_ids(layer.kind) ? g.node("Cast", {previous}, layer.name + ":ids", [](onnx::NodeProto& n) {
          set_attribute(n, "to", int64_t(onnx::TensorProto::INT64));
        })
                                           : previous);
        ins.push_back(shapes[size_t(from)]);
      }
    }
    emit_layer(g, layer, xs, ins, shapes[size_t(index)], context);
  }

  // The probabilities, as predict computes them from the model's outputs.
  const std::string output = model.output() == nn::Model::kInputNode ? model_input(false) : nodes[size_t(model.output())].layer->name();
  const Shape output_shape = model.output_shape(input_shape);
  if (output_shape.size() != 2) {
    Shape rest(output_shape.begin() + 1, output_shape.end());
    throw UsageError(fmt::format("[export] the model's output (layer '{}') has shape [N, {}], not [N, classes]: no "
                                 "class probabilities to export", graph.output, fmt::join(rest, ", ")));
  }
  int64_t classes = output_shape[1];
  if (config.train.loss.kind == LossKind::binary_crossentropy) {  // p -> [1 - p, p]
    const std::string complement = g.node("Sub", {g.scalar("probabilities:one", 1.0f), output}, "probabilities:1-p");
    g.node("Concat", {complement, output}, "probabilities", [](onnx::NodeProto& n) { set_attribute(n, "axis", int64_t(1)); });
    classes = 2;
  } else if (ends_in_softmax(config)) {
    g.node("Identity", {output}, "probabilities");
  } else {
    activation(g, Activation::softmax, output, "probabilities");
  }
  set_type(*onnx_graph.add_output(), "probabilities", onnx::TensorProto::FLOAT, {1, classes});
  return proto;
}

}  // namespace dtrain
