// Issue 14, "never a signal from input": config text, --set overrides and split strings of any size or
// shape are either read or refused with a UsageError at FILE:LINE:COL; none crashes (deep regex
// recursion, self-referencing aliases, integer overflow) or takes quadratic time.
#include <doctest/doctest.h>

#include <algorithm>
#include <ctime>
#include <string>

#include "tests/config_errors.hpp"
#include "app/config.hpp"
#include "core/error.hpp"
#include "core/mesh.hpp"
#include "core/nn/layout_map.hpp"
#include "data/split.hpp"

using namespace dtrain;
using namespace dtrain::testing;

namespace {

const std::string kBase = R"(mesh:
  dims: {batch: 4, model: 2}
data:
  dataset: imdb
  path: data/aclImdb
  vectorizer: {mode: tf_idf, max_tokens: 1200}
  batch_size: 64
  layout: [batch, unsharded]
model:
  - {dense: 48, activation: relu}
  - {batch_norm: {}}
  - {dense: 2, name: out}
layouts:
  dense1/kernel: [unsharded, model]
  .*/bias: [unsharded]
train:
  epochs: 2
  optimizer: {sgd: {learning_rate: 0.01}}
)";


// The error starts at `needle`'s position and says each of `parts`; it is short (never echoes the input).
void check_short_error(const std::string& text, const std::string& needle, std::vector<std::string> parts,
                 const LoadOptions& load = no_path_check()) {
  const std::string message = error_of(text, load);
  INFO("message: ", message.substr(0, 400));
  CHECK(message.rfind(position("t.yaml", text, needle) + ": ", 0) == 0);
  for (const std::string& part : parts) CHECK_MESSAGE(contains(message, part), part);
  CHECK(message.size() < 1000);
}

}  // namespace

TEST_CASE("names of any length are bounded before any regex sees them") {
  const std::string long_name(30000, 'a');
  const std::string layer = replace(kBase, "{dense: 2, name: out}", "{dense: 2, name: " + long_name + "}");
  check_short_error(layer, long_name, {"at most 256 characters"});

  // yaml-cpp refuses implicit keys over 1024 characters; explicit keys (`? KEY`) and --set have no bound.
  const std::string dim =
      replace(kBase, "dims: {batch: 4, model: 2}", "dims:\n    batch: 4\n    ? " + long_name + "\n    : 2");
  check_short_error(dim, long_name, {"at most 256 characters"});
  CHECK(contains(error_of(kBase, no_path_check({"mesh.dims." + long_name + "=2"})), "at most 256 characters"));
  // In a --set value's flow map, yaml-cpp's own 1024-character bound on implicit keys refuses it first.
  CHECK(contains(error_of(kBase, no_path_check({"mesh.dims={batch: 4, " + long_name + ": 2}"})), "--set mesh.dims="));

  const std::string key =
      replace(kBase, "dense1/kernel: [unsharded, model]", "? " + long_name + "\n  : [unsharded, model]");
  check_short_error(key, long_name, {"at most 256 characters"});
  CHECK(contains(error_of(kBase, no_path_check({"layouts={" + long_name + ": [unsharded]}"})), "--set layouts="));

  // 15,000 nested groups: std::regex recursed once per group and overflowed the stack.
  const std::string nested = std::string(15000, '(') + "a" + std::string(15000, ')');
  const std::string deep = replace(kBase, "dense1/kernel: [unsharded, model]", "? \"" + nested + "\"\n  : [unsharded]");
  check_short_error(deep, "\"" + nested, {"at most 256 characters"});
  CHECK(contains(error_of(kBase, no_path_check({"layouts={\"" + nested + "\": [unsharded]}"})), "--set layouts="));
}

TEST_CASE("layout rules are RE2: bounded patterns, linear-time matching, full-match semantics") {
  // Within the length bound, a nested pattern is fine; a bad one is a located error.
  const std::string nested = std::string(100, '(') + "dense1/kernel" + std::string(100, ')');
  CHECK(error_of(replace(kBase, "dense1/kernel: [", "\"" + nested + "\": [")) == "");
  check_short_error(replace(kBase, "dense1/kernel: [", "\"dense1/(kernel\": ["), "\"dense1/(kernel",
              {"not a valid regular expression", "missing )"});

  // The matcher: full match, and linear time for a pattern that backtracks exponentially in std::regex.
  auto mesh = make_mesh({"x"}, {1});
  nn::LayoutMap map({{"dense1/kernel", {"x", kUnsharded}, ""}, {"(a|aa)*c", {"x"}, ""}});
  CHECK(map.choose("dense1/kernel", {4, 4}, mesh, nullptr, "").reason == "rule 'dense1/kernel'");
  CHECK(map.choose("xdense1/kernel", {4, 4}, mesh, nullptr, "").reason == "replicated (no rule)");
  CHECK(map.choose("dense1/kernelx", {4, 4}, mesh, nullptr, "").reason == "replicated (no rule)");
  CHECK(map.choose(std::string(50000, 'a') + "b", {4}, mesh, nullptr, "").reason == "replicated (no rule)");
  CHECK(map.choose(std::string(50000, 'a') + "c", {4}, mesh, nullptr, "").reason == "rule '(a|aa)*c'");

  // LayoutMap built directly (not through a config) bounds patterns too.
  const std::string huge = std::string(15000, '(') + "a" + std::string(15000, ')');
  CHECK_THROWS_AS(nn::LayoutMap({{huge, {"x"}, "c.yaml:1:1"}}), UsageError);
  // 2,000 nested groups within the length bound: RE2 neither recurses on the stack nor refuses them.
  const std::string deep = std::string(2000, '(') + "a" + std::string(2000, ')');
  nn::LayoutMap deep_map({{deep, {"x"}, "c.yaml:1:1"}});
  CHECK(deep_map.choose("a", {4}, mesh, nullptr, "").reason == "rule '" + deep + "'");
  CHECK_THROWS_AS(nn::LayoutMap({{"a{1000}{1000}{1000}", {"x"}, ""}}), UsageError);
}

TEST_CASE("splits are scanned, not regex-matched, and their numbers are overflow-checked") {
  const std::string digits(40000, '1');
  const std::string split = "train[" + digits + ":]";
  CHECK_THROWS_AS(data::parse_split(split, 100), UsageError);
  CHECK_THROWS_AS(data::split_name(std::string(40000, 't')), UsageError);
  std::string message;
  try {
    data::parse_split("train[99999999999999999999:]", 100);
  } catch (const UsageError& error) {
    message = error.what();
  }
  CHECK(contains(message, "does not fit in 64 bits"));
  CHECK_THROWS_AS(data::parse_split("train[-9223372036854775808:]", 100), UsageError);  // |x| > int64 max
  CHECK_THROWS_AS(data::parse_split("train[9223372036854775807:]", 100), UsageError);
  CHECK(data::parse_split("train[ 10 : 20 ]", 100).size() == 10);

  // The config's own check: located, and the overflow is named.
  check_short_error(replace(kBase, "batch_size: 64", "batch_size: 64\n  train_split: " + split), "train[",
              {"64 bits"});
  check_short_error(replace(kBase, "batch_size: 64", "batch_size: 64\n  train_split: train[99999999999999999999:]"),
              "train[", {"does not fit in 64 bits"});
  check_short_error(replace(kBase, "batch_size: 64", "batch_size: 64\n  test_split: test[200%:]"), "test[",
              {"percentages must be in [-100, 100]"});
  CHECK(error_of(replace(kBase, "batch_size: 64", "batch_size: 64\n  test_split: test[-10%:]")) == "");
  check_short_error(replace(kBase, "batch_size: 64", "batch_size: 64\n  test_split: test[1.5:]"), "test[",
              {"expected a split"});
}

TEST_CASE("a self-referencing alias in --set is a clean error, as in the file") {
  for (const std::string& assignment :
       {std::string("run_dir=&a [*a]"), std::string("mesh=&a {dims: *a}"), std::string("model=&a [*a]"),
        std::string("train.epochs=&a {x: *a}")}) {
    INFO(assignment);
    const std::string message = error_of(kBase, no_path_check({assignment}));
    CHECK(contains(message, "--set " + assignment));
  }
  // Aliases of aliases: 2^30 nodes if walked naively.
  std::string value = "[&a0 [x, x]";
  for (int i = 1; i < 30; ++i) value += fmt::format(", &a{} [*a{}, *a{}]", i, i - 1, i - 1);
  value += "]";
  CHECK(contains(error_of(kBase, no_path_check({"run_dir=" + value})), "more than 10000 nodes"));
  // In the file: the reader's type checks refuse it.
  CHECK(contains(error_of(kBase + "run_dir: &a [*a]\n"), "run_dir: expected a directory"));
}

TEST_CASE("sizes from the config are multiplied with overflow checks") {
  const std::string mesh1 = error_of(kBase, no_path_check({"mesh.dims={batch: 65536, b: 65536}"}));
  CHECK(contains(mesh1, "more than 1048576 devices"));
  const std::string mesh2 = error_of(kBase, no_path_check({"mesh.dims={batch: 1048576, b: 2048}"}));
  CHECK(contains(mesh2, "more than 1048576 devices"));
  CHECK_FALSE(contains(mesh2, "-2147483648"));
  check_short_error(replace(kBase, "{batch: 4, model: 2}", "{batch: 1024, model: 1024, x: 2}"), "2}",
              {"more than 1048576 devices"});

  check_short_error(replace(kBase, "batch_size: 64", "batch_size: 4611686018427387904"), "4611686018427387904",
              {"more than 1099511627776 elements"});
  check_short_error(replace(kBase, "{dense: 48,", "{dense: 2147483647,"), "2147483647", {"kernel 1200 x 2147483647"});
  const std::string wide = replace(replace(kBase, "{dense: 48,", "{dense: 1048576,"), "{dense: 2,", "{dense: 2000000,");
  check_short_error(wide, "2000000", {"kernel 1048576 x 2000000", "more than 1099511627776"});
  // At the limit's side that fits: fine.
  CHECK(error_of(replace(kBase, "{dense: 48,", "{dense: 1048576,")) == "");
}

namespace {

// The three big configs of `keys` keys each: unknown keys, layout rules, mesh dims.
struct BigConfigs {
  std::string unknown, rules, many_dims, many;
};
BigConfigs big_configs(int keys) {
  BigConfigs out;
  out.unknown = "mesh:\n  dims: {batch: 4, model: 2}\n";
  for (int i = 0; i < keys; ++i) out.unknown += fmt::format("  k{}: 1\n", i);
  for (int i = 0; i < keys; ++i) out.many += fmt::format("  v{}/kernel: [unsharded, model]\n", i);
  out.rules = replace(kBase, "  .*/bias: [unsharded]\n", "  .*/bias: [unsharded]\n" + out.many);
  std::string dims = "{batch: 4, model: 2";
  for (int i = 0; i < keys; ++i) dims += fmt::format(", d{}: 1", i);
  out.many_dims = replace(kBase, "{batch: 4, model: 2}", dims + "}");
  return out;
}

// This thread's CPU seconds: what other processes on a shared machine do is not counted.
double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

// The median CPU time of three reads of `text`, and the message.
std::pair<double, std::string> timed_error_of(const std::string& text) {
  std::vector<double> seconds;
  std::string message;
  for (int round = 0; round < 3; ++round) {
    const double start = thread_cpu_seconds();
    message = error_of(text);
    seconds.push_back(thread_cpu_seconds() - start);
  }
  std::sort(seconds.begin(), seconds.end());
  return {seconds[1], message};
}

}  // namespace

// Growth, not speed: 10x the keys must cost about 10x (a quadratic reader: 100x), on any machine.
TEST_CASE("parsing is not quadratic in the number of keys") {
  const BigConfigs small = big_configs(10000), big = big_configs(100000);
  for (const auto& [name, small_text, big_text, expected] :
       {std::tuple{"unknown keys", small.unknown, big.unknown, std::string("unknown key 'k0'")},
        std::tuple{"layout rules", small.rules, big.rules, std::string()},
        std::tuple{"mesh dims", small.many_dims, big.many_dims, std::string("a mesh has at most 32")}}) {
    const auto [small_seconds, small_message] = timed_error_of(small_text);
    const auto [big_seconds, message] = timed_error_of(big_text);
    const double growth = big_seconds / std::max(small_seconds, 1e-6);
    MESSAGE(fmt::format("{}: 10k keys {:.3f} s, 100k keys {:.3f} s (CPU), growth {:.1f}x", name, small_seconds,
                        big_seconds, growth));
    INFO(message.substr(0, 300));
    if (expected.empty())
      CHECK(message == "");
    else
      CHECK(contains(message, expected));
    CHECK(growth < 30);
  }
  const std::string many = big.many;
  // Duplicates are still found, and point at the first.
  const std::string duplicate = replace(kBase, "  .*/bias: [unsharded]\n", "  .*/bias: [unsharded]\n" + many +
                                                                          "  v7/kernel: [unsharded, model]\n");
  const std::string message = error_of(duplicate);
  CHECK(contains(message, "duplicate key 'v7/kernel' (first at t.yaml:"));
}

TEST_CASE("control characters in keys and names are refused at their location") {
  const std::string nul = replace(kBase, "dense1/kernel: [", "\"dense1/kernel\\0\": [");
  check_short_error(nul, "\"dense1/kernel\\0\"", {"control character", "0x00"});
  const std::string tab = replace(kBase, "dense1/kernel: [", "\"dense1\\t/kernel\": [");
  check_short_error(tab, "\"dense1\\t", {"control character"});
  const std::string name = replace(kBase, "name: out", "name: \"o\\x01ut\"");
  check_short_error(name, "\"o\\x01ut\"", {"not a valid layer name"});
  CHECK(contains(error_of(kBase, no_path_check({std::string("train.ep\x01ochs=3")})), "control character"));
}

TEST_CASE("CR-only and CRLF files give errors at line:col") {
  const std::string bad = replace(kBase, "epochs: 2", "epochs: zero");
  const std::string expected = position("t.yaml", bad, "zero");
  for (const std::string& ending : {std::string("\r"), std::string("\r\n")}) {
    std::string text;
    for (char c : bad) text += c == '\n' ? ending : std::string(1, c);
    const std::string message = error_of(text);
    INFO(message);
    CHECK(message.rfind(expected + ": ", 0) == 0);
    std::string good;
    for (char c : kBase) good += c == '\n' ? ending : std::string(1, c);
    CHECK(error_of(good) == "");
  }
}

TEST_CASE("--set accepts the a[1].b notation that messages use") {
  const Config config = parse_config(kBase, "t.yaml", no_path_check({"model[2].dense=256", "model.0.dense=64"}));
  CHECK(config.model[2].dense.units == 256);
  CHECK(config.model[0].dense.units == 64);
  const Config nested = parse_config(kBase, "t.yaml", no_path_check({"data.layout[1]=model"}));
  CHECK(nested.data.layout[1] == "model");
  CHECK(contains(error_of(kBase, no_path_check({"model[7].dense=1"})), "is a list of 3; '7' is not an index"));
  CHECK(contains(error_of(kBase, no_path_check({"[0].dense=1"})), "starts with an index"));
  // A key that merely contains brackets stays a key.
  const Config rule = parse_config(kBase, "t.yaml", no_path_check({"layouts.dense[12]/kernel=[unsharded, model]"}));
  CHECK(rule.layouts.back().pattern == "dense[12]/kernel");
}

TEST_CASE("a mesh's device count is overflow-checked where a mesh is built (a checkpoint's mesh string too)") {
  CHECK_THROWS_AS(make_mesh({"a", "b"}, {65536, 65536}), UsageError);
  CHECK_THROWS_AS(make_mesh({"a", "b"}, {1048576, 2048}), UsageError);
  CHECK_THROWS_AS(Mesh::from_string("|a=65536,b=65536|0|0|"), UsageError);
  CHECK(make_mesh({"a", "b"}, {4, 2})->size() == 8);
}

TEST_CASE("the reader's order and number forms: duplicates before unknown keys, '+' only on numbers") {
  // Every key of a map is checked for duplicates before any is held to the keys its section knows.
  check_error(replace(kBase, "epochs: 2\n", "epohcs: 2\n  epochs: 2\n  epochs: 3\n"), "epochs: 3",
              {"train: duplicate key 'epochs' (first at t.yaml:"});
  check_error(replace(kBase, "epochs: 2\n", "epohcs: 2\n  epochs: 2\n"), "epohcs",
              {"train: unknown key 'epohcs'; did you mean 'epochs'?"});
  // A leading '+' is read on integers and numbers, not on --set list indices or validation fractions.
  CHECK(parse_config(kBase, "t.yaml", no_path_check({"data.batch_size=+32"})).data.batch_size == 32);
  CHECK(contains(error_of(kBase, no_path_check({"model.+1.dense=8"})),
                 "'model' is a list of 3; '+1' is not an index in it"));
  CHECK(contains(error_of(kBase, no_path_check({"data.validation_split=+0.5"})),
                 "data.validation_split: expected a split: train or test"));
  // A --set path through a list item that is empty: that item is not a map.
  CHECK(contains(error_of(replace(kBase, "  - {dense: 2, name: out}\n", "  - {dense: 2, name: out}\n  -\n"),
                          no_path_check({"model.3.dense=8"})),
                 "'model.3' is an empty value, not a map"));
  // checkpoint.every's words and steps, and the other form of the key's rule.
  const auto every = [&](const std::string& value) {
    return parse_config(kBase, "t.yaml", no_path_check({"checkpoint.every=" + value})).checkpoint;
  };
  CHECK(every("epoch").every == CheckpointEvery::epoch);
  CHECK(every("never").every == CheckpointEvery::never);
  CHECK((every("25").every == CheckpointEvery::steps && every("25").every_steps == 25));
  CHECK(contains(error_of(kBase, no_path_check({"checkpoint.every=nevr"})), "did you mean 'never'?"));
}
