// The aclImdb folder (Maas et al. 2011): DIR/{train,test}/{pos,neg}/*.txt, label 1 = pos, 0 = neg.
// Reviews come in a fixed, shuffled order (like TFDS records, not grouped by label) that depends only on
// the file names; a missing folder or unreadable file is a UsageError naming the path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/parallel.hpp"

namespace dtrain::data {

struct TextExamples {
  std::vector<std::string> texts;
  std::vector<int32_t> labels;
  std::vector<std::string> paths;  // where each text came from, relative to the split folder (pos/0_9.txt)
};

// `root` is the aclImdb folder (or a folder holding one); split is "train" or "test".
TextExamples read_imdb(const std::string& root, const std::string& split, int threads = default_threads());

}  // namespace dtrain::data
