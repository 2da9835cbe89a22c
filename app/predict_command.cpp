// `dtrain predict --checkpoint DIR "text" ... | --file PATH ... | --idx FILE | --npy FILE | --csv FILE
// [--output FILE]`: class probabilities for raw inputs, from the checkpoint alone (its stored config builds
// the model, on a 1-device mesh; texts go through its saved vectorizer, in its stored config's mode: a TF-IDF
// row, or a row of output_sequence_length token ids). --file takes image files (.png, .jpg, .jpeg: decoded,
// converted and resized as the training config's data says) for image models and text files (.txt, one
// example each) for text models; --npy and --csv take rows of numbers for any other model
// (engine/predict_rows.hpp).
// Prints one line per input: index (and the file, for --file), predicted class (its label), its name and
// probability (the checkpoint's class names; older checkpoints: the data set's defaults), every class's
// probability:
//   0	class 1	pos 0.9999	probabilities 0.000100 0.999900
// --output FILE writes them as a CSV file instead (engine/predictions.hpp).
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "engine/checkpoint_hooks.hpp"
#include "engine/checkpoint_model.hpp"
#include "app/commands.hpp"
#include "engine/model_builder.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/checkpoint/state.hpp"
#include "core/error.hpp"
#include "core/train/loss.hpp"
#include "core/train/predict.hpp"
#include "engine/data_source.hpp"
#include "engine/predict_rows.hpp"
#include "engine/predictions.hpp"
#include "data/idx.hpp"
#include "data/image_decode.hpp"
#include "data/image_folder.hpp"

namespace dtrain {
namespace {

// The images an mnist model was trained on: image_shape's first two extents, or square ones for a flat input
// (784 = 28x28); {0, 0} when a flat width is no square. The pixel count alone would let a 56x14 image through
// to a 28x28 model.
std::pair<int64_t, int64_t> mnist_image_size(const Shape& example) {
  if (example.size() >= 2) return {example[0], example[1]};
  const auto side = int64_t(std::llround(std::sqrt(double(num_elements(example)))));
  return side * side == num_elements(example) ? std::pair{side, side} : std::pair<int64_t, int64_t>{0, 0};
}

// The images an image model takes: height, width, channels and how to get there. image_folder: its data
// settings; mnist: its image size in gray, no resizing (the IDX images it learned from were all that size).
data::ImageFolderOptions model_images(const Config& config) {
  if (config.data.dataset == Dataset::image_folder) return image_folder_options(config);
  data::ImageFolderOptions options;
  options.channels = 1;
  options.resize = data::Resize::none;
  const auto [rows, cols] = mnist_image_size(config.data.example_shape());
  options.height = rows;
  options.width = cols;
  return options;
}

std::string lowercase_extension(const std::string& path) {
  std::string extension = std::filesystem::path(path).extension().string();
  for (char& c : extension) c = char(std::tolower(static_cast<unsigned char>(c)));
  return extension;
}

// The texts the model classifies, one row each, through the checkpoint's saved vectorizer.
Tensor vectorize(const std::vector<std::string>& texts, const Config& config, const checkpoint::CheckpointIndex& index) {
  const Shape example = config.data.example_shape();
  std::optional<data::TextVectorizer> vectorizer = saved_vectorizer(index, config);
  DTRAIN_CHECK(vectorizer.has_value(), "[predict] checkpoint {} holds no text vectorizer", index.folder);
  DTRAIN_CHECK(vectorizer->example_shape() == example,
               "[predict] the saved {} vectorizer makes inputs of shape {} but the model takes {}", vectorizer->mode(),
               shape_string(vectorizer->example_shape()), shape_string(example));
  const int64_t width = vectorizer->width();
  Tensor inputs({int64_t(texts.size()), width});
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<float> row = vectorizer->transform_one(texts[i]);
    std::copy(row.begin(), row.end(), inputs.data() + int64_t(i) * width);
  }
  return inputs;
}

// --file inputs: all images (for an image model) or all texts (for a text model), told by the extension.
Tensor read_files(const std::vector<std::string>& files, const Config& config, const checkpoint::CheckpointIndex& index) {
  const bool text_model = is_text(config.data.dataset);
  DTRAIN_CHECK_USAGE(text_model || config.data.dataset == Dataset::mnist || config.data.dataset == Dataset::image_folder,
                     "[predict] --file '{}': checkpoint {} holds a model of data set {}, which reads rows of numbers: "
                     "give them with --npy FILE or --csv FILE",
                     files.front(), index.folder, to_string(config.data.dataset));
  for (const std::string& file : files) {
    const std::string extension = lowercase_extension(file);
    const bool image = std::find(data::kImageExtensions.begin(), data::kImageExtensions.end(), extension) !=
                       data::kImageExtensions.end();
    DTRAIN_CHECK_USAGE(image || extension == ".txt",
                       "[predict] --file '{}': not an image (.png, .jpg, .jpeg) or text (.txt) file", file);
    DTRAIN_CHECK_USAGE(image != text_model, "[predict] --file '{}': checkpoint {} holds a model of data set {}, which takes {} files",
                       file, index.folder, to_string(config.data.dataset),
                       text_model ? "text (.txt)" : "image (.png, .jpg, .jpeg)");
  }
  if (text_model) {  // every file is a .txt (checked above)
    std::vector<std::string> contents;
    for (const std::string& file : files) {
      const std::vector<uint8_t> bytes = data::read_file_bytes(file);
      contents.emplace_back(bytes.begin(), bytes.end());
    }
    return vectorize(contents, config, index);
  }
  const data::ImageFolderOptions shape = model_images(config);
  const Shape example = config.data.example_shape();
  DTRAIN_CHECK_USAGE(shape.height * shape.width * shape.channels == num_elements(example),
               "[predict] images of {}x{}x{} do not make the model's input {}", shape.height, shape.width,
               shape.channels, shape_string(example));
  Shape batch{int64_t(files.size())};
  batch.insert(batch.end(), example.begin(), example.end());
  Tensor inputs(batch);
  for (size_t i = 0; i < files.size(); ++i) {
    const data::Image image = data::read_image(files[i], shape.channels);
    data::image_to_input(image, shape.height, shape.width, shape.resize, files[i],
                         inputs.data() + int64_t(i) * num_elements(example));
  }
  return inputs;
}

// The inputs a model of `dataset` takes, for messages.
std::string inputs_taken(Dataset dataset) {
  switch (dataset) {
    case Dataset::mnist: return "--idx FILE, --file PATH (images), --npy FILE or --csv FILE";
    case Dataset::image_folder: return "--file PATH (images), --npy FILE or --csv FILE";
    case Dataset::imdb: case Dataset::text_folder: return "texts, or --file PATH (.txt)";
    case Dataset::arrays: case Dataset::csv: break;
  }
  return "--npy FILE or --csv FILE";
}

// The inputs as a [N, ...example] tensor.
Tensor read_inputs(const CommandOptions& options, const Config& config, const checkpoint::CheckpointIndex& index) {
  const Shape example = config.data.example_shape();
  if (!options.npy_file.empty()) return read_npy_rows(options.npy_file, config, index.folder);
  if (!options.csv_file.empty()) return read_csv_rows(options.csv_file, config, index.folder);
  if (!options.files.empty()) return read_files(options.files, config, index);
  if (!options.texts.empty()) {
    DTRAIN_CHECK_USAGE(is_text(config.data.dataset), "[predict] checkpoint {} holds a model of data set {}: give {}, not texts",
                       index.folder, to_string(config.data.dataset), inputs_taken(config.data.dataset));
    return vectorize(options.texts, config, index);
  }
  DTRAIN_CHECK_USAGE(config.data.dataset == Dataset::mnist,
                     "[predict] checkpoint {} holds a model of data set {}: give {}, not --idx", index.folder,
                     to_string(config.data.dataset), inputs_taken(config.data.dataset));
  data::IdxImages images = data::read_idx_images(options.idx_file);
  const auto [rows, cols] = mnist_image_size(example);
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

}  // namespace

int run_predict(const CommandOptions& options) {
  const CheckpointModel loaded = open_checkpoint_model(options.checkpoint);
  const checkpoint::CheckpointIndex& index = loaded.index();
  const Config& config = loaded.config;
  const MeshPtr& mesh = loaded.mesh;
  const BuiltModel& built = loaded.built;

  Tensor inputs = read_inputs(options, config, index);
  Tensor outputs = train::predict(*built.model, mesh, input_specs(config), inputs, config.data.batch_size,
                                  [&](nn::Parameters& params, int rank) {
                                    checkpoint::read_tensors(index, checkpoint::variable_tensors(params), rank);
                                  },
                                  config.train.precision == Precision::bf16);
  // A binary model's one output is the probability of class 1: both classes' probabilities are [1 - p, p].
  const bool binary = config.train.loss.kind == LossKind::binary_crossentropy;
  if (binary) outputs = train::binary_class_probabilities(outputs);
  const std::vector<std::string> names = saved_class_names(index, config);
  DTRAIN_CHECK_USAGE(int64_t(names.size()) == outputs.dim(1), "[predict] checkpoint {} names {} classes but its model has {} outputs",
                     index.folder, names.size(), outputs.dim(1));
  const Predictions predictions = class_probabilities(outputs, binary || ends_in_softmax(config));
  if (options.output_file.empty()) {
    print_predictions(predictions, names, options.files);
    return 0;
  }
  if (process_index() == 0) write_predictions_csv(options.output_file, predictions, names);
  fmt::print("predict: {} predictions of checkpoint {} (step {}) written to {}\n", predictions.count, index.folder,
             index.meta.step, options.output_file);
  return 0;
}

}  // namespace dtrain
