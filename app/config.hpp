// The YAML config as plain typed structs: the mesh, the data, the model, the layouts, the training loop,
// the checkpoints. load_config reads a file (plus --set overrides) and checks everything that needs only
// the config; each error is a UsageError starting "FILE:LINE:COL: " (1-based) that says what was expected.
// Checks that need the model's shapes come later, in the engine, which reports them at the Where kept
// beside each field (Where::str(), throw_config_error).
#pragma once
#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/optim/schedule.hpp"

namespace dtrain {

// ---- limits: what a config may ask for; beyond them, a config error naming the limit ----
// Keys (section keys, mesh dim names, layout patterns), layer names and --set key segments: at most this
// many characters, none of them a control character.
inline constexpr size_t kMaxNameLength = 256;
inline constexpr int kMaxDevices = 1 << 20;  // the product of mesh.dims (and each dim's size)
inline constexpr int kMaxMeshDims = 32;      // Mesh::kMaxDims
// Any tensor the config's numbers imply (a batch of inputs, a dense kernel, a layer's activations);
// products are computed with overflow checks, so a huge number is this error, never a wrapped size.
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

// ---- mesh ----
enum class DeviceKind { cpu, gpu };

struct MeshDimConfig {
  std::string name;  // unique, not "unsharded"
  int size = 1;      // >= 1
  Where where;       // the dim's size in mesh.dims (or the --set that gave it)
};

struct MeshConfig {
  std::vector<MeshDimConfig> dims;  // YAML order: the last dim varies fastest over the device list
  DeviceKind devices = DeviceKind::cpu;
  Where where;  // the `mesh` section; the engine reports "mesh size vs device count" here
  Where devices_where;

  int num_devices() const;  // product of the sizes
  std::vector<std::string> dim_names() const;
  std::vector<int> dim_sizes() const;
  bool has_dim(const std::string& name) const;
  int size_of(const std::string& spec) const;  // a dim's size; 1 for "unsharded"
};

// ---- data ----
// mnist: MNIST-format IDX files. imdb: the aclImdb folder (a text folder with classes neg, pos).
// text_folder: Keras' text_dataset_from_directory layout, PATH/<split>/<class>/.../*.txt, one example per
// file. image_folder: PNG/JPEG files in class folders, PATH/<split>/<class>/*.png|jpg|jpeg (Keras'
// image_dataset_from_directory; data/image_folder.hpp). For both folder data sets the splits are the
// folders under PATH (train_split, test_split name them, TFDS slices allowed) and the classes the folders
// under a split (see data.classes). arrays: features and labels from an HDF5 file or .npy files (ArraysConfig).
// csv: one CSV file with a header row (CsvConfig).
enum class Dataset { mnist, imdb, text_folder, image_folder, arrays, csv };

// imdb and text_folder: Keras TextVectorization. mode tf_idf: [N, max_tokens] TF-IDF weights (max_tokens counts
// [UNK]); mode int: [N, output_sequence_length] token ids (max_tokens counts "" and [UNK]), for an
// embedding layer.
struct VectorizerConfig {
  std::string mode = "tf_idf";     // "tf_idf" or "int"
  int max_tokens = 0;              // >= 2 (tf_idf), >= 3 (int)
  int output_sequence_length = 0;  // int mode only, >= 1
  Where where;                     // the max_tokens value
  Where sequence_length_where;     // the output_sequence_length value (int mode)
};

struct ShuffleConfig {
  bool enabled = false;  // absent section: examples in the data set's own order
  std::uint64_t seed = 0;
  Where where;
};

// dataset arrays: features and labels stored as arrays whose first axis counts the examples, either
// datasets of an HDF5 file (data.path the file; features and labels are dataset paths in it, e.g.
// /train/x) or .npy files (data.path a folder; features and labels are file names relative to it, e.g.
// train_x.npy). `data.arrays: {train: {features: X, labels: Y}, test: {...}, divide_by: 255, example_shape:
// [28, 28, 1]}`; train or test may be left out (a split that names it is then an error). Features float32 or
// uint8 of any shape [N, ...]; they reach the model as float32, as stored (Keras gets what was saved), or
// divided by divide_by (> 0) when given: uint8 pixels with divide_by 255 are MNIST's IDX floats bit for bit.
// Labels: a 1-D integer array (any integer dtype) of N class ids. The features stay on disk (.npy mapped,
// HDF5 read by hyperslab per batch); each rank reads only its rows. The class count is data.classes' when
// given, else the largest training label + 1; every label must lie below it.
struct ArraySplitConfig {
  std::string features, labels;
  Where where, features_where;
};
struct ArraysConfig {
  std::map<std::string, ArraySplitConfig> splits;  // "train", "test"
  double divide_by = 0;                            // 0: as stored
  // One example's shape: the features' shape past the first axis (read from the file when not given), or
  // a shape of as many elements (e.g. [28, 28, 1] for [N, 784] pixels).
  std::vector<std::int64_t> example_shape;
  bool example_shape_given = false;
  Where where, example_shape_where;
};

// dataset csv: data.path one CSV file with a header row (RFC 4180; data/csv.hpp), read into memory.
// `data.csv: {label: COLUMN, features: [COLUMN, ...]}`: label (required) names the column of class ids
// (whole numbers >= 0); features picks the feature columns in order (default: every other column). The file
// is TFDS' one split `train`: test_split slices it too (train_split: train[:80%], test_split: train[80%:]).
// The class count as for arrays.
struct CsvConfig {
  std::string label;
  std::vector<std::string> features;  // resolved from the header row when not given
  bool features_given = false;
  Where where, label_where, features_where;
};

struct DataConfig {
  Dataset dataset = Dataset::mnist;
  std::string path;  // as written (relative to the working directory); checked to exist
  std::string train_split = "train";  // TFDS-like slices: train, train[:5000], test[10%:]; text_folder and
                                      // image_folder: any folder under path, e.g. train[:80%] and train[80%:]
  std::string test_split = "test";
  VectorizerConfig vectorizer;
  std::int64_t batch_size = 0;  // the GLOBAL batch, >= 1
  ShuffleConfig shuffle;
  // Specs of the input x, one per axis (batch first); labels take layout[0]. When not given: the first
  // mesh dim on the batch axis, the other axes unsharded (layout_given false).
  std::vector<std::string> layout;
  bool layout_given = false;
  // data.validation_split: the examples validated during training (not trained on), one of
  //   a number f in (0, 1)  Keras' validation_split: the LAST f of the training split's examples (after
  //                         train_split's slice, before any shuffle: floor(n * (1 - f)) stay for training)
  //   a split string        its own slice, train[90%:] or test[:2000]; one that shares examples with the
  //                         training split (same split, overlapping ranges) is an error at this key
  // Absent: no validation. IMDB's vectorizer is fitted on the training examples alone.
  double validation_fraction = 0;  // the number form (0: not that form)
  std::string validation_split;    // the string form ("" : not that form)
  bool has_validation() const { return validation_fraction > 0 || !validation_split.empty(); }

  // mnist: empty = flat [N, 784]; {28, 28} = [N, 28, 28]; {28, 28, 1} (NHWC).
  // image_folder (required): [height, width, channels], channels 1 (grayscale) or 3 (rgb), Keras' color_mode
  // (colour to gray by ITU-R 601 luma, gray replicated to rgb, alpha dropped: data/image_decode.hpp).
  std::vector<int> image_shape;
  // image_folder: how images of another size reach image_shape, as tf.image.resize (data/image_resize.hpp):
  // bilinear (Keras' default), nearest, or none (every image must already be height x width: else an error
  // naming the file and its size).
  std::string resize = "bilinear";
  // image_folder: a file that does not decode (corrupt, truncated, CMYK, wrong size under resize none, or a
  // .bmp/.gif/.webp/.tif in a class folder) is an error naming it (error), or left out with a notice counting
  // them and naming the first few (skip).
  std::string on_bad_file = "error";
  // data.classes: the class names, label k named classes[k] (printed by eval and predict, kept in checkpoints).
  // mnist: 10 names (default "0".."9"), imdb: 2 (default neg, pos); for class folders (text_folder, image_folder) the
  // folders to read, in label order (default: every subfolder of the training split, sorted by name, as
  // Keras; the test split must then have the same subfolders). Distinct, non-empty, at least 2.
  std::vector<std::string> classes;
  ArraysConfig arrays;  // dataset arrays
  CsvConfig csv;        // dataset csv

  // Training batches (micro-batches under train.accumulation_steps) each device has read ahead, 0..256: a
  // worker thread reads them (the source's values densified and cut to the device's block) while the step
  // computes; 0 (default): each device reads its block at the start of the step. The same batches in the
  // same order either way, so the same results bit for bit. Off by default: on the 2-core CI machine reading
  // the in-memory data is 1/88 of an MNIST step and 1/5 of an IMDB TF-IDF one (bench_input_pipeline), and
  // with both cores busy with the devices' threads a third one measured from 11% slower to 18% faster on
  // imdb_dp, by the machine's load; it pays where reading is slow or cores are spare.
  std::int64_t prefetch = 0;

  Where where, dataset_where, path_where, train_split_where, test_split_where, batch_size_where,
      layout_where, image_shape_where, classes_where, validation_split_where, resize_where, on_bad_file_where,
      prefetch_where;

  // One example's x shape without the batch axis: {784}, {28, 28}, {28, 28, 1}, {max_tokens} (tf_idf),
  // {output_sequence_length} (int), image_folder's image_shape, arrays.example_shape, or {csv feature columns}.
  std::vector<std::int64_t> example_shape() const;
};

// ---- model ----
enum class InitKind { zeros, ones, normal, uniform, glorot_uniform };

// A variable initializer. Random kinds draw from a counter-based RNG keyed by `seed` and the global
// element index (so values do not depend on the mesh). A seed not written in the config is
// {1000 + layer index, slot} with slot 0 kernel, 1 bias, 2 dropout, so every config is deterministic.
struct InitializerConfig {
  InitKind kind = InitKind::zeros;
  std::array<std::int64_t, 2> seed{0, 0};
  bool seed_given = false;
  double mean = 0.0, stddev = 1.0;       // normal; stddev 1 = tf.random.stateless_normal (the tutorial's)
  double minval = -0.05, maxval = 0.05;  // uniform (Keras' defaults)
  Where where;
};

enum class LayerKind {
  dense, batch_norm, dropout, flatten, relu, softmax,
  conv2d, max_pool2d, avg_pool2d, global_average_pool, embedding, layer_norm, sigmoid, tanh, gelu, relayout
};
enum class Activation { none, relu, softmax, sigmoid, tanh, gelu };
enum class PaddingKind { same, valid };

struct DenseConfig {
  int units = 0;  // >= 1
  Activation activation = Activation::none;
  bool use_bias = true;
  InitializerConfig kernel_init;  // default glorot_uniform (Keras' default)
  InitializerConfig bias_init;    // default zeros
  Where units_where;
};

// Keras Conv2D on NHWC images: `{conv2d: FILTERS, kernel_size: 3, strides: 1, padding: valid, activation,
// use_bias, init, bias_init}`; kernel_size and strides are one integer or [h, w]. Keras' defaults.
struct Conv2dConfig {
  int filters = 0;  // >= 1
  std::array<int, 2> kernel_size{0, 0};
  std::array<int, 2> strides{1, 1};
  PaddingKind padding = PaddingKind::valid;
  Activation activation = Activation::none;
  bool use_bias = true;
  InitializerConfig kernel_init;  // default glorot_uniform
  InitializerConfig bias_init;    // default zeros
  Where filters_where, kernel_size_where;
};

// Keras MaxPooling2D / AveragePooling2D: `{max_pool2d: POOL, strides: POOL, padding: valid}`.
struct Pool2dConfig {
  std::array<int, 2> pool_size{2, 2};
  std::array<int, 2> strides{0, 0};  // 0: the pool size (Keras' default)
  PaddingKind padding = PaddingKind::valid;
};

// Keras Embedding: `{embedding: OUTPUT_DIM, input_dim: VOCABULARY, init}`; input_dim defaults to the int
// vectorizer's max_tokens. The table is EMBEDDING_NAME/embeddings [input_dim, output_dim].
struct EmbeddingConfig {
  int output_dim = 0;
  int input_dim = 0;
  InitializerConfig init;  // default uniform [-0.05, 0.05] (Keras)
  Where output_dim_where, input_dim_where;
};

// Keras LayerNormalization over the last axis: `{layer_norm: {epsilon: 1e-3, center: true, scale: true}}`.
struct LayerNormConfig {
  double epsilon = 1e-3;
  bool center = true, scale = true;
};

// `{relayout: [batch, unsharded, ...]}`: DTensor's relayout of the activations between two layers (one spec
// per axis), e.g. to gather image rows before a pool whose output bands would be uneven.
struct RelayoutConfig {
  std::vector<std::string> specs;
  Where where;
};

// `batch_norm: {}` is the DTensor tutorial's parameter-free version: batch statistics over the GLOBAL
// batch, always (training and eval), epsilon 1e-5, no variables. Any key given selects the Keras-style
// layer: gamma (scale) / beta (center), moving statistics for inference; Keras' defaults.
struct BatchNormConfig {
  bool parameter_free = true;
  bool center = false, scale = false;  // Keras-style default: true, true
  double momentum = 0.99;              // Keras-style only
  double epsilon = 1e-5;               // Keras-style default: 1e-3
};

struct DropoutConfig {
  double rate = 0.0;  // in [0, 1)
  std::array<std::int64_t, 2> seed{0, 0};
  bool seed_given = false;
};

// One layer. Only the sub-struct matching `kind` is meaningful.
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
  Where where;  // the layer's entry in `model`
};

// ---- layouts ----
// One `layouts:` rule: a regex (full match) over variable paths such as "dense1/kernel" -> a spec per
// axis. Rules keep YAML order; the first match wins; unmatched variables are replicated.
struct LayoutRule {
  std::string pattern;
  // An RE2 regex (core/nn/layout_map.hpp: linear time, bounded stack), checked when read; nn::LayoutMap
  // matches it.
  std::vector<std::string> specs;  // mesh dim names or "unsharded"; no dim twice
  Where where;                     // the rule's key: rank mismatch, indivisible dims, "matches nothing"
};

// ---- training ----
enum class Reduction { sum, mean };
enum class OptimizerKind { sgd, adam, adamw };

struct LossConfig {  // sparse softmax cross-entropy over logits (the only loss)
  Reduction reduction = Reduction::mean;
  Where where;
};

// `optimizer: {KIND: {PARAMS}}` (or just KIND), Keras' optimizers and defaults:
//   sgd:   learning_rate 0.01, momentum 0.0 (in [0, 1)), nesterov false (needs momentum > 0), weight_decay 0
//   adam:  learning_rate 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7, weight_decay 0
//   adamw: adam's, weight_decay 0.004
// weight_decay is Keras' on every optimizer: DECOUPLED, w -= learning_rate * weight_decay * w before the
// step (the current, scheduled, rate), not an L2 term in the loss; on every trainable variable, biases
// and normalization scales too (Keras' default when no variables are excluded).
// `schedule` (any optimizer): the learning rate per step, {KIND: {PARAMS}} with KIND one of
//   constant:    {warmup_steps: 0}
//   cosine:      {warmup_steps: 0, decay_steps (required), alpha: 0.0}
//   linear:      {warmup_steps: 0, decay_steps (required), end_learning_rate: 0.0}
//   exponential: {warmup_steps: 0, decay_steps (required), decay_rate (required), staircase: false}
//   step:        {warmup_steps: 0, boundaries: [steps...] (required), values: [rates...] (one more)}
// learning_rate is the peak rate (after warmup); a step schedule's values[0] is it (learning_rate, when
// given, must equal it). Formulas in core/optim/schedule.hpp; the rate depends on the global step only.
struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  double learning_rate = 0.01;  // default: Keras' (sgd 0.01, adam and adamw 0.001)
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;  // adam and adamw
  double momentum = 0.0;  // sgd
  bool nesterov = false;  // sgd
  double weight_decay = 0.0;  // default 0.004 for adamw
  optim::LearningRateSchedule schedule;  // its learning_rate is learning_rate
  Where where;
};

// train.clip: gradient clipping of the summed gradients before each update (Keras' semantics), one of
//   {global_norm: C}  every gradient scaled by min(1, C / N), N the norm of all gradients of all variables
//                     together (Keras' global_clipnorm), whatever their sharding: equal on every mesh
//   {value: C}        every gradient value clamped to [-C, C] (Keras' clipvalue)
// C > 0. Off when not given.
struct ClipConfig {
  double global_norm = 0, value = 0;  // 0: not set
  Where where;
};

// train.early_stopping: Keras' EarlyStopping callback, {monitor: val_loss, patience: 0, min_delta: 0, mode: auto,
// restore_best_weights: false} (Keras' defaults; `{}` takes them all). monitor is val_loss or val_accuracy;
// mode auto minimizes val_loss and maximizes val_accuracy (min, max force it). The run stops after a
// validation once `patience` validations in a row (epochs, with validation_every: epoch) have not improved on
// the best by more than min_delta (>= 0), saving the position reached; exit code 0. Needs
// data.validation_split. restore_best_weights: true is refused (use checkpoint.keep_best and evaluate
// DIR/best). The state (best, step, validations since) is saved in every checkpoint, so a resumed run stops
// where the uninterrupted one does (resuming a run that stopped trains on until the next validation decides
// again: it stops there unless that validation improves).
struct EarlyStoppingConfig {
  std::string monitor = "val_loss";
  std::string mode = "auto";  // auto, min, max
  std::int64_t patience = 0;  // >= 0
  double min_delta = 0;       // >= 0
  Where where;
};

struct TrainConfig {
  int epochs = 1;  // >= 1
  std::optional<std::int64_t> max_steps;  // stop after this many steps in all (benchmarks, tests)
  LossConfig loss;
  OptimizerConfig optimizer;
  bool eval_every_epoch = true;  // evaluate the test split after each epoch
  std::int64_t log_every = 100;  // steps between plain log lines (when not on a terminal)
  ClipConfig clip;
  // train.accumulation_steps: k >= 1. Each optimizer step sums the gradients of k micro-batches of
  // data.batch_size / k examples (forward and backward one micro-batch at a time: the memory of one), so
  // data.batch_size stays the GLOBAL batch of a step (= k x micro-batch) and the losses (mean or sum) equal
  // one big batch's. k must divide data.batch_size, and the batch shards (data.layout's first dim) the
  // micro-batch. Steps, metrics and checkpoints count optimizer steps. BatchNorm's batch statistics and
  // Dropout's masks are per micro-batch.
  std::int64_t accumulation_steps = 1;
  // Fine-tuning, `dtrain train` only (engine/init_from.hpp): train.init_from names a checkpoint (a checkpoint
  // dir, read through its `latest`, or one DIR/ckpt-N folder) whose model variables (the trainable ones and
  // the rest: BatchNorm's moving statistics) start this fresh run, on any mesh and layouts; not its
  // optimizer slots, step or data position (this config's optimizer and schedule start at step 0). Every
  // variable must match by path and shape, both ways, except those train.init_skip names: RE2 patterns (full
  // match) over variable paths ("dense3/.*") left as this config initializes them (a new head) and, in the
  // checkpoint, not read. An IMDB model keeps the checkpoint's fitted vectorizer (its inputs' meaning).
  // The command line's --init-from PATH and --init-skip PATTERN (repeatable) replace them.
  std::string init_from;               // "": a run from the initializers
  std::vector<std::string> init_skip;  // each checked to compile and to match some variable
  Where init_from_where;
  std::vector<Where> init_skip_where;  // one per pattern
  // train.validation_every: when data.validation_split is evaluated: `epoch` (the default: after each
  // epoch's last step) or N (every N optimizer steps, counted over the whole run: at steps N, 2N, ...; not
  // also at each epoch's end). A validation comes before that step's save; its metrics go to the progress
  // output and metrics.jsonl (split "validation"). Needs data.validation_split.
  std::int64_t validation_every_steps = 0;  // 0: epoch
  std::optional<EarlyStoppingConfig> early_stopping;
  Where where, epochs_where, max_steps_where, accumulation_steps_where, validation_every_where;
};

enum class CheckpointEvery { epoch, steps, never };

struct CheckpointConfig {
  std::string dir;  // default RUN_DIR/ckpt
  CheckpointEvery every = CheckpointEvery::epoch;
  std::int64_t every_steps = 0;  // when every == steps
  int max_to_keep = 3;           // >= 1
  // checkpoint.keep_best: val_loss or val_accuracy (direction as early stopping's mode auto). A checkpoint is
  // saved at every validation, and the best one so far is kept beyond max_to_keep; DIR/best names it (as
  // DIR/latest names the latest): `dtrain eval --checkpoint DIR/best`. Needs data.validation_split and
  // checkpoints (every is not never).
  std::string keep_best;  // "": off
  Where where, dir_where, keep_best_where;
};

// ---- communication between processes ----
struct CommConfig {
  // How long a process waits in a collective for its peers (under mpirun) before it gives up with an
  // error: a stuck or dead peer ends the job with a message instead of a hang. > 0, finite.
  double timeout_s = 300;
  Where timeout_s_where;  // the value; when not given, the comm section or else the config itself
};

// ---- the whole config ----
struct Config {
  std::string file;  // the path it was read from (or the name given to parse_config)
  MeshConfig mesh;
  DataConfig data;
  std::vector<LayerConfig> model;
  std::vector<LayoutRule> layouts;
  TrainConfig train;
  CheckpointConfig checkpoint;
  CommConfig comm;
  std::string run_dir;  // --run-dir, else run_dir:, else runs/<config file stem>
  Where run_dir_where;

  std::string source_text;             // the file's text as read (before overrides)
  std::vector<std::string> overrides;  // the --set assignments applied, in order
  // Every key read, by dotted path ("data.batch_size", "model[1].dense", "layouts[0]"), at its value.
  std::map<std::string, Where> locations;

  Where where(const std::string& path) const;  // locations[path], or the file itself
};

struct LoadOptions {
  std::vector<std::string> overrides;  // "a.b=value", applied in order before parsing
  std::string run_dir;                 // --run-dir; empty = the config's
  bool check_data_path = true;         // false: do not require data.path to exist (tests, checkpoints)
  std::string init_from;               // train --init-from: replaces train.init_from
  std::vector<std::string> init_skip;  // train --init-skip (repeatable): replaces train.init_skip
};

// Reads and validates a config file. Throws UsageError (see the header comment).
Config load_config(const std::string& path, const LoadOptions& options = {});
// The same from text; `file` names it in messages and gives the default run dir's stem.
Config parse_config(const std::string& text, const std::string& file, const LoadOptions& options = {});

// Applies one override "dotted.key.path=VALUE" to a YAML tree: VALUE is parsed as YAML (so "[batch, model]"
// is a list), missing maps are created, a numeric segment indexes a list ("model.0.dense=64", or as
// messages write it, "model[0].dense=64").
// Errors read "--set ASSIGNMENT: ...". Returns the nodes it created or replaced, so that later errors about
// them can name the override.
std::vector<YAML::Node> apply_override(YAML::Node& root, const std::string& assignment);

// The resolved config (every default written out) as YAML that parse_config reads back to the same
// Config; what a checkpoint stores.
std::string dump_config(const Config& config);

std::string to_string(DeviceKind kind);
std::string to_string(Dataset dataset);
bool is_text(Dataset dataset);            // imdb, text_folder: texts through data.vectorizer
bool has_split_folders(Dataset dataset);  // text_folder, image_folder: a split is any folder under data.path
// The class count a dataset has whatever its files hold (mnist 10, imdb 2), or 0 when its data tell
// (image_folder: its class folders, or data.classes; arrays, csv: their labels).
int known_class_count(Dataset dataset);
std::string to_string(InitKind kind);
std::string to_string(LayerKind kind);
std::string to_string(Activation activation);
std::string to_string(PaddingKind padding);
std::string to_string(Reduction reduction);
std::string to_string(OptimizerKind kind);

}  // namespace dtrain
