#include "engine/process_memory.hpp"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <thread>

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
// 512 MiB, so that a step's tensors are not handed back and faulted in again): a block below 256 MiB comes
// from an arena's heap, and what is freed there stays resident, to be reused by later blocks that fit; the
// heap grows at its top when none does. VmHWM is then each arena's top, not the live bytes: MNIST's loading
// frees its inflated files (36 MB) but the test split's pixels (31 MB) fit none of the holes, and RSS polled
// every 2 ms never fell while loading (128 MiB after it, for 87 MiB of data; this model: 125 MiB).
// Two arenas are modelled: the main thread's and one for the worker threads (the loaders' threads end
// before the fibers' start, whose blocks then reuse their arena).
class Arena {
 public:
  // The block's offset in the arena.
  double alloc(double bytes) {
    // Best fit among the free segments (glibc's large bins are searched best-fit first).
    auto best = segments_.end();
    for (auto it = segments_.begin(); it != segments_.end(); ++it)
      if (it->free && it->bytes >= bytes && (best == segments_.end() || it->bytes < best->bytes)) best = it;
    if (best == segments_.end()) {
      if (!segments_.empty() && segments_.back().free) {  // the top chunk grows
        best = std::prev(segments_.end());
        best->bytes = bytes;
      } else {
        best = segments_.insert(segments_.end(), Segment{top(), bytes, false});
      }
    }
    if (best->bytes > bytes) segments_.insert(std::next(best), Segment{best->offset + bytes, best->bytes - bytes, true});
    best->bytes = bytes;
    best->free = false;
    high_ = std::max(high_, top_used());
    return best->offset;
  }
  void free(double offset) {
    auto it = std::find_if(segments_.begin(), segments_.end(), [&](const Segment& s) { return s.offset == offset && !s.free; });
    DTRAIN_CHECK(it != segments_.end(), "[process_memory] no block at {}", offset);
    it->free = true;
    if (auto next = std::next(it); next != segments_.end() && next->free) {
      it->bytes += next->bytes;
      segments_.erase(next);
    }
    if (it != segments_.begin()) {
      if (auto previous = std::prev(it); previous->free) {
        previous->bytes += it->bytes;
        segments_.erase(it);
      }
    }
  }
  // Resident bytes: every page the heap ever reached (freed ones are not trimmed).
  double resident() const { return high_; }

 private:
  struct Segment {
    double offset, bytes;
    bool free;
  };
  double top() const { return segments_.empty() ? 0 : segments_.back().offset + segments_.back().bytes; }
  double top_used() const {
    for (auto it = segments_.rbegin(); it != segments_.rend(); ++it)
      if (!it->free) return it->offset + it->bytes;
    return 0;
  }
  std::list<Segment> segments_;
  double high_ = 0;
};

class HeapModel {
 public:
  enum class Thread { main, worker };

  void alloc(const std::string& name, double bytes, Thread thread) {
    Block block{bytes, thread, bytes >= kMmapThreshold, 0};
    if (block.mapped) mapped_ += bytes;
    else block.offset = arena(thread).alloc(bytes);
    blocks_.emplace(name, block);
    peak_ = std::max(peak_, resident());
  }
  void free(const std::string& name) {
    auto it = blocks_.find(name);
    DTRAIN_CHECK(it != blocks_.end(), "[process_memory] no block '{}'", name);
    const Block block = it->second;
    blocks_.erase(it);
    if (block.mapped) mapped_ -= block.bytes;
    else arena(block.thread).free(block.offset);
  }
  double resident() const { return main_.resident() + worker_.resident() + mapped_; }
  double peak() const { return peak_; }

 private:
  struct Block {
    double bytes;
    Thread thread;
    bool mapped;
    double offset;
  };
  static constexpr double kMmapThreshold = 256 * MiB;
  Arena& arena(Thread thread) { return thread == Thread::main ? main_ : worker_; }
  Arena main_, worker_;
  double mapped_ = 0, peak_ = 0;
  std::map<std::string, Block> blocks_;
};

using Thread = HeapModel::Thread;

// The arena of a loader range's blocks. data/parallel.hpp runs range 0 on the calling thread, but the
// loaders' blocks are modelled as one block an item, far coarser than the real ones (strings, tables and
// vectors grown by doubling, freed in pieces between live ones): modelled in the main arena, the fit's freed
// blocks become one hole that takes the later token ids whole, which the real fragmented holes do not
// (IMDB int mode: 0.76 of VmHWM under mpirun -np 2 that way, 1.15 with every range in the worker arena).
Thread thread_of_range(int) { return Thread::worker; }

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
  heap.alloc(tag + " file", packed, Thread::main);
  std::string raw = tag + " file";
  if (header.gzipped) {
    double out = packed * 4 + 4096;
    heap.alloc(tag + " inflated", out, Thread::main);
    for (int k = 0; out < pixels + 16; ++k) {  // vector::resize(2x): the new block, then the old one freed
      heap.alloc(tag + " inflated " + std::to_string(k), out * 2, Thread::main);
      heap.free(k == 0 ? tag + " inflated" : tag + " inflated " + std::to_string(k - 1));
      out *= 2;
      raw = tag + " inflated " + std::to_string(k);
    }
    if (raw == tag + " file") raw = tag + " inflated";
    heap.free(tag + " file");
  }
  heap.alloc(tag + " pixels", pixels * 4, Thread::main);
  heap.alloc(tag + " labels", double(header.count) * 4, Thread::main);
  heap.free(raw);
  const data::SplitSlice slice = slice_of_split(config, split_text, header.count, where);
  const double kept = double(slice.end - slice.begin);
  if (kept == double(header.count)) {
    items.push_back({tag, (pixels + double(header.count)) * 4});
    return {tag + " pixels", tag + " labels"};
  }
  const double per_example = pixels / double(header.count) * 4 + 4;
  heap.alloc(tag + " slice", kept * per_example, Thread::main);
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

// The texts as read (data/text_folder.cpp, on worker threads): each file's text and path as strings.
void read_texts(HeapModel& heap, const std::string& tag, const TextFiles& files, int ranges) {
  const double bytes = files.total() + files.path_bytes + double(files.bytes.size()) * kStringOverhead;
  for (int r = 0; r < ranges; ++r) heap.alloc(tag + " texts " + std::to_string(r), bytes / ranges, thread_of_range(r));
}

void free_texts(HeapModel& heap, const std::string& tag, int ranges) {
  for (int r = 0; r < ranges; ++r) heap.free(tag + " texts " + std::to_string(r));
}

// The vectorizer fit (data/tfidf.cpp fit_transform: int mode runs it too and keeps only the vocabulary),
// on `ranges` worker threads: each range's token ids (4 bytes a token, reserved at bytes / 5), its token
// counter (hash table and token text: heaptrack measured 44.9 MB for IMDB's 33.1 MB on 2 ranges, growing
// with a range's distinct tokens) and its TF-IDF rows (index and value a non-zero, grown by doubling and
// then appended: 1.9x the final rows measured, V = 1,200 and 10,000). keeps_rows: TF-IDF mode keeps the
// rows as the training split (a block of its own, made by the caller); the rest is the fit's.
void fit_vectorizer(HeapModel& heap, const TextFiles& files, double vocabulary, int ranges, bool keeps_rows) {
  const double text = files.total();
  const double rows = sum_nonzeros(files, vocabulary) * 8 + double(files.bytes.size() + 1) * 8;
  for (int r = 0; r < ranges; ++r) {
    const std::string k = std::to_string(r);
    heap.alloc("fit token ids " + k, text / ranges / 5 * 4, thread_of_range(r));
    heap.alloc("fit counter " + k, 22.45e6 * std::pow(text / ranges / 16.57e6, 0.6), thread_of_range(r));
    heap.alloc("fit rows " + k, (keeps_rows ? 0.9 : 1.9) * rows / ranges + vocabulary * 4, thread_of_range(r));
  }
}

void end_fit(HeapModel& heap, int ranges) {
  for (int r = 0; r < ranges; ++r) {
    const std::string k = std::to_string(r);
    heap.free("fit token ids " + k);
    heap.free("fit counter " + k);
    heap.free("fit rows " + k);
  }
}

// A split's vectorized rows: TF-IDF (sparse: 8 bytes a non-zero, an offset a row; built by doubling on the
// worker ranges, then appended) or token ids (dense floats, one block made on the main thread).
double vectorize(HeapModel& heap, const Config& config, const std::string& tag, const TextFiles& files, double vocabulary,
                 int ranges, bool after_fit) {
  const double examples = double(files.bytes.size());
  const VectorizerConfig& settings = config.data.vectorizer;
  if (settings.mode == "int") {
    const double bytes = examples * double(settings.output_sequence_length) * 4 + examples * 4;
    heap.alloc(tag, bytes, Thread::main);
    return bytes;
  }
  const double rows = sum_nonzeros(files, vocabulary) * 8 + (examples + 1) * 8 + examples * 4;
  if (after_fit) {  // fit_transform's rows are the training rows (already counted by fit_vectorizer)
    // Appended onto range 0's rows on the calling thread, in fact; modelled in the loaders' arena with the
    // rest of the fit, for the coarseness the note at thread_of_range describes (IMDB TF-IDF: 0.94-0.97
    // of VmHWM that way, 1.05-1.11 in the main arena).
    heap.alloc(tag, rows, Thread::worker);
    return rows;
  }
  heap.alloc(tag + " building", 0.9 * rows, Thread::worker);  // the doubling's slack, freed at the append
  heap.alloc(tag, rows, Thread::worker);
  heap.free(tag + " building");
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

  if (data.dataset == Dataset::mnist) {
    const std::vector<std::string> train = load_idx(heap, config, data.train_split, "train split", config.where("data.train_split"), items);
    if (data.validation_fraction > 0) {  // Dataset::slice copies both parts
      const double whole = items.back().bytes;
      const double kept = whole * (1 - data.validation_fraction);
      heap.alloc("validation split", whole - kept, Thread::main);
      heap.alloc("train kept", kept, Thread::main);
      for (const std::string& block : train) heap.free(block);
      items.back().bytes = kept;
      items.push_back({"validation split", whole - kept});
    } else if (!data.validation_split.empty()) {
      load_idx(heap, config, data.validation_split, "validation split", config.where("data.validation_split"), items);
    }
    load_idx(heap, config, data.test_split, "test split", config.where("data.test_split"), items);
  } else if (data.dataset == Dataset::imdb || data.dataset == Dataset::text_folder) {
    const int ranges = cores;  // data/parallel.hpp default_threads(): the process's cores
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
    fit_vectorizer(heap, train, columns, ranges, !ids);
    double train_rows = 0;
    if (!ids) train_rows = vectorize(heap, config, "train split", train, columns, ranges, true);
    end_fit(heap, ranges);
    if (ids) train_rows = vectorize(heap, config, "train split", train, columns, ranges, true);
    items.push_back({"train split", train_rows});
    // The vocabulary's strings and idf weights, and its lookup table (16 bytes a slot, at most half full).
    const double vocabulary_bytes = columns * (kStringOverhead + 8 + 4 + 32);
    heap.alloc("vectorizer", vocabulary_bytes, Thread::main);
    items.push_back({"vectorizer", vocabulary_bytes});
    if (!validation.bytes.empty()) {
      read_texts(heap, "validation", validation, ranges);
      items.push_back({"validation split", vectorize(heap, config, "validation split", validation, columns, ranges, false)});
      free_texts(heap, "validation", ranges);
    }
    free_texts(heap, "train", ranges);
    TextFiles test = text_files(config, data.test_split, config.where("data.test_split"));
    read_texts(heap, "test", test, ranges);
    items.push_back({"test split", vectorize(heap, config, "test split", test, columns, ranges, false)});
    free_texts(heap, "test", ranges);
  } else {
    // arrays, csv and image folders: not estimated here (their loaders' memory is not modelled yet).
    items.push_back({"data set (not estimated for dataset " + to_string(data.dataset) + ")", 0});
  }
  const double loading_peak = heap.peak();

  // Training: the ranks' tensors and the threads' buffers, allocated by the fibers' threads.
  const int threads = std::min(devices, cores);
  const double runtime = kRuntimeBytes + (processes > 1 ? kMpiRuntimeBytes : 0);
  const double thread_bytes = threads * kThreadBytes + devices * kFiberBytes;
  // data.prefetch: one worker thread reading ahead (its blocks are the plan's input batches).
  const double prefetch_thread = data.prefetch > 0 ? 256.0 * 1024 : 0;
  heap.alloc("device tensors", device_bytes_per_process, Thread::worker);
  heap.alloc("threads", thread_bytes + prefetch_thread, Thread::worker);
  items.push_back({"device tensors", device_bytes_per_process});
  items.push_back({"compute threads and fibers", thread_bytes});
  if (prefetch_thread > 0) items.push_back({"prefetch thread", prefetch_thread});
  items.push_back({"runtime", runtime});
  items.push_back({"loading, at its peak", loading_peak});
  memory.peak_bytes = runtime + heap.peak();
  return memory;
}

}  // namespace dtrain
