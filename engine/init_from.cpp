#include "engine/init_from.hpp"

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <set>

#include "engine/checkpoint_hooks.hpp"
#include "core/checkpoint/dir_lock.hpp"
#include "core/error.hpp"
#include "core/nn/layout_map.hpp"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
const std::string kVariables = "variables/";

// An error about train.init_from, at its place in the config (or at --init-from).
[[noreturn]] void fail_init(const Config& config, const std::string& message) {
  const Where where = config.where("train.init_from");
  throw_config_error(where, where.line == 0 && where.file.rfind("--init-from", 0) == 0 ? message
                                                                                       : "train.init_from: " + message);
}

// 'a', 'b', 'c' (the first 20, then how many in all).
std::string quoted_names(const std::vector<std::string>& names) {
  constexpr size_t kShown = 20;
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) shown.push_back("'" + names[i] + "'");
  return fmt::format("{}{}", fmt::join(shown, ", "),
                     names.size() > kShown ? fmt::format(", ... ({} in all)", names.size()) : "");
}

// A train.init_skip list that leaves out the layers of `paths`: ['dense3/.*', ...].
std::string skip_suggestion(const std::vector<std::string>& paths) {
  std::set<std::string> seen;
  std::vector<std::string> patterns;
  for (const std::string& path : paths) {
    const std::string pattern = RE2::QuoteMeta(path.substr(0, path.find('/'))) + "/.*";
    if (seen.insert(pattern).second) patterns.push_back("'" + pattern + "'");
  }
  return fmt::format("[{}]", fmt::join(patterns, ", "));
}

}  // namespace

checkpoint::OpenedCheckpoint open_init_checkpoint(const Config& config) {
  const std::string& from = config.train.init_from;
  std::error_code error;
  if (config.checkpoint.every != CheckpointEvery::never && fs::is_directory(from, error)) {
    const fs::path source = fs::weakly_canonical(checkpoint::guarded_dir(from), error);
    const fs::path own = fs::weakly_canonical(config.checkpoint.dir, error);
    if (!error && source == own)
      fail_init(config, fmt::format("{} is in checkpoint.dir {}, which this run writes (and --overwrite would empty): "
                                    "give this run another checkpoint.dir",
                                    from, config.checkpoint.dir));
  }
  try {
    return checkpoint::open_checkpoint(from);
  } catch (const UsageError& e) {
    fail_init(config, e.what());
  }
}

InitPlan plan_init(const Config& config, const nn::Model& model, const checkpoint::CheckpointIndex& index) {
  const TrainConfig& train = config.train;
  std::vector<std::shared_ptr<const re2::RE2>> patterns;
  for (const std::string& pattern : train.init_skip) {
    std::string error;
    patterns.push_back(nn::compile_layout_pattern(pattern, &error));
    DTRAIN_CHECK(patterns.back() != nullptr, "[init] train.init_skip pattern '{}' was checked when read: {}", pattern, error);
  }
  std::vector<bool> used(patterns.size(), false);
  const auto skipped = [&](const std::string& path) {
    bool any = false;
    for (size_t i = 0; i < patterns.size(); ++i)
      if (nn::layout_pattern_matches(*patterns[i], path)) any = used[i] = true;
    return any;
  };

  std::map<std::string, const checkpoint::TensorRecord*> saved;  // the checkpoint's variables by path
  for (const auto& tensor : index.tensors)
    if (tensor.name.rfind(kVariables, 0) == 0) saved[tensor.name.substr(kVariables.size())] = &tensor;

  InitPlan plan;
  std::vector<std::string> missing, differing, extra, problems;
  for (const auto& info : model.variables()) {
    if (skipped(info.path)) {
      plan.skipped.push_back(info.path);
      continue;
    }
    const auto found = saved.find(info.path);
    if (found == saved.end()) {
      missing.push_back(info.path);
      problems.push_back(fmt::format("variable '{}' of the model is not there", info.path));
    } else if (found->second->global_shape != info.shape) {
      differing.push_back(info.path);
      problems.push_back(fmt::format("variable '{}' has shape {} there but {} in the model", info.path,
                                     shape_string(found->second->global_shape), shape_string(info.shape)));
    } else {
      plan.loaded.push_back(info.path);
    }
  }
  for (const auto& [path, record] : saved) {
    bool known = false;
    for (const auto& info : model.variables()) known = known || info.path == path;
    if (known) continue;
    if (skipped(path)) {
      plan.ignored.push_back(path);
      continue;
    }
    extra.push_back(path);
  }
  if (!extra.empty())
    problems.push_back(fmt::format("it holds {} that the model does not have", quoted_names(extra)));
  if (!problems.empty()) {
    std::vector<std::string> out = missing;
    out.insert(out.end(), differing.begin(), differing.end());
    out.insert(out.end(), extra.begin(), extra.end());
    fail_init(config, fmt::format("the model does not match checkpoint {}: {}. To leave such variables out (the "
                                  "model's keep their initializers, the checkpoint's are not read), list them in "
                                  "train.init_skip (or --init-skip), e.g. {}",
                                  index.folder, fmt::join(problems, "; "), skip_suggestion(out)));
  }
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (used[i]) continue;
    std::vector<std::string> paths;
    for (const auto& info : model.variables()) paths.push_back(info.path);
    throw_config_error(config.where(fmt::format("train.init_skip[{}]", i)),
                       fmt::format("train.init_skip: '{}' matches no variable of the model ({}) or of checkpoint {}",
                                   train.init_skip[i], quoted_names(paths), index.folder));
  }
  if (plan.loaded.empty())
    fail_init(config, fmt::format("train.init_skip leaves out every variable of the model: nothing would come from "
                                  "checkpoint {} (drop train.init_from for a run from the initializers)",
                                  index.folder));
  return plan;
}

std::optional<data::TextVectorizer> inherited_vectorizer(const Config& config, const checkpoint::CheckpointIndex& index) {
  const bool holds = !index.meta.vocabulary.empty();
  // Any text data set (imdb, text_folder) reads any text checkpoint's vocabulary: the texts differ, the
  // inputs the vectorizer makes of them do not.
  if (!is_text(config.data.dataset)) {
    if (holds)
      fail_init(config, fmt::format("checkpoint {} holds a text vectorizer (its model reads texts), but "
                                    "data.dataset is {}",
                                    index.folder, to_string(config.data.dataset)));
    return std::nullopt;
  }
  if (!holds)
    fail_init(config, fmt::format("checkpoint {} holds no text vectorizer: its model was not trained on texts, "
                                  "whose inputs it could not read (data.dataset is {})",
                                  index.folder, to_string(config.data.dataset)));
  return saved_vectorizer(index, config);
}

bool started_from_checkpoint(const std::string& config_text) {
  try {
    const YAML::Node node = YAML::Load(config_text);
    return node.IsMap() && node["train"] && node["train"].IsMap() && node["train"]["init_from"] &&
           node["train"]["init_from"].IsScalar() && !node["train"]["init_from"].Scalar().empty();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace dtrain
