#include "engine/split_names.hpp"

#include <algorithm>
#include <filesystem>

#include "core/suggest.hpp"

namespace dtrain {

std::vector<std::string> split_names(const Config& config) {
  const DataConfig& data = config.data;
  switch (data.dataset) {
    case Dataset::mnist: case Dataset::imdb: return {"train", "test"};
    case Dataset::csv: return {"train"};
    case Dataset::arrays: {
      std::vector<std::string> names;
      if (data.arrays.train) names.push_back("train");
      if (data.arrays.test) names.push_back("test");
      return names;
    }
    case Dataset::text_folder: case Dataset::image_folder: break;
  }
  std::vector<std::string> folders;
  std::error_code error;
  for (std::filesystem::directory_iterator it(data.path, error), end; !error && it != end; it.increment(error))
    if (it->is_directory(error)) folders.push_back(it->path().filename().string());
  std::sort(folders.begin(), folders.end());
  return folders;
}

std::string unknown_split(const Config& config, const std::string& name, const std::vector<std::string>& more) {
  std::vector<std::string> names = split_names(config);
  names.insert(names.end(), more.begin(), more.end());
  if (config.data.dataset == Dataset::csv)
    return fmt::format("unknown split '{}' (a CSV file is the one split 'train'; slice it, e.g. train[80%:]{}){}", name,
                       more.empty() ? "" : fmt::format(", or give {}", fmt::join(more, ", ")), did_you_mean(name, names));
  return fmt::format("unknown split '{}' (its splits: {}){}", name, names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")),
                     did_you_mean(name, names));
}

std::string split_suggestion(const Config& config, const std::string& name) { return did_you_mean(name, split_names(config)); }

}  // namespace dtrain
