// A seeded mutation fuzzer over everything a user types or a file brings in: each shipped config
// (configs/*.yaml) mutated (byte flips, huge numbers, long strings, deep nesting, aliases, truncations,
// duplicated keys) into parse_config, --set assignments, split strings, and a small checkpoint's manifest
// and index.h5 into read_index. Every input either loads or throws dtrain::UsageError / dtrain::Error:
// never a crash, a hang, or another exception (std::bad_alloc, std::out_of_range, std::regex_error, a
// YAML exception). Deterministic: fixed seeds, fixed iteration counts (printed), a few seconds in all.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "app/config.hpp"
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
