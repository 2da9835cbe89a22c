#include "engine/predictions.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/error.hpp"

namespace dtrain {
namespace {

// A CSV field: quoted (quotes doubled) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

Predictions class_probabilities(const Tensor& outputs, bool softmax_output) {
  DTRAIN_CHECK(outputs.rank() == 2, "[predict] outputs of shape {}, expected [N, classes]", shape_string(outputs.shape()));
  Predictions out;
  out.count = outputs.dim(0);
  out.classes = outputs.dim(1);
  out.probabilities.resize(size_t(out.count * out.classes));
  out.best.resize(size_t(out.count));
  for (int64_t i = 0; i < out.count; ++i) {
    const float* row = outputs.data() + i * out.classes;
    double* p = out.probabilities.data() + i * out.classes;
    const double top = *std::max_element(row, row + out.classes);
    double total = 0;
    for (int64_t k = 0; k < out.classes; ++k) total += p[k] = softmax_output ? row[k] : std::exp(double(row[k]) - top);
    int64_t best = 0;
    for (int64_t k = 0; k < out.classes; ++k) {
      p[k] /= total;
      if (p[k] > p[best]) best = k;
    }
    out.best[size_t(i)] = best;
  }
  return out;
}

void print_predictions(const Predictions& predictions, const std::vector<std::string>& names,
                       const std::vector<std::string>& files) {
  for (int64_t i = 0; i < predictions.count; ++i) {
    const double* p = predictions.probabilities.data() + i * predictions.classes;
    const int64_t best = predictions.best[size_t(i)];
    std::string text;
    for (int64_t k = 0; k < predictions.classes; ++k) text += fmt::format("{}{:.6f}", k ? " " : "", p[k]);
    const std::string input = files.empty() ? std::to_string(i) : fmt::format("{}\t{}", i, files[size_t(i)]);
    fmt::print("{}\tclass {}\t{} {:.4f}\tprobabilities {}\n", input, best, names[size_t(best)], p[best], text);
  }
}

void write_predictions_csv(const std::string& path, const Predictions& predictions, const std::vector<std::string>& names) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  DTRAIN_CHECK_USAGE(out.is_open(), "[predict] --output '{}': cannot write it: {}", path, std::strerror(errno));
  out << "index,class,name";
  for (int64_t k = 0; k < predictions.classes; ++k) out << ",p" << k;
  out << "\n";
  for (int64_t i = 0; i < predictions.count; ++i) {
    const int64_t best = predictions.best[size_t(i)];
    std::string row = fmt::format("{},{},{}", i, best, csv_field(names[size_t(best)]));
    for (int64_t k = 0; k < predictions.classes; ++k)
      row += fmt::format(",{:.6f}", predictions.probabilities[size_t(i * predictions.classes + k)]);
    out << row << "\n";
  }
  out.close();
  DTRAIN_CHECK_USAGE(out.good(), "[predict] --output '{}': writing it failed: {}", path, std::strerror(errno));
}

}  // namespace dtrain
