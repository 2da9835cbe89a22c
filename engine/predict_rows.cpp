#include "engine/predict_rows.hpp"

#include "core/error.hpp"
#include "data/array_file.hpp"
#include "data/csv.hpp"

namespace dtrain {
namespace {

// --npy and --csv give numbers; a text model reads texts, through its vectorizer.
void check_not_text(const std::string& option, const std::string& path, const Config& config,
                    const std::string& checkpoint) {
  DTRAIN_CHECK_USAGE(!is_text(config.data.dataset),
                     "[predict] {} {}: checkpoint {} holds a model of data set {}, which reads texts: give the texts, "
                     "or --file PATH.txt",
                     option, path, checkpoint, to_string(config.data.dataset));
}

Shape batch_of(int64_t rows, const Config& config) {
  const std::vector<int64_t> example = config.data.example_shape();
  Shape shape{rows};
  shape.insert(shape.end(), example.begin(), example.end());
  return shape;
}

}  // namespace

Tensor read_npy_rows(const std::string& path, const Config& config, const std::string& checkpoint) {
  check_not_text("--npy", path, config, checkpoint);
  const std::unique_ptr<data::ArrayFile> array = data::open_npy(path);
  const Shape example(config.data.example_shape());
  DTRAIN_CHECK_USAGE(array->type() != data::ElementType::other,
                     "[predict] --npy '{}' holds {}; give numbers (float32, float64, uint8 or an integer type)", path,
                     to_string(array->type()));
  DTRAIN_CHECK_USAGE(array->shape().size() >= 2 && array->row_elements() == num_elements(example),
                     "[predict] --npy '{}' has shape {}: its rows (shape {}) are not the model's input {} of checkpoint "
                     "{} ({} numbers a row; the first axis counts the inputs)",
                     path, shape_string(array->shape()),
                     array->shape().empty() ? "()" : shape_string(Shape(array->shape().begin() + 1, array->shape().end())),
                     shape_string(example), checkpoint, num_elements(example));
  DTRAIN_CHECK_USAGE(array->rows() >= 1, "[predict] --npy '{}' holds no rows (shape {})", path, shape_string(array->shape()));
  float divide_by = 0;  // as the data source reads the model's own data
  if (config.data.dataset == Dataset::arrays) divide_by = float(config.data.arrays.divide_by);
  const bool images = config.data.dataset == Dataset::mnist || config.data.dataset == Dataset::image_folder;
  if (images && array->type() == data::ElementType::uint8) divide_by = 255.0f;
  std::vector<int64_t> rows(size_t(array->rows()));
  for (int64_t r = 0; r < array->rows(); ++r) rows[size_t(r)] = r;
  Tensor inputs(batch_of(array->rows(), config));
  array->read_rows(rows, 0, array->row_elements(), divide_by, inputs.data());
  return inputs;
}

Tensor read_csv_rows(const std::string& path, const Config& config, const std::string& checkpoint) {
  check_not_text("--csv", path, config, checkpoint);
  const bool csv_model = config.data.dataset == Dataset::csv;
  std::vector<std::string> columns;
  std::vector<int64_t> lines;
  std::vector<float> values = data::read_csv_features(path, csv_model ? config.data.csv.label : "",
                                                            csv_model ? config.data.csv.features : std::vector<std::string>{},
                                                            columns, lines);
  const int64_t width = num_elements(Shape(config.data.example_shape()));
  DTRAIN_CHECK_USAGE(int64_t(columns.size()) == width,
                     "[predict] --csv '{}': line 1 (the header) names {} feature columns ({}{}) but the model of "
                     "checkpoint {} takes {} numbers a row (input {}){}",
                     path, columns.size(), fmt::join(columns.begin(), columns.begin() + std::min<size_t>(columns.size(), 8), ", "),
                     columns.size() > 8 ? ", ..." : "", checkpoint, width, shape_string(Shape(config.data.example_shape())),
                     csv_model ? fmt::format("; its data.csv.label is '{}'", config.data.csv.label) : "");
  DTRAIN_CHECK_USAGE(!lines.empty(), "[predict] --csv '{}' holds a header but no rows", path);
  const float divide_by = config.data.dataset == Dataset::arrays ? float(config.data.arrays.divide_by) : 0.0f;
  if (divide_by != 0.0f)  // float / float, as the array readers divide
    for (float& value : values) value /= divide_by;
  return Tensor::from_vector(batch_of(int64_t(lines.size()), config), values);
}

}  // namespace dtrain
