// The splits a config's data set has, by name, and what to say of a name it lacks: the names it has, and
// the nearest one (`tset`: did you mean 'test'?). The loaders and `eval --split` say it alike.
#pragma once
#include <string>
#include <vector>

#include "app/config.hpp"

namespace dtrain {

// mnist, imdb: train and test; a class folder data set (text_folder, image_folder): the folders under
// data.path (sorted); arrays: the entries data.arrays gives; csv: train (TFDS' name for a file of one split).
std::vector<std::string> split_names(const Config& config);

// "unknown split 'tset' (its splits: train, test); did you mean 'test'?"; `more` are names the caller also
// takes (eval's `validation`), listed and suggested too.
std::string unknown_split(const Config& config, const std::string& name, const std::vector<std::string>& more = {});

// "; did you mean 'test'?" for a split name the data set lacks, else "".
std::string split_suggestion(const Config& config, const std::string& name);

}  // namespace dtrain
