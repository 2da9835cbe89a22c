// Issue 14: bad data and bad sizes are refused up front (UsageError: exit 2) with one line naming what and
// where: labels outside the class range at load, unreadable IDX paths, empty splits, a sharded image
// feature axis at data.layout's FILE:LINE:COL, variables too large to allocate, plan's class check.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "app/config.hpp"
#include "engine/data_source.hpp"
#include "engine/dry_step.hpp"
#include "engine/model_builder.hpp"
#include "core/kernels/cuda/cuda.hpp"
#include "data/dataset.hpp"
#include "data/idx.hpp"
#include "tests/idx_bytes.hpp"
#include "tests/temp_folder.hpp"
#include "tests/usage_error.hpp"

using namespace dtrain;
using dtrain::testing::thrown;
using dtrain::testing::put_u32;
namespace fs = std::filesystem;

namespace {

// count images of rows x cols and their labels (label i is labels[i % labels.size()]).
void write_split(const fs::path& folder, const std::string& prefix, uint32_t count, std::vector<uint8_t> labels,
                 uint32_t rows = 28, uint32_t cols = 28) {
  std::string images, label_bytes;
  put_u32(images, 0x803);
  put_u32(images, count);
  put_u32(images, rows);
  put_u32(images, cols);
  images.append(size_t(count) * rows * cols, char(7));
  put_u32(label_bytes, 0x801);
  put_u32(label_bytes, count);
  for (uint32_t i = 0; i < count; ++i) label_bytes.push_back(char(labels[i % labels.size()]));
  std::ofstream(folder / (prefix + "-images-idx3-ubyte"), std::ios::binary) << images;
  std::ofstream(folder / (prefix + "-labels-idx1-ubyte"), std::ios::binary) << label_bytes;
}

std::string mnist_config(const std::string& path, const std::string& extra = "", const std::string& model = "") {
  return "mesh: {dims: {batch: 2}}\n"
         "data: {dataset: mnist, path: " + path + ", batch_size: 4" + extra + "}\n"
         "model:\n" + (model.empty() ? "  - {dense: 10}\n" : model) +
         "train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.1}}}\n";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a label outside the class range is refused at load, naming the file and the example") {
  dtrain::testing::TempFolder temp("labels_range");
  write_split(temp.path, "train", 8, {1, 2, 3, 4, 5, 12});  // example 5 has label 12
  write_split(temp.path, "t10k", 4, {0, 1});
  std::string message;
  CHECK(thrown([&] { data::load_idx_split(temp.str(), "train", 10); }, &message) == "usage");
  CHECK(contains(message, "train-labels-idx1-ubyte"));
  CHECK(contains(message, "label 12 of example 5"));
  // Through the app's loader, which knows MNIST has 10 classes.
  const Config config = parse_config(mnist_config(temp.str()), "labels.yaml", LoadOptions{{}, "", false, "", {}});
  CHECK(thrown([&] { load_data(config); }, &message) == "usage");
  CHECK(contains(message, "label 12 of example 5"));
  // IMDB-style labels named by their file.
  CHECK(thrown([&] { data::check_labels(std::vector<int32_t>{0, 1, 2}, 2, "[imdb] 'x/train'",
                                        [](int64_t i) { return "pos/" + std::to_string(i) + ".txt"; }); },
               &message) == "usage");
  CHECK(contains(message, "[imdb] 'x/train': label 2 of example 2 (pos/2.txt)"));
}

TEST_CASE("an IDX path that is a folder, missing, truncated or of the wrong magic is a usage error naming it") {
  dtrain::testing::TempFolder temp("idx_paths");
  std::string message;
  CHECK(thrown([&] { data::read_idx_images(temp.str()); }, &message) == "usage");
  CHECK(contains(message, temp.str()));
  CHECK(contains(message, "is a directory"));
  CHECK(thrown([&] { data::read_idx_images(temp.str() + "/missing"); }, &message) == "usage");
  CHECK(contains(message, "No such file"));
  write_split(temp.path, "train", 2, {1});
  const fs::path images = temp.path / "train-images-idx3-ubyte";
  CHECK(thrown([&] { data::read_idx_labels(images.string()); }, &message) == "usage");
  CHECK(contains(message, images.string()));
  CHECK(contains(message, "magic"));
  fs::resize_file(images, 100);
  CHECK(thrown([&] { data::read_idx_images(images.string()); }, &message) == "usage");
  CHECK(contains(message, images.string()));
}

TEST_CASE("a split with no examples is refused at the split") {
  dtrain::testing::TempFolder temp("empty_split");
  write_split(temp.path, "train", 8, {1, 2});
  write_split(temp.path, "t10k", 4, {0, 1});
  std::string message;
  Config config = parse_config(mnist_config(temp.str(), ", train_split: 'train[:0]'"), "empty.yaml",
                               LoadOptions{{}, "", false, "", {}});
  CHECK(thrown([&] { load_data(config); }, &message) == "usage");
  CHECK(contains(message, "empty.yaml:2:"));
  CHECK(contains(message, "'train[:0]'"));
  CHECK(contains(message, "holds no examples"));
  config = parse_config(mnist_config(temp.str(), ", test_split: 'test[4:]'"), "empty.yaml", LoadOptions{{}, "", false, "", {}});
  CHECK(thrown([&] { load_data(config, false); }, &message) == "usage");
  CHECK(contains(message, "'test[4:]'"));
  config = parse_config(mnist_config(temp.str()), "ok.yaml", LoadOptions{{}, "", false, "", {}});
  CHECK(thrown([&] { load_data(config); }) == "none");
}

TEST_CASE("an image input sharded on its rows builds (a flatten gathers them); bands a pool would split unevenly do not") {
  const std::string text = "mesh: {dims: {batch: 2, model: 2}}\n"
                           "data: {dataset: mnist, path: data, batch_size: 4, image_shape: [28, 28],\n"
                           "       layout: [batch, model, unsharded]}\n"
                           "model:\n  - {flatten: {}}\n  - {dense: 10}\n"
                           "train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.1}}}\n";
  const Config config = parse_config(text, "image.yaml", LoadOptions{{}, "", false, "", {}});
  CHECK(thrown([&] { build_engine(config, train_options(config)); }) == "none");
  const std::string pooled = "mesh: {dims: {batch: 2, model: 4}}\n"
                             "data: {dataset: mnist, path: data, batch_size: 4, image_shape: [28, 28, 1],\n"
                             "       layout: [batch, model, unsharded, unsharded]}\n"
                             "model:\n  - {max_pool2d: 2}\n  - {flatten: {}}\n  - {dense: 10}\n"
                             "train: {epochs: 1, optimizer: {sgd: {learning_rate: 0.1}}}\n";
  std::string message;
  CHECK(thrown([&] { parse_config(pooled, "image.yaml", LoadOptions{{}, "", false, "", {}}); }, &message) == "usage");
  CHECK(contains(message, "image.yaml:3:16: data.layout: layer 'max_pool2d1' (image.yaml:5:5)"));
  CHECK(contains(message, "do not form 4 bands"));
}

TEST_CASE("a variable too large to allocate is a config error naming it and its bytes") {
  const Config config = parse_config(mnist_config("data", "", "  - {dense: 1000000000}\n  - {dense: 10}\n"),
                                     "huge.yaml", LoadOptions{{}, "", false, "", {}});
  std::string message;
  CHECK(thrown([&] { build_engine(config, train_options(config)); }, &message) == "usage");
  CHECK(contains(message, "huge.yaml:4:"));
  CHECK(contains(message, "dense1/kernel"));
  CHECK(contains(message, "3136000000000 bytes"));
}

TEST_CASE("a run that does not fit in memory is refused before allocating, counting what plan counts") {
  // Each variable fits this machine; variables, gradients and adam slots on 8 devices together do not.
  const int64_t available = available_memory_bytes();
  REQUIRE(available > 0);
  // dense1/kernel [784, units] in halves over `model`: 8 devices hold 4 copies of it, 0.6 of the memory.
  const int64_t units = std::max<int64_t>(2, int64_t(0.6 * double(available) / (4.0 * 784 * 4)) / 2 * 2);
  const std::string text = "mesh: {dims: {batch: 4, model: 2}}\n"
                           "data: {dataset: mnist, path: data, batch_size: 8}\n"
                           "model:\n  - {dense: " + std::to_string(units) + "}\n  - {dense: 10}\n"
                           "layouts: {dense1/kernel: [unsharded, model], dense2/kernel: [model, unsharded]}\n"
                           "train: {epochs: 1, optimizer: adam}\n";
  const Config config = parse_config(text, "big.yaml", LoadOptions{{}, "", false, "", {}});
  std::string message;
  CHECK(thrown([&] { build_engine(config, train_options(config)); }, &message) == "usage");
  CHECK(contains(message, "big.yaml:4:13: the run needs "));  // at dense1's units
  CHECK(contains(message, "per process (8 devices x "));
  CHECK(contains(message, "variables "));
  CHECK(contains(message, "gradients "));
  CHECK(contains(message, "adam slots "));
  CHECK(contains(message, " short (the largest variable: dense1/kernel"));
  // The count is plan's: variables, as large again in gradients, and two slots a value on its update share.
  const Engine unchecked = build_engine(config, train_options(config), std::nullopt);
  const MemoryPlan plan = memory_plan(config, *unchecked.built.model, unchecked.placement);
  const double kernel = 784.0 * double(units) / 2 * 4;
  CHECK(plan.variable_bytes >= kernel);
  CHECK(plan.gradient_bytes == plan.variable_bytes);
  CHECK(plan.slot_bytes > 0);
  CHECK(plan.per_process() > double(available));
  CHECK(plan.variable_bytes * 8 < double(available));
  // The check counts the engine's own step run dry: an evaluation holds no gradients, so it needs less.
  const DryStep train_step = dry_step(config, MemoryUse::train), eval_step = dry_step(config, MemoryUse::eval);
  const MemoryPlan trains = memory_plan(config, *unchecked.built.model, unchecked.placement, MemoryUse::train, &train_step);
  const MemoryPlan evaluates = memory_plan(config, *unchecked.built.model, unchecked.placement, MemoryUse::eval, &eval_step);
  CHECK(trains.per_process() > double(available));
  CHECK(evaluates.per_process() < trains.per_process());
  CHECK(evaluates.per_device() >= evaluates.variable_bytes);
}

TEST_CASE("a GPU mesh is checked per GPU: the devices on one GPU against its free memory") {
  const std::string text = "mesh: {dims: {batch: 8}, devices: gpu}\n"
                           "data: {dataset: mnist, path: data, batch_size: 64}\n"
                           "model:\n  - {dense: 1000}\n  - {dense: 10}\n"
                           "train: {epochs: 1, optimizer: adam}\n";
  const Config config = parse_config(text, "gpu.yaml", LoadOptions{{}, "", false, "", {}});
  const Config on_cpu = parse_config(text, "gpu.yaml", LoadOptions{{"mesh.devices=cpu"}, "", false, "", {}});
  const Engine unchecked = build_engine(on_cpu, train_options(on_cpu), std::nullopt);
  const MemoryPlan plan = memory_plan(config, *unchecked.built.model, unchecked.placement);
  const int64_t device = int64_t(plan.per_device());
  REQUIRE(device > 4 * 784 * 1000);  // dense1/kernel, its gradient and slots
  // 8 devices on cuda:0 fit in 8 devices' bytes; 5 on cuda:1 and 3 on cuda:2 fit in theirs.
  check_gpu_memory(config, plan, {{0, 8, 8 * device}});
  check_gpu_memory(config, plan, {{1, 5, 5 * device}, {2, 3, 3 * device}});
  std::string message;
  CHECK(thrown([&] { check_gpu_memory(config, plan, {{1, 5, 5 * device}, {2, 3, 3 * device - 1}}); }, &message) ==
        "usage");
  CHECK(contains(message, "gpu.yaml:4:13: the run needs "));  // at dense1's units
  CHECK(contains(message, " on cuda:2 (3 devices x "));
  CHECK(contains(message, "adam slots "));
  CHECK(contains(message, "; cuda:2 has "));
  CHECK(contains(message, " free, 1 B short (the largest variable: dense1/kernel"));
  CHECK(thrown([&] { check_gpu_memory(config, plan, {{0, 1, device / 2}}); }, &message) == "usage");
  CHECK(contains(message, " on cuda:0 (1 device x "));
  // No GPU visible (this machine, without one): nothing to compare, so no refusal here.
  if (kernels::cuda_device_count() == 0) {
    CHECK(gpu_shares(8).empty());
    check_memory(config, plan);
  }
}

TEST_CASE("the class count comes from the config, and the last layer must match it") {
  const Config config = parse_config(mnist_config("nowhere", "", "  - {dense: 7}\n"), "classes.yaml",
                                     LoadOptions{{}, "", false, "", {}});
  CHECK(classes_of(config) == 10);
  Engine engine = build_engine(config, train_options(config));
  std::string message;
  CHECK(thrown([&] { check_output_classes(config, *engine.built.model, classes_of(config)); }, &message) == "usage");
  CHECK(contains(message, "7 units but mnist has 10 classes"));
}

TEST_CASE("DTRAIN_MEMORY_LIMIT bounds the memory a run may take: plan and the check keep to it") {
  struct Restore {  // the variable as the test found it (unset here)
    ~Restore() { ::unsetenv("DTRAIN_MEMORY_LIMIT"); }
  } restore;
  const int64_t machine = available_memory_bytes();
  REQUIRE(machine > (int64_t(1) << 20));
  for (const auto& [text, bytes] : std::vector<std::pair<std::string, int64_t>>{
           {"1048576", 1048576}, {"512K", 512 << 10}, {"1.5M", 3 << 19}, {"1GiB", int64_t(1) << 30}, {"2T", int64_t(2) << 40}}) {
    ::setenv("DTRAIN_MEMORY_LIMIT", text.c_str(), 1);
    CHECK(memory_limit_bytes() == bytes);
    // The limit binds where it is well below the machine's (whose MemAvailable moves with other processes).
    const int64_t available = available_memory_bytes();
    CHECK(available > 0);
    CHECK(available <= bytes);
    if (bytes < machine / 2) CHECK(available == bytes);
  }
  for (const std::string bad : {"abc", "5X", "-1G", "0", "1e30", "G"}) {
    ::setenv("DTRAIN_MEMORY_LIMIT", bad.c_str(), 1);
    std::string message;
    CHECK(thrown([] { memory_limit_bytes(); }, &message) == "usage");
    CHECK(contains(message, "DTRAIN_MEMORY_LIMIT=" + bad));
  }
  // A config that fits this machine is refused under a limit below its plan, naming the limit's bytes.
  ::setenv("DTRAIN_MEMORY_LIMIT", "2M", 1);
  const std::string text = "mesh: {dims: {batch: 8}}\n"
                           "data: {dataset: mnist, path: data, batch_size: 64}\n"
                           "model:\n  - {dense: 256}\n  - {dense: 10}\n"
                           "train: {epochs: 1, optimizer: adam}\n";
  const Config config = parse_config(text, "limited.yaml", LoadOptions{{}, "", false, "", {}});
  std::string message;
  CHECK(thrown([&] { build_engine(config, train_options(config)); }, &message) == "usage");
  CHECK(contains(message, "limited.yaml:"));
  CHECK(contains(message, "2097152 bytes"));
}
