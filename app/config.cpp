// Reading the YAML config into typed structs. A Reader walks the YAML tree top-down; every value it
// takes is a Field (node, dotted path, Where), so every error can say where and what was expected.
#include "app/config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <unordered_map>

#include <re2/re2.h>

#include "core/error.hpp"
#include "core/nn/layout_map.hpp"
#include "core/ops/halo.hpp"
#include "data/array_file.hpp"
#include "data/csv.hpp"
#include "data/split.hpp"

namespace dtrain {

std::string Where::str() const {
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, col);
}

void throw_config_error(const Where& where, const std::string& message) {
  throw UsageError(fmt::format("{}: {}", where.str(), message));
}

int MeshConfig::num_devices() const {
  // read_mesh refuses a product above kMaxDevices, so this cannot overflow for a loaded config.
  int n = 1;
  for (const MeshDimConfig& dim : dims)
    if (__builtin_mul_overflow(n, dim.size, &n)) return std::numeric_limits<int>::max();
  return n;
}

std::vector<std::string> MeshConfig::dim_names() const {
  std::vector<std::string> names;
  for (const MeshDimConfig& dim : dims) names.push_back(dim.name);
  return names;
}

std::vector<int> MeshConfig::dim_sizes() const {
  std::vector<int> sizes;
  for (const MeshDimConfig& dim : dims) sizes.push_back(dim.size);
  return sizes;
}

bool MeshConfig::has_dim(const std::string& name) const {
  return std::any_of(dims.begin(), dims.end(), [&](const MeshDimConfig& dim) { return dim.name == name; });
}

int MeshConfig::size_of(const std::string& spec) const {
  for (const MeshDimConfig& dim : dims)
    if (dim.name == spec) return dim.size;
  return 1;
}

std::vector<std::int64_t> DataConfig::example_shape() const {
  if (dataset == Dataset::image_folder) return {image_shape.begin(), image_shape.end()};
  if (is_text(dataset))
    return {vectorizer.mode == "int" ? vectorizer.output_sequence_length : vectorizer.max_tokens};
  if (dataset == Dataset::arrays) return arrays.example_shape;
  if (dataset == Dataset::csv) return {std::int64_t(csv.features.size())};
  if (image_shape.empty()) return {784};
  return {image_shape.begin(), image_shape.end()};
}

Where Config::where(const std::string& path) const {
  auto found = locations.find(path);
  if (found != locations.end()) return found->second;
  return Where{file, 0, 0};
}

std::string to_string(DeviceKind kind) { return kind == DeviceKind::cpu ? "cpu" : "gpu"; }
int known_class_count(Dataset dataset) { return dataset == Dataset::mnist ? 10 : dataset == Dataset::imdb ? 2 : 0; }

bool is_text(Dataset dataset) { return dataset == Dataset::imdb || dataset == Dataset::text_folder; }
bool has_split_folders(Dataset dataset) { return dataset == Dataset::text_folder || dataset == Dataset::image_folder; }

std::string to_string(Dataset dataset) {
  switch (dataset) {
    case Dataset::mnist: return "mnist";
    case Dataset::imdb: return "imdb";
    case Dataset::text_folder: return "text_folder";
    case Dataset::image_folder: return "image_folder";
    case Dataset::arrays: return "arrays";
    case Dataset::csv: return "csv";
  }
  return "?";
}
std::string to_string(InitKind kind) {
  switch (kind) {
    case InitKind::zeros: return "zeros";
    case InitKind::ones: return "ones";
    case InitKind::normal: return "normal";
    case InitKind::uniform: return "uniform";
    case InitKind::glorot_uniform: return "glorot_uniform";
  }
  return "?";
}
namespace {
// In LayerKind's order: the YAML key of each layer type.
const std::vector<std::string> kLayerKinds{"dense",      "batch_norm",  "dropout",    "flatten",
                                           "relu",       "softmax",     "conv2d",     "max_pool2d",
                                           "avg_pool2d", "global_average_pool", "embedding", "layer_norm",
                                           "sigmoid",    "tanh",        "gelu",       "relayout"};
// In Activation's order.
const std::vector<std::string> kActivations{"none", "relu", "softmax", "sigmoid", "tanh", "gelu"};
}  // namespace

std::string to_string(LayerKind kind) { return kLayerKinds.at(size_t(kind)); }
std::string to_string(Activation activation) { return kActivations.at(size_t(activation)); }
std::string to_string(PaddingKind padding) { return padding == PaddingKind::same ? "same" : "valid"; }
std::string to_string(Reduction reduction) { return reduction == Reduction::sum ? "sum" : "mean"; }
std::string to_string(OptimizerKind kind) {
  return kind == OptimizerKind::sgd ? "sgd" : kind == OptimizerKind::adam ? "adam" : "adamw";
}

namespace {

// ---- limits ----

[[noreturn]] void override_error(const std::string& assignment, const std::string& what) {
  throw UsageError(fmt::format("--set {}: {}", assignment, what));
}

// The text of a name or value for a message: long inputs are cut, control characters escaped.
std::string shown(const std::string& text) {
  constexpr size_t kShown = 64;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += char(c);
  }
  if (text.size() > kShown) out += fmt::format("... ({} characters)", text.size());
  return out;
}

// Why `name` (a key, a layer name, a dim name) is refused, or "" when it is fine: too long, or a control
// character (a NUL would silently cut the name short in some places and not in others).
std::string bad_name(const std::string& name, size_t max_length = kMaxNameLength) {
  if (name.size() > max_length)
    return fmt::format("'{}' is too long: at most {} characters", shown(name), max_length);
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f)
      return fmt::format("'{}' has a control character (byte 0x{:02x} at position {})", shown(name), c, i + 1);
  }
  return "";
}

bool is_ascii_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

// [A-Za-z_][A-Za-z0-9_]* (a mesh dim name), without a regex.
bool is_identifier(const std::string& text) {
  if (text.empty() || !(is_ascii_letter(text[0]) || text[0] == '_')) return false;
  return std::all_of(text.begin(), text.end(), [](char c) { return is_ascii_letter(c) || is_ascii_digit(c) || c == '_'; });
}

// [A-Za-z0-9_.-]+ (a layer name).
bool is_layer_name(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return is_ascii_letter(c) || is_ascii_digit(c) || c == '_' || c == '.' || c == '-';
  });
}

// a * b for sizes from the config; false when it overflows or exceeds `limit`.
bool checked_product(std::int64_t a, std::int64_t b, std::int64_t limit, std::int64_t* out) {
  return !__builtin_mul_overflow(a, b, out) && *out <= limit;
}

// ---- suggestions ----

// Edit distance counting a swap of two neighbours as one edit (optimal string alignment).
int edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = int(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = int(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

// "; did you mean 'x'?" for the closest candidate when it is close enough, else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  if (word.size() > kMaxNameLength) return "";  // the distance costs |word| x |candidate|
  std::string best;
  int best_distance = std::numeric_limits<int>::max();
  for (const std::string& candidate : candidates) {
    const int distance = edit_distance(word, candidate);
    if (distance < best_distance) best_distance = distance, best = candidate;
  }
  const int allowed = std::max<int>(2, int(word.size()) / 3);
  if (best.empty() || best_distance > allowed) return "";
  return fmt::format("; did you mean '{}'?", best);
}

std::string one_of(const std::vector<std::string>& options) { return fmt::format("{}", fmt::join(options, ", ")); }

// How a node reads in a message: 'text', a list, a map, an empty value.
std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: return fmt::format("'{}'", shown(node.Scalar()));
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "an empty value";
  }
}

// ---- the reader ----

// A value in the tree: the node, its dotted path for messages, and where it is.
struct Field {
  YAML::Node node;
  std::string path;
  Where where;
};

struct KeyedField {
  std::string key;
  Where key_where;
  Field value;
};

// Nodes that came from a --set (and their descendants), so errors about them name the override.
struct OverrideOrigin {
  YAML::Node node;
  std::string assignment;
};

class Reader {
 public:
  Reader(std::string file, std::vector<OverrideOrigin> origins) : file_(std::move(file)), origins_(std::move(origins)) {}

  const std::string& file() const { return file_; }

  Where where(const YAML::Node& node, const Where& fallback) const {
    for (auto origin = origins_.rbegin(); origin != origins_.rend(); ++origin)
      if (node.is(origin->node)) return Where{"--set " + origin->assignment, 0, 0};
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) return fallback;
    return Where{file_, mark.line + 1, mark.column + 1};
  }

  [[noreturn]] void fail(const Field& field, const std::string& what) const {
    throw_config_error(field.where, fmt::format("{}: {}", field.path, what));
  }
  [[noreturn]] void fail(const Where& where, const std::string& path, const std::string& what) const {
    throw_config_error(where, fmt::format("{}: {}", path, what));
  }

  Field child(const Field& parent, const YAML::Node& node, const std::string& path) {
    Field field{node, path, where(node, parent.where)};
    locations[path] = field.where;
    return field;
  }

  // The entries of a map in YAML order (an empty value reads as an empty map). Duplicate keys are errors.
  std::vector<KeyedField> entries(const Field& map, const std::string& expected = "a map") {
    std::vector<KeyedField> result;
    std::unordered_map<std::string, size_t> seen;  // key -> index in result (a linear scan was quadratic)
    if (map.node.IsNull()) return result;
    if (!map.node.IsMap()) fail(map, fmt::format("expected {}, got {}", expected, describe(map.node)));
    for (auto it = map.node.begin(); it != map.node.end(); ++it) {
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      const Where value_where = where(value, map.where);
      const Where key_where = where(key, value_where);
      if (!key.IsScalar()) fail(key_where, map.path, fmt::format("expected a key, got {}", describe(key)));
      const std::string name = key.Scalar();
      const std::string bad = bad_name(name);
      if (!bad.empty()) fail(key_where, map.path, "key " + bad);
      const auto [earlier, inserted] = seen.emplace(name, result.size());
      if (!inserted)
        fail(key_where, map.path,
             fmt::format("duplicate key '{}' (first at {})", name, result[earlier->second].key_where.str()));
      const std::string path = map.path.empty() ? name : map.path + "." + name;
      Field field = child(map, value, path);
      // yaml-cpp marks an empty value at the next token, often on the next line: point at its key.
      if (value.IsNull() && field.where.line > 0) field.where = locations[path] = key_where;
      result.push_back(KeyedField{name, key_where, field});
    }
    return result;
  }

  std::map<std::string, Where> locations;

 private:
  std::string file_;
  std::vector<OverrideOrigin> origins_;
};

// A map with a fixed set of keys: unknown keys are errors (with a suggestion), at construction.
class Section {
 public:
  // `label` names the map in messages when its path alone is unclear ("model[1] (dense)").
  Section(Reader& reader, const Field& field, const std::vector<std::string>& known, std::string label = "")
      : reader_(reader), field_(field), label_(label.empty() ? field.path : std::move(label)) {
    for (KeyedField& entry : reader.entries(field)) {
      if (std::find(known.begin(), known.end(), entry.key) == known.end()) {
        const std::string hint = suggestion(entry.key, known);
        reader.fail(entry.key_where, label_.empty() ? "config" : label_,
                    fmt::format("unknown key '{}'{}", entry.key,
                                hint.empty() ? fmt::format(" (expected one of: {})", one_of(known)) : hint));
      }
      entries_.push_back(std::move(entry));
    }
  }

  const Field& field() const { return field_; }

  std::optional<Field> get(const std::string& key) const {
    for (const KeyedField& entry : entries_)
      if (entry.key == key) return entry.value;
    return std::nullopt;
  }

  Field require(const std::string& key) const {
    if (auto value = get(key)) return *value;
    reader_.fail(field_.where, label_, fmt::format("missing required key '{}'", key));
  }

 private:
  Reader& reader_;
  Field field_;
  std::string label_;
  std::vector<KeyedField> entries_;
};

// ---- scalar conversions ----

std::string scalar(Reader& reader, const Field& field, const std::string& expected = "a string") {
  if (!field.node.IsScalar()) reader.fail(field, fmt::format("expected {}, got {}", expected, describe(field.node)));
  return field.node.Scalar();
}

std::int64_t integer(Reader& reader, const Field& field, std::int64_t min,
                     std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
  // Bounds that only guard against overflow are not worth printing.
  const bool print_max = max < (std::int64_t(1) << 30);
  const std::string expected = min == std::numeric_limits<std::int64_t>::min() ? std::string("an integer")
                               : print_max ? fmt::format("an integer in [{}, {}]", min, max)
                                           : fmt::format("an integer >= {}", min);
  const std::string text = scalar(reader, field, expected);
  std::int64_t value = 0;
  const char* begin = text.data() + (text.size() > 1 && text[0] == '+' ? 1 : 0);
  const auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    reader.fail(field, fmt::format("expected {}, got '{}'", expected, shown(text)));
  if (value < min || value > max) reader.fail(field, fmt::format("expected {}, got {}", expected, value));
  return value;
}

double number(Reader& reader, const Field& field) {
  const std::string text = scalar(reader, field, "a number");
  double value = 0;
  const char* begin = text.data() + (text.size() > 1 && text[0] == '+' ? 1 : 0);
  const auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    reader.fail(field, fmt::format("expected a number, got '{}'", shown(text)));
  return value;
}

double positive_number(Reader& reader, const Field& field) {
  const double value = number(reader, field);
  if (!(value > 0)) reader.fail(field, fmt::format("expected a number > 0, got {}", value));
  return value;
}

// A number in [0, 1) (rates, betas).
double fraction(Reader& reader, const Field& field) {
  const double value = number(reader, field);
  if (!(value >= 0 && value < 1)) reader.fail(field, fmt::format("expected a number in [0, 1), got {}", value));
  return value;
}

bool boolean(Reader& reader, const Field& field) {
  bool value = false;
  if (!field.node.IsScalar() || !YAML::convert<bool>::decode(field.node, value))
    reader.fail(field, fmt::format("expected true or false, got {}", describe(field.node)));
  return value;
}

std::string choice(Reader& reader, const Field& field, const std::vector<std::string>& options) {
  const std::string text = scalar(reader, field, "one of " + one_of(options));
  if (std::find(options.begin(), options.end(), text) == options.end())
    reader.fail(field, fmt::format("expected one of {}, got '{}'{}", one_of(options), text, suggestion(text, options)));
  return text;
}

// A seed: [s0, s1], or one integer s meaning [s, 0].
std::array<std::int64_t, 2> seed_pair(Reader& reader, const Field& field) {
  const auto min = std::numeric_limits<std::int64_t>::min();
  if (field.node.IsScalar()) return {integer(reader, field, min), 0};
  if (!field.node.IsSequence() || field.node.size() != 2)
    reader.fail(field, fmt::format("expected a seed: two integers [s0, s1] (or one integer), got {}",
                                   field.node.IsSequence() ? fmt::format("a list of {}", field.node.size())
                                                           : describe(field.node)));
  return {integer(reader, reader.child(field, field.node[0], field.path + "[0]"), min),
          integer(reader, reader.child(field, field.node[1], field.path + "[1]"), min)};
}

// A value that names a kind, with optional parameters: `kind` or `{kind: PARAMS}` (PARAMS may be empty).
// Returns the kind and the PARAMS field (an empty node for the scalar form).
std::pair<std::string, Field> tagged(Reader& reader, const Field& field, const std::vector<std::string>& kinds,
                                     const std::string& what) {
  const std::string expected = fmt::format("{}: one of {} (or a one-key map {{kind: {{...}}}})", what, one_of(kinds));
  if (field.node.IsScalar()) {
    const std::string kind = choice(reader, field, kinds);
    return {kind, Field{YAML::Node(), field.path + "." + kind, field.where}};
  }
  if (!field.node.IsMap() || field.node.size() != 1)
    reader.fail(field, fmt::format("expected {}, got {}", expected,
                                   field.node.IsMap() ? fmt::format("a map with {} keys", field.node.size())
                                                      : describe(field.node)));
  std::vector<KeyedField> entries = reader.entries(field);
  const KeyedField& entry = entries.front();
  if (std::find(kinds.begin(), kinds.end(), entry.key) == kinds.end())
    reader.fail(entry.key_where, field.path,
                fmt::format("unknown {} '{}'{}", what, entry.key,
                            suggestion(entry.key, kinds).empty() ? " (expected one of: " + one_of(kinds) + ")"
                                                                 : suggestion(entry.key, kinds)));
  return {entry.key, entry.value};
}

// ---- sections ----

MeshConfig read_mesh(Reader& reader, const Field& field) {
  MeshConfig mesh;
  mesh.where = field.where;
  Section section(reader, field, {"dims", "devices"});
  const Field dims = section.require("dims");
  std::vector<KeyedField> entries = reader.entries(dims, "a map of dim name -> size, e.g. {batch: 8}");
  if (entries.empty()) reader.fail(dims, "expected at least one dim, e.g. {batch: 8}");
  if (entries.size() > size_t(kMaxMeshDims))
    reader.fail(dims, fmt::format("{} dims; a mesh has at most {}", entries.size(), kMaxMeshDims));
  std::int64_t devices = 1;
  for (const KeyedField& entry : entries) {
    if (!is_identifier(entry.key))
      reader.fail(entry.key_where, dims.path,
                  fmt::format("'{}' is not a valid dim name (letters, digits, _)", shown(entry.key)));
    if (entry.key == "unsharded")
      reader.fail(entry.key_where, dims.path, "'unsharded' is reserved for layouts; name the dim otherwise");
    const int size = int(integer(reader, entry.value, 1, kMaxDevices));
    mesh.dims.push_back(MeshDimConfig{entry.key, size, entry.value.where});
    if (!checked_product(devices, size, kMaxDevices, &devices))
      reader.fail(entry.value, fmt::format("the mesh {{{}}} has more than {} devices (the most a mesh may have)",
                                           fmt::join(mesh.dim_names(), ", "), kMaxDevices));
  }
  if (auto devices = section.get("devices")) {
    mesh.devices = choice(reader, *devices, {"cpu", "gpu"}) == "cpu" ? DeviceKind::cpu : DeviceKind::gpu;
    mesh.devices_where = devices->where;
  } else {
    mesh.devices_where = field.where;
  }
  return mesh;
}

// Specs of one tensor: a list of mesh dim names or "unsharded", no dim twice.
std::vector<std::string> read_specs(Reader& reader, const Field& field, const MeshConfig& mesh) {
  if (!field.node.IsSequence() || field.node.size() == 0)
    reader.fail(field, fmt::format("expected a list of specs (mesh dims {} or unsharded), got {}",
                                   one_of(mesh.dim_names()), field.node.IsSequence() ? "an empty list" : describe(field.node)));
  std::vector<std::string> specs;
  std::vector<std::string> known = mesh.dim_names();
  known.push_back("unsharded");
  for (size_t i = 0; i < field.node.size(); ++i) {
    const Field spec_field = reader.child(field, field.node[i], fmt::format("{}[{}]", field.path, i));
    const std::string spec = scalar(reader, spec_field, "a mesh dim name or unsharded");
    if (std::find(known.begin(), known.end(), spec) == known.end())
      reader.fail(spec_field, fmt::format("'{}' is not a mesh dim (expected one of {}){}", shown(spec), one_of(known),
                                          suggestion(spec, known)));
    if (spec != "unsharded" && std::find(specs.begin(), specs.end(), spec) != specs.end())
      reader.fail(spec_field, fmt::format("mesh dim '{}' shards two axes; a dim may shard one axis only", spec));
    specs.push_back(spec);
  }
  return specs;
}

// Where a mesh dim's size was written, for messages that use it.
std::string dim_where(const MeshConfig& mesh, const std::string& name) {
  for (const MeshDimConfig& dim : mesh.dims)
    if (dim.name == name) return dim.where.str();
  return "";
}

// train, test[:5000], train[10%:], test[-100:] ...
// Read by data::parse_split_text (a scanner, with overflow-checked numbers), then held to the config's
// stricter form: (train|test)(\[(-?\d+%?)?:(-?\d+%?)?\])? with percentages in [-100, 100].
// folder_names (text_folder, image_folder): the name is a folder under data.path, any [A-Za-z0-9_-]+ the
// scanner takes (no '/' or '.': a split cannot leave data.path).
void check_split(Reader& reader, const Field& field, const std::string& split, bool folder_names = false) {
  const std::string expected =
      folder_names ? fmt::format("expected a split: a folder name under data.path (letters, digits, _ and -), "
                                 "optionally sliced like train[:80%] or train[-20%:], got '{}'",
                                 shown(split))
                   : fmt::format("expected a split: train or test, optionally sliced like train[:5000] or test[10%:], "
                                 "got '{}'",
                                 shown(split));
  data::SplitText text;
  try {
    text = data::parse_split_text(split);
  } catch (const UsageError& error) {
    const std::string what = error.what();
    // An overflowing number says so; any other syntax error gets the config's own wording.
    if (what.find("64 bits") != std::string::npos) reader.fail(field, what);
    reader.fail(field, expected);
  }
  if (!folder_names && text.name != "train" && text.name != "test") reader.fail(field, expected);
  if (split.find_first_of(" \t") != std::string::npos) reader.fail(field, expected);
  for (const auto& bound : {text.from, text.to}) {
    if (!bound) continue;
    if (bound->fractional) reader.fail(field, expected);
    if (bound->percent && bound->whole > 100)
      reader.fail(field, fmt::format("'{}': percentages must be in [-100, 100]", shown(split)));
  }
}

// data.validation_split: a fraction in (0, 1) (Keras' validation_split) or a split string (check_split).
void read_validation_split(Reader& reader, const Field& field, DataConfig& data) {
  const std::string text = scalar(reader, field, "a fraction in (0, 1) or a split like train[90%:]");
  data.validation_split_where = field.where;
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool numeric = !text.empty() && error == std::errc() && end == text.data() + text.size();
  if (!numeric && !text.empty() && (is_ascii_digit(text[0]) || text[0] == '-' || text[0] == '.'))
    reader.fail(field, fmt::format("expected a fraction in (0, 1) or a split like train[90%:], got '{}'", shown(text)));
  if (!numeric) {
    check_split(reader, field, text, has_split_folders(data.dataset));
    data.validation_split = text;
    return;
  }
  if (!(value > 0 && value < 1))
    reader.fail(field, fmt::format("expected a fraction in (0, 1) (the last part of the training split held out), "
                                   "got {}",
                                   text));
  data.validation_fraction = value;
}

// data.classes: a list of distinct, non-empty names without control characters.
std::vector<std::string> read_class_names(Reader& reader, const Field& field) {
  if (!field.node.IsSequence() || field.node.size() < 2)
    reader.fail(field, fmt::format("expected a list of at least 2 class names, got {}", describe(field.node)));
  std::vector<std::string> names;
  for (size_t i = 0; i < field.node.size(); ++i) {
    const Field item = reader.child(field, field.node[i], fmt::format("{}[{}]", field.path, i));
    std::string name = scalar(reader, item, "a class name");
    if (name.empty()) reader.fail(item, "expected a class name, got an empty string");
    if (const std::string why = bad_name(name); !why.empty()) reader.fail(item, why);
    if (std::find(names.begin(), names.end(), name) != names.end())
      reader.fail(item, fmt::format("class '{}' is named twice", shown(name)));
    names.push_back(std::move(name));
  }
  return names;
}

// image_folder's keys: image_shape [H, W, C] (required; C 1 grayscale or 3 rgb), resize, on_bad_file.
void read_image_folder_keys(Reader& reader, const Field& data_field, Section& section, DataConfig& data) {
  const Field image_shape = section.require("image_shape");
  data.image_shape_where = image_shape.where;
  const YAML::Node& node = image_shape.node;
  if (!node.IsSequence() || node.size() != 3)
    reader.fail(image_shape, fmt::format("expected [height, width, channels] (channels 1 for grayscale, 3 for rgb), got {}",
                                         describe(node)));
  for (size_t axis = 0; axis < 3; ++axis) {
    const Field extent = reader.child(image_shape, node[axis], fmt::format("{}[{}]", image_shape.path, axis));
    if (axis < 2) {
      data.image_shape.push_back(int(integer(reader, extent, 1, 1 << 15)));
    } else {
      const std::int64_t channels = integer(reader, extent, 1, 3);
      if (channels == 2) reader.fail(extent, "expected 1 (grayscale) or 3 (rgb) channels, got 2");
      data.image_shape.push_back(int(channels));
    }
  }
  if (auto resize = section.get("resize")) {
    data.resize = choice(reader, *resize, {"bilinear", "nearest", "none"});
    data.resize_where = resize->where;
  } else {
    data.resize_where = data_field.where;
  }
  if (auto on_bad_file = section.get("on_bad_file")) {
    data.on_bad_file = choice(reader, *on_bad_file, {"error", "skip"});
    data.on_bad_file_where = on_bad_file->where;
  } else {
    data.on_bad_file_where = data_field.where;
  }
}

// data.arrays (dataset arrays). The example shape is the features' (read from the file when it is there),
// or the one given, which must hold as many elements.
ArraysConfig read_arrays(Reader& reader, const Field& field, const std::string& path) {
  ArraysConfig arrays;
  arrays.where = field.where;
  Section section(reader, field, {"train", "test", "divide_by", "example_shape"});
  for (const char* split : {"train", "test"}) {
    const std::optional<Field> entry = section.get(split);
    if (!entry) continue;
    Section files(reader, *entry, {"features", "labels"});
    ArraySplitConfig config;
    config.where = entry->where;
    for (auto [key, target] : {std::pair{"features", &config.features}, std::pair{"labels", &config.labels}}) {
      const Field value = files.require(key);
      *target = scalar(reader, value, "an HDF5 dataset path or a .npy file name");
      if (target->empty()) reader.fail(value, "expected an HDF5 dataset path or a .npy file name, got an empty string");
      if (std::string(key) == "features") config.features_where = value.where;
    }
    arrays.splits[split] = config;
  }
  if (arrays.splits.empty())
    reader.fail(field, "expected train and/or test, e.g. {train: {features: /train/x, labels: /train/y}}");
  if (auto divide_by = section.get("divide_by")) arrays.divide_by = positive_number(reader, *divide_by);
  arrays.example_shape_where = field.where;
  if (auto shape = section.get("example_shape")) {
    if (!shape->node.IsSequence() || shape->node.size() == 0)
      reader.fail(*shape, fmt::format("expected a list of extents, e.g. [28, 28, 1], got {}", describe(shape->node)));
    for (size_t i = 0; i < shape->node.size(); ++i)
      arrays.example_shape.push_back(
          integer(reader, reader.child(*shape, shape->node[i], fmt::format("{}[{}]", shape->path, i)), 1, kMaxTensorElements));
    arrays.example_shape_given = true;
    arrays.example_shape_where = shape->where;
  }
  const ArraySplitConfig& first = arrays.splits.count("train") ? arrays.splits.at("train") : arrays.splits.at("test");
  if (!std::filesystem::exists(path)) {
    if (!arrays.example_shape_given)
      reader.fail(field, fmt::format("'{}' is not there to read the example shape from; give example_shape", path));
    return arrays;
  }
  Shape stored;
  try {
    const std::unique_ptr<data::ArrayFile> features = data::open_array(path, first.features);
    data::check_features(*features);
    stored = Shape(features->shape().begin() + 1, features->shape().end());
  } catch (const UsageError& error) {
    reader.fail(first.features_where, "data.arrays", error.what());
  }
  if (!arrays.example_shape_given) {
    arrays.example_shape.assign(stored.begin(), stored.end());
  } else if (num_elements(Shape(arrays.example_shape)) != num_elements(stored)) {
    reader.fail(arrays.example_shape_where, "data.arrays.example_shape",
                fmt::format("{} does not hold the examples of shape {} in '{}' ({})", shape_string(arrays.example_shape),
                            shape_string(stored), path, first.features));
  }
  return arrays;
}

// data.csv (dataset csv): the label and feature columns, checked against the header row when the file is there.
CsvConfig read_csv_columns(Reader& reader, const Field& field, const std::string& path) {
  CsvConfig csv;
  csv.where = field.where;
  Section section(reader, field, {"label", "features"});
  const Field label = section.require("label");
  csv.label = scalar(reader, label, "a column name");
  csv.label_where = label.where;
  if (csv.label.empty()) reader.fail(label, "expected a column name, got an empty string");
  csv.features_where = field.where;
  std::vector<Field> feature_fields;
  if (auto features = section.get("features")) {
    if (!features->node.IsSequence() || features->node.size() == 0)
      reader.fail(*features, fmt::format("expected a list of column names, got {}", describe(features->node)));
    for (size_t i = 0; i < features->node.size(); ++i) {
      const Field item = reader.child(*features, features->node[i], fmt::format("{}[{}]", features->path, i));
      const std::string name = scalar(reader, item, "a column name");
      if (name == csv.label) reader.fail(item, fmt::format("'{}' is the label column", shown(name)));
      if (std::find(csv.features.begin(), csv.features.end(), name) != csv.features.end())
        reader.fail(item, fmt::format("column '{}' is named twice", shown(name)));
      csv.features.push_back(name);
      feature_fields.push_back(item);
    }
    csv.features_given = true;
    csv.features_where = features->where;
  }
  if (!std::filesystem::exists(path)) {
    if (!csv.features_given)
      reader.fail(field, fmt::format("'{}' is not there to read the feature columns from; list them in features", path));
    return csv;
  }
  std::vector<std::string> header;
  try {
    header = data::read_csv_header(path);
  } catch (const UsageError& error) {
    reader.fail(field, error.what());
  }
  auto check_column = [&](const Field& at, const std::string& name) {
    if (std::find(header.begin(), header.end(), name) == header.end())
      reader.fail(at, fmt::format("'{}' has no column '{}'{} (columns: {})", path, shown(name), suggestion(name, header),
                                  one_of(header)));
  };
  check_column(label, csv.label);
  for (size_t i = 0; i < feature_fields.size(); ++i) check_column(feature_fields[i], csv.features[i]);
  if (!csv.features_given)
    for (const std::string& name : header)
      if (name != csv.label) csv.features.push_back(name);
  if (csv.features.empty()) reader.fail(label, fmt::format("'{}' has no column besides the label", path));
  return csv;
}

// The split names each dataset has: mnist and imdb train and test, arrays those data.arrays gives, csv
// only train (TFDS' name for a data set of one split, which test_split slices too).
void check_split_name(Reader& reader, const DataConfig& data, const std::string& split, const Where& where,
                      const std::string& key) {
  const std::string name = data::split_name(split);
  if (data.dataset == Dataset::csv && name != "train")
    reader.fail(where, "data." + key,
                fmt::format("a CSV file is the one split 'train'; slice it, e.g. train_split: train[:80%], "
                            "test_split: train[80%:] (got '{}')", shown(split)));
  if (data.dataset == Dataset::arrays && !data.arrays.splits.count(name))
    reader.fail(where, "data." + key, fmt::format("data.arrays has no '{}' entry (split '{}')", name, shown(split)));
}

DataConfig read_data(Reader& reader, const Field& field, const MeshConfig& mesh, const LoadOptions& options) {
  DataConfig data;
  data.where = field.where;
  Section section(reader, field,
                  {"dataset", "path", "train_split", "test_split", "vectorizer", "batch_size", "shuffle", "layout",
                   "image_shape", "classes", "validation_split", "resize", "on_bad_file", "arrays", "csv",
                   "prefetch"});

  const Field dataset = section.require("dataset");
  const std::string dataset_name =
      choice(reader, dataset, {"mnist", "imdb", "text_folder", "image_folder", "arrays", "csv"});
  data.dataset = dataset_name == "mnist"          ? Dataset::mnist
                 : dataset_name == "imdb"         ? Dataset::imdb
                 : dataset_name == "text_folder"  ? Dataset::text_folder
                 : dataset_name == "image_folder" ? Dataset::image_folder
                 : dataset_name == "arrays"       ? Dataset::arrays
                                                  : Dataset::csv;
  data.dataset_where = dataset.where;

  const Field path = section.require("path");
  data.path = scalar(reader, path, "a path");
  data.path_where = path.where;
  if (data.path.empty()) reader.fail(path, "expected a path, got an empty string");

  for (auto [key, target, target_where] :
       {std::tuple{"train_split", &data.train_split, &data.train_split_where},
        std::tuple{"test_split", &data.test_split, &data.test_split_where}}) {
    *target_where = field.where;
    if (auto split = section.get(key)) {
      *target = scalar(reader, *split, "a split name");
      *target_where = split->where;
      check_split(reader, *split, *target, has_split_folders(data.dataset));
    }
  }
  data.validation_split_where = field.where;
  if (auto validation = section.get("validation_split")) read_validation_split(reader, *validation, data);

  // Arrays and CSV files are read now, for their example shape: a missing path is an error first.
  if (options.check_data_path && (data.dataset == Dataset::arrays || data.dataset == Dataset::csv) &&
      !std::filesystem::exists(data.path))
    reader.fail(path, fmt::format("'{}' does not exist", data.path));
  for (auto [key, kind, target] : {std::tuple{"arrays", Dataset::arrays, 0}, std::tuple{"csv", Dataset::csv, 1}}) {
    const std::optional<Field> given = section.get(key);
    if (given && data.dataset != kind) reader.fail(*given, fmt::format("only dataset {} reads this key; remove it", key));
    if (!given && data.dataset == kind)
      reader.fail(field, fmt::format("missing required key '{}' (dataset {}), e.g. {}", key, key,
                                     kind == Dataset::arrays ? "{train: {features: /train/x, labels: /train/y}}"
                                                             : "{label: species}"));
    if (given && target == 0) data.arrays = read_arrays(reader, *given, data.path);
    if (given && target == 1) data.csv = read_csv_columns(reader, *given, data.path);
  }
  check_split_name(reader, data, data.train_split, data.train_split_where, "train_split");
  check_split_name(reader, data, data.test_split, data.test_split_where, "test_split");
  if (!data.validation_split.empty())
    check_split_name(reader, data, data.validation_split, data.validation_split_where, "validation_split");

  if (auto vectorizer = section.get("vectorizer")) {
    if (!is_text(data.dataset))
      reader.fail(*vectorizer, "only datasets imdb and text_folder use a vectorizer; remove this key");
    Section vectorizer_section(reader, *vectorizer, {"mode", "max_tokens", "output_sequence_length"});
    if (auto mode = vectorizer_section.get("mode")) data.vectorizer.mode = choice(reader, *mode, {"tf_idf", "int"});
    const bool ids = data.vectorizer.mode == "int";
    const Field max_tokens = vectorizer_section.require("max_tokens");
    data.vectorizer.max_tokens = int(integer(reader, max_tokens, ids ? 3 : 2, 1 << 24));
    data.vectorizer.where = max_tokens.where;
    if (ids) {
      const Field length = vectorizer_section.require("output_sequence_length");
      data.vectorizer.output_sequence_length = int(integer(reader, length, 1, 1 << 20));
      data.vectorizer.sequence_length_where = length.where;
    } else if (auto length = vectorizer_section.get("output_sequence_length")) {
      reader.fail(*length, "output_sequence_length is for mode int (token ids); mode tf_idf gives max_tokens weights");
    }
  } else if (is_text(data.dataset)) {
    reader.fail(field, fmt::format("missing required key 'vectorizer' (dataset {}), e.g. {{mode: tf_idf, max_tokens: 1200}}",
                                   to_string(data.dataset)));
  }

  if (data.dataset == Dataset::image_folder) {
    read_image_folder_keys(reader, field, section, data);
  } else if (auto image_shape = section.get("image_shape")) {
    if (data.dataset != Dataset::mnist) reader.fail(*image_shape, "only datasets mnist and image_folder have an image_shape");
    data.image_shape_where = image_shape->where;
    const YAML::Node& node = image_shape->node;
    const bool flat = node.IsScalar() && node.Scalar() == "flat";
    // [28, 28, 1]: NHWC with one channel, what conv2d takes.
    const bool square = node.IsSequence() && (node.size() == 2 || node.size() == 3) && node[0].IsScalar() &&
                        node[1].IsScalar() && node[0].Scalar() == "28" && node[1].Scalar() == "28" &&
                        (node.size() == 2 || (node[2].IsScalar() && node[2].Scalar() == "1"));
    if (!flat && !square)
      reader.fail(*image_shape, fmt::format("expected flat, [28, 28] or [28, 28, 1], got {}", describe(node)));
    if (square) data.image_shape = node.size() == 2 ? std::vector<int>{28, 28} : std::vector<int>{28, 28, 1};
  } else {
    data.image_shape_where = field.where;
  }
  if (data.dataset != Dataset::image_folder) {
    for (const char* key : {"resize", "on_bad_file"})
      if (auto given = section.get(key)) reader.fail(*given, "only dataset image_folder has this key; remove it");
  }

  data.classes_where = field.where;
  if (auto classes = section.get("classes")) {
    data.classes = read_class_names(reader, *classes);
    data.classes_where = classes->where;
    const int known = known_class_count(data.dataset);
    if (known > 0 && int(data.classes.size()) != known)
      reader.fail(*classes, fmt::format("dataset {} has {} classes, but {} names are given", to_string(data.dataset),
                                        known, data.classes.size()));
  }

  const Field batch_size = section.require("batch_size");
  data.batch_size = integer(reader, batch_size, 1);
  data.batch_size_where = batch_size.where;

  data.prefetch_where = field.where;
  if (auto prefetch = section.get("prefetch")) {
    data.prefetch = integer(reader, *prefetch, 0, 256);
    data.prefetch_where = prefetch->where;
  }

  if (auto shuffle = section.get("shuffle")) {
    data.shuffle.where = shuffle->where;
    if (shuffle->node.IsScalar()) {
      data.shuffle.enabled = boolean(reader, *shuffle);
    } else {
      Section shuffle_section(reader, *shuffle, {"seed"});
      data.shuffle.enabled = true;
      if (auto seed = shuffle_section.get("seed")) data.shuffle.seed = std::uint64_t(integer(reader, *seed, 0));
    }
  }

  const std::vector<std::int64_t> example = data.example_shape();
  if (auto layout = section.get("layout")) {
    data.layout = read_specs(reader, *layout, mesh);
    data.layout_given = true;
    data.layout_where = layout->where;
    if (data.layout.size() != example.size() + 1)
      reader.fail(*layout, fmt::format("the input x has rank {} (batch{}), but the layout has {} specs",
                                       example.size() + 1,
                                       fmt::format(", {}", fmt::join(example, ", ")), data.layout.size()));
  } else {
    data.layout.assign(example.size() + 1, "unsharded");
    data.layout[0] = mesh.dims.front().name;
    data.layout_where = field.where;
  }

  // The global batch is cut into equal shards along data.layout[0]; each feature axis likewise.
  const int batch_shards = mesh.size_of(data.layout[0]);
  if (data.batch_size % batch_shards != 0)
    reader.fail(batch_size, fmt::format("the global batch {} must be divisible by {}, the size of mesh dim '{}' "
                                        "({}) that shards the batch (data.layout[0])",
                                        data.batch_size, batch_shards, data.layout[0], dim_where(mesh, data.layout[0])));
  for (size_t axis = 1; axis < data.layout.size(); ++axis) {
    const int shards = mesh.size_of(data.layout[axis]);
    if (example[axis - 1] % shards != 0)
      reader.fail(data.layout_where, "data.layout",
                  fmt::format("axis {} of the input x has {} elements, not divisible by {}, the size of mesh "
                              "dim '{}' ({})",
                              axis, example[axis - 1], shards, data.layout[axis], dim_where(mesh, data.layout[axis])));
  }

  if (options.check_data_path && !std::filesystem::exists(data.path)) {
    if (data.dataset == Dataset::text_folder)
      reader.fail(path, fmt::format("'{}' does not exist (expected {}/<split>/<class>/*.txt)", data.path, data.path));
    reader.fail(path, fmt::format("'{}' does not exist (scripts/fetch_data.sh {} {} fetches it)", data.path,
                                  to_string(data.dataset), data.path));
  }
  return data;
}

InitializerConfig read_initializer(Reader& reader, const Field& field, std::array<std::int64_t, 2> default_seed) {
  InitializerConfig init;
  init.where = field.where;
  init.seed = default_seed;
  const auto [kind, params] = tagged(reader, field, {"zeros", "ones", "normal", "uniform", "glorot_uniform"},
                                     "initializer");
  if (kind == "zeros" || kind == "ones") {
    init.kind = kind == "zeros" ? InitKind::zeros : InitKind::ones;
    Section section(reader, params, {});
    return init;
  }
  init.kind = kind == "normal" ? InitKind::normal : kind == "uniform" ? InitKind::uniform : InitKind::glorot_uniform;
  std::vector<std::string> known{"seed"};
  if (init.kind == InitKind::normal) known.insert(known.end(), {"mean", "stddev"});
  if (init.kind == InitKind::uniform) known.insert(known.end(), {"minval", "maxval"});
  Section section(reader, params, known);
  if (auto seed = section.get("seed")) init.seed = seed_pair(reader, *seed), init.seed_given = true;
  if (auto mean = section.get("mean")) init.mean = number(reader, *mean);
  if (auto stddev = section.get("stddev")) init.stddev = positive_number(reader, *stddev);
  if (auto minval = section.get("minval")) init.minval = number(reader, *minval);
  if (auto maxval = section.get("maxval")) init.maxval = number(reader, *maxval);
  if (init.kind == InitKind::uniform && !(init.minval < init.maxval))
    reader.fail(field, fmt::format("expected minval < maxval, got {} and {}", init.minval, init.maxval));
  return init;
}

// An activation name (none, relu, softmax, sigmoid, tanh, gelu).
Activation read_activation(Reader& reader, const Field& field) {
  const std::string name = choice(reader, field, kActivations);
  return Activation(std::find(kActivations.begin(), kActivations.end(), name) - kActivations.begin());
}

PaddingKind read_padding(Reader& reader, const Field& field) {
  return choice(reader, field, {"same", "valid"}) == "same" ? PaddingKind::same : PaddingKind::valid;
}

// A window extent or stride: one integer n (meaning [n, n]) or [h, w], each in [1, 4096].
std::array<int, 2> int_pair(Reader& reader, const Field& field, const std::string& what) {
  constexpr int kMax = 4096;
  if (field.node.IsScalar()) {
    const int n = int(integer(reader, field, 1, kMax));
    return {n, n};
  }
  if (!field.node.IsSequence() || field.node.size() != 2)
    reader.fail(field, fmt::format("expected {}: one integer or [height, width], got {}", what, describe(field.node)));
  return {int(integer(reader, reader.child(field, field.node[0], field.path + "[0]"), 1, kMax)),
          int(integer(reader, reader.child(field, field.node[1], field.path + "[1]"), 1, kMax))};
}

std::string default_name_stem(LayerKind kind) { return kind == LayerKind::batch_norm ? "bn" : to_string(kind); }

LayerConfig read_layer(Reader& reader, const Field& field, int index, std::map<LayerKind, int>& counts,
                       const MeshConfig& mesh) {
  LayerConfig layer;
  layer.where = field.where;
  std::vector<KeyedField> entries =
      reader.entries(field, fmt::format("a layer: a map with one of {}, e.g. {{dense: 128, activation: relu}}",
                                        one_of(kLayerKinds)));
  const KeyedField* type = nullptr;
  for (const KeyedField& entry : entries) {
    if (std::find(kLayerKinds.begin(), kLayerKinds.end(), entry.key) == kLayerKinds.end()) continue;
    if (type) reader.fail(entry.key_where, field.path,
                          fmt::format("a layer has one type, got both '{}' and '{}'", type->key, entry.key));
    type = &entry;
  }
  if (!type) {
    // The likeliest intent: a misspelt layer type.
    for (const KeyedField& entry : entries) {
      const std::string hint = suggestion(entry.key, kLayerKinds);
      if (!hint.empty()) reader.fail(entry.key_where, field.path, fmt::format("unknown layer type '{}'{}", entry.key, hint));
    }
    reader.fail(field, fmt::format("expected a layer: a map with one of {}, got {}", one_of(kLayerKinds),
                                   entries.empty() ? "an empty map" : "keys " + entries.front().key + "..."));
  }
  const std::string kind = type->key;
  layer.kind = LayerKind(std::find(kLayerKinds.begin(), kLayerKinds.end(), kind) - kLayerKinds.begin());
  const int number_of_kind = ++counts[layer.kind];

  std::vector<std::string> known{kind, "name"};
  if (layer.kind == LayerKind::dense) known.insert(known.end(), {"activation", "use_bias", "init", "bias_init"});
  if (layer.kind == LayerKind::conv2d)
    known.insert(known.end(), {"kernel_size", "strides", "padding", "activation", "use_bias", "init", "bias_init"});
  if (layer.kind == LayerKind::max_pool2d || layer.kind == LayerKind::avg_pool2d)
    known.insert(known.end(), {"strides", "padding"});
  if (layer.kind == LayerKind::embedding) known.insert(known.end(), {"input_dim", "init"});
  if (layer.kind == LayerKind::dropout) known.push_back("seed");
  Section section(reader, field, known, fmt::format("{} ({})", field.path, kind));
  const Field value = *section.get(kind);
  const std::int64_t seed_base = 1000 + index;

  switch (layer.kind) {
    case LayerKind::dense: {
      layer.dense.units = int(integer(reader, value, 1, std::numeric_limits<int>::max()));
      layer.dense.units_where = value.where;
      if (auto activation = section.get("activation")) layer.dense.activation = read_activation(reader, *activation);
      if (auto use_bias = section.get("use_bias")) layer.dense.use_bias = boolean(reader, *use_bias);
      layer.dense.kernel_init.kind = InitKind::glorot_uniform;
      layer.dense.kernel_init.seed = {seed_base, 0};
      layer.dense.kernel_init.where = value.where;
      if (auto init = section.get("init")) layer.dense.kernel_init = read_initializer(reader, *init, {seed_base, 0});
      layer.dense.bias_init.seed = {seed_base, 1};
      layer.dense.bias_init.where = value.where;
      if (auto init = section.get("bias_init")) {
        if (!layer.dense.use_bias) reader.fail(*init, "use_bias is false, so there is no bias to initialize");
        layer.dense.bias_init = read_initializer(reader, *init, {seed_base, 1});
      }
      break;
    }
    case LayerKind::batch_norm: {
      Section params(reader, value, {"center", "scale", "momentum", "epsilon"});
      BatchNormConfig& bn = layer.batch_norm;
      const bool keras_style = value.node.IsMap() && value.node.size() > 0;
      if (keras_style) bn = BatchNormConfig{false, true, true, 0.99, 1e-3};
      if (auto center = params.get("center")) bn.center = boolean(reader, *center);
      if (auto scale = params.get("scale")) bn.scale = boolean(reader, *scale);
      if (auto momentum = params.get("momentum")) bn.momentum = fraction(reader, *momentum);
      if (auto epsilon = params.get("epsilon")) bn.epsilon = positive_number(reader, *epsilon);
      break;
    }
    case LayerKind::dropout: {
      layer.dropout.rate = fraction(reader, value);
      layer.dropout.seed = {seed_base, 2};
      if (auto seed = section.get("seed")) layer.dropout.seed = seed_pair(reader, *seed), layer.dropout.seed_given = true;
      break;
    }
    case LayerKind::conv2d: {
      Conv2dConfig& conv = layer.conv2d;
      conv.filters = int(integer(reader, value, 1, 1 << 20));
      conv.filters_where = value.where;
      const Field kernel_size = section.require("kernel_size");
      conv.kernel_size = int_pair(reader, kernel_size, "a kernel size");
      conv.kernel_size_where = kernel_size.where;
      if (auto strides = section.get("strides")) conv.strides = int_pair(reader, *strides, "strides");
      if (auto padding = section.get("padding")) conv.padding = read_padding(reader, *padding);
      if (auto activation = section.get("activation")) conv.activation = read_activation(reader, *activation);
      if (auto use_bias = section.get("use_bias")) conv.use_bias = boolean(reader, *use_bias);
      conv.kernel_init.kind = InitKind::glorot_uniform;
      conv.kernel_init.seed = {seed_base, 0};
      conv.kernel_init.where = value.where;
      if (auto init = section.get("init")) conv.kernel_init = read_initializer(reader, *init, {seed_base, 0});
      conv.bias_init.seed = {seed_base, 1};
      conv.bias_init.where = value.where;
      if (auto init = section.get("bias_init")) {
        if (!conv.use_bias) reader.fail(*init, "use_bias is false, so there is no bias to initialize");
        conv.bias_init = read_initializer(reader, *init, {seed_base, 1});
      }
      break;
    }
    case LayerKind::max_pool2d:
    case LayerKind::avg_pool2d: {
      layer.pool2d.pool_size = int_pair(reader, value, "a pool size");
      layer.pool2d.strides = layer.pool2d.pool_size;
      if (auto strides = section.get("strides")) layer.pool2d.strides = int_pair(reader, *strides, "strides");
      if (auto padding = section.get("padding")) layer.pool2d.padding = read_padding(reader, *padding);
      break;
    }
    case LayerKind::embedding: {
      EmbeddingConfig& embedding = layer.embedding;
      embedding.output_dim = int(integer(reader, value, 1, 1 << 20));
      embedding.output_dim_where = value.where;
      embedding.input_dim_where = value.where;
      if (auto input_dim = section.get("input_dim")) {
        embedding.input_dim = int(integer(reader, *input_dim, 1, 1 << 28));
        embedding.input_dim_where = input_dim->where;
      }
      embedding.init.kind = InitKind::uniform;
      embedding.init.seed = {seed_base, 0};
      embedding.init.where = value.where;
      if (auto init = section.get("init")) embedding.init = read_initializer(reader, *init, {seed_base, 0});
      break;
    }
    case LayerKind::layer_norm: {
      Section params(reader, value, {"epsilon", "center", "scale"});
      if (auto epsilon = params.get("epsilon")) layer.layer_norm.epsilon = positive_number(reader, *epsilon);
      if (auto center = params.get("center")) layer.layer_norm.center = boolean(reader, *center);
      if (auto scale = params.get("scale")) layer.layer_norm.scale = boolean(reader, *scale);
      break;
    }
    case LayerKind::relayout: {
      layer.relayout.specs = read_specs(reader, value, mesh);
      layer.relayout.where = value.where;
      break;
    }
    case LayerKind::flatten:
    case LayerKind::relu:
    case LayerKind::softmax:
    case LayerKind::global_average_pool:
    case LayerKind::sigmoid:
    case LayerKind::tanh:
    case LayerKind::gelu: {
      Section params(reader, value, {});
      break;
    }
  }

  layer.name = default_name_stem(layer.kind) + std::to_string(number_of_kind);
  if (auto name = section.get("name")) {
    layer.name = scalar(reader, *name, "a layer name");
    layer.name_given = true;
    if (layer.name.size() > kMaxNameLength)
      reader.fail(*name, fmt::format("'{}' is too long for a layer name: at most {} characters", shown(layer.name),
                                     kMaxNameLength));
    if (!is_layer_name(layer.name))
      reader.fail(*name, fmt::format("'{}' is not a valid layer name (letters, digits, _ . -; it becomes part of "
                                     "variable paths like NAME/kernel)",
                                     shown(layer.name)));
  }
  return layer;
}

std::vector<LayerConfig> read_model(Reader& reader, const Field& field, const MeshConfig& mesh) {
  if (!field.node.IsSequence() || field.node.size() == 0)
    reader.fail(field, fmt::format("expected a list of layers, e.g. [{{dense: 128, activation: relu}}, {{dense: 10}}], "
                                   "got {}",
                                   field.node.IsSequence() ? "an empty list" : describe(field.node)));
  std::vector<LayerConfig> model;
  std::map<LayerKind, int> counts;
  std::map<std::string, Where> names;
  for (size_t i = 0; i < field.node.size(); ++i) {
    const Field item = reader.child(field, field.node[i], fmt::format("model[{}]", i));
    LayerConfig layer = read_layer(reader, item, int(i), counts, mesh);
    auto [earlier, inserted] = names.emplace(layer.name, layer.where);
    if (!inserted)
      reader.fail(item, fmt::format("layer name '{}' is already used (at {}){}", layer.name, earlier->second.str(),
                                    layer.name_given ? "" : "; give this layer a name"));
    model.push_back(std::move(layer));
  }
  return model;
}

std::vector<LayoutRule> read_layouts(Reader& reader, const Field& field, const MeshConfig& mesh) {
  std::vector<LayoutRule> rules;
  int index = 0;
  for (const KeyedField& entry : reader.entries(field, "a map of variable regex -> specs, e.g. {dense1/kernel: [unsharded, model]}")) {
    LayoutRule rule;
    rule.pattern = entry.key;
    rule.where = entry.key_where;
    reader.locations[fmt::format("layouts[{}]", index++)] = entry.key_where;
    // entries() has bounded the key (kMaxNameLength, no control characters). RE2 checks it: linear time,
    // bounded stack, whatever the pattern (std::regex recursed once per group or character).
    std::string error;
    if (!nn::compile_layout_pattern(entry.key, &error))
      reader.fail(entry.key_where, "layouts",
                  fmt::format("'{}' is not a valid regular expression (RE2 syntax): {}", shown(entry.key), error));
    const Field specs{entry.value.node, fmt::format("layouts['{}']", entry.key), entry.value.where};
    rule.specs = read_specs(reader, specs, mesh);
    rules.push_back(std::move(rule));
  }
  return rules;
}

// The model's shapes from the example shape on, layer by layer, as the engine will make them: every size the
// config's numbers multiply into (a batch of examples, each kernel or table, each layer's activations) with
// overflow-checked products (more than kMaxTensorElements is an error at the number), layers given an input
// they cannot take (a conv2d on flat pixels, a relayout of the wrong rank), and spatially sharded image axes
// (data.layout, relayout) that a window layer would cut into uneven bands: an error at that layout.
void check_shapes(Reader& reader, const DataConfig& data, const std::vector<LayerConfig>& model, const MeshConfig& mesh) {
  std::vector<std::int64_t> shape = data.example_shape();
  std::int64_t features = 1;
  for (std::int64_t extent : shape)
    if (!checked_product(features, extent, kMaxTensorElements, &features))
      reader.fail(data.where, "data", fmt::format("an example has more than {} elements", kMaxTensorElements));
  std::int64_t elements = 0;
  if (!checked_product(data.batch_size, features, kMaxTensorElements, &elements))
    reader.fail(data.batch_size_where, "data.batch_size",
                fmt::format("a batch of {} examples of {} elements each has more than {} elements (the most a "
                            "tensor may have)",
                            data.batch_size, features, kMaxTensorElements));
  // The specs of the example's axes (batch excluded) and where they were set.
  std::vector<std::string> specs(data.layout.begin() + 1, data.layout.end());
  Where specs_where = data.layout_where;
  std::string specs_path = "data.layout";
  const auto unshard = [&] { specs.assign(shape.size(), "unsharded"); };
  const auto shape_text = [&] { return fmt::format("[batch, {}]", fmt::join(shape, ", ")); };

  for (size_t i = 0; i < model.size(); ++i) {
    const LayerConfig& layer = model[i];
    const std::string path = fmt::format("model[{}].{}", i, to_string(layer.kind));
    const std::string name = fmt::format("layer '{}' ({})", layer.name, layer.where.str());
    // The number of elements of a variable or kernel, checked.
    const auto product = [&](std::initializer_list<std::int64_t> extents, const Where& where, const std::string& what) {
      std::int64_t total = 1;
      for (std::int64_t extent : extents)
        if (!checked_product(total, extent, kMaxTensorElements, &total))
          reader.fail(where, path, fmt::format("{} has more than {} elements (the most a tensor may have)", what,
                                               kMaxTensorElements));
      return total;
    };
    const auto needs_image = [&] {
      if (shape.size() != 3)
        reader.fail(layer.where, path,
                    fmt::format("{} takes image batches [batch, height, width, channels], but its input is {} (for "
                                "MNIST: data.image_shape: [28, 28, 1])",
                                to_string(layer.kind), shape_text()));
    };
    // A window over the image's height and width: the output extents, and the bands of a sharded axis.
    const auto window = [&](std::array<int, 2> kernel, std::array<int, 2> strides, PaddingKind padding_kind) {
      const ops::Padding padding = padding_kind == PaddingKind::same ? ops::Padding::Same : ops::Padding::Valid;
      for (int axis = 0; axis < 2; ++axis) {
        const std::int64_t out = ops::window_output_extent(shape[axis], kernel[axis], strides[axis], padding);
        if (out == 0)
          reader.fail(layer.where, path,
                      fmt::format("a {}-wide window does not fit the {} {} of its input {} with padding valid",
                                  kernel[axis], shape[axis], axis == 0 ? "rows" : "columns", shape_text()));
        const std::string problem =
            ops::window_band_problem(name, axis + 1, shape[axis], mesh.size_of(specs[axis]), specs[axis], kernel[axis],
                                     strides[axis], padding);
        if (!problem.empty()) reader.fail(specs_where, specs_path, problem);
        shape[axis] = out;
      }
    };
    switch (layer.kind) {
      case LayerKind::flatten:
        shape = {features};
        unshard();
        break;
      case LayerKind::dense: {
        const std::int64_t in = shape.back(), units = layer.dense.units;
        product({in, units}, layer.dense.units_where, fmt::format("the kernel {} x {}", in, units));
        shape.back() = units;
        specs.back() = "unsharded";
        break;
      }
      case LayerKind::conv2d: {
        needs_image();
        const Conv2dConfig& conv = layer.conv2d;
        product({conv.kernel_size[0], conv.kernel_size[1], shape[2], conv.filters}, conv.filters_where,
                fmt::format("the kernel {} x {} x {} x {}", conv.kernel_size[0], conv.kernel_size[1], shape[2],
                            conv.filters));
        window(conv.kernel_size, conv.strides, conv.padding);
        shape[2] = conv.filters;
        specs[2] = "unsharded";
        break;
      }
      case LayerKind::max_pool2d:
      case LayerKind::avg_pool2d:
        needs_image();
        window(layer.pool2d.pool_size, layer.pool2d.strides, layer.pool2d.padding);
        break;
      case LayerKind::global_average_pool:  // images [H, W, C] or sequences [steps, features]
        if (shape.size() != 2) needs_image();
        shape = {shape.back()};
        unshard();
        break;
      case LayerKind::embedding: {
        const EmbeddingConfig& embedding = layer.embedding;
        product({embedding.input_dim, embedding.output_dim}, embedding.output_dim_where,
                fmt::format("the table {} x {}", embedding.input_dim, embedding.output_dim));
        shape.push_back(embedding.output_dim);
        specs.push_back("unsharded");
        break;
      }
      case LayerKind::relayout:
        if (layer.relayout.specs.size() != shape.size() + 1)
          reader.fail(layer.relayout.where, path,
                      fmt::format("the activations here are {} (rank {}), but the relayout has {} specs",
                                  shape_text(), shape.size() + 1, layer.relayout.specs.size()));
        specs.assign(layer.relayout.specs.begin() + 1, layer.relayout.specs.end());
        for (size_t axis = 0; axis < shape.size(); ++axis) {
          const int shards = mesh.size_of(specs[axis]);
          if (shape[axis] % shards != 0)
            reader.fail(layer.relayout.where, path,
                        fmt::format("axis {} of the activations {} has {} elements, not divisible by {}, the size of "
                                    "mesh dim '{}'",
                                    axis + 1, shape_text(), shape[axis], shards, specs[axis]));
        }
        specs_where = layer.relayout.where;
        specs_path = path;
        break;
      default:  // elementwise and normalizing layers keep the shape
        break;
    }
    features = 1;
    std::int64_t activations = 0;
    for (std::int64_t extent : shape)
      if (!checked_product(features, extent, kMaxTensorElements, &features)) features = kMaxTensorElements + 1;
    if (features > kMaxTensorElements || !checked_product(data.batch_size, features, kMaxTensorElements, &activations))
      reader.fail(layer.where, path,
                  fmt::format("the layer's output for a batch of {} has more than {} elements (the most a tensor "
                              "may have)",
                              data.batch_size, kMaxTensorElements));
  }
}

// Embedding tables without input_dim take the int vectorizer's max_tokens (the ids are below it).
void fill_embedding_vocabulary(Reader& reader, const DataConfig& data, std::vector<LayerConfig>& model) {
  for (size_t i = 0; i < model.size(); ++i) {
    EmbeddingConfig& embedding = model[i].embedding;
    if (model[i].kind != LayerKind::embedding || embedding.input_dim > 0) continue;
    if (!is_text(data.dataset) || data.vectorizer.mode != "int")
      reader.fail(model[i].where, fmt::format("model[{}].embedding", i),
                  "missing key 'input_dim' (the vocabulary size); it defaults to data.vectorizer.max_tokens only "
                  "with vectorizer mode int");
    embedding.input_dim = data.vectorizer.max_tokens;
  }
}

// optimizer.KIND.schedule (see OptimizerConfig); `learning_rate` is the optimizer's, given or not.
optim::LearningRateSchedule read_schedule(Reader& reader, const Field& field, double learning_rate,
                                          const std::optional<Field>& learning_rate_field) {
  optim::LearningRateSchedule schedule;
  schedule.learning_rate = learning_rate;
  const std::vector<std::string> kinds{"constant", "cosine", "linear", "exponential", "step"};
  const auto [kind, params] = tagged(reader, field, kinds, "schedule");
  std::vector<std::string> known{"warmup_steps"};
  if (kind == "cosine") known.insert(known.end(), {"decay_steps", "alpha"});
  if (kind == "linear") known.insert(known.end(), {"decay_steps", "end_learning_rate"});
  if (kind == "exponential") known.insert(known.end(), {"decay_steps", "decay_rate", "staircase"});
  if (kind == "step") known.insert(known.end(), {"boundaries", "values"});
  Section section(reader, params, known, fmt::format("{} ({} schedule)", params.path, kind));
  if (auto warmup = section.get("warmup_steps")) schedule.warmup_steps = integer(reader, *warmup, 0);
  if (kind == "constant") schedule.kind = optim::ScheduleKind::constant;
  if (kind == "cosine") schedule.kind = optim::ScheduleKind::cosine;
  if (kind == "linear") schedule.kind = optim::ScheduleKind::linear;
  if (kind == "exponential") schedule.kind = optim::ScheduleKind::exponential;
  if (kind == "step") schedule.kind = optim::ScheduleKind::step;
  if (kind == "cosine" || kind == "linear" || kind == "exponential")
    schedule.decay_steps = integer(reader, section.require("decay_steps"), 1);
  if (auto alpha = section.get("alpha")) {
    schedule.alpha = number(reader, *alpha);
    if (!(schedule.alpha >= 0 && schedule.alpha <= 1))
      reader.fail(*alpha, fmt::format("expected a number in [0, 1] (the final rate as a fraction of learning_rate), "
                                      "got {}", schedule.alpha));
  }
  if (auto end = section.get("end_learning_rate")) {
    schedule.end_learning_rate = number(reader, *end);
    if (!(schedule.end_learning_rate >= 0))
      reader.fail(*end, fmt::format("expected a number >= 0, got {}", schedule.end_learning_rate));
  }
  if (kind == "exponential") schedule.decay_rate = positive_number(reader, section.require("decay_rate"));
  if (auto staircase = section.get("staircase")) schedule.staircase = boolean(reader, *staircase);
  if (kind == "step") {
    const Field boundaries = section.require("boundaries");
    if (!boundaries.node.IsSequence() || boundaries.node.size() == 0)
      reader.fail(boundaries, fmt::format("expected a list of steps, got {}",
                                          boundaries.node.IsSequence() ? "an empty list" : describe(boundaries.node)));
    for (size_t i = 0; i < boundaries.node.size(); ++i) {
      const Field item = reader.child(boundaries, boundaries.node[i], fmt::format("{}[{}]", boundaries.path, i));
      const std::int64_t step = integer(reader, item, schedule.boundaries.empty() ? 0 : schedule.boundaries.back() + 1);
      schedule.boundaries.push_back(step);
    }
    const Field values = section.require("values");
    if (!values.node.IsSequence() || values.node.size() != schedule.boundaries.size() + 1)
      reader.fail(values, fmt::format("expected a list of {} learning rates (one more than boundaries), got {}",
                                      schedule.boundaries.size() + 1,
                                      values.node.IsSequence() ? fmt::format("{}", values.node.size())
                                                               : describe(values.node)));
    for (size_t i = 0; i < values.node.size(); ++i)
      schedule.values.push_back(
          positive_number(reader, reader.child(values, values.node[i], fmt::format("{}[{}]", values.path, i))));
    if (learning_rate_field && schedule.values.front() != learning_rate)
      reader.fail(*learning_rate_field,
                  fmt::format("{} but the step schedule's values[0] is {}: the schedule's values are the rates; "
                              "drop learning_rate or make them equal",
                              learning_rate, schedule.values.front()));
    schedule.learning_rate = schedule.values.front();
  }
  return schedule;
}

// train.optimizer (see OptimizerConfig).
OptimizerConfig read_optimizer(Reader& reader, const Field& optimizer) {
  OptimizerConfig opt;
  opt.where = optimizer.where;
  const auto [kind, params] = tagged(reader, optimizer, {"sgd", "adam", "adamw"}, "optimizer");
  opt.kind = kind == "sgd" ? OptimizerKind::sgd : kind == "adam" ? OptimizerKind::adam : OptimizerKind::adamw;
  opt.learning_rate = opt.kind == OptimizerKind::sgd ? 0.01 : 0.001;
  if (opt.kind == OptimizerKind::adamw) opt.weight_decay = 0.004;
  std::vector<std::string> known{"learning_rate", "weight_decay", "schedule"};
  if (opt.kind == OptimizerKind::sgd) known.insert(known.end(), {"momentum", "nesterov"});
  if (opt.kind != OptimizerKind::sgd) known.insert(known.end(), {"beta_1", "beta_2", "epsilon"});
  Section params_section(reader, params, known);
  const std::optional<Field> lr = params_section.get("learning_rate");
  if (lr) opt.learning_rate = positive_number(reader, *lr);
  if (auto beta = params_section.get("beta_1")) opt.beta_1 = fraction(reader, *beta);
  if (auto beta = params_section.get("beta_2")) opt.beta_2 = fraction(reader, *beta);
  if (auto epsilon = params_section.get("epsilon")) opt.epsilon = positive_number(reader, *epsilon);
  if (auto momentum = params_section.get("momentum")) opt.momentum = fraction(reader, *momentum);
  if (auto nesterov = params_section.get("nesterov")) {
    opt.nesterov = boolean(reader, *nesterov);
    if (opt.nesterov && opt.momentum == 0)
      reader.fail(*nesterov, "nesterov needs a momentum > 0 (e.g. momentum: 0.9)");
  }
  if (auto decay = params_section.get("weight_decay")) {
    opt.weight_decay = number(reader, *decay);
    if (!(opt.weight_decay >= 0 && opt.weight_decay < 1))
      reader.fail(*decay, fmt::format("expected a number in [0, 1) (decoupled: w -= learning_rate * weight_decay * w), "
                                      "got {}", opt.weight_decay));
  }
  opt.schedule.learning_rate = opt.learning_rate;
  if (auto schedule = params_section.get("schedule")) {
    opt.schedule = read_schedule(reader, *schedule, opt.learning_rate, lr);
    opt.learning_rate = opt.schedule.learning_rate;
  }
  return opt;
}

// train.clip: {global_norm: C} or {value: C}, one of them.
ClipConfig read_clip(Reader& reader, const Field& field) {
  ClipConfig clip;
  clip.where = field.where;
  const auto [kind, value] = tagged(reader, field, {"global_norm", "value"}, "clip");
  if (!value.node.IsDefined() || value.node.IsNull())
    reader.fail(field, fmt::format("expected {{{}: C}} with a number C > 0", kind));
  (kind == "global_norm" ? clip.global_norm : clip.value) = positive_number(reader, value);
  return clip;
}

// train.accumulation_steps against the batch: k divides data.batch_size, the batch shards the micro-batch.
void check_accumulation(Reader& reader, const TrainConfig& train, const DataConfig& data, const MeshConfig& mesh) {
  const std::int64_t k = train.accumulation_steps;
  if (k == 1) return;
  if (data.batch_size % k != 0)
    reader.fail(train.accumulation_steps_where, "train.accumulation_steps",
                fmt::format("{} micro-batches do not divide data.batch_size {} (the global batch of a step)", k,
                            data.batch_size));
  const std::int64_t micro = data.batch_size / k;
  const std::string batch_dim = data.layout.empty() ? "unsharded" : data.layout.front();
  const int shards = mesh.size_of(batch_dim);
  if (micro % shards != 0)
    reader.fail(train.accumulation_steps_where, "train.accumulation_steps",
                fmt::format("the micro-batch of {} examples (data.batch_size {} / {}) is not divisible by mesh dim "
                            "'{}' of size {}",
                            micro, data.batch_size, k, batch_dim, shards));
}

// A train.init_skip pattern (or --init-skip's): a bounded name that RE2 compiles.
void check_init_pattern(Reader& reader, const Where& where, const std::string& path, const std::string& pattern) {
  const std::string bad = bad_name(pattern);
  if (!bad.empty()) reader.fail(where, path, "pattern " + bad);
  std::string error;
  if (!nn::compile_layout_pattern(pattern, &error))
    reader.fail(where, path, fmt::format("'{}' is not a valid regular expression (RE2 syntax): {}", shown(pattern), error));
}

// train.init_from and train.init_skip (fine-tuning).
void read_init_from(Reader& reader, const Section& section, TrainConfig& train) {
  if (auto from = section.get("init_from")) {
    train.init_from = scalar(reader, *from, "a checkpoint dir or folder");
    train.init_from_where = from->where;
    if (train.init_from.empty()) reader.fail(*from, "expected a checkpoint dir or folder, got an empty string");
  }
  auto skip = section.get("init_skip");
  if (!skip) return;
  if (!skip->node.IsSequence())
    reader.fail(*skip, fmt::format("expected a list of variable patterns (e.g. ['dense3/.*']), got {}", describe(skip->node)));
  for (size_t i = 0; i < skip->node.size(); ++i) {
    const Field item = reader.child(*skip, skip->node[i], fmt::format("{}[{}]", skip->path, i));
    const std::string pattern = scalar(reader, item, "a variable pattern");
    check_init_pattern(reader, item.where, item.path, pattern);
    train.init_skip.push_back(pattern);
    train.init_skip_where.push_back(item.where);
  }
}

// `dtrain train --init-from PATH --init-skip PATTERN...` replace the config's train.init_from / init_skip;
// init_skip needs an init_from.
void apply_init_flags(Reader& reader, TrainConfig& train, const LoadOptions& options) {
  if (!options.init_from.empty()) {
    train.init_from = options.init_from;
    train.init_from_where = Where{"--init-from " + options.init_from, 0, 0};
  }
  if (!options.init_skip.empty()) {
    train.init_skip.clear();
    train.init_skip_where.clear();
    for (const std::string& pattern : options.init_skip) {
      const Where where{"--init-skip " + pattern, 0, 0};
      check_init_pattern(reader, where, "train.init_skip", pattern);
      train.init_skip.push_back(pattern);
      train.init_skip_where.push_back(where);
    }
  }
  if (!train.init_skip.empty() && train.init_from.empty())
    reader.fail(train.init_skip_where.front(), "train.init_skip",
                "variables to leave as initialized, but no checkpoint to initialize the others from: give "
                "train.init_from (or --init-from)");
}

// train.validation_every: epoch or a number of steps >= 1.
void read_validation_every(Reader& reader, const Field& field, TrainConfig& train) {
  const std::string text = scalar(reader, field, "epoch or a number of steps");
  train.validation_every_where = field.where;
  if (text == "epoch") return;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    reader.fail(field, fmt::format("expected epoch or a number of steps >= 1, got '{}'{}", shown(text),
                                   suggestion(text, {"epoch"})));
  train.validation_every_steps = integer(reader, field, 1);
}

// train.early_stopping: Keras EarlyStopping's arguments and defaults.
EarlyStoppingConfig read_early_stopping(Reader& reader, const Field& field) {
  EarlyStoppingConfig stopping;
  stopping.where = field.where;
  Section section(reader, field, {"monitor", "patience", "min_delta", "mode", "restore_best_weights"});
  if (auto monitor = section.get("monitor")) stopping.monitor = choice(reader, *monitor, {"val_loss", "val_accuracy"});
  if (auto patience = section.get("patience")) stopping.patience = integer(reader, *patience, 0, 1 << 30);
  if (auto min_delta = section.get("min_delta")) {
    stopping.min_delta = number(reader, *min_delta);
    if (stopping.min_delta < 0) reader.fail(*min_delta, fmt::format("expected a number >= 0, got {}", stopping.min_delta));
  }
  if (auto mode = section.get("mode")) stopping.mode = choice(reader, *mode, {"auto", "min", "max"});
  if (auto restore = section.get("restore_best_weights"); restore && boolean(reader, *restore))
    reader.fail(*restore, "restoring the best weights at the end is not supported; set checkpoint.keep_best: "
                          + stopping.monitor + " and evaluate or predict with the checkpoint DIR/best names");
  return stopping;
}

// Validation settings need a validation split, and keep_best needs checkpoints.
void check_validation(Reader& reader, const Config& config) {
  const bool validates = config.data.has_validation();
  const auto need_split = [&](const Where& where, const std::string& key) {
    if (!validates)
      reader.fail(where, key, "needs a validation set: add data.validation_split (e.g. 0.1, or train[90%:])");
  };
  if (config.locations.count("train.validation_every") || config.train.validation_every_steps > 0)
    need_split(config.train.validation_every_where, "train.validation_every");
  if (config.train.early_stopping) need_split(config.train.early_stopping->where, "train.early_stopping");
  if (!config.checkpoint.keep_best.empty()) {
    need_split(config.checkpoint.keep_best_where, "checkpoint.keep_best");
    if (config.checkpoint.every == CheckpointEvery::never)
      reader.fail(config.checkpoint.keep_best_where, "checkpoint.keep_best",
                  "needs checkpoints, but checkpoint.every is never");
  }
}

TrainConfig read_train(Reader& reader, const Field& field) {
  TrainConfig train;
  train.where = field.where;
  Section section(reader, field,
                  {"epochs", "max_steps", "loss", "optimizer", "eval_every_epoch", "log_every", "clip",
                   "accumulation_steps", "validation_every", "early_stopping", "init_from", "init_skip"});
  const Field epochs = section.require("epochs");
  train.epochs = int(integer(reader, epochs, 1, 1 << 30));
  train.epochs_where = epochs.where;
  train.max_steps_where = field.where;
  if (auto max_steps = section.get("max_steps")) {
    train.max_steps = integer(reader, *max_steps, 1);
    train.max_steps_where = max_steps->where;
  }

  train.loss.where = field.where;
  if (auto loss = section.get("loss")) {
    train.loss.where = loss->where;
    const auto [kind, params] = tagged(reader, *loss, {"sparse_softmax_cross_entropy"}, "loss");
    Section params_section(reader, params, {"reduction"});
    if (auto reduction = params_section.get("reduction"))
      train.loss.reduction = choice(reader, *reduction, {"sum", "mean"}) == "sum" ? Reduction::sum : Reduction::mean;
  }

  train.optimizer = read_optimizer(reader, section.require("optimizer"));

  if (auto eval = section.get("eval_every_epoch")) train.eval_every_epoch = boolean(reader, *eval);
  if (auto log_every = section.get("log_every")) train.log_every = integer(reader, *log_every, 1);
  if (auto clip = section.get("clip")) train.clip = read_clip(reader, *clip);
  train.accumulation_steps_where = field.where;
  if (auto steps = section.get("accumulation_steps")) {
    train.accumulation_steps = integer(reader, *steps, 1, 1 << 20);
    train.accumulation_steps_where = steps->where;
  }
  read_init_from(reader, section, train);
  train.validation_every_where = field.where;
  if (auto every = section.get("validation_every")) read_validation_every(reader, *every, train);
  if (auto stopping = section.get("early_stopping")) train.early_stopping = read_early_stopping(reader, *stopping);
  return train;
}

CheckpointConfig read_checkpoint(Reader& reader, const std::optional<Field>& field, const std::string& run_dir,
                                 const Where& run_dir_where) {
  CheckpointConfig checkpoint;
  checkpoint.dir = run_dir + "/ckpt";
  checkpoint.where = checkpoint.dir_where = run_dir_where;
  if (!field) return checkpoint;
  checkpoint.where = field->where;
  Section section(reader, *field, {"dir", "every", "max_to_keep", "keep_best"});
  if (auto dir = section.get("dir")) {
    checkpoint.dir = scalar(reader, *dir, "a directory");
    checkpoint.dir_where = dir->where;
    if (checkpoint.dir.empty()) reader.fail(*dir, "expected a directory, got an empty string");
  }
  if (auto every = section.get("every")) {
    const std::string text = scalar(reader, *every, "epoch, never or a number of steps");
    if (text == "epoch") {
      checkpoint.every = CheckpointEvery::epoch;
    } else if (text == "never") {
      checkpoint.every = CheckpointEvery::never;
    } else {
      if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
        reader.fail(*every, fmt::format("expected epoch, never or a number of steps >= 1, got '{}'{}", text,
                                        suggestion(text, {"epoch", "never"})));
      checkpoint.every = CheckpointEvery::steps;
      checkpoint.every_steps = integer(reader, *every, 1);
    }
  }
  if (auto keep = section.get("max_to_keep")) checkpoint.max_to_keep = int(integer(reader, *keep, 1, 1 << 20));
  if (auto best = section.get("keep_best")) {
    checkpoint.keep_best = choice(reader, *best, {"val_loss", "val_accuracy"});
    checkpoint.keep_best_where = best->where;
  }
  return checkpoint;
}

CommConfig read_comm(Reader& reader, const std::optional<Field>& field, const Where& file_where) {
  CommConfig comm;
  comm.timeout_s_where = file_where;
  if (!field) return comm;
  comm.timeout_s_where = field->where;
  Section section(reader, *field, {"timeout_s"});
  if (auto timeout = section.get("timeout_s")) {
    comm.timeout_s = positive_number(reader, *timeout);
    comm.timeout_s_where = timeout->where;
  }
  return comm;
}

std::string file_stem(const std::string& file) {
  const std::string stem = std::filesystem::path(file).stem().string();
  return stem.empty() ? "config" : stem;
}

// Every node of an override's value, iteratively. A value nests at most kMaxOverrideDepth levels and has
// at most kMaxOverrideNodes nodes: a self-referencing alias (`&a [*a]`) would otherwise recurse forever,
// and aliases of aliases (`[&a [x, x], &b [*a, *a], ...]`) double the count at every level.
void collect_descendants(const YAML::Node& root, const std::string& assignment, std::vector<OverrideOrigin>& out) {
  constexpr int kMaxOverrideDepth = 64;
  constexpr size_t kMaxOverrideNodes = 10000;
  std::vector<std::pair<YAML::Node, int>> stack{{root, 0}};
  size_t count = 0;
  auto add = [&](int depth) {
    if (depth > kMaxOverrideDepth)
      override_error(assignment, fmt::format("the value nests more than {} levels deep (a self-referencing alias?)",
                                             kMaxOverrideDepth));
    if (++count > kMaxOverrideNodes)
      override_error(assignment, fmt::format("the value has more than {} nodes", kMaxOverrideNodes));
  };
  add(0);
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    out.push_back(OverrideOrigin{node, assignment});
    if (node.IsMap()) {
      for (auto it = node.begin(); it != node.end(); ++it) {
        add(depth + 1);
        out.push_back(OverrideOrigin{it->first, assignment});
        add(depth + 1);
        stack.emplace_back(it->second, depth + 1);
      }
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        add(depth + 1);
        stack.emplace_back(node[i], depth + 1);
      }
    }
  }
}

Config parse_tree(const YAML::Node& root, const std::string& file, std::vector<OverrideOrigin> origins,
                  const LoadOptions& options) {
  Reader reader(file, std::move(origins));
  const Field top{root, "", reader.where(root, Where{file, 0, 0})};
  if (!root.IsMap())
    reader.fail(top.where, "config",
                fmt::format("expected a map with sections mesh, data, model, train (and layouts, checkpoint, comm, run_dir), "
                            "got {}",
                            describe(root)));
  Section section(reader, top, {"mesh", "data", "model", "layouts", "train", "checkpoint", "comm", "run_dir"});
  auto require = [&](const std::string& key) {
    if (auto value = section.get(key)) return *value;
    reader.fail(top.where, "config", fmt::format("missing required section '{}'", key));
  };

  Config config;
  config.file = file;
  config.mesh = read_mesh(reader, require("mesh"));
  config.data = read_data(reader, require("data"), config.mesh, options);
  config.model = read_model(reader, require("model"), config.mesh);
  fill_embedding_vocabulary(reader, config.data, config.model);
  check_shapes(reader, config.data, config.model, config.mesh);
  if (auto layouts = section.get("layouts")) config.layouts = read_layouts(reader, *layouts, config.mesh);
  config.train = read_train(reader, require("train"));
  apply_init_flags(reader, config.train, options);
  check_accumulation(reader, config.train, config.data, config.mesh);

  config.run_dir = "runs/" + file_stem(file);
  config.run_dir_where = top.where;
  if (auto run_dir = section.get("run_dir")) {
    config.run_dir = scalar(reader, *run_dir, "a directory");
    config.run_dir_where = run_dir->where;
    if (config.run_dir.empty()) reader.fail(*run_dir, "expected a directory, got an empty string");
  }
  if (!options.run_dir.empty()) {
    config.run_dir = options.run_dir;
    config.run_dir_where = Where{"--run-dir " + options.run_dir, 0, 0};
  }
  config.checkpoint = read_checkpoint(reader, section.get("checkpoint"), config.run_dir, config.run_dir_where);
  config.comm = read_comm(reader, section.get("comm"), top.where);
  config.locations = std::move(reader.locations);
  check_validation(reader, config);
  return config;
}

std::string trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

}  // namespace


std::vector<YAML::Node> apply_override(YAML::Node& root, const std::string& assignment) {
  auto fail = [&](const std::string& what) { override_error(assignment, what); };
  const auto equals = assignment.find('=');
  if (equals == std::string::npos) fail("expected KEY.PATH=VALUE, e.g. mesh.dims.batch=4");
  const std::string key = trim(assignment.substr(0, equals));
  const std::string text = assignment.substr(equals + 1);
  std::vector<std::string> segments;
  for (size_t begin = 0;;) {
    const size_t dot = key.find('.', begin);
    std::string segment = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    // `model[1]` (the notation of messages) is `model.1`: trailing [DIGITS] groups are list indices.
    std::vector<std::string> indices;
    while (segment.size() >= 3 && segment.back() == ']') {
      const size_t open = segment.rfind('[');
      if (open == std::string::npos || open + 2 > segment.size() - 1) break;
      const std::string digits = segment.substr(open + 1, segment.size() - open - 2);
      if (!std::all_of(digits.begin(), digits.end(), is_ascii_digit)) break;
      indices.insert(indices.begin(), digits);
      segment.resize(open);
    }
    if (segment.empty() && !indices.empty() && segments.empty())
      fail(fmt::format("'{}' is not a key path: it starts with an index", shown(key)));
    if (!segment.empty() || indices.empty()) segments.push_back(segment);
    segments.insert(segments.end(), indices.begin(), indices.end());
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  for (const std::string& segment : segments) {
    if (segment.empty()) fail(fmt::format("'{}' is not a key path: an empty segment between dots", shown(key)));
    const std::string bad = bad_name(segment);
    if (!bad.empty()) fail("key " + bad);
  }

  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& error) {
    fail(fmt::format("the value is not valid YAML: {}", error.msg));
  }

  std::vector<YAML::Node> changed;
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  YAML::Node current;
  current.reset(root);  // rebinding, not assignment: `=` on a Node would overwrite the tree
  std::string prefix;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& segment = segments[i];
    const bool last = i + 1 == segments.size();
    const std::string here = prefix.empty() ? segment : prefix + "." + segment;
    if (current.IsSequence()) {
      size_t index = 0;
      const auto [end, error] = std::from_chars(segment.data(), segment.data() + segment.size(), index);
      if (error != std::errc() || end != segment.data() + segment.size() || index >= current.size())
        fail(fmt::format("'{}' is a list of {}; '{}' is not an index in it", prefix, current.size(), segment));
      if (last) {
        current[index] = value;
      } else {
        YAML::Node next = current[index];
        current.reset(next);
      }
    } else if (current.IsMap()) {
      if (last) {
        current[segment] = value;
      } else {
        YAML::Node next = current[segment];
        if (!next.IsDefined() || next.IsNull()) {
          YAML::Node created(YAML::NodeType::Map);
          current[segment] = created;
          changed.push_back(created);
          next.reset(created);
        }
        current.reset(next);
      }
    } else {
      fail(fmt::format("'{}' is {}, not a map", prefix, describe(current)));
    }
    prefix = here;
  }
  changed.push_back(value);
  return changed;
}

// CR LF and a lone CR (old Mac files) as LF: yaml-cpp counts lines at LF only, so a CR-only file would
// read as one line and its errors would carry no useful line:col.
static std::string normalize_line_ends(const std::string& text) {
  if (text.find('\r') == std::string::npos) return text;
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') {
      out += text[i];
    } else {
      out += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    }
  }
  return out;
}

Config parse_config(const std::string& text, const std::string& file, const LoadOptions& options) {
  YAML::Node root;
  try {
    root = YAML::Load(normalize_line_ends(text));
  } catch (const YAML::Exception& error) {
    const Where where = error.mark.is_null() ? Where{file, 0, 0} : Where{file, error.mark.line + 1, error.mark.column + 1};
    throw_config_error(where, fmt::format("invalid YAML: {}", error.msg));
  }
  std::vector<OverrideOrigin> origins;
  for (const std::string& assignment : options.overrides)
    for (const YAML::Node& node : apply_override(root, assignment)) collect_descendants(node, assignment, origins);
  Config config;
  try {
    config = parse_tree(root, file, std::move(origins), options);
  } catch (const YAML::Exception& error) {
    // The reader checks each node's type before it reads it; this is the net under a case it missed.
    const Where where = error.mark.is_null() ? Where{file, 0, 0} : Where{file, error.mark.line + 1, error.mark.column + 1};
    throw_config_error(where, fmt::format("unexpected YAML: {}", error.msg));
  }
  config.source_text = text;
  config.overrides = options.overrides;
  return config;
}

Config load_config(const std::string& path, const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path))
    throw UsageError(fmt::format("{}: cannot read the config file ({})", path,
                                 std::filesystem::exists(path) ? "not a readable file" : "no such file"));
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path, options);
}

namespace {

std::string number_text(double value) { return fmt::format("{}", value); }

void emit_seed(YAML::Emitter& out, const std::array<std::int64_t, 2>& seed) {
  out << YAML::Key << "seed" << YAML::Value << YAML::Flow << YAML::BeginSeq << seed[0] << seed[1] << YAML::EndSeq;
}

void emit_initializer(YAML::Emitter& out, const InitializerConfig& init) {
  if (init.kind == InitKind::zeros || init.kind == InitKind::ones) {
    out << to_string(init.kind);
    return;
  }
  out << YAML::Flow << YAML::BeginMap << YAML::Key << to_string(init.kind) << YAML::Value << YAML::BeginMap;
  emit_seed(out, init.seed);
  if (init.kind == InitKind::normal) {
    out << YAML::Key << "mean" << YAML::Value << number_text(init.mean);
    out << YAML::Key << "stddev" << YAML::Value << number_text(init.stddev);
  }
  if (init.kind == InitKind::uniform) {
    out << YAML::Key << "minval" << YAML::Value << number_text(init.minval);
    out << YAML::Key << "maxval" << YAML::Value << number_text(init.maxval);
  }
  out << YAML::EndMap << YAML::EndMap;
}

}  // namespace

std::vector<int> pair_list(const std::array<int, 2>& pair) { return {pair[0], pair[1]}; }

namespace {

void dump_optimizer(YAML::Emitter& out, const OptimizerConfig& opt) {
  out << YAML::Key << "optimizer" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << to_string(opt.kind)
      << YAML::Value << YAML::BeginMap << YAML::Key << "learning_rate" << YAML::Value << number_text(opt.learning_rate);
  if (opt.kind != OptimizerKind::sgd)
    out << YAML::Key << "beta_1" << YAML::Value << number_text(opt.beta_1) << YAML::Key << "beta_2" << YAML::Value
        << number_text(opt.beta_2) << YAML::Key << "epsilon" << YAML::Value << number_text(opt.epsilon);
  if (opt.kind == OptimizerKind::sgd && opt.momentum != 0)
    out << YAML::Key << "momentum" << YAML::Value << number_text(opt.momentum) << YAML::Key << "nesterov"
        << YAML::Value << opt.nesterov;
  if (opt.weight_decay != 0 || opt.kind == OptimizerKind::adamw)
    out << YAML::Key << "weight_decay" << YAML::Value << number_text(opt.weight_decay);
  const optim::LearningRateSchedule& schedule = opt.schedule;
  if (schedule.kind != optim::ScheduleKind::constant || schedule.warmup_steps != 0) {
    out << YAML::Key << "schedule" << YAML::Value << YAML::BeginMap << YAML::Key << optim::to_string(schedule.kind)
        << YAML::Value << YAML::BeginMap << YAML::Key << "warmup_steps" << YAML::Value << schedule.warmup_steps;
    switch (schedule.kind) {
      case optim::ScheduleKind::constant:
        break;
      case optim::ScheduleKind::cosine:
        out << YAML::Key << "decay_steps" << YAML::Value << schedule.decay_steps << YAML::Key << "alpha" << YAML::Value
            << number_text(schedule.alpha);
        break;
      case optim::ScheduleKind::linear:
        out << YAML::Key << "decay_steps" << YAML::Value << schedule.decay_steps << YAML::Key << "end_learning_rate"
            << YAML::Value << number_text(schedule.end_learning_rate);
        break;
      case optim::ScheduleKind::exponential:
        out << YAML::Key << "decay_steps" << YAML::Value << schedule.decay_steps << YAML::Key << "decay_rate"
            << YAML::Value << number_text(schedule.decay_rate) << YAML::Key << "staircase" << YAML::Value
            << schedule.staircase;
        break;
      case optim::ScheduleKind::step:
        out << YAML::Key << "boundaries" << YAML::Value << YAML::BeginSeq;
        for (const std::int64_t boundary : schedule.boundaries) out << boundary;
        out << YAML::EndSeq << YAML::Key << "values" << YAML::Value << YAML::BeginSeq;
        for (const double value : schedule.values) out << number_text(value);
        out << YAML::EndSeq;
        break;
    }
    out << YAML::EndMap << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndMap;
}

}  // namespace

std::string dump_config(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;

  out << YAML::Key << "mesh" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dims" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const MeshDimConfig& dim : config.mesh.dims) out << YAML::Key << dim.name << YAML::Value << dim.size;
  out << YAML::EndMap;
  out << YAML::Key << "devices" << YAML::Value << to_string(config.mesh.devices);
  out << YAML::EndMap;

  const DataConfig& data = config.data;
  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dataset" << YAML::Value << to_string(data.dataset);
  out << YAML::Key << "path" << YAML::Value << data.path;
  out << YAML::Key << "train_split" << YAML::Value << data.train_split;
  out << YAML::Key << "test_split" << YAML::Value << data.test_split;
  if (data.validation_fraction > 0) out << YAML::Key << "validation_split" << YAML::Value << number_text(data.validation_fraction);
  if (!data.validation_split.empty()) out << YAML::Key << "validation_split" << YAML::Value << data.validation_split;
  if (is_text(data.dataset))
    out << YAML::Key << "vectorizer" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "mode"
        << YAML::Value << data.vectorizer.mode << YAML::Key << "max_tokens" << YAML::Value << data.vectorizer.max_tokens;
  if (is_text(data.dataset) && data.vectorizer.mode == "int")
    out << YAML::Key << "output_sequence_length" << YAML::Value << data.vectorizer.output_sequence_length;
  if (is_text(data.dataset)) out << YAML::EndMap;
  out << YAML::Key << "batch_size" << YAML::Value << data.batch_size;
  out << YAML::Key << "shuffle" << YAML::Value;
  if (data.shuffle.enabled)
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "seed" << YAML::Value << data.shuffle.seed << YAML::EndMap;
  else
    out << false;
  out << YAML::Key << "layout" << YAML::Value << YAML::Flow << data.layout;
  if (!data.classes.empty()) out << YAML::Key << "classes" << YAML::Value << YAML::Flow << data.classes;
  if (data.dataset == Dataset::image_folder) {
    out << YAML::Key << "image_shape" << YAML::Value << YAML::Flow << data.image_shape;
    out << YAML::Key << "resize" << YAML::Value << data.resize;
    out << YAML::Key << "on_bad_file" << YAML::Value << data.on_bad_file;
  }
  if (data.dataset == Dataset::arrays) {
    out << YAML::Key << "arrays" << YAML::Value << YAML::BeginMap;
    for (const auto& [split, files] : data.arrays.splits)
      out << YAML::Key << split << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "features" << YAML::Value
          << files.features << YAML::Key << "labels" << YAML::Value << files.labels << YAML::EndMap;
    if (data.arrays.divide_by > 0) out << YAML::Key << "divide_by" << YAML::Value << data.arrays.divide_by;
    out << YAML::Key << "example_shape" << YAML::Value << YAML::Flow << data.arrays.example_shape << YAML::EndMap;
  }
  if (data.dataset == Dataset::csv)
    out << YAML::Key << "csv" << YAML::Value << YAML::BeginMap << YAML::Key << "label" << YAML::Value << data.csv.label
        << YAML::Key << "features" << YAML::Value << YAML::Flow << data.csv.features << YAML::EndMap;
  if (data.prefetch != 0) out << YAML::Key << "prefetch" << YAML::Value << data.prefetch;
  if (data.dataset == Dataset::mnist) {
    out << YAML::Key << "image_shape" << YAML::Value;
    if (data.image_shape.empty())
      out << "flat";
    else
      out << YAML::Flow << data.image_shape;
  }
  out << YAML::EndMap;

  out << YAML::Key << "model" << YAML::Value << YAML::BeginSeq;
  for (const LayerConfig& layer : config.model) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << to_string(layer.kind) << YAML::Value;
    switch (layer.kind) {
      case LayerKind::dense:
        out << layer.dense.units << YAML::Key << "name" << YAML::Value << layer.name;
        out << YAML::Key << "activation" << YAML::Value << to_string(layer.dense.activation);
        out << YAML::Key << "use_bias" << YAML::Value << layer.dense.use_bias;
        out << YAML::Key << "init" << YAML::Value;
        emit_initializer(out, layer.dense.kernel_init);
        if (layer.dense.use_bias) {
          out << YAML::Key << "bias_init" << YAML::Value;
          emit_initializer(out, layer.dense.bias_init);
        }
        break;
      case LayerKind::batch_norm: {
        const BatchNormConfig& bn = layer.batch_norm;
        out << YAML::BeginMap;
        if (!bn.parameter_free)
          out << YAML::Key << "center" << YAML::Value << bn.center << YAML::Key << "scale" << YAML::Value << bn.scale
              << YAML::Key << "momentum" << YAML::Value << number_text(bn.momentum) << YAML::Key << "epsilon"
              << YAML::Value << number_text(bn.epsilon);
        out << YAML::EndMap << YAML::Key << "name" << YAML::Value << layer.name;
        break;
      }
      case LayerKind::dropout:
        out << number_text(layer.dropout.rate) << YAML::Key << "name" << YAML::Value << layer.name;
        emit_seed(out, layer.dropout.seed);
        break;
      case LayerKind::conv2d: {
        const Conv2dConfig& conv = layer.conv2d;
        out << conv.filters << YAML::Key << "name" << YAML::Value << layer.name;
        out << YAML::Key << "kernel_size" << YAML::Value << YAML::Flow << pair_list(conv.kernel_size);
        out << YAML::Key << "strides" << YAML::Value << YAML::Flow << pair_list(conv.strides);
        out << YAML::Key << "padding" << YAML::Value << to_string(conv.padding);
        out << YAML::Key << "activation" << YAML::Value << to_string(conv.activation);
        out << YAML::Key << "use_bias" << YAML::Value << conv.use_bias;
        out << YAML::Key << "init" << YAML::Value;
        emit_initializer(out, conv.kernel_init);
        if (conv.use_bias) {
          out << YAML::Key << "bias_init" << YAML::Value;
          emit_initializer(out, conv.bias_init);
        }
        break;
      }
      case LayerKind::max_pool2d:
      case LayerKind::avg_pool2d:
        out << YAML::Flow << pair_list(layer.pool2d.pool_size) << YAML::Key << "name" << YAML::Value << layer.name;
        out << YAML::Key << "strides" << YAML::Value << YAML::Flow << pair_list(layer.pool2d.strides);
        out << YAML::Key << "padding" << YAML::Value << to_string(layer.pool2d.padding);
        break;
      case LayerKind::embedding:
        out << layer.embedding.output_dim << YAML::Key << "name" << YAML::Value << layer.name;
        out << YAML::Key << "input_dim" << YAML::Value << layer.embedding.input_dim;
        out << YAML::Key << "init" << YAML::Value;
        emit_initializer(out, layer.embedding.init);
        break;
      case LayerKind::layer_norm:
        out << YAML::BeginMap << YAML::Key << "epsilon" << YAML::Value << number_text(layer.layer_norm.epsilon)
            << YAML::Key << "center" << YAML::Value << layer.layer_norm.center << YAML::Key << "scale" << YAML::Value
            << layer.layer_norm.scale << YAML::EndMap << YAML::Key << "name" << YAML::Value << layer.name;
        break;
      case LayerKind::relayout:
        out << YAML::Flow << layer.relayout.specs << YAML::Key << "name" << YAML::Value << layer.name;
        break;
      default:
        out << YAML::BeginMap << YAML::EndMap << YAML::Key << "name" << YAML::Value << layer.name;
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  out << YAML::Key << "layouts" << YAML::Value << YAML::BeginMap;
  for (const LayoutRule& rule : config.layouts)
    out << YAML::Key << rule.pattern << YAML::Value << YAML::Flow << rule.specs;
  out << YAML::EndMap;

  const TrainConfig& train = config.train;
  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "epochs" << YAML::Value << train.epochs;
  if (train.max_steps) out << YAML::Key << "max_steps" << YAML::Value << *train.max_steps;
  out << YAML::Key << "loss" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "sparse_softmax_cross_entropy"
      << YAML::Value << YAML::BeginMap << YAML::Key << "reduction" << YAML::Value << to_string(train.loss.reduction)
      << YAML::EndMap << YAML::EndMap;
  dump_optimizer(out, train.optimizer);
  out << YAML::Key << "eval_every_epoch" << YAML::Value << train.eval_every_epoch;
  out << YAML::Key << "log_every" << YAML::Value << train.log_every;
  if (train.clip.global_norm > 0 || train.clip.value > 0) {
    const bool norm = train.clip.global_norm > 0;
    out << YAML::Key << "clip" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key
        << (norm ? "global_norm" : "value") << YAML::Value
        << number_text(norm ? train.clip.global_norm : train.clip.value) << YAML::EndMap;
  }
  if (train.accumulation_steps != 1)
    out << YAML::Key << "accumulation_steps" << YAML::Value << train.accumulation_steps;
  if (!train.init_from.empty()) out << YAML::Key << "init_from" << YAML::Value << train.init_from;
  if (!train.init_skip.empty()) out << YAML::Key << "init_skip" << YAML::Value << YAML::Flow << train.init_skip;
  if (train.validation_every_steps > 0)
    out << YAML::Key << "validation_every" << YAML::Value << train.validation_every_steps;
  if (const auto& stopping = train.early_stopping) {
    out << YAML::Key << "early_stopping" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "monitor"
        << YAML::Value << stopping->monitor << YAML::Key << "patience" << YAML::Value << stopping->patience
        << YAML::Key << "min_delta" << YAML::Value << number_text(stopping->min_delta) << YAML::Key << "mode"
        << YAML::Value << stopping->mode << YAML::EndMap;
  }
  out << YAML::EndMap;

  const CheckpointConfig& checkpoint = config.checkpoint;
  out << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dir" << YAML::Value << checkpoint.dir;
  out << YAML::Key << "every" << YAML::Value;
  if (checkpoint.every == CheckpointEvery::steps)
    out << checkpoint.every_steps;
  else
    out << (checkpoint.every == CheckpointEvery::epoch ? "epoch" : "never");
  out << YAML::Key << "max_to_keep" << YAML::Value << checkpoint.max_to_keep;
  if (!checkpoint.keep_best.empty()) out << YAML::Key << "keep_best" << YAML::Value << checkpoint.keep_best;
  out << YAML::EndMap;

  out << YAML::Key << "comm" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "timeout_s" << YAML::Value << number_text(config.comm.timeout_s);
  out << YAML::EndMap;

  out << YAML::Key << "run_dir" << YAML::Value << config.run_dir;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace dtrain
