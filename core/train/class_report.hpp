// eval --report: scikit-learn's classification_report from an evaluation's confusion matrix. Per class k
// (the true label's): precision = right / predicted k, recall = right / examples of k (its support), F1 their
// harmonic mean; a ratio with nothing to divide by is 0 (scikit-learn's zero_division). Macro averages are
// the classes' plain means, weighted ones weigh each class by its support. As text (a table and the matrix)
// and as JSON (the "report" of metrics.jsonl's eval row).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::train {

struct ClassScores {
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;  // examples of the class (of all classes, for the averages)
};

struct ClassReport {
  std::vector<ClassScores> classes;
  ClassScores macro, weighted;
  std::vector<int64_t> confusion;  // K x K, [true][predicted]

  // Error unless confusion has classes^2 counts.
  static ClassReport from_confusion(const std::vector<int64_t>& confusion, size_t classes);
  // names: label k's name, one per class.
  std::string text(const std::vector<std::string>& names) const;
  std::string json(const std::vector<std::string>& names) const;
};

}  // namespace dtrain::train
