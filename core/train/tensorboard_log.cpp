#include "core/train/tensorboard_log.hpp"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/train/tfrecord.hpp"
#include "tensorboard/compat/proto/event.pb.h"

namespace dtrain::train {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// An event at `step`, now, holding one summary value tagged `tag` (returned, for its contents).
tensorboard::Summary::Value* add_value(tensorboard::Event& event, const std::string& tag, int64_t step) {
  event.set_wall_time(now_seconds());
  event.set_step(step);
  tensorboard::Summary::Value* entry = event.mutable_summary()->add_value();
  entry->set_tag(tag);
  return entry;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

struct CloseFile {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

}  // namespace

struct TensorBoardLog::EventFile {
  std::string path;
  std::unique_ptr<std::FILE, CloseFile> out;

  // A new file in `folder`: the n of its name counts up past files that exist (two writers of one process in one
  // second, or a pid used again), and "x" opens only a file that did not exist.
  explicit EventFile(const std::filesystem::path& folder) {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    DTRAIN_CHECK(!error, "[tensorboard] cannot create '{}': {}", path_text(folder.string()), error.message());
    const auto seconds = int64_t(now_seconds());
    const std::string host = host_name();
    for (int n = 0; out == nullptr; ++n) {
      path = (folder / fmt::format("events.out.tfevents.{}.{}.{}.{}", seconds, host, int64_t(getpid()), n)).string();
      out.reset(std::fopen(path.c_str(), "wbx"));
      DTRAIN_CHECK(out != nullptr || (errno == EEXIST && n < 1000), "[tensorboard] cannot create '{}': {}",
                   path_text(path), std::strerror(errno));
    }
    tensorboard::Event event;
    event.set_wall_time(now_seconds());
    event.set_file_version("brain.Event:2");
    write(event);
  }
  void write(const tensorboard::Event& event) {
    std::string data;
    DTRAIN_CHECK(event.SerializeToString(&data), "[tensorboard] cannot encode an event for '{}'", path_text(path));
    const std::string record = tfrecord(data);
    const bool written = std::fwrite(record.data(), 1, record.size(), out.get()) == record.size();
    DTRAIN_CHECK(written && std::fflush(out.get()) == 0, "[tensorboard] write to '{}' failed: {}", path_text(path),
                 std::strerror(errno));
  }
};

TensorBoardLog::TensorBoardLog(std::string dir) : dir_(std::move(dir)) {}

TensorBoardLog::~TensorBoardLog() = default;

TensorBoardLog::EventFile& TensorBoardLog::file(const std::string& run) {
  std::unique_ptr<EventFile>& file = files_[run];
  if (!file) file = std::make_unique<EventFile>(std::filesystem::path(dir_) / run);
  return *file;
}

std::string TensorBoardLog::file_of(const std::string& run) const {
  const auto it = files_.find(run);
  return it == files_.end() ? "" : it->second->path;
}

void TensorBoardLog::scalar(const std::string& run, const std::string& tag, int64_t step, float value) {
  EventFile& out = file(run);
  tensorboard::Event event;
  add_value(event, tag, step)->set_simple_value(value);
  out.write(event);
}

void TensorBoardLog::text(const std::string& run, const std::string& tag, int64_t step, const std::string& markdown) {
  EventFile& out = file(run);
  tensorboard::Event event;
  tensorboard::Summary::Value* entry = add_value(event, tag, step);
  entry->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  tensorboard::TensorProto* tensor = entry->mutable_tensor();
  tensor->set_dtype(tensorboard::DT_STRING);
  tensor->mutable_tensor_shape();  // a scalar: a shape with no dims
  tensor->add_string_val(markdown);
  out.write(event);
}

}  // namespace dtrain::train
