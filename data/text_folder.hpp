// Texts in Keras' class folders (text_dataset_from_directory): SPLIT_FOLDER/<class>/.../*.txt, one example
// per file, its label its class folder's (data/class_folders.hpp has the classes and the record order).
// Files are read as bytes, in parallel; an unreadable file is a UsageError naming it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/parallel.hpp"

namespace dtrain::data {

struct TextExamples {
  std::vector<std::string> texts;
  std::vector<int32_t> labels;
  std::vector<std::string> paths;        // where each text came from, relative to the split folder (pos/0_9.txt)
  std::vector<std::string> class_names;  // label k is class_names[k]
};

// `classes` empty: every subfolder, in sorted order; else those, in that order. `tag` starts messages.
TextExamples read_text_folder(const std::string& folder, const std::vector<std::string>& classes,
                              const std::string& tag, int threads = default_threads());

}  // namespace dtrain::data
