// A seeded mutation fuzzer over everything a user types or a file brings in: each shipped config
// (configs/*.yaml) mutated (byte flips, huge numbers, long strings, deep nesting, aliases, truncations,
// duplicated keys) into parse_config, --set assignments, split strings, and a small checkpoint's files:
// its manifest and index.h5 as they are (what the manifest's checksums refuse), and index.h5 and shard
// files mutated (byte flips, truncations, chunk-sized splices, zeroed ranges, boundary values; in the
// superblock, object headers, chunk data and global heap) and then RESEALED (the manifest recomputed for
// the mutated bytes with the project's own manifest code) so that they get past the manifest into HDF5
// and dtrain's reader: read_index, a restore and verify_checkpoint, in a child process each. Every input
// either loads or throws dtrain::UsageError / dtrain::Error: never a crash, a hang, or another exception
// (std::bad_alloc, std::out_of_range, std::regex_error, a YAML exception); where HDF5 1.10 itself dies on
// a resealed file, a case of its own says so (SKIPPED in ctest). Deterministic: fixed seeds, fixed
// iteration counts (printed); about 30 s in all.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/config.hpp"
#include "core/checkpoint/hdf5.hpp"
#include "core/checkpoint/manifest.hpp"
#include "core/error.hpp"
#include "data/split.hpp"
#include "tests/checkpoint_fixture.hpp"

using namespace dtrain;

namespace {

std::filesystem::path source_dir() { return std::filesystem::path(__FILE__).parent_path().parent_path(); }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// What a call threw: "ok", "usage", "error", or "OTHER: what" (a failure of this test).
template <typename Call>
std::string outcome(Call&& call) {
  try {
    call();
    return "ok";
  } catch (const UsageError&) {
    return "usage";
  } catch (const Error&) {
    return "error";
  } catch (const std::exception& e) {
    return std::string("OTHER: ") + typeid(e).name() + ": " + e.what();
  } catch (...) {
    return "OTHER: a non-std exception";
  }
}

std::string printable(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < 300; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += (c >= 0x20 && c < 0x7f) || c == '\n' ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  }
  if (text.size() > 300) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(int percent) { return int(below(100)) < percent; }

  const std::string& token() {
    static const std::vector<std::string> tokens{
        "99999999999999999999999999", "-9223372036854775808", "9223372036854775807", "4294967296", "2147483648",
        "65536", "1048576", "0", "-1", "1e400", "-0.0", "nan", ".inf", "0x10", "+", "~", "null", "''", "\"\\0\"",
        "&a [*a]", "*a", "&x", "*undefined", "[", "]", "{", "}", ":", "- ", "? ", "|", ">", "!!binary", "!tag",
        "%YAML 1.2", "---", "...", "#", "\t", "\r", "\r\n", "\xff\xfe", "train[99999999999999999999:]",
        "test[:-100%]", "unsharded", "batch", "model", "dense1/kernel", ".*", "(((((a)))))", "a{1000}{1000}",
        "[unsharded, unsharded, unsharded, unsharded]", "{dense: 2147483647}", "{dense: 1}", "{flatten: {}}"};
    return tokens[below(tokens.size())];
  }

  std::string long_string() {
    switch (below(4)) {
      case 0: return std::string(1000 + below(30000), 'a');
      case 1: return std::string(1000 + below(40000), '9');
      case 2: return std::string(500 + below(3000), '(');
      default: return "train[" + std::string(1000 + below(40000), '1') + ":]";
    }
  }

  std::string nesting() {
    const size_t depth = 50 + below(5000);
    if (chance(50)) return std::string(depth, '[') + "1" + std::string(depth, ']');
    std::string text;
    for (size_t i = 0; i < depth; ++i) text += "{a: ";
    return text + "1" + std::string(depth, '}');
  }

  // One mutation of `text`.
  void mutate(std::string& text) {
    const size_t at = below(text.size() + 1);
    switch (below(9)) {
      case 0:  // byte flips
        for (size_t i = 0, n = 1 + below(4); i < n && !text.empty(); ++i) text[below(text.size())] = char(below(256));
        break;
      case 1: text.insert(at, token()); break;
      case 2: text.insert(at, long_string()); break;
      case 3: text.insert(at, nesting()); break;
      case 4: text.resize(at); break;  // truncation
      case 5: {  // a line again (duplicate keys), or a line dropped
        const auto lines = line_starts(text);
        const size_t line = lines[below(lines.size())];
        const size_t end = std::min(text.size(), text.find('\n', line) == std::string::npos ? text.size()
                                                                                             : text.find('\n', line) + 1);
        const std::string copy = text.substr(line, end - line);
        if (chance(70))
          text.insert(end, copy);
        else
          text.erase(line, end - line);
        break;
      }
      case 6: {  // a value replaced
        const size_t colon = text.find(": ", at);
        if (colon == std::string::npos) break;
        size_t end = colon + 2;
        while (end < text.size() && text[end] != '\n' && text[end] != ',' && text[end] != '}') ++end;
        text.replace(colon + 2, end - colon - 2, chance(80) ? token() : long_string());
        break;
      }
      case 7: {  // an alias loop or an alias of an alias
        const size_t colon = text.find(": ", at);
        if (colon == std::string::npos) break;
        text.insert(colon + 2, chance(50) ? "&r [*r] " : "*r ");
        break;
      }
      default: {  // a chunk of the text copied elsewhere
        const size_t from = below(text.size() + 1);
        text.insert(at, text.substr(from, below(200)));
      }
    }
  }

  std::string assignment() {
    static const std::vector<std::string> keys{
        "mesh.dims", "mesh.dims.batch", "mesh.dims.model", "mesh", "data.batch_size", "data.train_split",
        "data.test_split", "data.layout", "data.layout[0]", "data.vectorizer.max_tokens", "model", "model[0]",
        "model[1].dense", "model.2.dense", "model[9].dense", "layouts", "layouts.dense1/kernel", "train.epochs",
        "train.max_steps", "train.optimizer", "checkpoint.every", "comm.timeout_s", "run_dir", "a.b.c.d", "[0]",
        "x[", "model[]", "model[1][2]", ".", "", "model..dense"};
    std::string key = keys[below(keys.size())];
    if (chance(10)) key = long_string();
    std::string value = token();
    if (chance(15)) value = long_string();
    if (chance(15)) value = nesting();
    if (chance(10)) value = "&a {x: *a, y: [*a, *a]}";
    std::string result = key + (chance(95) ? "=" : "") + value;
    if (chance(20)) mutate(result);
    return result;
  }

 private:
  static std::vector<size_t> line_starts(const std::string& text) {
    std::vector<size_t> starts{0};
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n' && i + 1 < text.size()) starts.push_back(i + 1);
    return starts;
  }

  std::mt19937_64 rng_;
};

LoadOptions fuzz_options(std::vector<std::string> overrides = {}) {
  LoadOptions options;
  options.overrides = std::move(overrides);
  options.check_data_path = false;
  return options;
}

}  // namespace

TEST_CASE("fuzz: mutated configs and --set assignments load or are UsageErrors") {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir() / "configs"))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  REQUIRE(!files.empty());

  constexpr int kIterations = 250;  // per config file
  int runs = 0, loaded = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string original = read_file(files[f]);
    Mutator mutator(0x5eed0000 + f);
    for (int i = 0; i < kIterations; ++i) {
      std::string text = original;
      for (size_t m = 0, n = 1 + mutator.below(3); m < n; ++m) mutator.mutate(text);
      std::vector<std::string> overrides;
      if (mutator.chance(30))
        for (size_t k = 0, n = 1 + mutator.below(2); k < n; ++k) overrides.push_back(mutator.assignment());
      // The mutated file alone, and when there are overrides, the original with them and both.
      std::vector<std::pair<std::string, std::vector<std::string>>> inputs{{text, {}}};
      if (!overrides.empty()) inputs.insert(inputs.end(), {{original, overrides}, {text, overrides}});
      for (const auto& [input, sets] : inputs) {
        ++runs;
        Config config;
        const std::string result = outcome([&] { config = parse_config(input, "fuzz.yaml", fuzz_options(sets)); });
        INFO("config ", files[f].filename().string(), ", iteration ", i, ", --set ", fmt::format("{}", fmt::join(sets, " ")),
             "\n", printable(input));
        REQUIRE_MESSAGE(result.rfind("OTHER", 0) != 0, result);
        if (result != "ok") continue;
        ++loaded;
        // What loads dumps to YAML that loads again (what a checkpoint stores and reads back).
        const std::string again = outcome([&] { parse_config(dump_config(config), "dump.yaml", fuzz_options()); });
        REQUIRE_MESSAGE(again.rfind("OTHER", 0) != 0, again);
      }
    }
  }
  MESSAGE(fmt::format("fuzz configs: {} files x {} mutations = {} parses ({} loaded)", files.size(), kIterations, runs,
                      loaded));
}

TEST_CASE("fuzz: split strings parse or are UsageErrors") {
  const std::vector<std::string> seeds{"train", "test", "test[:5000]", "train[10%:]", "train[1000:2000]",
                                       "train[-1000:]", "train[12.5%:50%]", "train[ 1 : 2 ]", "validation_1[2:3]"};
  Mutator mutator(0x5911);
  constexpr int kIterations = 20000;
  int parsed = 0;
  for (int i = 0; i < kIterations; ++i) {
    std::string text = seeds[mutator.below(seeds.size())];
    for (size_t m = 0, n = 1 + mutator.below(2); m < n; ++m) {
      if (mutator.chance(30)) {
        text.insert(mutator.below(text.size() + 1), std::string(1 + mutator.below(40), "0123456789%-.:[] "[mutator.below(17)]));
      } else {
        mutator.mutate(text);
      }
    }
    const std::int64_t sizes[] = {0, 1, 100, 25000, std::numeric_limits<std::int64_t>::max() / 2};
    const std::int64_t size = sizes[mutator.below(5)];
    data::SplitSlice slice;
    const std::string result = outcome([&] { slice = data::parse_split(text, size); });
    INFO(printable(text), " size ", size);
    REQUIRE_MESSAGE((result == "ok" || result == "usage"), result);
    if (result == "ok") {
      ++parsed;
      CHECK((0 <= slice.begin && slice.begin <= slice.end && slice.end <= size));
    }
    REQUIRE(outcome([&] { data::split_name(text); }).rfind("OTHER", 0) != 0);
  }
  MESSAGE(fmt::format("fuzz splits: {} strings ({} parsed)", kIterations, parsed));
}

TEST_CASE("fuzz: a checkpoint with flipped bytes in its manifest or index.h5 is an Error, never a crash") {
  using namespace dtrain::testing;
  TempFolder dir("fuzz_checkpoint");
  save_on(mesh_cases()[2], dir.str());
  const std::string folder = checkpoint::find_checkpoint(dir.str());
  REQUIRE(outcome([&] { checkpoint::read_index(folder); }) == "ok");

  Mutator mutator(0xc4ec);
  constexpr int kIterations = 150;
  int refused = 0;
  for (const std::string name : {"manifest", "index.h5"}) {
    const std::filesystem::path path = std::filesystem::path(folder) / name;
    const std::string original = read_file(path);
    for (int i = 0; i < kIterations; ++i) {
      std::string bytes = original;
      switch (mutator.below(3)) {
        case 0:
          for (size_t k = 0, n = 1 + mutator.below(8); k < n && !bytes.empty(); ++k)
            bytes[mutator.below(bytes.size())] = char(mutator.below(256));
          break;
        case 1: bytes.resize(mutator.below(bytes.size() + 1)); break;
        default: bytes.insert(mutator.below(bytes.size() + 1), mutator.token());
      }
      write_file(path, bytes);
      const std::string result = outcome([&] { checkpoint::read_index(folder); });
      INFO(name, " iteration ", i);
      REQUIRE_MESSAGE(result.rfind("OTHER", 0) != 0, result);
      if (result != "ok") ++refused;
    }
    write_file(path, original);
  }
  REQUIRE(outcome([&] { checkpoint::read_index(folder); }) == "ok");
  MESSAGE(fmt::format("fuzz checkpoint: {} mutated files ({} refused)", 2 * kIterations, refused));
}

namespace {

using Range = std::pair<size_t, size_t>;  // [begin, end) of a file's bytes

// Where an HDF5 file keeps what: the superblock; the raw data of its datasets (chunks with their
// Fletcher-32 checksums, contiguous storage); its global heap: the collections ("GCOL") that hold
// variable-length strings (attributes, meta/config, meta/tensors) and virtual dataset mappings, and the
// arrays of heap IDs that are the raw data of variable-length string datasets; and the file's other bytes:
// object headers (with their attributes), B-trees, local heaps, symbol table nodes.
struct FileRegions {
  std::vector<Range> superblock, metadata, data, heap;
};

std::vector<Range> merged(std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<Range> out;
  for (const Range& range : ranges) {
    if (range.first >= range.second) continue;
    if (!out.empty() && range.first <= out.back().second)
      out.back().second = std::max(out.back().second, range.second);
    else
      out.push_back(range);
  }
  return out;
}

size_t total(const std::vector<Range>& ranges) {
  size_t bytes = 0;
  for (const Range& range : ranges) bytes += range.second - range.first;
  return bytes;
}

FileRegions map_regions(const std::string& path, const std::string& bytes) {
  namespace h5 = checkpoint::h5;
  const size_t size = bytes.size();
  auto clip = [&](uint64_t begin, uint64_t length) {
    return Range{size_t(std::min<uint64_t>(begin, size)), size_t(std::min<uint64_t>(begin + length, size))};
  };
  FileRegions regions;
  std::vector<Range> data, heap;
  {
    auto held = h5::lock();
    h5::Handle file = h5::open_file(path);
    H5F_info2_t info{};
    h5::check_status(H5Fget_info2(file, &info), path);
    regions.superblock.push_back(clip(0, info.super.super_size));
    std::vector<std::string> links;
    auto collect = [](hid_t, const char* name, const H5L_info_t* link, void* out) -> herr_t {
      if (link->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(out)->push_back(name);
      return 0;
    };
    h5::check_status(H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, collect, &links), path);
    for (const std::string& link : links) {
      h5::Handle object(h5::check_id(H5Oopen(file, link.c_str(), H5P_DEFAULT), link), H5Oclose);
      if (H5Iget_type(object) != H5I_DATASET) continue;
      h5::Handle create(h5::check_id(H5Dget_create_plist(object), link), H5Pclose);
      h5::Handle type(h5::check_id(H5Dget_type(object), link), H5Tclose);
      const bool heap_ids = H5Tdetect_class(type, H5T_VLEN) > 0 || H5Tis_variable_str(type) > 0;
      const H5D_layout_t layout = H5Pget_layout(create);
      if (layout == H5D_CHUNKED) {
        h5::Handle space(h5::check_id(H5Dget_space(object), link), H5Sclose);
        hsize_t chunks = 0;
        h5::check_status(H5Dget_num_chunks(object, space, &chunks), link);
        for (hsize_t i = 0; i < chunks; ++i) {
          hsize_t offset[H5S_MAX_RANK];
          unsigned filters = 0;
          haddr_t address = 0;
          hsize_t stored = 0;
          h5::check_status(H5Dget_chunk_info(object, space, i, offset, &filters, &address, &stored), link);
          (heap_ids ? heap : data).push_back(clip(address, stored));
        }
      } else if (layout == H5D_CONTIGUOUS) {
        const haddr_t address = H5Dget_offset(object);
        if (address != HADDR_UNDEF) (heap_ids ? heap : data).push_back(clip(address, H5Dget_storage_size(object)));
      }
    }
    H5Eclear2(H5E_DEFAULT);
  }
  // Global heap collections: "GCOL", version, 3 reserved bytes, the collection's size (8 bytes).
  for (size_t at = bytes.find("GCOL"); at != std::string::npos; at = bytes.find("GCOL", at + 4)) {
    if (at + 16 > size) break;
    uint64_t length = 0;
    std::memcpy(&length, bytes.data() + at + 8, 8);
    heap.push_back(clip(at, length));
  }
  regions.data = merged(data);
  regions.heap = merged(heap);
  std::vector<Range> known = merged([&] {
    std::vector<Range> all = regions.superblock;
    all.insert(all.end(), regions.data.begin(), regions.data.end());
    all.insert(all.end(), regions.heap.begin(), regions.heap.end());
    return all;
  }());
  size_t from = 0;  // the rest is metadata
  for (const Range& range : known) {
    if (range.first > from) regions.metadata.push_back({from, range.first});
    from = std::max(from, range.second);
  }
  if (from < size) regions.metadata.push_back({from, size});
  return regions;
}

// One mutation of an HDF5 file's bytes, aimed at its superblock, metadata, data or global heap (only the
// heap when `heap_only`). Returns what it did ("64 bytes zeroed at 1234 (metadata)"), enough to
// reproduce it by hand.
std::string mutate_hdf5(Mutator& mutator, std::string& bytes, const FileRegions& regions, bool heap_only) {
  static const char* const kWhere[] = {"superblock", "metadata", "data", "heap"};
  const std::vector<Range>* classes[] = {&regions.superblock, &regions.metadata, &regions.data, &regions.heap};
  const size_t roll = mutator.below(100);
  size_t where = heap_only ? 3 : roll < 15 ? 0 : roll < 60 ? 1 : roll < 85 ? 2 : 3;
  if (total(*classes[where]) == 0) where = 1;
  size_t pick = mutator.below(total(*classes[where])), at = 0;  // a byte of that class, uniformly
  for (const Range& range : *classes[where]) {
    if (pick < range.second - range.first) {
      at = range.first + pick;
      break;
    }
    pick -= range.second - range.first;
  }
  const size_t size = bytes.size(), room = size - at;  // the bytes from `at` on
  const std::string place = fmt::format("at {} ({})", at, kWhere[where]);
  switch (mutator.below(5)) {
    case 0: {  // byte or bit flips within a few bytes
      const size_t count = 1 + mutator.below(8);
      for (size_t k = 0; k < count; ++k) {
        const size_t i = at + mutator.below(std::min<size_t>(room, 16));
        if (mutator.chance(50))
          bytes[i] = char(mutator.below(256));
        else
          bytes[i] = char(bytes[i] ^ (1 << mutator.below(8)));
      }
      return fmt::format("{} bytes flipped {}", count, place);
    }
    case 1: {  // a range zeroed
      static const size_t kLengths[] = {1, 2, 4, 8, 16, 64, 256, 4096};
      const size_t length = std::min(room, kLengths[mutator.below(8)]);
      std::fill(bytes.begin() + ptrdiff_t(at), bytes.begin() + ptrdiff_t(at + length), '\0');
      return fmt::format("{} bytes zeroed {}", length, place);
    }
    case 2:  // truncated
      bytes.resize(at);
      return fmt::format("truncated {}", place);
    case 3: {  // a chunk-sized splice: bytes from elsewhere in the file written over, or inserted
      size_t length = 16 << mutator.below(9);  // 16 B .. 4 KiB
      if (!regions.data.empty() && mutator.chance(50)) {  // a dataset chunk's size
        const Range& chunk = regions.data[mutator.below(regions.data.size())];
        length = chunk.second - chunk.first;
      }
      length = std::min(length, size);
      const size_t from = mutator.below(size - length + 1);
      const std::string piece = bytes.substr(from, length);
      if (mutator.chance(70)) {
        const size_t written = std::min(length, room);
        bytes.replace(at, written, piece.substr(0, written));
        return fmt::format("{} bytes from {} written {}", written, from, place);
      }
      bytes.insert(at, piece);  // everything after it moves: HDF5's addresses point at other bytes
      return fmt::format("{} bytes from {} inserted {}", length, from, place);
    }
    default: {  // a boundary value in an integer field (addresses, sizes, counts)
      static const uint64_t kValues[] = {0, 1, 0xff, 0x7fffffff, 0x80000000, 0xffffffff, 0x7fffffffffffffff,
                                         0xffffffffffffffff};
      uint64_t value = kValues[mutator.below(8)];
      if (mutator.chance(25)) value = size + mutator.below(3) - 1;  // about the file's size
      const size_t width = std::min<size_t>(room, size_t(1) << mutator.below(4));
      std::memcpy(bytes.data() + at, &value, width);
      return fmt::format("{}-byte value {:#x} written {}", width, value, place);
    }
  }
}

// Seals a checkpoint again after one of its files changed: the manifest's digest for that file
// recomputed from its new bytes, the manifest (and its own checksum) written anew. The project's code,
// as tests/e2e/lib/reseal.sh does for the shell tests.
void reseal(const std::string& folder, checkpoint::Manifest manifest, const std::string& file, const std::string& bytes) {
  for (auto& digest : manifest.files)
    if (digest.file == file) digest = checkpoint::digest_of(file, bytes.data(), bytes.size());
  checkpoint::write_manifest(folder, manifest);
}

// Restores `index` onto a one-device mesh (every block of every shard file read by one rank, optimizer
// slots too); the outcome as outcome() says it.
std::string restore_outcome(const checkpoint::CheckpointIndex& index) {
  using namespace dtrain::testing;
  const MeshCase one = mesh_cases()[0];
  std::string result = "ok";
  const std::string spmd = outcome([&] {
    run_spmd(one.mesh, [&](DeviceContext& device) {
      RankModel state = make_state(one, device.rank, false);
      train::RankState rank_state{device.rank, state.params, *state.optimizer, state.position};
      result = outcome([&] { checkpoint::restore(index, rank_state, true); });
    });
  });
  return result != "ok" ? result : spmd;
}

bool is_other(const std::string& result) { return result.rfind("OTHER", 0) == 0; }

// The checkpoint read every way dtrain reads one: read_index, a restore when that succeeds, and
// verify_checkpoint. "" when each read it or refused it with an Error; else what went wrong.
// *refused_by: the first of them that refused it ("" when none did).
std::string read_every_way(const std::string& folder, std::string* refused_by) {
  checkpoint::CheckpointIndex index;
  const std::string read = outcome([&] { index = checkpoint::read_index(folder); });
  const std::string restored = read == "ok" ? restore_outcome(index) : "not run";
  const std::string verified =
      outcome([&] { checkpoint::verify_checkpoint(folder, [](const checkpoint::VerifiedFile&) {}); });
  *refused_by = read != "ok" ? "read_index" : restored != "ok" ? "restore" : verified != "ok" ? "verify_checkpoint" : "";
  if (is_other(read)) return "read_index: " + read;
  if (is_other(restored)) return "restore: " + restored;
  if (is_other(verified)) return "verify_checkpoint: " + verified;
  return "";
}

// A child process reading a mutated checkpoint that dies of a signal (SIGXCPU: it hung) says whether
// HDF5's code was on its stack: a death inside HDF5 exits with kDiedInHdf5 after writing what killed it
// to g_death_note; any other dies of the signal again (a crash or hang of dtrain's: the test fails).
constexpr int kDiedInHdf5 = 10;
char g_death_note[4096];

void on_death(int signal) {
  void* frames[64];
  const int count = ::backtrace(frames, 64);
  const char* in_hdf5 = nullptr;  // the innermost named function of HDF5 on the stack
  for (int i = 0; i < count && !(in_hdf5 && std::strcmp(in_hdf5, "libhdf5") != 0); ++i) {
    Dl_info info{};
    if (::dladdr(frames[i], &info) && info.dli_fname && std::strstr(info.dli_fname, "hdf5"))
      in_hdf5 = info.dli_sname ? info.dli_sname : "libhdf5";
  }
  if (!in_hdf5) {
    ::signal(signal, SIG_DFL);
    ::raise(signal);
    return;
  }
  if (const int fd = ::open(g_death_note, O_WRONLY | O_CREAT | O_TRUNC, 0644); fd >= 0) {
    const std::string note = fmt::format("{} in {}", signal == SIGXCPU ? "hung (over 10 s of CPU)" : strsignal(signal), in_hdf5);
    [[maybe_unused]] const ssize_t written = ::write(fd, note.data(), note.size());
    ::close(fd);
  }
  ::_exit(kDiedInHdf5);
}

struct FuzzCounts {
  int mutations = 0, reached = 0, refused = 0;
  std::vector<std::string> hdf5_deaths;  // the mutations that killed or hung HDF5, and how
};

// Mutates `file` of a saved checkpoint `iterations` times, resealing each mutation so that it gets past
// the manifest into HDF5, and reads the checkpoint every way dtrain does, in a child process (HDF5 1.10
// may die on some: see the case below): each read succeeds or is an Error; a death outside HDF5 or
// another exception fails. Stops after `max_deaths` deaths in HDF5.
FuzzCounts fuzz_resealed(const std::string& folder, const std::string& file, uint64_t seed, int iterations,
                         bool heap_only, size_t max_deaths) {
  const std::string path = folder + "/" + file;
  const std::string original = read_file(path);
  const checkpoint::Manifest manifest = checkpoint::read_manifest(folder);
  const FileRegions regions = map_regions(path, original);
  MESSAGE(fmt::format("{}: {} bytes: superblock {}, metadata {}, data {}, global heap {}", file, original.size(),
                      total(regions.superblock), total(regions.metadata), total(regions.data), total(regions.heap)));
  REQUIRE(total(regions.metadata) > 0);
  REQUIRE(total(regions.heap) > 0);
  const std::string note = folder + "/../death_note";
  REQUIRE(note.size() < sizeof(g_death_note));
  std::strcpy(g_death_note, note.c_str());

  Mutator mutator(seed);
  FuzzCounts counts;
  std::map<std::string, int> refusals;  // by the read that refused it first
  for (int i = 0; i < iterations && counts.hdf5_deaths.size() < max_deaths; ++i) {
    ++counts.mutations;
    std::string bytes = original;
    std::string what = mutate_hdf5(mutator, bytes, regions, heap_only);
    // Sometimes a second one (when the first kept every byte where it was: the regions still hold).
    if (bytes.size() == original.size() && mutator.chance(25))
      what += "; " + mutate_hdf5(mutator, bytes, regions, heap_only);
    const std::string label = fmt::format("{} mutation {} (seed {:#x}): {}", file, i, seed, what);
    INFO(label);
    write_file(path, bytes);
    reseal(folder, manifest, file, bytes);
    // The seal holds: what follows gets past the manifest into HDF5.
    REQUIRE(outcome([&] { checkpoint::verify_files(folder, checkpoint::read_manifest(folder)); }) == "ok");
    if (bytes == original) continue;
    ++counts.reached;

    std::fflush(nullptr);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      for (const int signal : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGXCPU}) ::signal(signal, on_death);
      // A hang is a loop: counted in CPU time, which a loaded machine does not use up, not by the wall
      // clock. A read takes milliseconds of it (under ASan too); 10 s of it is a loop (SIGXCPU). Each of
      // HDF5's hangs costs the run this limit, so it is not larger.
      const rlimit cpu{10, 11};
      ::setrlimit(RLIMIT_CPU, &cpu);
      std::string refused_by;
      const std::string failure = read_every_way(folder, &refused_by);
      if (!failure.empty()) std::fprintf(stderr, "%s: %s\n", label.c_str(), failure.c_str());
      std::_Exit(!failure.empty() ? 3 : refused_by.empty() ? 0 : 1);  // no destructors: the folder stays
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE_MESSAGE(!WIFSIGNALED(status), "died outside HDF5 of ",
                    WTERMSIG(status) == SIGXCPU ? "a hang (over 10 s of CPU)" : strsignal(WTERMSIG(status)));
    REQUIRE(WIFEXITED(status));
    REQUIRE_MESSAGE(WEXITSTATUS(status) != 3, "another exception than an Error (above)");
    if (WEXITSTATUS(status) == kDiedInHdf5) {
      counts.hdf5_deaths.push_back(fmt::format("{}: {}", label, read_file(note)));
    } else if (WEXITSTATUS(status) == 1) {
      ++counts.refused;
    }
  }
  write_file(path, original);
  checkpoint::write_manifest(folder, manifest);
  MESSAGE(fmt::format("{}: {} mutations, {} reached HDF5 past the resealed manifest: {} refused with an Error, {} "
                      "killed HDF5",
                      file, counts.mutations, counts.reached, counts.refused, counts.hdf5_deaths.size()));
  return counts;
}

// A checkpoint saved on 8 devices ({4,2}), and the shard files its index names.
struct SavedCheckpoint {
  testing::TempFolder dir;
  std::string folder;
  std::vector<std::string> shards;

  explicit SavedCheckpoint(const std::string& name) : dir(name) {
    testing::save_on(testing::mesh_cases()[2], dir.str());
    folder = checkpoint::find_checkpoint(dir.str());
    const checkpoint::CheckpointIndex intact = checkpoint::read_index(folder);
    REQUIRE(restore_outcome(intact) == "ok");
    std::set<std::string> files;
    for (const auto& tensor : intact.tensors)
      for (const auto& shard : tensor.shards) files.insert(shard.file);
    shards.assign(files.begin(), files.end());
    REQUIRE(shards.size() >= 2);
  }
  // The checkpoint as saved reads again.
  void check_intact() const {
    REQUIRE(outcome([&] { checkpoint::read_index(folder); }) == "ok");
    REQUIRE(outcome([&] { checkpoint::verify_checkpoint(folder, [](const checkpoint::VerifiedFile&) {}); }) == "ok");
  }
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("fuzz: a resealed index.h5 or shard file with mutations reaches HDF5 and reads or is an Error") {
  SavedCheckpoint saved("fuzz_resealed");
  constexpr int kIterations = 120;  // per file
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> deaths;
  for (const auto& [file, seed] : {std::pair{checkpoint::kIndexFile, uint64_t(0x1de5)},
                                   std::pair{saved.shards.front(), uint64_t(0x54a2d)},
                                   std::pair{saved.shards.back(), uint64_t(0x54a2e)}}) {
    const FuzzCounts counts = fuzz_resealed(saved.folder, file, seed, kIterations, false, kIterations);
    // Most mutations change the file (some zero zeros, or write what was there), and the resealed
    // manifest lets each change through: the fuzzer reaches HDF5, and with dtrain's checks refuses much of
    // it (a change to bytes nothing reads, or to a chunk that keeps its Fletcher-32 checksum, may load).
    CHECK(counts.reached >= kIterations * 8 / 10);
    CHECK(counts.refused >= counts.reached / 4);
    deaths.insert(deaths.end(), counts.hdf5_deaths.begin(), counts.hdf5_deaths.end());
  }
  saved.check_intact();
  // HDF5's own deaths are the next case's (a ctest entry of its own: SKIPPED while they happen).
  MESSAGE(fmt::format("fuzz resealed checkpoint: {:.1f} s; HDF5 died on {} mutations{}", seconds_since(started),
                      deaths.size(), deaths.empty() ? "" : fmt::format(", the first: {}", deaths.front())));
}

// HDF5 1.10 (1.10.8 here) trusts a global heap collection's object table and the heap IDs that point into
// it (variable-length strings: every string attribute, meta/config, meta/tensors, vectorizer/vocabulary;
// and index.h5's virtual dataset mappings): a resealed change there can hang it
// (H5HG__cache_heap_deserialize loops on a zero-size free-space object), SIGSEGV it (H5HG_read with an
// object index or size the collection does not hold) or abort it (glibc's "buffer overflow detected" in
// H5S_select_deserialize, a virtual mapping's selection), a heap ID in an attribute's object header
// message as much as the heap itself. index.h5 is read from verified bytes in memory, but HDF5 parses
// them. Every mutation is read in a child process: the case passes where HDF5 survives them all, and
// where it dies on some it lists them and says "skipped" (ctest: SKIPPED, never a pass).
TEST_CASE("needs HDF5 that survives a corrupt global heap: resealed mutations of the heap of index.h5 and a shard") {
  SavedCheckpoint saved("fuzz_heap");
  constexpr int kIterations = 150;  // per file, or until HDF5 died on 3
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> deaths;
  int mutations = 0;
  for (const auto& [file, seed] : {std::pair{checkpoint::kIndexFile, uint64_t(0x4ea9)},
                                   std::pair{saved.shards.front(), uint64_t(0x4eaa)}}) {
    const FuzzCounts counts = fuzz_resealed(saved.folder, file, seed, kIterations, true, 3);
    mutations += counts.mutations;
    deaths.insert(deaths.end(), counts.hdf5_deaths.begin(), counts.hdf5_deaths.end());
  }
  saved.check_intact();
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  for (const auto& death : deaths) MESSAGE("HDF5 died: " << death);
  MESSAGE(fmt::format("fuzz resealed global heap: {:.1f} s", seconds_since(started)));
  if (!deaths.empty())
    MESSAGE(fmt::format("skipped: HDF5 {}.{}.{} died on {} of {} resealed global heap mutations (listed above)", major,
                        minor, release, deaths.size(), mutations));
}
