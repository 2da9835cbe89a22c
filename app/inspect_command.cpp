// `dtrain inspect DIR`: what a checkpoint holds (DIR is a checkpoint folder or a checkpoint dir, whose
// `latest` is shown): step, epoch, mesh, optimizer, class names, vectorizer (its mode and sequence length from the config
// stored in the checkpoint), and per tensor its global shape, layout when saved and the shard files holding
// its blocks. Every file is checked against the manifest first.
// `dtrain inspect --verify DIR`: checks the whole checkpoint without loading it into a model (manifest,
// every file's size, checksum and stamps, every dataset read back against its chunks' checksums), one
// line per file and a verdict; exit 1 naming the first damaged file.
#include <cstdio>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "app/commands.hpp"
#include "core/checkpoint/dir_lock.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"
#include "core/bytes_text.hpp"
#include "core/layout.hpp"

namespace dtrain {
namespace {

// "tf_idf, 1200 tokens" or "int, 20000 tokens, sequence length 200": the mode and sequence length are the
// stored config's data.vectorizer; without a readable one, the vocabulary's form tells the mode ("" and
// "[UNK]" first, no idf weights: int).
std::string vectorizer_text(const checkpoint::CheckpointMeta& meta) {
  std::string mode;
  int64_t length = 0;
  try {
    const YAML::Node root = YAML::Load(meta.config);
    const YAML::Node vectorizer = root["data"]["vectorizer"];
    if (vectorizer.IsMap() && vectorizer["mode"]) mode = vectorizer["mode"].as<std::string>();
    if (vectorizer.IsMap() && vectorizer["output_sequence_length"])
      length = vectorizer["output_sequence_length"].as<int64_t>();
  } catch (const std::exception&) {
    // An old or damaged config text: the vocabulary alone tells the mode.
  }
  if (mode.empty()) mode = meta.idf.empty() && meta.vocabulary.front().empty() ? "int" : "tf_idf";
  std::string text = fmt::format("{}, {} tokens", mode, meta.vocabulary.size());
  if (mode == "int" && length > 0) text += fmt::format(", sequence length {}", length);
  return text;
}

// "neg, pos"; a long list shows its first and last names: "c0, c1, ..., c99 (100 classes)".
std::string classes_text(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  if (names.empty()) return "not stored (an older checkpoint: eval and predict use the data set's default names)";
  if (names.size() <= kShown) return fmt::format("{}", fmt::join(names, ", "));
  const std::vector<std::string> first(names.begin(), names.begin() + kShown - 1);
  return fmt::format("{}, ..., {} ({} classes)", fmt::join(first, ", "), names.back(), names.size());
}

// "mnist data/mnist", or for an image folder "image_folder data/shapes: images 12x12x3 (rgb), resize bilinear,
// on_bad_file error": the stored config's data section; "unknown" without a readable one.
std::string data_text(const checkpoint::CheckpointMeta& meta) {
  try {
    const YAML::Node data = YAML::Load(meta.config)["data"];
    const std::string dataset = data["dataset"].as<std::string>();
    std::string text = fmt::format("{} {}", dataset, data["path"].as<std::string>());
    if (dataset != "image_folder") return text;
    const auto shape = data["image_shape"].as<std::vector<int64_t>>();
    return text + fmt::format(": images {} ({}), resize {}, on_bad_file {}", fmt::join(shape, "x"),
                              shape.at(2) == 1 ? "grayscale" : "rgb", data["resize"].as<std::string>(),
                              data["on_bad_file"].as<std::string>());
  } catch (const std::exception&) {
    return "unknown (no readable config)";
  }
}

int verify(const CommandOptions& options) {
  checkpoint::ReadLease lease;  // keeps the writer from deleting the checkpoint while it is read
  if (std::filesystem::is_directory(options.inspect_dir))
    lease = checkpoint::ReadLease(checkpoint::guarded_dir(options.inspect_dir));
  const std::string folder = checkpoint::find_checkpoint(options.inspect_dir);
  fmt::print("verifying checkpoint {}\n", folder);
  std::fflush(stdout);
  int files = 0;
  uint64_t bytes = 0;
  try {
    const checkpoint::CheckpointIndex index =
        checkpoint::verify_checkpoint(folder, [&](const checkpoint::VerifiedFile& file) {
          const char* what = file.file == checkpoint::kManifestFile ? "files listed"
                             : file.file == checkpoint::kIndexFile  ? "tensors"
                                                                    : "datasets";
          fmt::print("ok {} ({} {}, {})\n", file.file, file.items, what, bytes_text(double(file.bytes)));
          std::fflush(stdout);
          ++files;
          bytes += file.bytes;
        });
    fmt::print("verdict: intact: step {} of run {}, {} files, {} checked\n", index.meta.step, index.meta.run_id, files,
               bytes_text(double(bytes)));
  } catch (const UsageError&) {
    throw;
  } catch (const Error&) {
    fmt::print("verdict: damaged (see the error)\n");
    std::fflush(stdout);
    throw;
  }
  return 0;
}

}  // namespace

int run_inspect(const CommandOptions& options) {
  if (options.verify) return verify(options);
  const checkpoint::OpenedCheckpoint opened = checkpoint::open_checkpoint(options.inspect_dir);
  const checkpoint::CheckpointIndex& index = opened.index;
  const std::string& folder = index.folder;
  const checkpoint::CheckpointMeta& meta = index.meta;
  fmt::print("checkpoint: {}\n", folder);
  if (folder != options.inspect_dir) {
    fmt::print("all checkpoints in {}: {}\n", options.inspect_dir,
               fmt::join(checkpoint::list_checkpoints(options.inspect_dir), ", "));
  }
  fmt::print("format: {} version {} (every file matches the manifest)\n", checkpoint::kMagic, meta.format_version);
  fmt::print("run: {}\n", meta.run_id);
  fmt::print("step: {}\nposition: {} ({} epochs finished)\n", meta.step, checkpoint::position_text(meta),
             meta.epochs_done);
  fmt::print("mesh: {}\n", meta.mesh);
  fmt::print("optimizer: {} ({} iterations)\n", meta.optimizer, meta.iterations);
  fmt::print("shuffle seed: {}\n", meta.shuffle_seed);
  fmt::print("data: {}\n", data_text(meta));
  if (meta.vocabulary.empty()) fmt::print("vectorizer: none\n");
  else fmt::print("vectorizer: {}\n", vectorizer_text(meta));
  fmt::print("classes: {}\n", classes_text(meta.class_names));
  fmt::print("tensors: {}\n", index.tensors.size());
  for (const auto& tensor : index.tensors) {
    std::string specs = tensor.layout;
    try {
      specs = Layout::from_string(tensor.layout).specs_string();
    } catch (const Error&) {
      // Show the stored text as it is.
    }
    std::vector<std::string> shards;
    for (const auto& shard : tensor.shards) shards.push_back(fmt::format("{}@{}", shard.file, shape_string(shard.offset)));
    fmt::print("  {}  shape {}  layout {}  shards {}\n", tensor.name, shape_string(tensor.global_shape), specs,
               fmt::join(shards, " "));
  }
  return 0;
}

}  // namespace dtrain
