#include "engine/process_memory.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "core/error.hpp"
#include "data/idx.hpp"
#include "data/split.hpp"
#include "engine/data_source.hpp"

namespace dtrain {

namespace fs = std::filesystem;

double ProcessMemory::item(const std::string& name) const {
  for (const MemoryItem& it : items)
    if (it.name == name) return it.bytes;
  return 0;
}

namespace {

constexpr double MiB = 1024.0 * 1024.0;

// Measured on this project's Release build (Intel Xeon, 2 cores, glibc 2.36, OpenMPI 4.1):
// - VmHWM of `dtrain --help`: 17,892 KiB: the binary and its libraries as mapped and touched, the CLI.
//   A tiny training (MNIST-format files of 128 images, mesh {batch: 1}, 5 steps) peaks at 22,440 KiB, the
//   help figure plus its data (0.8 MiB), device tensors (1.6 MiB) and one thread's GEMM packing buffers.
// - The same tiny run under `mpirun -np 2` (4 devices a process): 34,176 KiB a process, 8.9 MiB above
//   the single-process run of 4 devices (22,440 + 3 x 938 KiB): MPI's libraries, shared-memory segments
//   and progress thread.
constexpr double kRuntimeBytes = 17892.0 * 1024;
constexpr double kMpiRuntimeBytes = 8.9 * MiB;
// A compute thread's GEMM packing buffers (core/kernels/gemm/gemm_blocked.cpp: A 144 x 256 and B 256 x 2048
// floats, thread_local), its stack and malloc arena header.
constexpr double kThreadBytes = (144.0 * 256 + 256.0 * 2048) * 4 + 256.0 * 1024;
// A fiber's stack (core/fibers.cpp maps 8 MiB of address space; only the pages a rank's calls touch count)
// and its per-rank state: the tiny runs above grew 938 KiB a device, of which ~0.9 MiB were its tensors.
constexpr double kFiberBytes = 64.0 * 1024;
// A std::string's own size plus the heap block of a long one's text: 32 + a malloc header (16).
constexpr double kStringOverhead = 48;

// glibc's allocator as dtrain sets it (core/tensor.cpp: mallopt M_MMAP_THRESHOLD 256 MiB, M_TRIM_THRESHOLD
// 512 MiB, so that a step's tensors are not handed back and faulted in again). Each thread allocates from an
// arena: the main thread from the main arena (one heap grown with sbrk), the others from arenas of their own
// (a thread takes the arena an exited thread left, else makes one). A block below 256 MiB comes from its
// thread's arena, and what is freed there stays resident, to be reused by later blocks of that arena that fit
// (best fit); the arena grows at its top when none does. The main arena is never trimmed (its free top would
// have to pass 512 MiB). Another arena is a chain of heaps of at most 64 MiB each (glibc's HEAP_MAX_SIZE): a
// block that does not fit the top heap starts a new one, a block larger than a heap is mapped on its own, and
// a heap at the top of the chain left wholly free is unmapped (heap_trim). Measured on IMDB (malloc_info at
// phase boundaries): the loaders' second thread's arena reached 88 MiB during the fit, two heaps, and was
// 48 MiB after it, the second heap unmapped; the main arena kept its 119 MiB.
class Arena {
 public:
  explicit Arena(bool main) : main_(main) {}
  // The block's id in the arena.
  int64_t alloc(double bytes) {
    const int64_t id = next_id_++;
    if (!main_ && bytes > kHeapBytes) {  // mapped on its own, unmapped when freed
      mapped_[id] = bytes;
      return id;
    }
    // Best fit among the free chunks in the bins: every free segment but the top heap's free tail (glibc's
    // large bins are searched best-fit first; the top chunk is used only when no bin fits).
    Segment* best = nullptr;
    size_t best_heap = 0;
    for (size_t h = 0; h < heaps_.size(); ++h)
      for (auto it = heaps_[h].segments.begin(); it != heaps_[h].segments.end(); ++it) {
        const bool top_chunk = h + 1 == heaps_.size() && std::next(it) == heaps_[h].segments.end();
        if (it->free && !top_chunk && it->bytes >= bytes && (best == nullptr || it->bytes < best->bytes)) best = &*it, best_heap = h;
      }
    if (best == nullptr) {  // from the top chunk, the top heap grown (or a new heap when it cannot grow enough)
      if (heaps_.empty() || (!main_ && heaps_.back().used_top() + bytes > kHeapBytes)) heaps_.emplace_back();
      Heap& top = heaps_.back();
      if (top.segments.empty() || !top.segments.back().free) top.segments.push_back(Segment{top.end(), bytes, true, -1});
      best = &top.segments.back();
      best->bytes = std::max(best->bytes, bytes);
      best_heap = heaps_.size() - 1;
    }
    Heap& heap = heaps_[best_heap];
    auto it = std::find_if(heap.segments.begin(), heap.segments.end(), [&](const Segment& s) { return &s == best; });
    if (it->bytes > bytes) heap.segments.insert(std::next(it), Segment{it->offset + bytes, it->bytes - bytes, true, -1});
    it->bytes = bytes;
    it->free = false;
    it->id = id;
    heap.high = std::max(heap.high, heap.used_top());
    return id;
  }
  void free(int64_t id) {
    if (mapped_.erase(id) > 0) return;
    for (size_t h = 0; h < heaps_.size(); ++h) {
      auto& segments = heaps_[h].segments;
      auto it = std::find_if(segments.begin(), segments.end(), [&](const Segment& s) { return s.id == id && !s.free; });
      if (it == segments.end()) continue;
      it->free = true;
      it->id = -1;
      if (auto next = std::next(it); next != segments.end() && next->free) {
        it->bytes += next->bytes;
        segments.erase(next);
      }
      if (it != segments.begin()) {
        if (auto previous = std::prev(it); previous->free) {
          previous->bytes += it->bytes;
          segments.erase(it);
        }
      }
      // heap_trim: the top heaps left wholly free go back to the system (never an arena's first heap).
      while (!main_ && heaps_.size() > 1 && heaps_.back().used_top() == 0) heaps_.pop_back();
      return;
    }
    DTRAIN_CHECK(false, "[process_memory] no block {}", id);
  }
  // Resident bytes: every page each heap ever reached (freed ones are not trimmed) and the mapped blocks.
  double resident() const {
    double sum = 0;
    for (const Heap& heap : heaps_) sum += heap.high;
    for (const auto& [id, bytes] : mapped_) sum += bytes;
    return sum;
  }

 private:
  static constexpr double kHeapBytes = 64 * MiB;
  struct Segment {
    double offset, bytes;
    bool free;
    int64_t id;
  };
  struct Heap {
    std::list<Segment> segments;
    double high = 0;
    double end() const { return segments.empty() ? 0 : segments.back().offset + segments.back().bytes; }
    double used_top() const {
      for (auto it = segments.rbegin(); it != segments.rend(); ++it)
        if (!it->free) return it->offset + it->bytes;
      return 0;
    }
  };
  bool main_;
  std::vector<Heap> heaps_;
  std::map<int64_t, double> mapped_;
  int64_t next_id_ = 0;
};

// The process's arenas: the main thread's (0) and the others' (1, 2, ...), by the thread that allocates.
class HeapModel {
 public:
  using Thread = int;
  static constexpr Thread main_thread = 0;

  void alloc(const std::string& name, double bytes, Thread thread) {
    Block block{bytes, thread, bytes >= kMmapThreshold, 0};
    if (block.mapped) mapped_ += bytes;
    else block.id = arena(thread).alloc(bytes);
    DTRAIN_CHECK(blocks_.emplace(name, block).second, "[process_memory] block '{}' twice", name);
    peak_ = std::max(peak_, resident());
  }
  void free(const std::string& name) {
    auto it = blocks_.find(name);
    DTRAIN_CHECK(it != blocks_.end(), "[process_memory] no block '{}'", name);
    const Block block = it->second;
    blocks_.erase(it);
    if (block.mapped) mapped_ -= block.bytes;
    else arena(block.thread).free(block.id);
  }
  double resident() const {
    double sum = mapped_;
    for (const Arena& a : arenas_) sum += a.resident();
    return sum;
  }
  double peak() const { return peak_; }
  double arena_resident(Thread thread) const { return size_t(thread) < arenas_.size() ? arenas_[size_t(thread)].resident() : 0; }
  int arenas() const { return int(arenas_.size()); }

 private:
  struct Block {
    double bytes;
    Thread thread;
    bool mapped;
    int64_t id;
  };
  static constexpr double kMmapThreshold = 256 * MiB;
  Arena& arena(Thread thread) {
    while (int(arenas_.size()) <= thread) arenas_.emplace_back(arenas_.empty());
    return arenas_[size_t(thread)];
  }
  std::vector<Arena> arenas_;
  double mapped_ = 0, peak_ = 0;
  std::map<std::string, Block> blocks_;
};

using Thread = HeapModel::Thread;

// The arena of a loader range's blocks: data/parallel.hpp runs range 0 on the calling (main) thread and
// range k on a thread of its own, which takes the arena the previous call's k-th thread left (an exited
// thread's arena is handed to the next new thread): arena k.
Thread thread_of_range(int range) { return range; }

double file_bytes(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  DTRAIN_CHECK_USAGE(!error, "[process_memory] cannot read the size of '{}': {}", path, error.message());
  return double(size);
}

// An IDX images file's header (count, rows, cols), through zlib when gzipped: 16 bytes, not the pixels.
struct IdxHeader {
  int64_t count = 0, rows = 0, cols = 0;
  bool gzipped = false;
};

IdxHeader idx_header(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  DTRAIN_CHECK_USAGE(file != nullptr, "[process_memory] cannot open '{}'", path);
  unsigned char bytes[16] = {};
  const int got = gzread(file, bytes, sizeof bytes);
  IdxHeader header;
  header.gzipped = gzdirect(file) == 0;
  gzclose(file);
  DTRAIN_CHECK_USAGE(got == 16 && bytes[2] == 0x08 && bytes[3] == 3, "[process_memory] '{}' is not an IDX images file", path);
  const auto word = [&](int at) {
    return int64_t(bytes[at]) << 24 | int64_t(bytes[at + 1]) << 16 | int64_t(bytes[at + 2]) << 8 | int64_t(bytes[at + 3]);
  };
  header.count = word(4), header.rows = word(8), header.cols = word(12);
  return header;
}

// One split of an IDX folder as data/idx.cpp loads it: the file read whole, inflated into a buffer that
// starts at 4x the packed size and doubles, the pixels made floats, then the slice copied out.
// Returns the held blocks' names.
std::vector<std::string> load_idx(HeapModel& heap, const Config& config, const std::string& split_text, const std::string& tag,
                     const Where& where, std::vector<MemoryItem>& items) {
  const std::string name = data::split_name(split_text);
  const data::IdxFiles files = data::find_idx_split(config.data.path, name);
  const IdxHeader header = idx_header(files.images);
  const double pixels = double(header.count * header.rows * header.cols);
  const double packed = file_bytes(files.images);
  heap.alloc(tag + " file", packed, HeapModel::main_thread);
  std::string raw = tag + " file";
  if (header.gzipped) {
    double out = packed * 4 + 4096;
    heap.alloc(tag + " inflated", out, HeapModel::main_thread);
    for (int k = 0; out < pixels + 16; ++k) {  // vector::resize(2x): the new block, then the old one freed
      heap.alloc(tag + " inflated " + std::to_string(k), out * 2, HeapModel::main_thread);
      heap.free(k == 0 ? tag + " inflated" : tag + " inflated " + std::to_string(k - 1));
      out *= 2;
      raw = tag + " inflated " + std::to_string(k);
    }
    if (raw == tag + " file") raw = tag + " inflated";
    heap.free(tag + " file");
  }
  heap.alloc(tag + " pixels", pixels * 4, HeapModel::main_thread);
  heap.alloc(tag + " labels", double(header.count) * 4, HeapModel::main_thread);
  heap.free(raw);
  const data::SplitSlice slice = slice_of_split(config, split_text, header.count, where);
  const double kept = double(slice.end - slice.begin);
  if (kept == double(header.count)) {
    items.push_back({tag, (pixels + double(header.count)) * 4});
    return {tag + " pixels", tag + " labels"};
  }
  const double per_example = pixels / double(header.count) * 4 + 4;
  heap.alloc(tag + " slice", kept * per_example, HeapModel::main_thread);
  heap.free(tag + " pixels");
  heap.free(tag + " labels");
  items.push_back({tag, kept * per_example});
  return {tag + " slice"};
}

// A text split's files (aclImdb's <split>/{neg,pos}, a text folder's <split>/<class>): their sizes, sliced.
struct TextFiles {
  std::vector<double> bytes;  // each file's
  double path_bytes = 0;
  double total() const {
    double sum = 0;
    for (double b : bytes) sum += b;
    return sum;
  }
};

TextFiles text_files(const Config& config, const std::string& split_text, const Where& where) {
  const std::string name = data::split_name(split_text);
  fs::path root = config.data.path;
  std::vector<std::string> classes = config.data.classes;
  if (config.data.dataset == Dataset::imdb) {
    if (!fs::is_directory(root / "train") && !fs::is_directory(root / "test") && fs::is_directory(root / "aclImdb"))
      root /= "aclImdb";
    classes = {"neg", "pos"};
  }
  const fs::path folder = root / name;
  DTRAIN_CHECK_USAGE(fs::is_directory(folder), "[process_memory] no folder '{}'", folder.string());
  if (classes.empty()) {
    for (const auto& entry : fs::directory_iterator(folder))
      if (entry.is_directory()) classes.push_back(entry.path().filename().string());
    std::sort(classes.begin(), classes.end());
  }
  TextFiles files;
  std::vector<std::pair<std::string, double>> listed;
  for (const std::string& label : classes) {
    std::vector<std::pair<std::string, double>> in_class;
    for (const auto& entry : fs::directory_iterator(folder / label))
      if (entry.is_regular_file() && entry.path().extension() == ".txt")
        in_class.emplace_back(entry.path().string(), double(entry.file_size()));
    std::sort(in_class.begin(), in_class.end());
    listed.insert(listed.end(), in_class.begin(), in_class.end());
  }
  const data::SplitSlice slice = slice_of_split(config, split_text, int64_t(listed.size()), where);
  for (int64_t i = slice.begin; i < slice.end; ++i) {
    files.bytes.push_back(listed[size_t(i)].second);
    files.path_bytes += double(listed[size_t(i)].first.size()) + kStringOverhead;
  }
  return files;
}

// Non-zeros of a TF-IDF row (distinct in-vocabulary tokens, "[UNK]" one of them) of a text of `bytes`.
// Calibrated on IMDB's training reviews (Keras' standardization; 5.69 bytes a token, 141 distinct tokens a
// review of 1,325 bytes on average): the distinct tokens of a text grow as tokens^0.91, and the share of
// them a vocabulary of V holds was 0.676 (V = 1,200: 95.2 non-zeros a review), 0.905 (10,000), 0.95
// (20,000), all of them from ~200,000; interpolated in log V between.
double tfidf_nonzeros(double bytes, double vocabulary) {
  const double distinct = std::pow(std::max(1.0, bytes / 5.69), 0.91);
  static const double points[][2] = {{2, 0.0}, {1200, 0.676}, {10000, 0.905}, {20000, 0.95}, {200000, 1.0}};
  double share = 1.0;
  for (size_t k = 1; k < std::size(points); ++k) {
    if (vocabulary <= points[k][0]) {
      const double t = std::log(vocabulary / points[k - 1][0]) / std::log(points[k][0] / points[k - 1][0]);
      share = points[k - 1][1] + std::max(0.0, t) * (points[k][1] - points[k - 1][1]);
      break;
    }
  }
  return std::clamp(distinct * share, 1.0, vocabulary);
}

double sum_nonzeros(const TextFiles& files, double vocabulary) {
  double sum = 0;
  for (double b : files.bytes) sum += tfidf_nonzeros(b, vocabulary);
  return sum;
}

// Distinct tokens of a corpus of `bytes` (Heaps' law through IMDB's training split: 121,364 distinct tokens in
// 33.1 MB), for the vocabulary's own size.
double corpus_tokens(double bytes) { return 121364.0 * std::pow(bytes / 33.13e6, 0.6); }

// The texts as read (data/text_folder.cpp, range r of the files on range r's thread): each file's text and
// path as strings.
void read_texts(HeapModel& heap, const std::string& tag, const TextFiles& files, int ranges) {
  const double bytes = files.total() + files.path_bytes + double(files.bytes.size()) * kStringOverhead;
  for (int r = 0; r < ranges; ++r) heap.alloc(tag + " texts " + std::to_string(r), bytes / ranges, thread_of_range(r));
}

void free_texts(HeapModel& heap, const std::string& tag, int ranges) {
  for (int r = 0; r < ranges; ++r) heap.free(tag + " texts " + std::to_string(r));
}

// A std::vector of `n` elements of `size` bytes grown by push_back from empty (libstdc++ doubles it): its
// capacity is the power of two at or above n; while it doubles the last time, the old half is still held.
double pushed_capacity(double n, double size) { return std::exp2(std::ceil(std::log2(std::max(1.0, n)))) * size; }
void push_vector(HeapModel& heap, const std::string& name, double n, double size, Thread thread) {
  const double capacity = pushed_capacity(n, size);
  if (capacity > size) {
    heap.alloc(name + " (half)", capacity / 2, thread);
    heap.alloc(name, capacity, thread);
    heap.free(name + " (half)");
  } else {
    heap.alloc(name, capacity, thread);
  }
}

// Tokens of a text of `bytes` (Keras' standardization of IMDB's reviews: 5.69 bytes a token).
double tokens_of(double bytes) { return bytes / 5.69; }

// The token counter of a text of `bytes` (data/tfidf.cpp's hash table and token text): heaptrack measured
// 44.9 MB for IMDB's 33.1 MB on 2 ranges, growing with the distinct tokens (Heaps' law, below).
double counter_bytes(double bytes) { return 22.45e6 * std::pow(bytes / 16.57e6, 0.6); }

// The vectorizer fit (data/tfidf.cpp fit_transform; int mode runs it too and keeps only the vocabulary), as
// its code holds memory, range r on range r's thread:
// 1. each range's token ids (reserved at its bytes / 5, 4 bytes each), offsets and token counter;
// 2. on the main thread, the counters merged into range 0's, the vocabulary sorted out of it;
// 3. each range's TF-IDF rows (index and value, 4 bytes each, a non-zero): range 0 reserves half of ALL
//    ranges' tokens, the others half of their own; a vector that needs more doubles;
// 4. on the main thread, the other ranges' rows appended to range 0's: when the non-zeros pass half the
//    tokens (a large vocabulary: IMDB at 20,000 tokens has 0.57 non-zeros a token) range 0's vectors move to
//    blocks of all the non-zeros, the reserved ones held until the copy is done (IMDB int mode: the main
//    arena grew 93 -> 119 MiB there).
// Returns the name of range 0's rows block: TF-IDF mode keeps it as the training split, int mode frees it with
// the rest of the fit (end_fit).
std::string fit_vectorizer(HeapModel& heap, const TextFiles& files, double vocabulary, int ranges) {
  const double text = files.total();
  const double docs = double(files.bytes.size());
  const double tokens = tokens_of(text), nonzeros = sum_nonzeros(files, vocabulary);
  for (int r = 0; r < ranges; ++r) {
    const std::string k = std::to_string(r);
    heap.alloc("fit token ids " + k, (text / ranges / 5 + 16) * 4 + (docs / ranges + 1) * 8, thread_of_range(r));
    heap.alloc("fit counter " + k, counter_bytes(text / ranges), thread_of_range(r));
  }
  if (ranges > 1) heap.alloc("fit counter merged", counter_bytes(text) - counter_bytes(text / ranges), HeapModel::main_thread);
  const double distinct = corpus_tokens(text);
  heap.alloc("fit order", distinct * 8 + vocabulary * (kStringOverhead + 4), HeapModel::main_thread);
  // Range r's rows: capacity reserved, doubled while its non-zeros pass it.
  double rows_capacity_0 = 0;
  for (int r = 0; r < ranges; ++r) {
    const std::string k = std::to_string(r);
    const double reserved = (r == 0 ? tokens : tokens / ranges) / 2;
    double capacity = reserved;
    while (capacity < nonzeros / ranges) capacity *= 2;
    if (r > 0) heap.alloc("fit remapped " + k, distinct / ranges * 4, thread_of_range(r));
    heap.alloc("fit offsets " + k, (r == 0 ? docs : docs / ranges) * 8, thread_of_range(r));
    if (capacity > reserved) heap.alloc("fit rows (half) " + k, capacity * 4, thread_of_range(r));  // the two vectors' old halves
    heap.alloc("fit rows " + k, capacity * 8, thread_of_range(r));
    if (capacity > reserved) heap.free("fit rows (half) " + k);
    if (r == 0) rows_capacity_0 = capacity;
  }
  std::string rows = "fit rows 0";
  if (ranges > 1 && nonzeros > rows_capacity_0) {  // the append moves range 0's rows: old and new held at once
    heap.alloc("fit rows appended", nonzeros * 8, HeapModel::main_thread);
    heap.free("fit rows 0");
    rows = "fit rows appended";
  }
  for (int r = 1; r < ranges; ++r) heap.free("fit rows " + std::to_string(r));
  return rows;
}

// The fit's working memory freed; `rows` (fit_vectorizer's) too unless kept as the training split.
void end_fit(HeapModel& heap, int ranges, const std::string& rows, bool keeps_rows) {
  for (int r = 0; r < ranges; ++r) {
    const std::string k = std::to_string(r);
    heap.free("fit token ids " + k);
    heap.free("fit counter " + k);
    heap.free("fit offsets " + k);
    if (r > 0) heap.free("fit remapped " + k);
  }
  if (ranges > 1) heap.free("fit counter merged");
  heap.free("fit order");
  if (!keeps_rows) heap.free(rows);
}

// A split's vectorized rows: token ids (dense floats, one block made on the main thread) or TF-IDF
// (data/tfidf.cpp transform: each range's rows pushed into vectors of its own, then range 0's grown on the
// main thread to hold the others', appended, and theirs freed).
double vectorize(HeapModel& heap, const Config& config, const std::string& tag, const TextFiles& files, double vocabulary,
                 int ranges) {
  const double examples = double(files.bytes.size());
  const VectorizerConfig& settings = config.data.vectorizer;
  if (settings.mode == "int") {
    const double bytes = examples * double(settings.output_sequence_length) * 4 + examples * 4;
    heap.alloc(tag, bytes, HeapModel::main_thread);
    return bytes;
  }
  const double nonzeros = sum_nonzeros(files, vocabulary);
  for (int r = 0; r < ranges; ++r) {
    const std::string k = std::to_string(r);
    push_vector(heap, tag + " indices " + k, nonzeros / ranges, 4, thread_of_range(r));
    push_vector(heap, tag + " values " + k, nonzeros / ranges, 4, thread_of_range(r));
    push_vector(heap, tag + " offsets " + k, examples / ranges, 8, thread_of_range(r));
  }
  const double rows = nonzeros * 8 + (examples + 1) * 8 + examples * 4;
  if (ranges > 1 && pushed_capacity(nonzeros / ranges, 4) < nonzeros * 4) {  // appending moves range 0's vectors
    heap.alloc(tag, rows, HeapModel::main_thread);
    for (int r = 0; r < ranges; ++r)
      for (const char* part : {" indices ", " values ", " offsets "}) heap.free(tag + part + std::to_string(r));
  } else {
    for (int r = 1; r < ranges; ++r)
      for (const char* part : {" indices ", " values ", " offsets "}) heap.free(tag + part + std::to_string(r));
    heap.alloc(tag, examples * 4, HeapModel::main_thread);  // the labels; the rows stay where range 0 made them
  }
  return rows;
}

int cores_per_process(int processes) {
  return std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, processes));
}

}  // namespace

ProcessMemory process_memory(const Config& config, int processes, double device_bytes_per_process) {
  processes = std::max(1, processes);
  const int devices = std::max(1, config.mesh.num_devices() / processes);
  const int cores = cores_per_process(processes);
  ProcessMemory memory;
  std::vector<MemoryItem>& items = memory.items;
  HeapModel heap;
  const DataConfig& data = config.data;
  int ranges_used = 1;  // the loaders' threads: range 0 on the main thread, range k on arena k

  if (data.dataset == Dataset::mnist) {
    const std::vector<std::string> train = load_idx(heap, config, data.train_split, "train split", config.where("data.train_split"), items);
    if (data.validation_fraction > 0) {  // Dataset::slice copies both parts
      const double whole = items.back().bytes;
      const double kept = whole * (1 - data.validation_fraction);
      heap.alloc("validation split", whole - kept, HeapModel::main_thread);
      heap.alloc("train kept", kept, HeapModel::main_thread);
      for (const std::string& block : train) heap.free(block);
      items.back().bytes = kept;
      items.push_back({"validation split", whole - kept});
    } else if (!data.validation_split.empty()) {
      load_idx(heap, config, data.validation_split, "validation split", config.where("data.validation_split"), items);
    }
    load_idx(heap, config, data.test_split, "test split", config.where("data.test_split"), items);
  } else if (data.dataset == Dataset::imdb || data.dataset == Dataset::text_folder) {
    const int ranges = cores;  // data/parallel.hpp default_threads(): the process's cores
    ranges_used = ranges;
    TextFiles train = text_files(config, data.train_split, config.where("data.train_split"));
    TextFiles validation;
    if (data.validation_fraction > 0) {
      const auto kept = size_t(std::floor(double(train.bytes.size()) * (1 - data.validation_fraction)));
      validation.bytes.assign(train.bytes.begin() + ptrdiff_t(kept), train.bytes.end());
      train.bytes.resize(kept);
    } else if (!data.validation_split.empty()) {
      validation = text_files(config, data.validation_split, config.where("data.validation_split"));
    }
    const double train_text = train.total();
    const VectorizerConfig& settings = data.vectorizer;
    const bool ids = settings.mode == "int";
    // The vocabulary: max_tokens (less when the texts have fewer distinct tokens); int mode's columns are its
    // tokens less "" (data/text_ids.cpp fits TF-IDF on max_tokens - 1).
    const double distinct = corpus_tokens(train_text);
    const double columns = std::min(double(ids ? settings.max_tokens - 1 : settings.max_tokens), distinct + 1);
    read_texts(heap, "train", train, ranges);
    const std::string fitted_rows = fit_vectorizer(heap, train, columns, ranges);
    end_fit(heap, ranges, fitted_rows, !ids);
    heap.alloc("train labels", double(train.bytes.size()) * 4, HeapModel::main_thread);
    const double train_rows = ids ? vectorize(heap, config, "train split", train, columns, ranges)
                                  : sum_nonzeros(train, columns) * 8 + double(train.bytes.size() + 1) * 8 +
                                        double(train.bytes.size()) * 4;
    items.push_back({"train split", train_rows});
    // The vocabulary's strings and idf weights, and its lookup table (16 bytes a slot, at most half full).
    const double vocabulary_bytes = columns * (kStringOverhead + 8 + 4 + 32);
    heap.alloc("vectorizer", vocabulary_bytes, HeapModel::main_thread);
    items.push_back({"vectorizer", vocabulary_bytes});
    if (!validation.bytes.empty()) {
      read_texts(heap, "validation", validation, ranges);
      items.push_back({"validation split", vectorize(heap, config, "validation split", validation, columns, ranges)});
      free_texts(heap, "validation", ranges);
    }
    free_texts(heap, "train", ranges);
    TextFiles test = text_files(config, data.test_split, config.where("data.test_split"));
    read_texts(heap, "test", test, ranges);
    items.push_back({"test split", vectorize(heap, config, "test split", test, columns, ranges)});
    free_texts(heap, "test", ranges);
  } else {
    // arrays, csv and image folders: not estimated here (their loaders' memory is not modelled yet).
    items.push_back({"data set (not estimated for dataset " + to_string(data.dataset) + ")", 0});
  }
  const double loading_peak = heap.peak();
  // What the main arena holds after loading: the loaders' freed blocks stay resident there, unused by training.
  const double main_kept = heap.arena_resident(HeapModel::main_thread);

  // Training: the ranks' tensors and the threads' buffers, allocated by the fibers' threads (core/fibers.hpp:
  // min(devices, cores) threads, fiber i on thread i % threads, so each thread makes its share of the tensors).
  // Fiber thread t takes an exited thread's arena: t + 1, which the loaders' range t + 1 left (its blocks all
  // freed, its first heap still resident) when there was one, else a new arena. The main arena's free holes
  // left by the loaders are not reused: no fiber runs on the main thread.
  const int threads = std::min(devices, cores);
  const double runtime = kRuntimeBytes + (processes > 1 ? kMpiRuntimeBytes : 0);
  const double thread_bytes = threads * kThreadBytes + devices * kFiberBytes;
  const double share = device_bytes_per_process / threads;
  const double piece = std::max(MiB, share / 256);  // a step's tensors are many blocks, freed and made again
  for (int t = 0; t < threads; ++t) {
    int pieces = 0;
    for (double left = share; left > 0; left -= piece)
      heap.alloc(fmt::format("device tensors {} {}", t, pieces++), std::min(piece, left), t + 1);
    heap.alloc(fmt::format("thread {}", t), thread_bytes / threads, t + 1);
  }
  // data.prefetch: one more thread reading ahead (its blocks are the plan's input batches), its own arena.
  const double prefetch_thread = data.prefetch > 0 ? 256.0 * 1024 : 0;
  if (prefetch_thread > 0) heap.alloc("prefetch thread", prefetch_thread, std::max(ranges_used, threads) + 1);
  items.push_back({"device tensors", device_bytes_per_process});
  items.push_back({"compute threads and fibers", thread_bytes});
  if (prefetch_thread > 0) items.push_back({"prefetch thread", prefetch_thread});
  items.push_back({"runtime", runtime});
  items.push_back({"loading, at its peak", loading_peak});
  items.push_back({"loaders' memory the main thread keeps", main_kept});
  memory.peak_bytes = runtime + heap.peak();
  return memory;
}

}  // namespace dtrain
