// The YAML config as plain typed structs: the mesh, the data, the model, the layouts, the training loop,
// the checkpoints. Each struct declares its keys ONCE, in `visit`: v(member, "key", rule, "doc"[, flags]).
// One visitor reads them (load_config: every error a UsageError "FILE:LINE:COL: path: what was expected"),
// one writes the dump a checkpoint keeps, one prints them (plan's echo, the round-trip test), one the schema
// reference (config_schema). Positions of every key read live in Config::locations; the engine's later
// checks report there (Config::where, throw_config_error).
#pragma once
#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/optim/schedule.hpp"
#include "core/shape.hpp"

namespace dtrain {

// ---- limits: what a config may ask for; beyond them, a config error naming the limit ----
// Keys (section keys, mesh dim names, layout patterns), layer names and --set key segments: at most this
// many characters, none of them a control character.
inline constexpr size_t kMaxNameLength = 256;
inline constexpr int kMaxDevices = 1 << 20;  // the product of mesh.dims (and each dim's size)
inline constexpr int kMaxMeshDims = 32;      // Mesh::kMaxDims
// Any tensor the config's numbers imply; products are overflow-checked, so a huge number is this error.
inline constexpr std::int64_t kMaxTensorElements = std::int64_t(1) << 40;

// A place in the config. A file position (1-based line and column); or, with line == 0, a whole source
// without a position: the file itself, or a `--set a.b=c` override (then `file` is "--set a.b=c").
struct Where {
  std::string file;
  int line = 0;
  int col = 0;
  std::string str() const;  // "FILE:LINE:COL", or just "FILE" when line == 0
};

// Throws UsageError("WHERE: message"), the form of every config error.
[[noreturn]] void throw_config_error(const Where& where, const std::string& message);

// ---- rules: what a key's value may be (read, written and documented in config.cpp) ----
enum KeyFlags : unsigned { kOptional = 0, kRequired = 1, kOmitDefault = 2 /* left out of the dump at its default */ };
inline constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();
struct Int { std::int64_t min, max = kNoLimit; };
// "> 0" and its test (none: any number); the engine uses the number as a float32 unless it stays a double.
struct Num { const char* what = nullptr; bool (*ok)(double) = nullptr; bool stays_double = false; };
struct Bool {};
struct Text { const char* expected; };  // a non-empty string
struct Choice { const std::vector<std::string>* names; };  // a string member, or an enum in the names' order
struct Sub { static constexpr const char* text = "map"; };  // a struct with its own visit(): a map of its keys
struct Tagged { const std::vector<std::string>* kinds; const char* what; };  // KIND or {KIND: {keys}}; selects .kind
// Values with a syntax of their own; `text` is their type in the schema reference.
struct Dims { static constexpr const char* text = "map of dim name -> size"; };
struct Specs { static constexpr const char* text = "list of mesh dims | unsharded"; };
struct Seed { static constexpr const char* text = "[s0, s1] or s"; };
struct Pair { const char* what; static constexpr const char* text = "n or [h, w], each in [1, 4096]"; };
struct Split { static constexpr const char* text = "split: NAME or NAME[from:to] (counts or percentages)"; };
struct ValidationSplit { double* fraction; static constexpr const char* text = "number in (0, 1) or split"; };
struct ClassNames { static constexpr const char* text = "list of >= 2 distinct names"; };
struct ImageShape { static constexpr const char* text = "list of extents (mnist: or flat)"; };
struct Shuffle { static constexpr const char* text = "true | false | {seed: N}"; };
struct Every { std::int64_t* steps; static constexpr const char* text = "epoch | never | steps >= 1"; };
struct ValidationEvery { static constexpr const char* text = "epoch | steps >= 1"; };
struct Patterns { static constexpr const char* text = "list of RE2 patterns"; };
struct Extents { static constexpr const char* text = "list of integers >= 1"; };
struct Columns { static constexpr const char* text = "list of column names"; };
struct Steps { static constexpr const char* text = "list of increasing steps >= 0"; };
struct Rates { static constexpr const char* text = "list of numbers > 0"; };
struct Clip { static constexpr const char* text = "{global_norm: C} | {value: C}, C > 0"; };
struct LayerName { static constexpr const char* text = "[A-Za-z0-9_.-]+"; };
struct Layers { static constexpr const char* text = "list of layers {KIND: VALUE, key: value, ...}"; };
struct Inputs { static constexpr const char* text = "a layer name or a list of them ('input': the model's or block's input)"; };
struct Blocks { static constexpr const char* text = "map of block name -> list of layers"; };
struct LayoutRules { static constexpr const char* text = "map of RE2 pattern -> specs"; };

inline const std::vector<std::string> kDeviceKinds{"cpu", "gpu"};
inline const std::vector<std::string> kPrecisions{"float32", "bf16"};
inline const std::vector<std::string> kDatasets{"mnist", "imdb", "text_folder", "image_folder", "arrays", "csv"};
inline const std::vector<std::string> kInitKinds{"zeros", "ones", "normal", "uniform", "glorot_uniform"};
inline const std::vector<std::string> kLayerKinds{
    "dense", "batch_norm", "dropout", "flatten", "relu", "softmax", "conv2d", "max_pool2d", "avg_pool2d",
    "global_average_pool", "embedding", "layer_norm", "sigmoid", "tanh", "gelu", "relayout",
    "add", "subtract", "multiply", "average", "concatenate", "block", "multi_head_attention", "position_embedding"};
inline const std::vector<std::string> kActivations{"none", "relu", "softmax", "sigmoid", "tanh", "gelu"};
inline const std::vector<std::string> kPaddings{"same", "valid"};
inline const std::vector<std::string> kReductions{"sum", "mean"};
inline const std::vector<std::string> kOptimizers{"sgd", "adam", "adamw"};
inline const std::vector<std::string> kSchedules{"constant", "cosine", "linear", "exponential", "step"};
inline const std::vector<std::string> kMonitors{"val_loss", "val_accuracy"};

inline bool positive(double x) { return x > 0; }
inline bool nonnegative(double x) { return x >= 0; }
inline bool fraction(double x) { return x >= 0 && x < 1; }

// ---- mesh ----
enum class DeviceKind { cpu, gpu };

struct MeshDimConfig {
  std::string name;        // unique, not "unsharded"
  int size = 1;            // >= 1
  bool automatic = false;  // written `auto`: sized by the process count (see read(Dims) in config.cpp)
};

struct MeshConfig {
  std::vector<MeshDimConfig> dims;  // YAML order: the last dim varies fastest over the device list
  DeviceKind devices = DeviceKind::cpu;
  template <class V> void visit(V& v) {
    v(dims, "dims", Dims{},
      "mesh dim name -> size, e.g. {batch: 2, model: 2}; the last dim varies fastest; one dim may be auto: the "
      "process count over the other dims' product (1 when that product is larger)",
      kRequired);
    v(devices, "devices", Choice{&kDeviceKinds}, "virtual CPU devices (fibers) or one GPU per device");
  }

  int num_devices() const;  // product of the sizes
  std::vector<std::string> dim_names() const;
  std::vector<int> dim_sizes() const;
  int size_of(const std::string& spec) const;  // a dim's size; 1 for "unsharded"
};

// ---- data ----
// The datasets: mnist (IDX files), imdb (the aclImdb folder), text_folder and image_folder (Keras'
// *_dataset_from_directory: PATH/<split>/<class>/files), arrays (HDF5 datasets or .npy files), csv (one file
// with a header row). data/ reads them; engine/data_source.cpp wires them.
enum class Dataset { mnist, imdb, text_folder, image_folder, arrays, csv };

// Keras TextVectorization: tf_idf gives [N, max_tokens] weights, int [N, output_sequence_length] token ids.
struct VectorizerConfig {
  std::string mode = "tf_idf";
  int max_tokens = 0;
  int output_sequence_length = 0;
  std::string truncating = "post", padding = "post";
  template <class V> void visit(V& v) {
    static const std::vector<std::string> modes{"tf_idf", "int"};
    v(mode, "mode", Choice{&modes}, "tf_idf (TF-IDF weights) or int (token ids, for an embedding)");
    v(max_tokens, "max_tokens", Int{mode == "int" ? 3 : 2, 1 << 24}, "vocabulary size, [UNK] (and \"\" in int) counted", kRequired);
    v(output_sequence_length, "output_sequence_length", Int{1, 1 << 20}, "ids per example (mode int only)",
      mode == "int" ? kRequired : kOmitDefault);
    static const std::vector<std::string> ends{"post", "pre"};  // keras.utils.pad_sequences' names
    v(truncating, "truncating", Choice{&ends}, "int: post keeps a text's first ids, pre its last", kOmitDefault);
    v(padding, "padding", Choice{&ends}, "int: post pads a short text's end with 0, pre its start", kOmitDefault);
  }
};

struct ShuffleConfig {
  bool enabled = false;  // absent section: examples in the data set's own order
  std::uint64_t seed = 0;
};

struct ArraySplitConfig {
  std::string features, labels;
  template <class V> void visit(V& v) {
    v(features, "features", Text{"an HDF5 dataset path or a .npy file name"}, "features [N, ...] float32 or uint8", kRequired);
    v(labels, "labels", Text{"an HDF5 dataset path or a .npy file name"}, "class ids [N], any integer dtype", kRequired);
  }
};
// Features and labels of each split: datasets of the HDF5 file data.path, or .npy files in the folder data.path.
struct ArraysConfig {
  std::optional<ArraySplitConfig> train, test;
  double divide_by = 0;  // 0: as stored
  std::vector<std::int64_t> example_shape;  // read from the file when not given
  bool example_shape_given = false;
  template <class V> void visit(V& v) {
    v(train, "train", Sub{}, "the training split's arrays", kOmitDefault);
    v(test, "test", Sub{}, "the test split's arrays", kOmitDefault);
    v(divide_by, "divide_by", Num{"> 0", positive}, "features divided by this (255: MNIST's floats)", kOmitDefault);
    v(example_shape, "example_shape", Extents{}, "one example's shape (default: the stored one)");
  }
  const ArraySplitConfig* split(const std::string& name) const {
    return name == "train" && train ? &*train : name == "test" && test ? &*test : nullptr;
  }
};

// One CSV file with a header row (TFDS' one split `train`, sliced by train_split and test_split).
struct CsvConfig {
  std::string label;
  std::vector<std::string> features;  // resolved from the header row when not given
  bool features_given = false;
  template <class V> void visit(V& v) {
    v(label, "label", Text{"a column name"}, "the column of class ids (whole numbers >= 0)", kRequired);
    v(features, "features", Columns{}, "the feature columns in order (default: every other column)");
  }
};

struct DataConfig {
  Dataset dataset = Dataset::mnist;
  std::string path;                   // as written (relative to the working directory)
  std::string train_split = "train";  // TFDS-like slices: train, train[:5000], test[10%:]
  std::string test_split = "test";
  double validation_fraction = 0;  // validation_split's number form (0: not that form)
  std::string validation_split;    // its split form ("": not that form)
  VectorizerConfig vectorizer;
  std::vector<int> image_shape;        // mnist: empty (flat), {28, 28} or {28, 28, 1}; image_folder: [H, W, C]
  std::string resize = "bilinear";     // image_folder
  std::string on_bad_file = "error";   // image_folder
  std::vector<std::string> classes;    // class k's name
  ArraysConfig arrays;
  CsvConfig csv;
  std::int64_t batch_size = 0;  // the GLOBAL batch
  std::int64_t prefetch = 0;
  ShuffleConfig shuffle;
  std::vector<std::string> layout;  // specs of the input x (batch first); labels take layout[0]
  bool layout_given = false;
  template <class V> void visit(V& v) {
    static const std::vector<std::string> resizes{"bilinear", "nearest", "none"}, on_bad{"error", "skip"};
    v(dataset, "dataset", Choice{&kDatasets}, "the kind of data set", kRequired);
    v(path, "path", Text{"a path"}, "its file or folder, relative to the working directory", kRequired);
    v(train_split, "train_split", Split{}, "the training examples: train, train[:5000], test[10%:] (TFDS slices)");
    v(test_split, "test_split", Split{}, "the examples eval and the per-epoch evaluation read");
    v(validation_split, "validation_split", ValidationSplit{&validation_fraction},
      "validated during training: a fraction f (the LAST f of train_split) or a disjoint split", kOmitDefault);
    v(arrays, "arrays", Sub{}, "dataset arrays: {train: {features, labels}, test: ..., divide_by, example_shape}", kOmitDefault);
    v(csv, "csv", Sub{}, "dataset csv: {label: COLUMN, features: [COLUMN, ...]}", kOmitDefault);
    v(vectorizer, "vectorizer", Sub{}, "imdb, text_folder: Keras TextVectorization {mode, max_tokens, ...}", kOmitDefault);
    v(image_shape, "image_shape", ImageShape{}, "mnist: flat, [28, 28] or [28, 28, 1]; image_folder: [H, W, C] (C 1 or 3)", kOmitDefault);
    const KeyFlags images = dataset == Dataset::image_folder ? kOptional : kOmitDefault;  // inspect shows them
    v(resize, "resize", Choice{&resizes}, "image_folder: tf.image.resize's method to image_shape (none: sizes must match)", images);
    v(on_bad_file, "on_bad_file", Choice{&on_bad}, "image_folder: a file that does not decode is an error, or skipped", images);
    v(classes, "classes", ClassNames{}, "class names in label order (class folders: the folders to read)", kOmitDefault);
    v(batch_size, "batch_size", Int{1}, "the GLOBAL batch (micro-batches under accumulation_steps)", kRequired);
    v(prefetch, "prefetch", Int{0, 256}, "batches a worker thread reads ahead per device (same results)", kOmitDefault);
    v(shuffle, "shuffle", Shuffle{}, "false, or {seed: N}: a new order every epoch, the same on any mesh");
    v(layout, "layout", Specs{}, "specs of the input x, batch first (default: the first mesh dim on the batch)");
  }
  bool has_validation() const { return validation_fraction > 0 || !validation_split.empty(); }
  // One example's x shape without the batch axis.
  std::vector<std::int64_t> example_shape() const;
};

// ---- model ----
enum class InitKind { zeros, ones, normal, uniform, glorot_uniform };

// A variable initializer. Random kinds draw from a counter-based RNG keyed by `seed` and the global element
// index (values do not depend on the mesh). A seed not written is {1000 + layer index, slot} (slot 0 kernel,
// 1 bias, 2 dropout), so every config is deterministic.
struct InitializerConfig {
  InitKind kind = InitKind::zeros;
  std::array<std::int64_t, 2> seed{0, 0};
  bool seed_given = false;
  double mean = 0.0, stddev = 1.0;       // normal; stddev 1 = tf.random.stateless_normal (the tutorial's)
  double minval = -0.05, maxval = 0.05;  // uniform (Keras' defaults)
  template <class V> void visit(V& v) {
    if (kind == InitKind::zeros || kind == InitKind::ones) return;
    v(seed, "seed", Seed{}, "[s0, s1] (or s: [s, 0])");
    if (kind == InitKind::normal) {
      v(mean, "mean", Num{}, "normal's mean");
      v(stddev, "stddev", Num{"> 0", positive}, "normal's standard deviation");
    }
    if (kind == InitKind::uniform) {
      v(minval, "minval", Num{}, "uniform's lower bound");
      v(maxval, "maxval", Num{}, "uniform's upper bound (> minval)");
    }
  }
};

enum class LayerKind {
  dense, batch_norm, dropout, flatten, relu, softmax,
  conv2d, max_pool2d, avg_pool2d, global_average_pool, embedding, layer_norm, sigmoid, tanh, gelu, relayout,
  add, subtract, multiply, average, concatenate,  // Keras' merge layers: two or more inputs
  block,                                          // a use of a block of layers (Config::blocks)
  multi_head_attention, position_embedding
};
// The merge layers take two or more inputs; every other layer one.
inline bool is_merge(LayerKind kind) { return kind >= LayerKind::add && kind <= LayerKind::concatenate; }
enum class Activation { none, relu, softmax, sigmoid, tanh, gelu };
enum class PaddingKind { same, valid };

// The keys dense and conv2d share: activation, bias, initializers (Keras' defaults: glorot_uniform, zeros).
struct WeightsConfig {
  Activation activation = Activation::none;
  bool use_bias = true;
  InitializerConfig kernel_init;
  InitializerConfig bias_init;
  template <class V> void visit(V& v) {
    v(activation, "activation", Choice{&kActivations}, "applied to the output");
    v(use_bias, "use_bias", Bool{}, "add a bias");
    v(kernel_init, "init", Tagged{&kInitKinds, "initializer"}, "the kernel's initializer");
    if (use_bias) v(bias_init, "bias_init", Tagged{&kInitKinds, "initializer"}, "the bias' initializer");
  }
};

struct DenseConfig : WeightsConfig {
  int units = 0;
};

// Keras Conv2D on NHWC images.
struct Conv2dConfig : WeightsConfig {
  int filters = 0;
  std::array<int, 2> kernel_size{0, 0};
  std::array<int, 2> strides{1, 1};
  PaddingKind padding = PaddingKind::valid;
};

// Keras MaxPooling2D / AveragePooling2D.
struct Pool2dConfig {
  std::array<int, 2> pool_size{2, 2};
  std::array<int, 2> strides{0, 0};  // 0: the pool size (Keras' default)
  PaddingKind padding = PaddingKind::valid;
};

// Keras Embedding: the table NAME/embeddings [input_dim, output_dim]; input_dim defaults to the int
// vectorizer's max_tokens.
struct EmbeddingConfig {
  int output_dim = 0;
  int input_dim = 0;
  InitializerConfig init;  // default uniform [-0.05, 0.05] (Keras)
  bool mask_zero = false;
};

// keras_hub's PositionEmbedding: NAME/embeddings [length, features].
struct PositionEmbeddingConfig {
  InitializerConfig init;  // default glorot_uniform (keras_hub)
  template <class V> void visit(V& v) { v(init, "init", Tagged{&kInitKinds, "initializer"}, "the positions' initializer"); }
};

// Keras' MultiHeadAttention as self-attention: NAME/{query,key,value,attention_output}/{kernel,bias}.
struct AttentionConfig : WeightsConfig {
  int num_heads = 0, key_dim = 0, value_dim = 0, output_shape = 0;  // 0: key_dim / the input's features
  double dropout = 0.0;
  std::array<std::int64_t, 2> seed{0, 0};
  bool causal = false;
  template <class V> void visit(V& v) {
    v(key_dim, "key_dim", Int{1, 1 << 16}, "size of each head's query and key", kRequired);
    v(value_dim, "value_dim", Int{0, 1 << 16}, "size of each head's value (0, the default: key_dim)");
    v(output_shape, "output_shape", Int{0, 1 << 20}, "output features (0, the default: the input's)");
    v(dropout, "dropout", Num{"in [0, 1)", fraction}, "on the attention probabilities");
    v(seed, "seed", Seed{}, "[s0, s1] (or s) keying the dropout masks");
    v(causal, "causal", Bool{}, "each position attends to itself and earlier ones (use_causal_mask)");
    v(use_bias, "use_bias", Bool{}, "biases on the four projections");
    v(kernel_init, "init", Tagged{&kInitKinds, "initializer"}, "the kernels' initializer");
    if (use_bias) v(bias_init, "bias_init", Tagged{&kInitKinds, "initializer"}, "the biases' initializer");
  }
};

// Keras LayerNormalization over the last axis.
struct LayerNormConfig {
  double epsilon = 1e-3;
  bool center = true, scale = true;
  template <class V> void visit(V& v) {
    v(epsilon, "epsilon", Num{"> 0", positive}, "added to the variance");
    v(center, "center", Bool{}, "a learned offset beta");
    v(scale, "scale", Bool{}, "a learned scale gamma");
  }
};

// DTensor's relayout of the activations between two layers (one spec per axis).
struct RelayoutConfig {
  std::vector<std::string> specs;
};

// `batch_norm: {}` is the DTensor tutorial's parameter-free version: batch statistics over the GLOBAL
// batch, always, epsilon 1e-5, no variables. Any key given selects the Keras-style layer (its defaults).
struct BatchNormConfig {
  bool parameter_free = true;
  bool center = false, scale = false;  // Keras-style default: true, true
  double momentum = 0.99;              // Keras-style only
  double epsilon = 1e-5;               // Keras-style default: 1e-3
  template <class V> void visit(V& v) {
    if (parameter_free) return;
    v(center, "center", Bool{}, "a learned offset beta");
    v(scale, "scale", Bool{}, "a learned scale gamma");
    v(momentum, "momentum", Num{"in [0, 1)", fraction}, "of the moving statistics");
    v(epsilon, "epsilon", Num{"> 0", positive}, "added to the variance");
  }
};

struct DropoutConfig {
  double rate = 0.0;  // in [0, 1)
  std::array<std::int64_t, 2> seed{0, 0};
  bool seed_given = false;
};

// Keras Concatenate: the inputs joined along `axis` (negative: from the end; not the batch axis).
struct ConcatenateConfig {
  int axis = -1;
  template <class V> void visit(V& v) { v(axis, "axis", Int{-8, 8}, "the axis joined (-1: the last)"); }
};

// `{block: NAME, repeat: N}`: the block's layers N times in a row, each use taking the one before; use k of
// a block (counted over the model) names its layers NAMEk/LAYER (`name:` replaces NAME), so its variables
// are NAMEk/LAYER/kernel and one layout rule (NAME\d+/LAYER/kernel) shards every use.
struct BlockUseConfig {
  std::string block;
  int repeat = 1;
};

struct EmptyConfig {
  template <class V> void visit(V&) {}
};

// One layer: `{KIND: VALUE, name: ..., keys}`. Only the sub-struct matching `kind` is meaningful.
struct LayerConfig {
  LayerKind kind = LayerKind::dense;
  std::string name;  // unique; default <type><n> counted per type in order: dense1, dense2, bn1, dropout1
  bool name_given = false;
  DenseConfig dense;
  BatchNormConfig batch_norm;
  DropoutConfig dropout;
  Conv2dConfig conv2d;
  Pool2dConfig pool2d;  // max_pool2d, avg_pool2d
  EmbeddingConfig embedding;
  LayerNormConfig layer_norm;
  RelayoutConfig relayout;
  ConcatenateConfig concatenate;
  BlockUseConfig block;
  // The layers (or 'input') whose outputs this layer takes; empty: the layer before (a stack).
  std::vector<std::string> inputs;
  AttentionConfig attention;
  PositionEmbeddingConfig position_embedding;
  template <class V> void visit(V& v) {
    const std::string& k = kLayerKinds[size_t(kind)];
    const char* key = k.c_str();
    switch (kind) {
      case LayerKind::dense:
        v(dense.units, key, Int{1, std::numeric_limits<int>::max()}, "units", kRequired);
        dense.visit(v);
        break;
      case LayerKind::conv2d:
        v(conv2d.filters, key, Int{1, 1 << 20}, "filters", kRequired);
        v(conv2d.kernel_size, "kernel_size", Pair{"a kernel size"}, "n or [h, w]", kRequired);
        visit_window(v, conv2d.strides, conv2d.padding);
        conv2d.visit(v);
        break;
      case LayerKind::max_pool2d:
      case LayerKind::avg_pool2d:
        v(pool2d.pool_size, key, Pair{"a pool size"}, "n or [h, w]", kRequired);
        visit_window(v, pool2d.strides, pool2d.padding);
        break;
      case LayerKind::batch_norm: v(batch_norm, key, Sub{}, "{} (DTensor's) or Keras' {center, scale, momentum, epsilon}", kRequired); break;
      case LayerKind::layer_norm: v(layer_norm, key, Sub{}, "{epsilon, center, scale}", kRequired); break;
      case LayerKind::dropout:
        v(dropout.rate, key, Num{"in [0, 1)", fraction}, "the rate", kRequired);
        v(dropout.seed, "seed", Seed{}, "[s0, s1] (or s) keying the masks");
        break;
      case LayerKind::embedding:
        v(embedding.output_dim, key, Int{1, 1 << 20}, "output_dim", kRequired);
        v(embedding.input_dim, "input_dim", Int{1, 1 << 28}, "the vocabulary (default: the int vectorizer's max_tokens)");
        v(embedding.init, "init", Tagged{&kInitKinds, "initializer"}, "the table's initializer");
        v(embedding.mask_zero, "mask_zero", Bool{}, "id 0 is padding: attention after it hides it (Keras')");
        break;
      case LayerKind::multi_head_attention:
        v(attention.num_heads, key, Int{1, 1 << 12}, "num_heads", kRequired);
        attention.visit(v);
        break;
      case LayerKind::position_embedding:
        v(position_embedding, key, Sub{}, "{init}", kRequired);
        break;
      case LayerKind::relayout: v(relayout.specs, key, Specs{}, "the activations' specs, batch first", kRequired); break;
      case LayerKind::concatenate: v(concatenate, key, Sub{}, "{axis} (default -1: the last)", kRequired); break;
      case LayerKind::block:
        v(block.block, key, Text{"a block name"}, "the block (blocks: NAME) used here", kRequired);
        v(block.repeat, "repeat", Int{1, 1 << 16}, "uses in a row, each taking the one before");
        break;
      default: {
        EmptyConfig none;
        v(none, key, Sub{}, "{}", kRequired);
      }
    }
    v(name, "name", LayerName{}, "unique; part of variable paths NAME/kernel (a block use: the prefix's stem)");
    v(inputs, "inputs", Inputs{}, "the layers it takes, by name (default: the layer before)", kOmitDefault);
  }

 private:
  template <class V> static void visit_window(V& v, std::array<int, 2>& strides, PaddingKind& padding) {
    v(strides, "strides", Pair{"strides"}, "n or [h, w] (pools: the pool size)");
    v(padding, "padding", Choice{&kPaddings}, "valid or same (Keras')");
  }
};

// `blocks: {NAME: [layers]}`: a block's layers, its own graph whose `inputs` name its layers or 'input' (what
// the block's use takes); its output is its last layer.
struct BlockConfig {
  std::string name;
  std::vector<LayerConfig> layers;
};

// ---- layouts ----
// One `layouts:` rule: an RE2 regex (full match) over variable paths such as "dense1/kernel" -> a spec per
// axis. Rules keep YAML order; the first match wins; unmatched variables are replicated.
struct LayoutRule {
  std::string pattern;
  std::vector<std::string> specs;  // mesh dim names or "unsharded"; no dim twice
};

// ---- training ----
enum class Reduction { sum, mean };
enum class OptimizerKind { sgd, adam, adamw };

// sparse_softmax_cross_entropy: over the logits of one unit per class (Keras' from_logits=True);
// binary_crossentropy: Keras' BinaryCrossentropy (from_logits=False) over the probability of class 1 that a
// 1-unit sigmoid output gives, clipped to [1e-7, 1 - 1e-7] as Keras does; labels 0 and 1 (two classes).
enum class LossKind { sparse_softmax_cross_entropy, binary_crossentropy };
inline const std::vector<std::string> kLosses{"sparse_softmax_cross_entropy", "binary_crossentropy"};

struct LossConfig {
  LossKind kind = LossKind::sparse_softmax_cross_entropy;
  Reduction reduction = Reduction::mean;
  template <class V> void visit(V& v) { v(reduction, "reduction", Choice{&kReductions}, "over the batch"); }
};

}  // namespace dtrain
namespace dtrain::optim {
template <class V> void visit(LearningRateSchedule& s, V& v) {
  using K = ScheduleKind;
  v(s.warmup_steps, "warmup_steps", Int{0}, "steps of linear warmup from 0 to learning_rate");
  if (s.kind == K::cosine || s.kind == K::linear || s.kind == K::exponential)
    v(s.decay_steps, "decay_steps", Int{1}, "steps of decay after warmup", kRequired);
  if (s.kind == K::cosine)
    v(s.alpha, "alpha", Num{"in [0, 1] (the final rate as a fraction of learning_rate)", [](double x) { return x >= 0 && x <= 1; }},
      "cosine: the final rate as a fraction of learning_rate");
  if (s.kind == K::linear) v(s.end_learning_rate, "end_learning_rate", Num{">= 0", nonnegative}, "linear: the final rate");
  if (s.kind == K::exponential) {
    v(s.decay_rate, "decay_rate", Num{"> 0", positive}, "exponential: the factor per decay_steps", kRequired);
    v(s.staircase, "staircase", Bool{}, "exponential: decay in whole steps of decay_steps");
  }
  if (s.kind == K::step) {
    v(s.boundaries, "boundaries", Steps{}, "step: the steps where the rate changes, increasing", kRequired);
    v(s.values, "values", Rates{}, "step: the rates, one more than boundaries (values[0] is learning_rate)", kRequired);
  }
}
}  // namespace dtrain::optim
namespace dtrain {

// Keras' optimizers and defaults; weight_decay is DECOUPLED (w -= learning_rate * weight_decay * w).
// The schedule's formulas: core/optim/schedule.hpp; learning_rate is its peak (after warmup).
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  double learning_rate = 0.01;  // default: Keras' (sgd 0.01, adam and adamw 0.001)
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;  // adam and adamw
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
  double weight_decay = 0.0;  // default 0.004 for adamw
  optim::LearningRateSchedule schedule;  // its learning_rate is learning_rate
  template <class V> void visit(V& v) {
    v(learning_rate, "learning_rate", Num{"> 0", positive}, "the (peak) rate");
    if (kind == OptimizerKind::sgd) {
      v(momentum, "momentum", Num{"in [0, 1)", fraction}, "sgd's momentum", kOmitDefault);
      v(nesterov, "nesterov", Bool{}, "Nesterov momentum (needs momentum > 0)", kOmitDefault);
    } else {
      v(beta_1, "beta_1", Num{"in [0, 1)", fraction}, "decay of the first moment");
      v(beta_2, "beta_2", Num{"in [0, 1)", fraction}, "decay of the second moment");
      v(epsilon, "epsilon", Num{"> 0", positive}, "added to the second moment's root");
    }
    v(weight_decay, "weight_decay", Num{"in [0, 1) (decoupled: w -= learning_rate * weight_decay * w)", fraction},
      "decoupled weight decay (adamw: 0.004)", kind == OptimizerKind::adamw ? kOptional : kOmitDefault);
    v(schedule, "schedule", Tagged{&kSchedules, "schedule"}, "the rate per step (core/optim/schedule.hpp)", kOmitDefault);
  }
};

// train.clip: {global_norm: C} scales all gradients by min(1, C / N), N their global norm (Keras'
// global_clipnorm); {value: C} clamps each to [-C, C]. C > 0; off when not given.
struct ClipConfig {
  double global_norm = 0, value = 0;  // 0: not set
};

// train.early_stopping: Keras' EarlyStopping. Its state is saved in every checkpoint, so a resumed run stops
// where the uninterrupted one does. restore_best_weights reads the best weights back from the checkpoint
// DIR/best names (so it needs checkpoint.keep_best of the same monitor, whose record then follows this one's
// mode and min_delta) when the run ends: stopped early or after its last epoch, not at a signal or max_steps.
struct EarlyStoppingConfig {
  std::string monitor = "val_loss";
  std::string mode = "auto";  // auto, min, max
  std::int64_t patience = 0;
  double min_delta = 0;
  bool restore_best_weights = false;
  template <class V> void visit(V& v) {
    static const std::vector<std::string> modes{"auto", "min", "max"};
    v(monitor, "monitor", Choice{&kMonitors}, "the validation metric watched");
    v(patience, "patience", Int{0, 1 << 30}, "validations without improvement before stopping");
    v(min_delta, "min_delta", Num{">= 0", nonnegative}, "the least change that counts as improvement");
    v(mode, "mode", Choice{&modes}, "auto minimizes val_loss and maximizes val_accuracy");
    v(restore_best_weights, "restore_best_weights", Bool{},
      "at the run's end, the weights of the best validation (from DIR/best: needs checkpoint.keep_best)", kOmitDefault);
  }
};

// train.reduce_lr_on_plateau: Keras' ReduceLROnPlateau and defaults. After `patience` validations without an
// improvement of more than min_delta (the `cooldown` validations after a reduction reset the count), the rate is
// multiplied by `factor`, never below min_lr; the schedule's rate is multiplied by the product of the
// reductions. Its state (best, wait, cooldown, the product) is saved in every checkpoint.
struct ReduceLrOnPlateauConfig {
  std::string monitor = "val_loss";
  std::string mode = "auto";  // auto, min, max
  double factor = 0.1;
  std::int64_t patience = 10;
  double min_delta = 1e-4;
  std::int64_t cooldown = 0;
  double min_lr = 0;
  template <class V> void visit(V& v) {
    static const std::vector<std::string> modes{"auto", "min", "max"};
    v(monitor, "monitor", Choice{&kMonitors}, "the validation metric watched");
    v(factor, "factor", Num{"in (0, 1)", [](double x) { return x > 0 && x < 1; }}, "the rate is multiplied by it");
    v(patience, "patience", Int{0, 1 << 30}, "validations without improvement before a reduction");
    v(min_delta, "min_delta", Num{">= 0", nonnegative}, "the least change that counts as improvement");
    v(cooldown, "cooldown", Int{0, 1 << 30}, "validations after a reduction before the count starts again");
    v(min_lr, "min_lr", Num{">= 0", nonnegative}, "a reduction takes the rate no lower");
    v(mode, "mode", Choice{&modes}, "auto minimizes val_loss and maximizes val_accuracy");
  }
};

// train.profile (or train/resume --profile S:K): a step timeline of steps start_step .. start_step + steps - 1,
// numbered as metrics.jsonl numbers them (the run's first step is 1; a resumed run goes on counting), written
// as RUN_DIR/trace/process-P.trace.json (core/profile/trace.hpp).
struct ProfileConfig {
  std::int64_t start_step = 1;
  std::int64_t steps = 1;
  template <class V> void visit(V& v) {
    v(start_step, "start_step", Int{1}, "the first step traced (the run's first step is 1)");
    v(steps, "steps", Int{1, 1 << 20}, "how many steps are traced");
  }
};

// train.precision: float32, or bf16 (Keras' mixed_bfloat16: float32 variables, optimizer state, reductions,
// loss and metrics; layers compute from bf16 values, core/ops/precision.hpp).
enum class Precision { float32, bf16 };

struct TrainConfig {
  int epochs = 1;
  std::optional<std::int64_t> max_steps;
  LossConfig loss;
  OptimizerConfig optimizer;
  bool eval_every_epoch = true;
  std::int64_t log_every = 100;
  ClipConfig clip;
  std::int64_t accumulation_steps = 1;
  std::string init_from;               // "": a run from the initializers
  std::vector<std::string> init_skip;  // each checked to compile
  std::int64_t validation_every_steps = 0;  // 0: epoch
  std::optional<EarlyStoppingConfig> early_stopping;
  std::optional<ReduceLrOnPlateauConfig> reduce_lr_on_plateau;
  bool bitwise = false;
  std::optional<ProfileConfig> profile;
  bool tensorboard = true;  // RUN_DIR/tensorboard/ beside metrics.jsonl (core/train/metrics_log.hpp)
  Precision precision = Precision::float32;
  template <class V> void visit(V& v) {
    v(epochs, "epochs", Int{1, 1 << 30}, "passes over the training split", kRequired);
    v(max_steps, "max_steps", Int{1}, "stop after this many steps in all", kOmitDefault);
    v(loss, "loss", Tagged{&kLosses, "loss"},
      "sparse_softmax_cross_entropy (logits) or binary_crossentropy (a 1-unit sigmoid), {reduction: sum | mean}");
    v(optimizer, "optimizer", Tagged{&kOptimizers, "optimizer"}, "KIND or {KIND: {learning_rate, ...}} (Keras' defaults)", kRequired);
    v(eval_every_epoch, "eval_every_epoch", Bool{}, "evaluate the test split after each epoch");
    v(log_every, "log_every", Int{1}, "steps between plain log lines (when not on a terminal)");
    v(clip, "clip", Clip{}, "{global_norm: C} or {value: C} (Keras' global_clipnorm, clipvalue)", kOmitDefault);
    v(accumulation_steps, "accumulation_steps", Int{1, 1 << 20},
      "k micro-batches of batch_size / k summed per optimizer step", kOmitDefault);
    v(init_from, "init_from", Text{"a checkpoint dir or folder"}, "fine-tuning: the model variables start from it", kOmitDefault);
    v(init_skip, "init_skip", Patterns{}, "variable patterns init_from leaves as initialized", kOmitDefault);
    v(validation_every_steps, "validation_every", ValidationEvery{}, "epoch or every N steps", kOmitDefault);
    v(early_stopping, "early_stopping", Sub{}, "Keras' EarlyStopping {monitor, patience, min_delta, mode, restore_best_weights}", kOmitDefault);
    v(reduce_lr_on_plateau, "reduce_lr_on_plateau", Sub{},
      "Keras' ReduceLROnPlateau {monitor, factor, patience, min_delta, cooldown, min_lr, mode}", kOmitDefault);
    v(bitwise, "bitwise", Bool{}, "every sum in one canonical order: the same bits on any mesh and process count",
      kOmitDefault);
    v(profile, "profile", Sub{}, "a step timeline {start_step, steps}: RUN_DIR/trace/process-P.trace.json (Chrome trace)",
      kOmitDefault);
    v(tensorboard, "tensorboard", Bool{}, "also write metrics.jsonl's scalars as TensorBoard event files in RUN_DIR/tensorboard",
      kOmitDefault);
    v(precision, "precision", Choice{&kPrecisions},
      "float32, or bf16: Keras' mixed_bfloat16 (layers compute from bf16 values; variables, optimizer, loss float32)",
      kOmitDefault);
  }
};

enum class CheckpointEvery { epoch, steps, never };

struct CheckpointConfig {
  std::string dir;  // default RUN_DIR/ckpt
  CheckpointEvery every = CheckpointEvery::epoch;
  std::int64_t every_steps = 0;  // when every == steps
  int max_to_keep = 3;
  std::string keep_best;  // "": off
  bool async = false;
  template <class V> void visit(V& v) {
    v(dir, "dir", Text{"a directory"}, "where checkpoints go (default RUN_DIR/ckpt)");
    v(every, "every", Every{&every_steps}, "epoch, never or a number of steps");
    v(max_to_keep, "max_to_keep", Int{1, 1 << 20}, "the newest kept");
    v(keep_best, "keep_best", Choice{&kMonitors}, "also keep the best validation's checkpoint as DIR/best", kOmitDefault);
    v(async, "async", Bool{},
      "write and commit in the background (a host copy of the state; one save in flight), the same files", kOmitDefault);
  }
};

// ---- communication between processes ----
struct CommConfig {
  double timeout_s = 300;
  template <class V> void visit(V& v) {
    v(timeout_s, "timeout_s", Num{"> 0", positive, true}, "how long a collective waits for its peers before an error");
  }
};

// ---- the whole config ----
struct Config {
  std::string file;  // the path it was read from (or the name given to parse_config)
  MeshConfig mesh;
  DataConfig data;
  std::vector<BlockConfig> blocks;
  std::string outputs;  // the output layer's name; "": the last layer
  std::vector<LayerConfig> model;
  std::vector<LayoutRule> layouts;
  TrainConfig train;
  std::string run_dir;  // --run-dir, else run_dir:, else runs/<config file stem>
  CheckpointConfig checkpoint;
  CommConfig comm;
  template <class V> void visit(V& v) {
    v(mesh, "mesh", Sub{}, "the device mesh", kRequired);
    v(data, "data", Sub{}, "the data set and its input pipeline", kRequired);
    v(blocks, "blocks", Blocks{}, "named lists of layers that the model uses as {block: NAME, repeat: N}", kOmitDefault);
    v(outputs, "outputs", LayerName{}, "the layer (or block use) whose output is the model's (default: the last)", kOmitDefault);
    v(model, "model", Layers{}, "the layers: a stack, or a graph where layers name their inputs", kRequired);
    v(layouts, "layouts", LayoutRules{}, "variable regex -> specs; unmatched variables are replicated");
    v(train, "train", Sub{}, "the training loop", kRequired);
    v(run_dir, "run_dir", Text{"a directory"}, "metrics.jsonl, vocabulary, plots (default runs/<config stem>)");
    v(checkpoint, "checkpoint", Sub{}, "sharded HDF5 checkpoints");
    v(comm, "comm", Sub{}, "communication between processes");
  }

  std::string source_text;             // the file's text as read (before overrides)
  std::vector<std::string> overrides;  // the --set assignments applied, in order
  // Where every key is, by dotted path ("data.batch_size", "model[1].dense", "layouts[0]"): a key read is at its
  // value (a --set, --run-dir or --init-from at that flag); a key not given at its section.
  std::map<std::string, Where> locations;

  Where where(const std::string& path) const;  // locations[path], or the file itself
};

struct LoadOptions {
  std::vector<std::string> overrides;  // "a.b=value", applied in order before parsing
  std::string run_dir;                 // --run-dir; empty = the config's
  bool check_data_path = true;         // false: do not require data.path to exist (tests, checkpoints)
  std::string init_from;               // train --init-from: replaces train.init_from
  std::vector<std::string> init_skip;  // train --init-skip (repeatable): replaces train.init_skip
  std::string profile{};               // train/resume --profile START:STEPS: replaces train.profile
};

// Reads and validates a config file. Throws UsageError (see the header comment).
Config load_config(const std::string& path, const LoadOptions& options = {});
// The same from text; `file` names it in messages and gives the default run dir's stem.
Config parse_config(const std::string& text, const std::string& file, const LoadOptions& options = {});

// Applies one override "dotted.key.path=VALUE" to a YAML tree: VALUE is parsed as YAML, missing maps are
// created, a numeric segment indexes a list ("model.0.dense=64" or "model[0].dense=64"). Errors read
// "--set ASSIGNMENT: ...". Returns the nodes it created or replaced (later errors about them name the override).
std::vector<YAML::Node> apply_override(YAML::Node& root, const std::string& assignment);

// The resolved config (every default written out, but off features) as YAML that parse_config reads back
// to the same Config; what a checkpoint stores.
std::string dump_config(const Config& config);
// Every key's value, one "path = value" line each, as the structs hold them (not through the dump): plan's
// echo, and what the round-trip test compares.
std::string describe_config(const Config& config);
// The schema reference: every key, its type and range, its default and its doc line (dtrain plan --schema).
std::string config_schema();

// Each layer's output shape [batch, ...] (indexed as model_graph(config).layers, engine/model_graph.hpp; empty
// past a layer that refuses its input), from the example shape on through the layers' own output_shape
// (core/nn), with the checks of what the config's numbers imply (sizes, window fits, even bands) and of the
// graph (names, cycles, unused layers, merged shapes): the one shape walk, which load_config runs and plan
// prints. Throws UsageError at the key concerned.
std::vector<Shape> model_shapes(const Config& config);

// Whether a layer of the model or of a block it may use is a batch_norm: its statistics are a micro-batch's
// under train.accumulation_steps, so only a model without one accumulates to its batch's bits.
bool has_batch_norm(const Config& config);

// imdb, text_folder: texts through data.vectorizer.
inline bool is_text(Dataset dataset) { return dataset == Dataset::imdb || dataset == Dataset::text_folder; }
// text_folder, image_folder: a split is any folder under data.path.
inline bool has_split_folders(Dataset dataset) { return dataset == Dataset::text_folder || dataset == Dataset::image_folder; }
// The class count a dataset has whatever its files hold (mnist 10, imdb 2), or 0 when its data tell.
inline int known_class_count(Dataset d) { return d == Dataset::mnist ? 10 : d == Dataset::imdb ? 2 : 0; }
// An enum's name: its entry in the names list the config reads it from.
inline std::string to_string(DeviceKind kind) { return kDeviceKinds.at(size_t(kind)); }
inline std::string to_string(Precision precision) { return kPrecisions.at(size_t(precision)); }
inline std::string to_string(Dataset dataset) { return kDatasets.at(size_t(dataset)); }
inline std::string to_string(InitKind kind) { return kInitKinds.at(size_t(kind)); }
inline std::string to_string(LayerKind kind) { return kLayerKinds.at(size_t(kind)); }
inline std::string to_string(Activation activation) { return kActivations.at(size_t(activation)); }
inline std::string to_string(PaddingKind padding) { return kPaddings.at(size_t(padding)); }
inline std::string to_string(Reduction reduction) { return kReductions.at(size_t(reduction)); }
inline std::string to_string(LossKind kind) { return kLosses.at(size_t(kind)); }
inline std::string to_string(OptimizerKind kind) { return kOptimizers.at(size_t(kind)); }

}  // namespace dtrain
