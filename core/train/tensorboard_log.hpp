// RUN_DIR/tensorboard/: event files TensorBoard reads (`tensorboard --logdir RUN_DIR/tensorboard`). Each run
// folder under it ("train", "validation", ...: TensorBoard's runs, drawn as curves of one chart per tag) gets,
// the first time it is written to, a file of its own, events.out.tfevents.<unix time>.<host>.<pid>.<n>: TFRecords
// (core/train/tfrecord.hpp) of tensorboard.Event protobufs, the first saying the format ("brain.Event:2"), each
// flushed as it is written. A later writer (a resumed run, an eval) adds files beside them, and TensorBoard
// merges the files of a folder into one run. The protobuf types stay in the .cpp.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace dtrain::train {

class TensorBoardLog {
 public:
  // Writes under `dir`; creates nothing before the first value.
  explicit TensorBoardLog(std::string dir);
  ~TensorBoardLog();
  TensorBoardLog(const TensorBoardLog&) = delete;
  TensorBoardLog& operator=(const TensorBoardLog&) = delete;

  // A scalar as a Summary.Value's simple_value: what TensorBoard's scalar charts and EventAccumulator.Scalars read.
  void scalar(const std::string& run, const std::string& tag, int64_t step, float value);
  // A text summary (plugin "text": a string tensor, shown as Markdown on the Text tab).
  void text(const std::string& run, const std::string& tag, int64_t step, const std::string& markdown);

  const std::string& dir() const { return dir_; }
  // The file a run folder's events go to ("" before its first).
  std::string file_of(const std::string& run) const;

 private:
  struct EventFile;
  EventFile& file(const std::string& run);
  std::string dir_;
  std::map<std::string, std::unique_ptr<EventFile>> files_;
};

}  // namespace dtrain::train
