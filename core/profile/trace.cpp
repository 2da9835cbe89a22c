#include "core/profile/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fibers.hpp"
#include "core/kernels/cuda/cuda.hpp"

namespace dtrain::profile {

std::atomic<int> detail::recording_tracks{0};
std::atomic<Recorder*> detail::recorder{nullptr};

std::string trace_file(const std::string& folder, int process) {
  return (std::filesystem::path(folder) / fmt::format("process-{}.trace.json", process)).string();
}

const char* category_name(Category category) {
  switch (category) {
    case Category::Kernel: return "kernel";
    case Category::Collective: return "collective";
    case Category::Data: return "data";
    case Category::Checkpoint: return "checkpoint";
    case Category::Step: return "step";
  }
  return "?";
}

Recorder::Recorder(Window window, int first_rank, int local, int process, int processes,
                   std::vector<int> process_of_rank)
    : window_(std::move(window)),
      first_rank_(first_rank),
      process_(process),
      processes_(processes),
      process_of_rank_(std::move(process_of_rank)),
      tracks_(size_t(local)),
      left_(size_t(local), 0),
      start_(std::chrono::steady_clock::now()) {
  for (size_t i = 0; i < tracks_.size(); ++i) {
    tracks_[i].rank = first_rank + int(i);
    tracks_[i].place = "cpu";
  }
  Recorder* none = nullptr;
  DTRAIN_CHECK(detail::recorder.compare_exchange_strong(none, this), "[profile] a profiled run is already on");
}

Recorder::~Recorder() {
  for (Track& track : tracks_)
    if (track.recording) detail::recording_tracks.fetch_sub(1);
  detail::recorder.store(nullptr);
}

Track* Recorder::current_track() {
  const auto* device = static_cast<const DeviceContext*>(fibers::local(fibers::Slot::Device));
  if (device == nullptr) return nullptr;
  const int index = device->rank - first_rank_;
  if (index < 0 || size_t(index) >= tracks_.size()) return nullptr;
  Track& track = tracks_[size_t(index)];
  return track.recording ? &track : nullptr;
}

Track* current_track() {
  Recorder* recorder = detail::recorder.load(std::memory_order_acquire);
  return recorder ? recorder->current_track() : nullptr;
}

bool Recorder::crosses_processes(const std::vector<int>& ranks) const {
  for (const int rank : ranks)
    if (size_t(rank) >= process_of_rank_.size() || process_of_rank_[size_t(rank)] != process_) return true;
  return false;
}

void Recorder::begin_step(int rank, int64_t step) {
  Track& track = this->track(rank);
  track.step = step;
  if (!window_.holds(step) || left_[size_t(rank - first_rank_)]) return;
  if (track.on_gpu && track.reference == nullptr) {  // the GPU's clock against the host's, once a window
    kernels::synchronize_rank_stream();
    track.reference = kernels::cuda_record_mark();
    kernels::cuda_mark_elapsed_ms(track.reference, track.reference);  // waits for it: the stream was idle
    track.reference_ns = now_ns();
  }
  track.recording = true;
  detail::recording_tracks.fetch_add(1, std::memory_order_relaxed);
  Event event;
  event.category = Category::Step;
  event.name = "step";
  event.step = step;
  event.start_ns = now_ns();
  track.events.push_back(std::move(event));
}

void Recorder::end_step(int rank, int64_t step) {
  Track& track = this->track(rank);
  if (!track.recording) return;
  // The step's own event is the last step event: every span inside it has ended.
  for (auto it = track.events.rbegin(); it != track.events.rend(); ++it) {
    if (it->category == Category::Step) {
      it->duration_ns = now_ns() - it->start_ns;
      break;
    }
  }
  track.recording = false;
  detail::recording_tracks.fetch_sub(1, std::memory_order_relaxed);
  if (step >= window_.start_step + window_.steps - 1) leave_window(track);
}

void Recorder::finish(int rank) {
  Track& track = this->track(rank);
  if (track.recording) end_step(rank, track.step);
  if (!left_[size_t(rank - first_rank_)]) leave_window(track);
}

namespace {

// A GPU track's kernel events get their times from their marks (each waited for), and the marks are freed.
void resolve_marks(Track& track) {
  for (const Track::Marks& marks : track.marks) {
    Event& event = track.events[marks.event];
    const double start_ms = kernels::cuda_mark_elapsed_ms(track.reference, marks.start);
    const double duration_ms = kernels::cuda_mark_elapsed_ms(marks.start, marks.stop);
    event.start_ns = track.reference_ns + int64_t(start_ms * 1e6);
    event.duration_ns = int64_t(duration_ms * 1e6);
    kernels::cuda_release_mark(marks.start);
    kernels::cuda_release_mark(marks.stop);
  }
  track.marks.clear();
  if (track.reference != nullptr) kernels::cuda_release_mark(track.reference);
  track.reference = nullptr;
}

}  // namespace

void Recorder::leave_window(Track& track) {
  resolve_marks(track);
  left_[size_t(track.rank - first_rank_)] = 1;
  // The last device of the process to leave writes: the others record no more (acq_rel: their events are seen).
  if (left_count_.fetch_add(1, std::memory_order_acq_rel) + 1 != int(tracks_.size())) return;
  bool any = false;
  for (const Track& t : tracks_) any = any || !t.events.empty();
  if (!any) return;  // the run ended before the window
  write();
  written_.store(true);
}

namespace {

// Nanoseconds as the trace's microseconds, to the nanosecond.
std::string micros(int64_t ns) { return fmt::format("{}.{:03}", ns / 1000, ns % 1000); }

// A GPU device's kernels track: beside its own (rank + 1), after every device's.
int gpu_tid(int rank) { return 100000 + rank + 1; }

std::string ranks_text(const std::vector<int>& ranks) {
  return fmt::format("[{}]", fmt::join(ranks, ","));
}

}  // namespace

std::string Recorder::json() const {
  // tid 0: the host track; device rank r: tid r + 1, its GPU kernels (CUDA events) tid 100000 + r + 1.
  std::string out = "{\"displayTimeUnit\": \"ms\",\n";
  out += fmt::format("\"otherData\": {{\"start_step\": {}, \"steps\": {}, \"process\": {}, \"processes\": {}}},\n",
                     window_.start_step, window_.steps, process_, processes_);
  out += "\"traceEvents\": [\n";
  const int pid = process_;
  std::vector<std::string> lines;
  const int last_rank = first_rank_ + int(tracks_.size()) - 1;
  lines.push_back(fmt::format(
      "{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {}, \"tid\": 0, \"args\": {{\"name\": \"process {} of {} "
      "(devices {}-{})\"}}}}",
      pid, process_, processes_, first_rank_, last_rank));
  lines.push_back(fmt::format(
      "{{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": {}, \"tid\": 0, \"args\": {{\"sort_index\": {}}}}}",
      pid, pid));
  lines.push_back(fmt::format(
      "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {}, \"tid\": 0, \"args\": {{\"name\": \"host (steps)\"}}}}",
      pid));
  for (const Track& track : tracks_) {
    lines.push_back(fmt::format(
        "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {}, \"tid\": {}, \"args\": {{\"name\": \"device {} "
        "({})\"}}}}",
        pid, track.rank + 1, track.rank, track.place));
    lines.push_back(fmt::format(
        "{{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": {}, \"tid\": {}, \"args\": {{\"sort_index\": {}}}}}",
        pid, track.rank + 1, track.rank + 1));
    if (!track.on_gpu) continue;
    lines.push_back(fmt::format(
        "{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {}, \"tid\": {}, \"args\": {{\"name\": \"device {} "
        "({}) kernels, CUDA events\"}}}}",
        pid, gpu_tid(track.rank), track.rank, track.place));
    lines.push_back(fmt::format(
        "{{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": {}, \"tid\": {}, \"args\": {{\"sort_index\": {}}}}}",
        pid, gpu_tid(track.rank), gpu_tid(track.rank)));
  }
  // The host track: each step from the first device's start to the last device's end.
  std::map<int64_t, std::pair<int64_t, int64_t>> steps;
  for (const Track& track : tracks_) {
    for (const Event& event : track.events) {
      if (event.category != Category::Step) continue;
      auto [it, fresh] = steps.try_emplace(event.step, event.start_ns, event.start_ns + event.duration_ns);
      if (!fresh) {
        it->second.first = std::min(it->second.first, event.start_ns);
        it->second.second = std::max(it->second.second, event.start_ns + event.duration_ns);
      }
    }
  }
  for (const auto& [step, span] : steps) {
    lines.push_back(fmt::format(
        "{{\"ph\": \"X\", \"cat\": \"step\", \"name\": \"step {}\", \"ts\": {}, \"dur\": {}, \"pid\": {}, \"tid\": 0, "
        "\"args\": {{\"step\": {}, \"devices\": {}}}}}",
        step, micros(span.first), micros(span.second - span.first), pid, step, tracks_.size()));
  }
  for (const Track& track : tracks_) {
    for (const Event& event : track.events) {
      const int tid = event.on_gpu ? gpu_tid(track.rank) : track.rank + 1;
      std::string name, args;
      switch (event.category) {
        case Category::Step:
          name = fmt::format("step {}", event.step);
          args = fmt::format("\"step\": {}", event.step);
          break;
        case Category::Kernel:
          name = fmt::format("{}/{}", event.family, event.name);
          args = fmt::format("\"family\": \"{}\", \"kernel\": \"{}\"", event.family, event.name);
          if (event.on_gpu) args += fmt::format(", \"host_us\": {}", micros(event.host_ns));
          break;
        case Category::Collective:
          name = event.name;
          args = fmt::format("\"kind\": \"{}\", \"group\": {}, \"crossed_processes\": {}", event.name,
                             ranks_text(event.group), event.crossed_processes ? "true" : "false");
          break;
        default:
          name = event.name;
          break;
      }
      for (int i = 0; i < event.arg_count; ++i)
        args += fmt::format("{}\"{}\": {}", args.empty() ? "" : ", ", event.args[size_t(i)].key, event.args[size_t(i)].value);
      if (event.category != Category::Step) args += fmt::format("{}\"step\": {}", args.empty() ? "" : ", ", event.step);
      lines.push_back(fmt::format(
          "{{\"ph\": \"X\", \"cat\": \"{}\", \"name\": \"{}\", \"ts\": {}, \"dur\": {}, \"pid\": {}, \"tid\": {}, "
          "\"args\": {{{}}}}}",
          category_name(event.category), name, micros(event.start_ns), micros(event.duration_ns), pid, tid, args));
    }
  }
  out += fmt::format("{}", fmt::join(lines, ",\n"));
  out += "\n]}\n";
  return out;
}

void Recorder::write() const {
  const std::filesystem::path path(window_.file);
  std::error_code error;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), error);
  const std::string text = json();
  const std::string partial = window_.file + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    DTRAIN_CHECK(out.good(), "[profile] cannot write the trace file '{}'", partial);
  }
  std::filesystem::rename(partial, path, error);
  DTRAIN_CHECK(!error, "[profile] cannot write the trace file '{}': {}", window_.file, error.message());
}

namespace {

// A new event of `track`, in its current step.
Event& add_event(Track& track, Category category, const char* family, const char* name,
                 std::initializer_list<Arg> args) {
  Event& event = track.events.emplace_back();
  event.category = category;
  event.family = family;
  event.name = name;
  event.step = track.step;
  for (const Arg& arg : args) {
    if (event.arg_count == int(event.args.size())) break;
    event.args[size_t(event.arg_count++)] = arg;
  }
  return event;
}

}  // namespace

void Span::start(Track* track, Category category, const char* family, const char* name,
                 std::initializer_list<Arg> args) {
  track_ = track;
  index_ = track->events.size();
  Event& event = add_event(*track, category, family, name, args);
  Recorder* recorder = detail::recorder.load(std::memory_order_relaxed);
  event.start_ns = recorder ? recorder->now_ns() : 0;
}

void Span::stop() {
  Recorder* recorder = detail::recorder.load(std::memory_order_relaxed);
  Event& event = track_->events[index_];
  event.duration_ns = recorder ? recorder->now_ns() - event.start_ns : 0;
}

KernelSpan::KernelSpan(Track* track, const char* family, const char* name, std::initializer_list<Arg> args)
    : host_(track != nullptr && !track->on_gpu ? track : nullptr, Category::Kernel, family, name, args) {
  if (track == nullptr || !track->on_gpu || !track->recording) return;
  gpu_ = track;
  add_event(*track, Category::Kernel, family, name, args).on_gpu = true;
  marks_ = track->marks.size();
  track->marks.push_back({track->events.size() - 1, kernels::cuda_record_mark(), nullptr, 0});
  // The call's own host time: after the start mark is recorded, before the stop mark.
  Recorder* recorder = detail::recorder.load(std::memory_order_relaxed);
  track->marks.back().host_start_ns = recorder ? recorder->now_ns() : 0;
}

KernelSpan::~KernelSpan() {
  if (gpu_ == nullptr) [[likely]]
    return;
  Track::Marks& marks = gpu_->marks[marks_];
  Recorder* recorder = detail::recorder.load(std::memory_order_relaxed);
  if (recorder) gpu_->events[marks.event].host_ns = recorder->now_ns() - marks.host_start_ns;
  marks.stop = kernels::cuda_record_mark();
}

}  // namespace dtrain::profile
