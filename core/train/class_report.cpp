#include "core/train/class_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/train/metrics_log.hpp"

namespace dtrain::train {
namespace {

double ratio(int64_t part, int64_t whole) { return whole > 0 ? double(part) / double(whole) : 0.0; }

std::string json_scores(const ClassScores& s) {
  return fmt::format("\"precision\": {:.9g}, \"recall\": {:.9g}, \"f1\": {:.9g}, \"support\": {}", s.precision, s.recall,
                     s.f1, s.support);
}

}  // namespace

ClassReport ClassReport::from_confusion(const std::vector<int64_t>& confusion, size_t classes) {
  DTRAIN_CHECK(confusion.size() == classes * classes, "[eval] a confusion matrix of {} counts for {} classes",
               confusion.size(), classes);
  ClassReport report;
  report.confusion = confusion;
  int64_t total = 0;
  for (size_t k = 0; k < classes; ++k) {
    int64_t support = 0, predicted = 0;
    for (size_t j = 0; j < classes; ++j) {
      support += confusion[k * classes + j];
      predicted += confusion[j * classes + k];
    }
    const int64_t right = confusion[k * classes + k];
    ClassScores scores{ratio(right, predicted), ratio(right, support), 0, support};
    const double sum = scores.precision + scores.recall;
    scores.f1 = sum > 0 ? 2 * scores.precision * scores.recall / sum : 0.0;
    report.classes.push_back(scores);
    total += support;
  }
  report.macro.support = report.weighted.support = total;
  for (const ClassScores& s : report.classes) {
    const double share = ratio(s.support, total), mean = 1.0 / double(std::max<size_t>(1, classes));
    report.macro.precision += s.precision * mean;
    report.macro.recall += s.recall * mean;
    report.macro.f1 += s.f1 * mean;
    report.weighted.precision += s.precision * share;
    report.weighted.recall += s.recall * share;
    report.weighted.f1 += s.f1 * share;
  }
  return report;
}

std::string ClassReport::text(const std::vector<std::string>& names) const {
  DTRAIN_CHECK(names.size() == classes.size(), "[eval] {} class names for {} classes", names.size(), classes.size());
  size_t width = std::string("weighted avg").size();
  for (const std::string& name : names) width = std::max(width, name.size());
  std::string out = fmt::format("  {:>{}}  {:>9}  {:>9}  {:>9}  {:>9}\n", "", width, "precision", "recall", "f1-score",
                                "support");
  const auto row = [&](const std::string& name, const ClassScores& s) {
    out += fmt::format("  {:>{}}  {:>9.4f}  {:>9.4f}  {:>9.4f}  {:>9}\n", name, width, s.precision, s.recall, s.f1,
                       s.support);
  };
  for (size_t k = 0; k < classes.size(); ++k) row(names[k], classes[k]);
  row("macro avg", macro);
  row("weighted avg", weighted);
  // The matrix: a row per true class, a column per predicted one.
  size_t cell = 0;
  for (const std::string& name : names) cell = std::max(cell, name.size());
  for (int64_t count : confusion) cell = std::max(cell, fmt::format("{}", count).size());
  out += "  confusion matrix (rows: true class, columns: predicted class):\n";
  out += fmt::format("  {:>{}}", "", width);
  for (const std::string& name : names) out += fmt::format("  {:>{}}", name, cell);
  out += "\n";
  for (size_t k = 0; k < classes.size(); ++k) {
    out += fmt::format("  {:>{}}", names[k], width);
    for (size_t j = 0; j < classes.size(); ++j) out += fmt::format("  {:>{}}", confusion[k * classes.size() + j], cell);
    out += "\n";
  }
  return out;
}

std::string ClassReport::json(const std::vector<std::string>& names) const {
  DTRAIN_CHECK(names.size() == classes.size(), "[eval] {} class names for {} classes", names.size(), classes.size());
  std::string per_class, matrix;
  for (size_t k = 0; k < classes.size(); ++k) {
    per_class += fmt::format("{}{{\"name\": {}, {}}}", k ? ", " : "", json_string(names[k]), json_scores(classes[k]));
    std::string row;
    for (size_t j = 0; j < classes.size(); ++j) row += fmt::format("{}{}", j ? ", " : "", confusion[k * classes.size() + j]);
    matrix += fmt::format("{}[{}]", k ? ", " : "", row);
  }
  return fmt::format("{{\"classes\": [{}], \"macro_avg\": {{{}}}, \"weighted_avg\": {{{}}}, \"confusion\": [{}]}}", per_class,
                     json_scores(macro), json_scores(weighted), matrix);
}

}  // namespace dtrain::train
