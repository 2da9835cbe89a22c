// `dtrain predict --checkpoint DIR "text" ... | --idx FILE`: class probabilities for raw inputs, from the
// checkpoint alone (its stored config builds the model, on a 1-device mesh; IMDB texts go through its
// saved vectorizer, in its stored config's mode: a TF-IDF row, or a row of output_sequence_length token ids).
// Prints one line per input: index, predicted class, probabilities.
#include <cmath>
#include <cstdio>

#include "app/checkpoint_hooks.hpp"
#include "app/commands.hpp"
#include "app/model_builder.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/error.hpp"
#include "core/train/predict.hpp"
#include "data/idx.hpp"

namespace dtrain {
namespace {

// The inputs as a [N, ...example] tensor.
Tensor read_inputs(const CommandOptions& options, const Config& config, const checkpoint::CheckpointIndex& index) {
  const Shape example = config.data.example_shape();
  DTRAIN_CHECK_USAGE(config.data.dataset == Dataset::mnist || config.data.dataset == Dataset::imdb,
                     "[predict] checkpoint {} is a dataset {} model: predict reads IDX images (mnist) or texts (imdb); "
                     "`dtrain eval --split` evaluates it on a split of its data",
                     index.folder, to_string(config.data.dataset));
  if (!options.texts.empty()) {
    DTRAIN_CHECK_USAGE(config.data.dataset == Dataset::imdb,
                       "[predict] checkpoint {} is a {} model: give images with --idx FILE, not texts", index.folder,
                       to_string(config.data.dataset));
    std::optional<data::TextVectorizer> vectorizer = saved_vectorizer(index, config);
    DTRAIN_CHECK(vectorizer.has_value(), "[predict] checkpoint {} holds no text vectorizer", index.folder);
    DTRAIN_CHECK(vectorizer->example_shape() == example,
                 "[predict] the saved {} vectorizer makes inputs of shape {} but the model takes {}", vectorizer->mode(),
                 shape_string(vectorizer->example_shape()), shape_string(example));
    const int64_t width = vectorizer->width();
    Tensor inputs({int64_t(options.texts.size()), width});
    for (size_t i = 0; i < options.texts.size(); ++i) {
      std::vector<float> row = vectorizer->transform_one(options.texts[i]);
      std::copy(row.begin(), row.end(), inputs.data() + int64_t(i) * width);
    }
    return inputs;
  }
  DTRAIN_CHECK_USAGE(config.data.dataset == Dataset::mnist,
                     "[predict] checkpoint {} is an {} model: give texts, not --idx", index.folder,
                     to_string(config.data.dataset));
  data::IdxImages images = data::read_idx_images(options.idx_file);
  // The images the model was trained on: image_shape's first two extents, or square ones for a flat input
  // (784 = 28x28); the pixel count alone would let a 56x14 image through to a 28x28 model.
  int64_t rows = 0, cols = 0;
  if (example.size() >= 2) {
    rows = example[0];
    cols = example[1];
  } else {
    const auto side = int64_t(std::llround(std::sqrt(double(num_elements(example)))));
    if (side * side == num_elements(example)) rows = cols = side;
  }
  const bool fits = rows > 0 ? images.rows == rows && images.cols == cols
                             : images.rows * images.cols == num_elements(example);
  DTRAIN_CHECK_USAGE(fits, "[predict] {} holds {}x{} images but the model takes {} (input {})", options.idx_file,
                     images.rows, images.cols,
                     rows > 0 ? fmt::format("{}x{} images", rows, cols) : fmt::format("{} pixels", num_elements(example)),
                     shape_string(example));
  DTRAIN_CHECK_USAGE(images.count >= 1, "[predict] {} holds no images", options.idx_file);
  Shape shape{images.count};
  shape.insert(shape.end(), example.begin(), example.end());
  return Tensor::from_vector(shape, images.pixels);
}

bool ends_in_softmax(const Config& config) {
  const LayerConfig& last = config.model.back();
  return last.kind == LayerKind::softmax || (last.kind == LayerKind::dense && last.dense.activation == Activation::softmax);
}

}  // namespace

int run_predict(const CommandOptions& options) {
  // The lease keeps a training run from deleting the checkpoint while it is read.
  const checkpoint::OpenedCheckpoint opened = checkpoint::open_checkpoint(options.checkpoint);
  const checkpoint::CheckpointIndex& index = opened.index;
  Config config = parse_config(index.meta.config, index.folder + "/index.h5:/meta/config", LoadOptions{{}, "", false});
  // One device; the mesh keeps its dim names (size 1) so that the stored layout rules still apply.
  std::vector<int> ones(config.mesh.dims.size(), 1);
  for (auto& dim : config.mesh.dims) dim.size = 1;
  MeshPtr mesh = make_mesh(config.mesh.dim_names(), ones);
  BuiltModel built = build_model(config, mesh, config.data.example_shape());
  check_model_matches(config, *built.model, index);

  Tensor inputs = read_inputs(options, config, index);
  Tensor outputs = train::predict(*built.model, mesh, input_specs(config), inputs, config.data.batch_size,
                                  [&](nn::Parameters& params, int rank) {
                                    checkpoint::read_tensors(index, checkpoint::variable_tensors(params), rank);
                                  });
  const int64_t count = outputs.dim(0), classes = outputs.dim(1);
  const bool probabilities = ends_in_softmax(config);
  for (int64_t i = 0; i < count; ++i) {
    std::vector<double> p(classes);
    const float* row = outputs.data() + i * classes;
    double total = 0, top = *std::max_element(row, row + classes);
    for (int64_t k = 0; k < classes; ++k) total += p[k] = probabilities ? row[k] : std::exp(double(row[k]) - top);
    std::string text;
    int64_t best = 0;
    for (int64_t k = 0; k < classes; ++k) {
      p[k] /= total;
      if (p[k] > p[best]) best = k;
      text += fmt::format("{}{:.6f}", k ? " " : "", p[k]);
    }
    fmt::print("{}\tclass {}\tprobabilities {}\n", i, best, text);
  }
  return 0;
}

}  // namespace dtrain
