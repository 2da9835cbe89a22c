// `dtrain inspect DIR`: what a checkpoint holds (DIR is a checkpoint folder or a checkpoint dir, whose
// `latest` is shown): step, epoch, mesh, optimizer, vectorizer, and per tensor its global shape, layout
// when saved and the shard files holding its blocks.
#include <cstdio>
#include <filesystem>

#include "app/commands.hpp"
#include "core/checkpoint/manager.hpp"
#include "core/checkpoint/reader.hpp"
#include "core/error.hpp"
#include "core/layout.hpp"

namespace dtrain {

int run_inspect(const CommandOptions& options) {
  const std::string folder = checkpoint::find_checkpoint(options.inspect_dir);
  const checkpoint::CheckpointIndex index = checkpoint::read_index(folder);
  const checkpoint::CheckpointMeta& meta = index.meta;
  fmt::print("checkpoint: {}\n", folder);
  if (folder != options.inspect_dir) {
    fmt::print("all checkpoints in {}: {}\n", options.inspect_dir,
               fmt::join(checkpoint::list_checkpoints(options.inspect_dir), ", "));
  }
  fmt::print("format: {} version {}\n", checkpoint::kMagic, meta.format_version);
  fmt::print("step: {}\nepoch: {} (batch {} of it done; {} epoch(s) finished)\n", meta.step, meta.epoch,
             meta.batch_in_epoch, meta.epochs_done);
  fmt::print("mesh: {}\n", meta.mesh);
  fmt::print("optimizer: {} ({} iterations)\n", meta.optimizer, meta.iterations);
  fmt::print("shuffle seed: {}\n", meta.shuffle_seed);
  if (meta.vocabulary.empty()) fmt::print("vectorizer: none\n");
  else fmt::print("vectorizer: tf_idf, {} tokens\n", meta.vocabulary.size());
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
