// The aclImdb folder (Maas et al. 2011): DIR/{train,test}/{pos,neg}/*.txt, label 1 = pos, 0 = neg (other
// folders such as train/unsup are not read). A text folder (data/text_folder.hpp) with those two classes:
// reviews come in its fixed, mixed record order; a missing folder or unreadable file is a UsageError naming
// the path.
#pragma once
#include <string>

#include "data/text_folder.hpp"

namespace dtrain::data {

// `root` is the aclImdb folder (or a folder holding one); split is "train" or "test".
TextExamples read_imdb(const std::string& root, const std::string& split, int threads = default_threads());

}  // namespace dtrain::data
