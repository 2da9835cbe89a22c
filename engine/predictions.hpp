// What `dtrain predict` reports for each input: the model's outputs as class probabilities (a softmax of the
// logits, or the softmax layer's own), the most probable class and its name; printed one line an input, or
// written as a CSV file (--output) for batch prediction.
#pragma once
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace dtrain {

struct Predictions {
  int64_t count = 0, classes = 0;
  std::vector<double> probabilities;  // [count, classes], row-major; each row sums to 1
  std::vector<int64_t> best;          // each row's most probable class (the first of equals)
};

// outputs: [N, classes]; `softmax_output`: they are probabilities already (a softmax last layer).
Predictions class_probabilities(const Tensor& outputs, bool softmax_output);

// One line an input: "0<TAB>[FILE<TAB>]class 1<TAB>pos 0.9999<TAB>probabilities 0.000100 0.999900" (files: one
// per input, or none).
void print_predictions(const Predictions& predictions, const std::vector<std::string>& names,
                       const std::vector<std::string>& files);

// The CSV file `path`: a header "index,class,name,p0,p1,..." and a row per input (name: the class's name;
// quoted as RFC 4180 when it holds a comma, a quote or a line break). UsageError naming the file when it
// cannot be written.
void write_predictions_csv(const std::string& path, const Predictions& predictions, const std::vector<std::string>& names);

}  // namespace dtrain
