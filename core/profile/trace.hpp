// A step timeline (train.profile: {start_step: S, steps: K}): what each device of this process did during
// training steps S .. S+K-1 (numbered as metrics.jsonl numbers them, from 1), written as one Chrome trace-event
// JSON file per process (Perfetto and chrome://tracing open it): a track per device with its kernel calls
// (family/method, shapes), its collectives (kind, group, bytes, whether they crossed processes), its data
// waits and checkpoint saves, each inside its "step N"; and a host track with each step as a whole (from the
// first device's start to the last device's end). Times are steady_clock microseconds from the recorder's
// start (the run's).
//
// Recording costs one branch per event site when off (no Recorder, or no device inside a profiled step:
// recording() is one relaxed load). Each device's events go into its own track, written only by the device's
// fiber, so no lock; a device records only while inside a profiled step. When the last device of the process
// has left the window (its step S+K-1 done, or its run over), that device writes the file; a run that ends
// before step S writes nothing. GPU ranks: their kernels run asynchronously on streams, so a kernel call is
// timed by two CUDA events recorded on the rank's stream around its launch (host launch times would mislead),
// resolved when the device leaves the window against a reference event recorded when its stream was idle, and
// written on a track of their own beside the device's (whose collectives, data waits and saves keep host times),
// each with the host's time in the call (`host_us`: launch, allocation, checks).
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/profile/recording.hpp"

namespace dtrain::profile {

// The trace file of process `process` in `folder`: FOLDER/process-P.trace.json.
std::string trace_file(const std::string& folder, int process);

enum class Category { Kernel, Collective, Data, Checkpoint, Step };
const char* category_name(Category category);  // "kernel", "collective", "data", "checkpoint", "step"

struct Arg {
  const char* key;
  int64_t value;
};

struct Event {
  Category category = Category::Step;
  const char* family = "";  // a kernel's family ("gemm"); "" otherwise
  const char* name = "";    // the method, collective kind, "data wait", "checkpoint save", "step"
  int64_t start_ns = 0, duration_ns = 0;
  std::array<Arg, 6> args{};
  int arg_count = 0;
  std::vector<int> group;  // a collective's ranks
  bool crossed_processes = false;
  int64_t step = 0;        // the step it belongs to
  bool on_gpu = false;     // a GPU kernel, timed by CUDA events (its device's kernels track)
  int64_t host_ns = 0;     // a GPU kernel's: the host's time in the call (launch, allocation, checks)
};

// One device's events. Written by the device's fiber alone.
struct Track {
  int rank = 0;
  std::string place;  // "cpu", "cuda:0"
  bool recording = false;  // inside a profiled step
  int64_t step = 0;        // the step it is in (or last was)
  std::vector<Event> events;
  // A GPU rank's: its kernel events' CUDA events (opaque marks, core/kernels/cuda/cuda.hpp), turned into times
  // when the device leaves the window, against `reference`, a mark its idle stream passed at reference_ns.
  bool on_gpu = false;
  struct Marks {
    size_t event;
    void* start;
    void* stop;
    int64_t host_start_ns;  // when the call began on the host
  };
  std::vector<Marks> marks;
  void* reference = nullptr;
  int64_t reference_ns = 0;
};

class Recorder;
namespace detail {
extern std::atomic<Recorder*> recorder;
}  // namespace detail

// The process's recorder while a profiled run is on; one at a time.
class Recorder {
 public:
  // Devices [first_rank, first_rank + local) of this process (each names its place in its track); `process`
  // of `processes`; process_of_rank[r] for every world rank r: whether a group crosses processes.
  Recorder(Window window, int first_rank, int local, int process, int processes, std::vector<int> process_of_rank);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  const Window& window() const { return window_; }
  Track& track(int rank) { return tracks_[size_t(rank - first_rank_)]; }
  // The calling fiber's device's track while it records, else null.
  Track* current_track();
  bool crosses_processes(const std::vector<int>& ranks) const;
  int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
  }

  // From device `rank`'s fiber: step `step` begins / is over (its save included); the device's run is over.
  void begin_step(int rank, int64_t step);
  void end_step(int rank, int64_t step);
  void finish(int rank);
  // Whether the trace file was written (by the last device to leave the window).
  bool written() const { return written_.load(); }

  // The trace of these tracks as Chrome trace-event JSON (the file's text).
  std::string json() const;

 private:
  void leave_window(Track& track);
  void write() const;

  Window window_;
  int first_rank_;
  int process_, processes_;
  std::vector<int> process_of_rank_;
  std::vector<Track> tracks_;
  std::vector<char> left_;  // per track: it left the window (its own fiber writes its entry)
  std::atomic<int> left_count_{0};
  std::atomic<bool> written_{false};
  std::chrono::steady_clock::time_point start_;
};

// The calling device's track while it records (kernels, collectives), or null: call only when recording().
Track* current_track();
// The same for sites that run whether or not a device records (a checkpoint save): one branch when none does.
inline Track* track_if_recording() { return recording() ? current_track() : nullptr; }

// Times its scope as an event of `track`: nothing (one branch) when track is null or not recording.
class Span {
 public:
  Span(Track* track, Category category, const char* family, const char* name, std::initializer_list<Arg> args = {}) {
    if (track != nullptr && track->recording) [[unlikely]]
      start(track, category, family, name, args);
  }
  ~Span() {
    if (track_ != nullptr) [[unlikely]]
      stop();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  // The event being recorded, or null.
  Event* event() { return track_ ? &track_->events[index_] : nullptr; }

 private:
  void start(Track* track, Category category, const char* family, const char* name, std::initializer_list<Arg> args);
  void stop();
  Track* track_ = nullptr;
  size_t index_ = 0;
};

// A kernel call as an event of the calling device's track: a Span on a CPU device; on a GPU device, the CUDA
// events recorded on its stream before and after the launch (the track's Marks).
class KernelSpan {
 public:
  KernelSpan(const char* family, const char* name, std::initializer_list<Arg> args)
      : KernelSpan(current_track(), family, name, args) {}
  ~KernelSpan();
  KernelSpan(const KernelSpan&) = delete;
  KernelSpan& operator=(const KernelSpan&) = delete;

 private:
  KernelSpan(Track* track, const char* family, const char* name, std::initializer_list<Arg> args);
  Span host_;
  Track* gpu_ = nullptr;
  size_t marks_ = 0;
};

}  // namespace dtrain::profile
