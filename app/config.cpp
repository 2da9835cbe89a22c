// Reading, writing, printing and documenting the config, all from the structs' visit() declarations
// (config.hpp). A Reader walks the YAML tree top-down; every value it takes is a Field (node, dotted path,
// Where), so every error can say where and what was expected.
#include "app/config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>
#include <unordered_map>

#include "engine/elastic_plan.hpp"
#include "engine/model_builder.hpp"
#include "engine/model_graph.hpp"
#include "core/article.hpp"
#include "core/bitwise.hpp"
#include "core/comm/mpi/mpi.hpp"
#include "core/error.hpp"
#include "core/output_dir.hpp"
#include "core/nn/layout_map.hpp"
#include "core/ops/halo.hpp"
#include "core/suggest.hpp"
#include "data/array_file.hpp"
#include "data/csv.hpp"
#include "data/split.hpp"

namespace dtrain {

std::string Where::str() const { return line <= 0 ? file : fmt::format("{}:{}:{}", file, line, col); }

void throw_config_error(const Where& where, const std::string& message) {
  throw UsageError(fmt::format("{}: {}", where.str(), message));
}

int MeshConfig::num_devices() const {
  // The reader refuses a product above kMaxDevices, so this cannot overflow for a loaded config.
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
  const auto found = locations.find(path);
  return found != locations.end() ? found->second : Where{file, 0, 0};
}

namespace {

// Dotted paths: "train" + "optimizer" is "train.optimizer", item("model", 1) is "model[1]".
std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string item(const std::string& path, size_t index) { return fmt::format("{}[{}]", path, index); }

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

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }

// Only ASCII letters, digits and `extra`: [A-Za-z0-9_.-]+ a layer name; a mesh dim name, [A-Za-z0-9_]+, also
// does not start with a digit.
bool is_name(const std::string& text, std::string_view extra) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [&](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || is_ascii_digit(c) || extra.find(c) != extra.npos;
  });
}

// a * b for sizes from the config; false when it overflows or exceeds `limit`.
bool checked_product(std::int64_t a, std::int64_t b, std::int64_t limit, std::int64_t* out) {
  return !__builtin_mul_overflow(a, b, out) && *out <= limit;
}

// ---- suggestions ----

// "; did you mean 'x'?" for the closest of `candidates` (core/suggest.hpp), else "".
std::string suggestion(const std::string& word, const std::vector<std::string>& candidates) {
  return did_you_mean(word, candidates, kMaxNameLength);
}

std::string one_of(const std::vector<std::string>& options) { return fmt::format("{}", fmt::join(options, ", ")); }

// "unknown WHAT 'word'" with a suggestion, else the list of what is known.
std::string unknown(const std::string& what, const std::string& word, const std::vector<std::string>& known) {
  const std::string hint = suggestion(word, known);
  return fmt::format("unknown {} '{}'{}", what, word, hint.empty() ? " (expected one of: " + one_of(known) + ")" : hint);
}

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

// Walks the tree into config (config.file names the source); the keys that depend on others read it so far.
struct Reader {
  Reader(Config& config, const LoadOptions& options, std::vector<OverrideOrigin> origins)
      : config(&config), options(&options), origins(std::move(origins)) {}
  Config* config;
  const LoadOptions* options;
  std::vector<OverrideOrigin> origins;
  std::map<std::string, Where>& locations = config->locations;
  std::set<std::string> given_keys;  // the paths of keys the config (or a --set) gave

  Where where(const YAML::Node& node, const Where& fallback) const {
    for (auto origin = origins.rbegin(); origin != origins.rend(); ++origin)
      if (node.is(origin->node)) return Where{"--set " + path_text(origin->assignment), 0, 0};
    const YAML::Mark mark = node.Mark();
    return mark.is_null() ? fallback : Where{config->file, mark.line + 1, mark.column + 1};
  }

  [[noreturn]] void fail(const Field& field, const std::string& what) const { fail(field.where, field.path, what); }
  [[noreturn]] void fail(const Where& where, const std::string& path, const std::string& what) const {
    throw_config_error(where, fmt::format("{}: {}", path, what));
  }
  // "expected WHAT, got GOT", GOT by default how the node reads.
  [[noreturn]] void expected(const Field& field, const std::string& what, const std::string& got = "") const {
    fail(field, fmt::format("expected {}, got {}", what, got.empty() ? describe(field.node) : got));
  }
  // An error at a key read earlier (or at its section when it was not given).
  [[noreturn]] void fail_at(const std::string& path, const std::string& what) const { fail(at(path), path, what); }

  Field child(const Field& parent, const YAML::Node& node, const std::string& path) {
    Field field{node, path, where(node, parent.where)};
    locations[path] = field.where;
    return field;
  }

  // The entries of a map in YAML order (an empty value reads as an empty map). Duplicate keys are errors.
  std::vector<KeyedField> entries(const Field& map, const std::string& what = "a map") {
    std::vector<KeyedField> result;
    std::unordered_map<std::string, size_t> seen;  // key -> index in result (a linear scan was quadratic)
    if (map.node.IsNull()) return result;
    if (!map.node.IsMap()) expected(map, what);
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
      const std::string path = join(map.path, name);
      Field field = child(map, value, path);
      // yaml-cpp marks an empty value at the next token, often on the next line: point at its key.
      if (value.IsNull() && field.where.line > 0) field.where = locations[path] = key_where;
      result.push_back(KeyedField{name, key_where, field});
    }
    return result;
  }
  // The same for a map with a fixed set of keys: an unknown key is an error at it, with a suggestion.
  std::vector<KeyedField> entries(const Field& map, const std::vector<std::string>& known, const std::string& label) {
    std::vector<KeyedField> result = entries(map);
    for (const KeyedField& entry : result)
      if (std::find(known.begin(), known.end(), entry.key) == known.end())
        fail(entry.key_where, label, unknown("key", entry.key, known));
    return result;
  }

  // Where a key is (its value, or its section when not given), "" the file itself.
  Where at(const std::string& path) const { return config->where(path); }
  bool given(const std::string& path) const { return given_keys.count(path) > 0; }
};

// ---- scalar conversions ----

std::string scalar(Reader& reader, const Field& field, const std::string& expected = "a string") {
  if (!field.node.IsScalar()) reader.expected(field, expected);
  return field.node.Scalar();
}

// The whole of `text` as a T (a leading '+' allowed when `plus`); false when it is not one.
template <class T> bool parse(const std::string& text, T& value, bool plus = true) {
  const char* begin = text.data() + (plus && text.size() > 1 && text[0] == '+' ? 1 : 0);
  const auto [end, error] = std::from_chars(begin, text.data() + text.size(), value);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
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
  if (!parse(text, value)) reader.fail(field, fmt::format("expected {}, got '{}'", expected, shown(text)));
  if (value < min || value > max) reader.fail(field, fmt::format("expected {}, got {}", expected, value));
  return value;
}

// Why `value` cannot be used as the float32 the engine computes with ("" when it can): beyond float's range,
// or so small that it flushes to zero or is a denormal (whose arithmetic loses its digits).
std::string float_problem(double value) {
  const double magnitude = std::fabs(value);
  if (magnitude > double(std::numeric_limits<float>::max()))
    return fmt::format("is beyond the range of the float32 the engine computes with (at most {:g})",
                       double(std::numeric_limits<float>::max()));
  if (magnitude != 0 && magnitude < double(std::numeric_limits<float>::min()))
    return fmt::format("is below the smallest normal float32 ({:g}), and the engine computes in float32: it "
                       "would be {}",
                       double(std::numeric_limits<float>::min()), float(value) == 0 ? "0" : "a denormal");
  return "";
}

// A finite number, held to the rule's test when it has one, as it will be used: a float32 (unless the rule
// says the number stays a double), tested after the conversion (0.99999999999 is 1 as a float).
double number(Reader& reader, const Field& field, const Num& rule = {}) {
  const std::string text = scalar(reader, field, "a number");
  double value = 0;
  if (!parse(text, value) || !std::isfinite(value))
    reader.fail(field, fmt::format("expected a number, got '{}'", shown(text)));
  if (!rule.stays_double) {
    if (const std::string problem = float_problem(value); !problem.empty())
      reader.fail(field, fmt::format("{} {}", shown(text), problem));
    const double used = double(float(value));
    if (rule.ok && rule.ok(value) && !rule.ok(used))
      reader.fail(field, fmt::format("expected a number {}, got {}, which is {} as a float32", rule.what, shown(text), used));
  }
  if (rule.ok && !rule.ok(value)) reader.fail(field, fmt::format("expected a number {}, got {}", rule.what, value));
  return value;
}

bool boolean(Reader& reader, const Field& field) {
  bool value = false;
  if (!field.node.IsScalar() || !YAML::convert<bool>::decode(field.node, value))
    reader.expected(field, "true or false");
  return value;
}

std::string choice(Reader& reader, const Field& field, const std::vector<std::string>& options) {
  const std::string text = scalar(reader, field, "one of " + one_of(options));
  if (std::find(options.begin(), options.end(), text) == options.end())
    reader.fail(field, fmt::format("expected one of {}, got '{}'{}", one_of(options), text, suggestion(text, options)));
  return text;
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
    reader.expected(field, expected, field.node.IsMap() ? fmt::format("a map with {} keys", field.node.size()) : "");
  std::vector<KeyedField> entries = reader.entries(field);
  const KeyedField& entry = entries.front();
  if (std::find(kinds.begin(), kinds.end(), entry.key) == kinds.end())
    reader.fail(entry.key_where, field.path, unknown(what, entry.key, kinds));
  return {entry.key, entry.value};
}

// ---- the visitors' common ground ----

// A struct whose keys a visitor walks: its own visit(), or a free one (optim::LearningRateSchedule).
template <class T, class V> void visit_fields(T& t, V& v) requires requires { t.visit(v); } { t.visit(v); }
template <class V> void visit_fields(optim::LearningRateSchedule& s, V& v) { optim::visit(s, v); }
struct NoVisitor {
  template <class... A> void operator()(A&&...) {}
};
template <class T> constexpr bool kVisitable = requires(T& t, NoVisitor& v) { visit_fields(t, v); };
template <class T> constexpr bool kOptionalStruct = false;
template <class T> constexpr bool kOptionalStruct<std::optional<T>> = kVisitable<T>;

std::string number_text(double value) { return fmt::format("{}", value); }

const std::vector<std::string> kClipKinds{"global_norm", "value"};
const std::vector<std::string> kEvery{"epoch", "never"};

// A tagged struct's kind (the index of its name), and selecting one with the defaults that go with it
// (Keras' per optimizer).
template <class T> size_t kind_of(const T& tagged) requires requires { tagged.kind; } { return size_t(tagged.kind); }
template <class T> void select(T& tagged, size_t kind) { tagged.kind = decltype(T::kind)(kind); }
void select(OptimizerConfig& opt, size_t kind) {
  opt.kind = OptimizerKind(kind);
  opt.learning_rate = opt.kind == OptimizerKind::sgd ? 0.01 : 0.001;
  opt.weight_decay = opt.kind == OptimizerKind::adamw ? 0.004 : 0.0;
}

// Records where each key of a section that was not given is: at the nearest place that was.
struct Locate {
  Reader& reader;
  std::string path;
  Where where;
  template <class T, class R> void operator()(T& member, const char* key, const R&, const char*, unsigned = 0) {
    const std::string here = join(path, key);
    reader.locations.emplace(here, where);
    if constexpr (kVisitable<T>) {
      Locate inner{reader, here, where};
      visit_fields(member, inner);
    }
  }
};

// The keys a struct declares (for the unknown-key check, before any value is read).
struct KeyNames {
  std::vector<std::string> keys;
  template <class T, class R> void operator()(T&, const char* key, const R&, const char*, unsigned = 0) { keys.push_back(key); }
};
template <class T> std::vector<std::string> keys_of(T& t) {
  KeyNames names;
  visit_fields(t, names);
  return names.keys;
}

template <class T> void read(Reader& reader, const Field& field, T& member, const Sub&);

// Reads one map's keys into a struct, each declared key in declaration order (a missing required one is
// an error; one not given is located at the section).
struct Load {
  Reader& reader;
  const Field& parent;
  const std::string& label;  // names the map in messages when its path alone is unclear ("model[1] (dense)")
  const std::vector<KeyedField>& entries;
  template <class T, class R> void operator()(T& member, const char* key, const R& rule, const char*, unsigned flags = 0) {
    const auto entry = std::find_if(entries.begin(), entries.end(), [&](const KeyedField& e) { return e.key == key; });
    if (entry != entries.end()) {
      reader.given_keys.insert(join(parent.path, key));
      read(reader, entry->value, member, rule);
    } else if (flags & kRequired) {
      reader.fail(parent.where, label,
                  fmt::format("missing required {} '{}'", parent.path.empty() ? "section" : "key", key));
    } else {
      Locate{reader, parent.path, parent.where}(member, key, rule, "");
    }
  }
};

// Hooks around a struct's keys: before (what the map's form selects), check (what needs several keys).
template <class T> void before(Reader&, const Field&, T&) {}
template <class T> void check(Reader&, const Field&, T&) {}

template <class T> void read_keys(Reader& reader, const Field& field, T& member, std::string label = "") {
  before(reader, field, member);
  if (label.empty()) label = field.path.empty() ? "config" : field.path;
  const std::vector<KeyedField> entries = reader.entries(field, keys_of(member), label);
  Load load{reader, field, label, entries};
  visit_fields(member, load);
  check(reader, field, member);
}

// ---- reading each rule ----

template <class T> void read(Reader& reader, const Field& field, T& member, const Int& rule) { member = T(integer(reader, field, rule.min, rule.max)); }
void read(Reader& reader, const Field& field, double& member, const Num& rule) { member = number(reader, field, rule); }
void read(Reader& reader, const Field& field, bool& member, const Bool&) { member = boolean(reader, field); }
void read(Reader& reader, const Field& field, std::string& member, const Text& rule) {
  member = scalar(reader, field, rule.expected);
  if (member.empty()) reader.fail(field, fmt::format("expected {}, got an empty string", rule.expected));
}
void read(Reader& reader, const Field& field, std::string& member, const Choice& rule) { member = choice(reader, field, *rule.names); }
template <class E> void read(Reader& reader, const Field& field, E& member, const Choice& rule) requires std::is_enum_v<E> {
  const std::string name = choice(reader, field, *rule.names);
  member = E(std::find(rule.names->begin(), rule.names->end(), name) - rule.names->begin());
}
template <class T> void read(Reader& reader, const Field& field, T& member, const Sub&) { read_keys(reader, field, member); }
template <class T> void read(Reader& reader, const Field& field, std::optional<T>& member, const Sub& rule) {
  member.emplace();
  read(reader, field, *member, rule);
}
template <class T> void read(Reader& reader, const Field& field, T& member, const Tagged& rule) {
  const auto [kind, params] = tagged(reader, field, *rule.kinds, rule.what);
  select(member, size_t(std::find(rule.kinds->begin(), rule.kinds->end(), kind) - rule.kinds->begin()));
  read_keys(reader, params, member,
            std::strcmp(rule.what, "schedule") == 0 ? fmt::format("{} ({} schedule)", params.path, kind) : "");
}

// A list node's items as fields; `expected` is the message when it is not a list of at least `min` items.
std::vector<Field> items(Reader& reader, const Field& field, const std::string& expected, size_t min = 1) {
  if (!field.node.IsSequence() || field.node.size() < min)
    reader.expected(field, expected, field.node.IsSequence() && min == 1 ? "an empty list" : "");
  std::vector<Field> result;
  for (size_t i = 0; i < field.node.size(); ++i) result.push_back(reader.child(field, field.node[i], item(field.path, i)));
  return result;
}

void read(Reader& reader, const Field& dims, std::vector<MeshDimConfig>& member, const Dims&) {
  std::vector<KeyedField> entries = reader.entries(dims, "a map of dim name -> size, e.g. {batch: 8}");
  if (entries.empty()) reader.fail(dims, "expected at least one dim, e.g. {batch: 8}");
  if (entries.size() > size_t(kMaxMeshDims))
    reader.fail(dims, fmt::format("{} dims; a mesh has at most {}", entries.size(), kMaxMeshDims));
  std::int64_t devices = 1;
  for (const KeyedField& entry : entries) {
    if (!is_name(entry.key, "_") || is_ascii_digit(entry.key[0]))
      reader.fail(entry.key_where, dims.path,
                  fmt::format("'{}' is not a valid dim name (letters, digits, _)", shown(entry.key)));
    if (entry.key == "unsharded")
      reader.fail(entry.key_where, dims.path, "'unsharded' is reserved for layouts; name the dim otherwise");
    if (entry.value.node.IsScalar() && entry.value.node.Scalar() == "auto") {
      for (const MeshDimConfig& other : member)
        if (other.automatic) reader.fail(entry.value, fmt::format("'{}' is auto too: one dim at most may be auto", other.name));
      member.push_back(MeshDimConfig{entry.key, 1, true});
      continue;
    }
    const int size = int(integer(reader, entry.value, 1, kMaxDevices));
    member.push_back(MeshDimConfig{entry.key, size});
    if (!checked_product(devices, size, kMaxDevices, &devices))
      reader.fail(entry.value, fmt::format("the mesh {{{}}} has more than {} devices (the most a mesh may have)",
                                           fmt::join(reader.config->mesh.dim_names(), ", "), kMaxDevices));
  }
  // auto: one device per process over the other dims (`dtrain elastic` relaunches such a config on whatever
  // processes are left): the rule is elastic::auto_sized's, which elastic plans with.
  const std::vector<MeshDimConfig> sized = elastic::auto_sized(member, process_count());
  for (size_t i = 0; i < member.size(); ++i) {
    if (!member[i].automatic) continue;
    if (sized[i].size == 0)
      reader.fail(entries[i].value, fmt::format("auto: {} processes cannot share the other dims' {} devices evenly (the "
                                                "process count must be a multiple or a divisor of {})",
                                                process_count(), devices, devices));
    member[i].size = sized[i].size;
  }
}

// Specs of one tensor: a list of mesh dim names or "unsharded", no dim twice.
void read(Reader& reader, const Field& field, std::vector<std::string>& specs, const Specs&) {
  std::vector<std::string> known = reader.config->mesh.dim_names();
  const std::vector<Field> fields = items(reader, field, fmt::format("a list of specs (mesh dims {} or unsharded)", one_of(known)));
  known.push_back("unsharded");
  specs.clear();
  for (const Field& spec_field : fields) {
    const std::string spec = scalar(reader, spec_field, "a mesh dim name or unsharded");
    if (std::find(known.begin(), known.end(), spec) == known.end())
      reader.fail(spec_field, fmt::format("'{}' is not a mesh dim (expected one of {}){}", shown(spec), one_of(known),
                                          suggestion(spec, known)));
    if (spec != "unsharded" && std::find(specs.begin(), specs.end(), spec) != specs.end())
      reader.fail(spec_field, fmt::format("mesh dim '{}' shards two axes; a dim may shard one axis only", spec));
    specs.push_back(spec);
  }
}

// One integer n or a list of two [a, b], each in [min, max]; n reads as [n, n], or as [n, 0] for a seed.
std::array<std::int64_t, 2> one_or_two(Reader& reader, const Field& field, std::int64_t min, std::int64_t max,
                                       bool seed, const std::string& expected) {
  if (field.node.IsScalar()) {
    const std::int64_t n = integer(reader, field, min, max);
    return {n, seed ? 0 : n};
  }
  if (!field.node.IsSequence() || field.node.size() != 2)
    reader.expected(field, expected,
                    seed && field.node.IsSequence() ? fmt::format("a list of {}", field.node.size()) : "");
  return {integer(reader, reader.child(field, field.node[0], item(field.path, 0)), min, max),
          integer(reader, reader.child(field, field.node[1], item(field.path, 1)), min, max)};
}

// A seed: [s0, s1], or one integer s meaning [s, 0].
void read(Reader& reader, const Field& field, std::array<std::int64_t, 2>& seed, const Seed&) {
  seed = one_or_two(reader, field, std::numeric_limits<std::int64_t>::min(), kNoLimit, true,
                    "a seed: two integers [s0, s1] (or one integer)");
}

// A window extent or stride: one integer n (meaning [n, n]) or [h, w], each in [1, 4096].
void read(Reader& reader, const Field& field, std::array<int, 2>& pair, const Pair& rule) {
  const auto [h, w] = one_or_two(reader, field, 1, 4096, false, fmt::format("{}: one integer or [height, width]", rule.what));
  pair = {int(h), int(w)};
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
  if (!folder_names && text.name != "train" && text.name != "test")
    reader.fail(field, expected + suggestion(text.name, {"train", "test"}));
  if (split.find_first_of(" \t") != std::string::npos) reader.fail(field, expected);
  for (const auto& bound : {text.from, text.to}) {
    if (!bound) continue;
    if (bound->fractional) reader.fail(field, expected);
    if (bound->percent && bound->whole > 100)
      reader.fail(field, fmt::format("'{}': percentages must be in [-100, 100]", shown(split)));
  }
}

// Embedding tables without input_dim take the int vectorizer's max_tokens (the ids are below it).
void fill_embedding_vocabulary(Reader& reader, const DataConfig& data, std::vector<LayerConfig>& model,
                               const std::string& path = "model") {
  for (size_t i = 0; i < model.size(); ++i) {
    EmbeddingConfig& embedding = model[i].embedding;
    if (model[i].kind != LayerKind::embedding || embedding.input_dim > 0) continue;
    if (!is_text(data.dataset) || data.vectorizer.mode != "int")
      reader.fail(reader.at(item(path, i)), item(path, i) + ".embedding",
                  "missing key 'input_dim' (the vocabulary size); it defaults to data.vectorizer.max_tokens only "
                  "with vectorizer mode int");
    embedding.input_dim = data.vectorizer.max_tokens;
  }
}

void read(Reader& reader, const Field& field, std::string& split, const Split&) {
  split = scalar(reader, field, "a split name");
  check_split(reader, field, split, has_split_folders(reader.config->data.dataset));
}

// data.validation_split: a fraction in (0, 1) (Keras' validation_split) or a split string (check_split).
void read(Reader& reader, const Field& field, std::string& split, const ValidationSplit& rule) {
  const std::string text = scalar(reader, field, "a fraction in (0, 1) or a split like train[90%:]");
  double value = 0;
  const bool numeric = parse(text, value, false);
  if (!numeric && !text.empty() && (is_ascii_digit(text[0]) || text[0] == '-' || text[0] == '.'))
    reader.fail(field, fmt::format("expected a fraction in (0, 1) or a split like train[90%:], got '{}'", shown(text)));
  if (!numeric) {
    check_split(reader, field, text, has_split_folders(reader.config->data.dataset));
    split = text;
    return;
  }
  if (!(value > 0 && value < 1))
    reader.fail(field, fmt::format("expected a fraction in (0, 1) (the last part of the training split held out), "
                                   "got {}",
                                   text));
  *rule.fraction = value;
}

// data.classes: a list of distinct, non-empty names without control characters.
void read(Reader& reader, const Field& field, std::vector<std::string>& names, const ClassNames&) {
  for (const Field& entry : items(reader, field, "a list of at least 2 class names", 2)) {
    std::string name = scalar(reader, entry, "a class name");
    if (name.empty()) reader.fail(entry, "expected a class name, got an empty string");
    if (const std::string why = bad_name(name); !why.empty()) reader.fail(entry, why);
    if (std::find(names.begin(), names.end(), name) != names.end())
      reader.fail(entry, fmt::format("class '{}' is named twice", shown(name)));
    names.push_back(std::move(name));
  }
  const Dataset dataset = reader.config->data.dataset;
  const int known = known_class_count(dataset);
  if (known > 0 && int(names.size()) != known)
    reader.fail(field, fmt::format("dataset {} has {} classes, but {} names are given", to_string(dataset), known,
                                   names.size()));
}

// image_folder: [H, W, C] (C 1 grayscale or 3 rgb); mnist: flat, [28, 28] or [28, 28, 1] (NHWC).
void read(Reader& reader, const Field& field, std::vector<int>& shape, const ImageShape&) {
  const YAML::Node& node = field.node;
  const Dataset dataset = reader.config->data.dataset;
  if (dataset == Dataset::image_folder) {
    if (!node.IsSequence() || node.size() != 3)
      reader.expected(field, "[height, width, channels] (channels 1 for grayscale, 3 for rgb)");
    for (size_t axis = 0; axis < 3; ++axis) {
      const Field extent = reader.child(field, node[axis], item(field.path, axis));
      const std::int64_t n = integer(reader, extent, 1, axis < 2 ? 1 << 15 : 3);
      if (axis == 2 && n == 2) reader.fail(extent, "expected 1 (grayscale) or 3 (rgb) channels, got 2");
      shape.push_back(int(n));
    }
    return;
  }
  if (dataset != Dataset::mnist) reader.fail(field, "only datasets mnist and image_folder have an image_shape");
  const bool flat = node.IsScalar() && node.Scalar() == "flat";
  const bool square = node.IsSequence() && (node.size() == 2 || node.size() == 3) && node[0].IsScalar() &&
                      node[1].IsScalar() && node[0].Scalar() == "28" && node[1].Scalar() == "28" &&
                      (node.size() == 2 || (node[2].IsScalar() && node[2].Scalar() == "1"));
  if (!flat && !square) reader.expected(field, "flat, [28, 28] or [28, 28, 1]");
  if (square) shape = node.size() == 2 ? std::vector<int>{28, 28} : std::vector<int>{28, 28, 1};
}

void read(Reader& reader, const Field& field, ShuffleConfig& shuffle, const Shuffle&) {
  if (field.node.IsScalar()) {
    shuffle.enabled = boolean(reader, field);
    return;
  }
  const std::vector<KeyedField> entries = reader.entries(field, {"seed"}, field.path);
  shuffle.enabled = true;
  if (!entries.empty()) shuffle.seed = std::uint64_t(integer(reader, entries.front().value, 0));
}

// epoch, never or a number of steps >= 1 (checkpoint.every); epoch or a number (train.validation_every). 0: a word.
std::int64_t steps_or(Reader& reader, const Field& field, const std::vector<std::string>& words) {
  const std::string expected = fmt::format("{} or a number of steps", fmt::join(words, ", "));
  const std::string text = scalar(reader, field, expected);
  if (std::find(words.begin(), words.end(), text) != words.end()) return 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    reader.fail(field, fmt::format("expected {} >= 1, got '{}'{}", expected, shown(text), suggestion(text, words)));
  return integer(reader, field, 1);
}
void read(Reader& reader, const Field& field, CheckpointEvery& every, const Every& rule) {
  *rule.steps = steps_or(reader, field, kEvery);
  every = *rule.steps > 0                    ? CheckpointEvery::steps
          : field.node.Scalar() == kEvery[0] ? CheckpointEvery::epoch
                                             : CheckpointEvery::never;
}
void read(Reader& reader, const Field& field, std::int64_t& steps, const ValidationEvery&) {
  steps = steps_or(reader, field, {kEvery[0]});
}

// A variable pattern (a layouts key, a train.init_skip entry or --init-skip's): a bounded name that RE2 compiles
// (linear time, bounded stack, whatever the pattern; std::regex recursed once per group or character).
void check_pattern(Reader& reader, const Where& where, const std::string& path, const std::string& pattern) {
  const std::string bad = bad_name(pattern);
  if (!bad.empty()) reader.fail(where, path, "pattern " + bad);
  std::string error;
  if (!nn::compile_layout_pattern(pattern, &error))
    reader.fail(where, path, fmt::format("'{}' is not a valid regular expression (RE2 syntax): {}", shown(pattern), error));
}
void read(Reader& reader, const Field& field, std::vector<std::string>& patterns, const Patterns&) {
  for (const Field& entry : items(reader, field, "a list of variable patterns (e.g. ['dense3/.*'])", 0)) {
    patterns.push_back(scalar(reader, entry, "a variable pattern"));
    check_pattern(reader, entry.where, entry.path, patterns.back());
  }
}

void read(Reader& reader, const Field& field, std::vector<std::int64_t>& shape, const Extents&) {
  for (const Field& extent : items(reader, field, "a list of extents, e.g. [28, 28, 1]"))
    shape.push_back(integer(reader, extent, 1, kMaxTensorElements));
}

void read(Reader& reader, const Field& field, std::vector<std::string>& columns, const Columns&) {
  const std::string& label = reader.config->data.csv.label;
  for (const Field& entry : items(reader, field, "a list of column names")) {
    const std::string name = scalar(reader, entry, "a column name");
    if (name == label) reader.fail(entry, fmt::format("'{}' is the label column", shown(name)));
    if (std::find(columns.begin(), columns.end(), name) != columns.end())
      reader.fail(entry, fmt::format("column '{}' is named twice", shown(name)));
    columns.push_back(name);
  }
}

void read(Reader& reader, const Field& field, std::vector<std::int64_t>& boundaries, const Steps&) {
  for (const Field& step : items(reader, field, "a list of steps"))
    boundaries.push_back(integer(reader, step, boundaries.empty() ? 0 : boundaries.back() + 1));
}

void read(Reader& reader, const Field& field, std::vector<double>& values, const Rates&) {
  const size_t expected = reader.config->train.optimizer.schedule.boundaries.size() + 1;
  if (!field.node.IsSequence() || field.node.size() != expected)
    reader.expected(field, fmt::format("a list of {} learning rates (one more than boundaries)", expected),
                    field.node.IsSequence() ? fmt::format("{}", field.node.size()) : "");
  for (const Field& rate : items(reader, field, "")) values.push_back(number(reader, rate, {"> 0", positive}));
}

// train.clip: {global_norm: C} or {value: C}, one of them.
void read(Reader& reader, const Field& field, ClipConfig& clip, const Clip&) {
  const auto [kind, value] = tagged(reader, field, kClipKinds, "clip");
  if (!value.node.IsDefined() || value.node.IsNull())
    reader.fail(field, fmt::format("expected {{{}: C}} with a number C > 0", kind));
  (kind == kClipKinds[0] ? clip.global_norm : clip.value) = number(reader, value, {"> 0", positive});
}

void read(Reader& reader, const Field& field, std::string& name, const LayerName&) {
  name = scalar(reader, field, "a layer name");
  if (name.size() > kMaxNameLength)
    reader.fail(field, fmt::format("'{}' is too long for a layer name: at most {} characters", shown(name), kMaxNameLength));
  if (!is_name(name, "_.-"))
    reader.fail(field, fmt::format("'{}' is not a valid layer name (letters, digits, _ . -; it becomes part of "
                                   "variable paths like NAME/kernel)",
                                   shown(name)));
}

// One layer: its type is the one key among the layer kinds; its defaults depend on its index (seeds).
LayerConfig read_layer(Reader& reader, const Field& field, int index, std::map<LayerKind, int>& counts) {
  LayerConfig layer;
  std::vector<KeyedField> entries =
      reader.entries(field, fmt::format("a layer: a map with one of {}, e.g. {{dense: 128, activation: relu}}",
                                        one_of(kLayerKinds)));
  const KeyedField* type = nullptr;
  for (const KeyedField& entry : entries) {
    if (std::find(kLayerKinds.begin(), kLayerKinds.end(), entry.key) == kLayerKinds.end()) continue;
    // `dropout` is also a key of multi_head_attention (Keras' name): there it is no second type.
    if (type && entry.key == "dropout" && type->key == "multi_head_attention") continue;
    if (type && type->key == "dropout" && entry.key == "multi_head_attention") {
      type = &entry;
      continue;
    }
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
  layer.kind = LayerKind(std::find(kLayerKinds.begin(), kLayerKinds.end(), type->key) - kLayerKinds.begin());
  const std::int64_t seed = 1000 + index;
  for (WeightsConfig* weights : {static_cast<WeightsConfig*>(&layer.dense), static_cast<WeightsConfig*>(&layer.conv2d),
                                 static_cast<WeightsConfig*>(&layer.attention)}) {
    weights->kernel_init = InitializerConfig{InitKind::glorot_uniform, {seed, 0}};
    weights->bias_init.seed = {seed, 1};
  }
  layer.dropout.seed = {seed, 2};
  layer.embedding.init = InitializerConfig{InitKind::uniform, {seed, 0}};
  layer.position_embedding.init = InitializerConfig{InitKind::glorot_uniform, {seed, 0}};
  layer.attention.seed = {seed, 2};
  layer.pool2d.strides = {0, 0};
  read_keys(reader, field, layer, fmt::format("{} ({})", field.path, type->key));

  const std::string bias_init = join(field.path, "bias_init");
  if (reader.locations.count(bias_init) && ((layer.kind == LayerKind::dense && !layer.dense.use_bias) ||
                                  (layer.kind == LayerKind::conv2d && !layer.conv2d.use_bias)))
    reader.fail_at(bias_init, "use_bias is false, so there is no bias to initialize");
  if (layer.pool2d.strides[0] == 0) layer.pool2d.strides = layer.pool2d.pool_size;
  layer.dropout.seed_given = reader.given(join(field.path, "seed"));
  const std::string stem = layer.kind == LayerKind::batch_norm ? "bn" : to_string(layer.kind);
  layer.name_given = reader.given(join(field.path, "name"));
  if (layer.kind == LayerKind::block) {  // a block use's name is its layers' prefix stem: NAMEk/LAYER
    if (!layer.name_given) layer.name = layer.block.block;
  } else if (!layer.name_given) {
    layer.name = stem + std::to_string(++counts[layer.kind]);
  } else {
    ++counts[layer.kind];
  }
  return layer;
}

// The layers of the model or of a block (`in_block`: a block may not use another).
void read_layers(Reader& reader, const Field& field, std::vector<LayerConfig>& model, bool in_block) {
  std::map<LayerKind, int> counts;
  std::map<std::string, Where> names;
  const std::vector<Field> layers =
      items(reader, field, "a list of layers, e.g. [{dense: 128, activation: relu}, {dense: 10}]");
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerConfig layer = read_layer(reader, layers[i], int(i), counts);
    if (layer.kind == LayerKind::block) {
      const std::string at = join(layers[i].path, "block");
      if (in_block) reader.fail_at(at, "a block cannot use a block; list the layers, or use both blocks in the model");
      const auto& blocks = reader.config->blocks;
      if (std::none_of(blocks.begin(), blocks.end(), [&](const BlockConfig& b) { return b.name == layer.block.block; })) {
        std::vector<std::string> known;
        for (const BlockConfig& b : blocks) known.push_back(b.name);
        reader.fail_at(at, known.empty() ? fmt::format("no block '{}': blocks: is empty", layer.block.block)
                                         : unknown("block", layer.block.block, known));
      }
      if (layer.inputs.size() > 1) reader.fail_at(join(layers[i].path, "inputs"), "a block takes one input");
    } else {
      auto [earlier, inserted] = names.emplace(layer.name, layers[i].where);
      if (!inserted)
        reader.fail(layers[i], fmt::format("layer name '{}' is already used (at {}){}", layer.name, earlier->second.str(),
                                           layer.name_given ? "" : "; give this layer a name"));
    }
    model.push_back(std::move(layer));
  }
}

void read(Reader& reader, const Field& field, std::vector<LayerConfig>& model, const Layers&) {
  read_layers(reader, field, model, false);
  fill_embedding_vocabulary(reader, reader.config->data, model);
  model_shapes(*reader.config);
}

void read(Reader& reader, const Field& field, std::vector<BlockConfig>& blocks, const Blocks&) {
  for (const KeyedField& entry : reader.entries(field, "a map of block name -> list of layers, e.g. {res: [{dense: 8}]}")) {
    if (!is_name(entry.key, "_.-"))
      reader.fail(entry.key_where, field.path, fmt::format("'{}' is not a valid block name (letters, digits, _ . -)", shown(entry.key)));
    BlockConfig block{entry.key, {}};
    read_layers(reader, entry.value, block.layers, true);
    fill_embedding_vocabulary(reader, reader.config->data, block.layers, entry.value.path);
    blocks.push_back(std::move(block));
  }
}

// A layer's inputs: one name or a list of names (checked against the graph by the engine's model).
void read(Reader& reader, const Field& field, std::vector<std::string>& inputs, const Inputs&) {
  if (field.node.IsScalar()) {
    read(reader, field, inputs.emplace_back(), LayerName{});
    return;
  }
  for (const Field& entry : items(reader, field, "a layer name or a list of layer names, e.g. [dense1, dense2]"))
    read(reader, entry, inputs.emplace_back(), LayerName{});
}

void read(Reader& reader, const Field& field, std::vector<LayoutRule>& rules, const LayoutRules&) {
  int index = 0;
  for (const KeyedField& entry : reader.entries(field, "a map of variable regex -> specs, e.g. {dense1/kernel: [unsharded, model]}")) {
    LayoutRule rule{entry.key, {}};
    reader.locations[item("layouts", index++)] = entry.key_where;
    check_pattern(reader, entry.key_where, "layouts", entry.key);  // entries() has bounded the key already
    read(reader, Field{entry.value.node, fmt::format("layouts['{}']", entry.key), entry.value.where}, rule.specs, Specs{});
    rules.push_back(std::move(rule));
  }
}

// ---- what needs several keys ----

void before(Reader&, const Field& field, BatchNormConfig& bn) {
  if (field.node.IsMap() && field.node.size() > 0) bn = BatchNormConfig{false, true, true, 0.99, 1e-3};
}

void check(Reader& reader, const Field& field, InitializerConfig& init) {
  init.seed_given = reader.given(join(field.path, "seed"));
  const std::string at = field.path.substr(0, field.path.rfind('.'));  // the init key, above its kind
  if (init.kind == InitKind::uniform && !(init.minval < init.maxval))
    reader.fail_at(at, fmt::format("expected minval < maxval, got {} and {}", init.minval, init.maxval));
}

void check(Reader& reader, const Field& field, OptimizerConfig& opt) {
  const std::string nesterov = join(field.path, "nesterov"), learning_rate = join(field.path, "learning_rate");
  if (opt.nesterov && opt.momentum == 0)
    reader.fail_at(nesterov, "nesterov needs a momentum > 0 (e.g. momentum: 0.9)");
  optim::LearningRateSchedule& schedule = opt.schedule;
  if (schedule.kind == optim::ScheduleKind::step) {
    if (reader.given(learning_rate) && schedule.values.front() != opt.learning_rate)
      reader.fail_at(learning_rate,
                     fmt::format("{} but the step schedule's values[0] is {}: the schedule's values are the rates; "
                                 "drop learning_rate or make them equal",
                                 opt.learning_rate, schedule.values.front()));
    opt.learning_rate = schedule.values.front();
  }
  schedule.learning_rate = opt.learning_rate;
}

void read(Reader& reader, const Field& field, VectorizerConfig& vectorizer, const Sub&) {
  if (!is_text(reader.config->data.dataset))
    reader.fail(field, "only datasets imdb and text_folder use a vectorizer; remove this key");
  read_keys(reader, field, vectorizer);
  if (vectorizer.mode == "int") return;
  for (const char* key : {"output_sequence_length", "truncating", "padding"}) {
    const std::string path = join(field.path, key);
    if (reader.given(path))
      reader.fail_at(path, fmt::format("{} is for mode int (token ids); mode tf_idf gives max_tokens weights", key));
  }
}

void check(Reader& reader, const Field& field, ArraysConfig& arrays) {
  if (!arrays.train && !arrays.test)
    reader.fail(field, "expected train and/or test, e.g. {train: {features: /train/x, labels: /train/y}}");
}

// Arrays and CSV files are read now, for what they hold (a missing data.path is an error first). Returns
// whether the file is there; when it is not, `key` must give what it would (`what`).
template <class T>
bool read_file_keys(Reader& reader, const Field& field, T& member, Dataset dataset, const char* key, const char* what) {
  const std::string& path = reader.config->data.path;
  if (reader.config->data.dataset != dataset)
    reader.fail(field, fmt::format("only dataset {} reads this key; remove it", to_string(dataset)));
  if (reader.options->check_data_path && !std::filesystem::exists(path))
    reader.fail_at("data.path", fmt::format("'{}' does not exist", path));
  read_keys(reader, field, member);
  if (std::filesystem::exists(path)) return true;
  if (!reader.given(join(field.path, key))) reader.fail(field, fmt::format("'{}' is not there to read {}", path, what));
  return false;
}

// data.arrays: the example shape is the features' (read from the file when it is there), or the one given,
// which must hold as many elements.
void read(Reader& reader, const Field& field, ArraysConfig& arrays, const Sub&) {
  const bool there = read_file_keys(reader, field, arrays, Dataset::arrays, "example_shape",
                                    "the example shape from; give example_shape");
  const std::string shape_path = join(field.path, "example_shape"), &path = reader.config->data.path;
  arrays.example_shape_given = reader.given(shape_path);
  if (!there) return;
  const ArraySplitConfig& first = arrays.train ? *arrays.train : *arrays.test;
  Shape stored;
  try {
    const std::unique_ptr<data::ArrayFile> features = data::open_array(path, first.features);
    data::check_features(*features);
    stored = Shape(features->shape().begin() + 1, features->shape().end());
  } catch (const UsageError& error) {
    reader.fail(reader.at(fmt::format("data.arrays.{}.features", arrays.train ? "train" : "test")), "data.arrays", error.what());
  }
  if (!arrays.example_shape_given) {
    arrays.example_shape.assign(stored.begin(), stored.end());
  } else if (num_elements(Shape(arrays.example_shape)) != num_elements(stored)) {
    reader.fail_at(shape_path, fmt::format("{} does not hold the examples of shape {} in '{}' ({})",
                                           shape_string(arrays.example_shape), shape_string(stored), path, first.features));
  }
}

// data.csv: the label and feature columns, checked against the header row when the file is there.
void read(Reader& reader, const Field& field, CsvConfig& csv, const Sub&) {
  const bool there = read_file_keys(reader, field, csv, Dataset::csv, "features",
                                    "the feature columns from; list them in features");
  const std::string label_path = join(field.path, "label"), features_path = join(field.path, "features");
  const std::string& path = reader.config->data.path;
  csv.features_given = reader.given(features_path);
  if (!there) return;
  std::vector<std::string> header;
  try {
    header = data::read_csv_header(path);
  } catch (const UsageError& error) {
    reader.fail(field, error.what());
  }
  auto check_column = [&](const std::string& at, const std::string& name) {
    if (std::find(header.begin(), header.end(), name) == header.end())
      reader.fail_at(at, fmt::format("'{}' has no column '{}'{} (columns: {})", path, shown(name),
                                     suggestion(name, header), one_of(header)));
  };
  check_column(label_path, csv.label);
  for (size_t i = 0; i < csv.features.size() && csv.features_given; ++i) check_column(item(features_path, i), csv.features[i]);
  if (!csv.features_given)
    for (const std::string& name : header)
      if (name != csv.label) csv.features.push_back(name);
  if (csv.features.empty()) reader.fail_at(label_path, fmt::format("'{}' has no column besides the label", path));
}

// The split names each dataset has: mnist and imdb train and test, arrays those data.arrays gives, csv
// only train (TFDS' name for a data set of one split, which test_split slices too).
void check_split_name(Reader& reader, const DataConfig& data, const std::string& split, const std::string& key) {
  const std::string name = data::split_name(split), path = "data." + key;
  if (data.dataset == Dataset::csv && name != "train")
    reader.fail_at(path, fmt::format("a CSV file is the one split 'train'; slice it, e.g. train_split: train[:80%], "
                                     "test_split: train[80%:] (got '{}'){}", shown(split), suggestion(name, {"train"})));
  if (data.dataset == Dataset::arrays && !data.arrays.split(name)) {
    std::vector<std::string> entries;
    for (const char* entry : {"train", "test"})
      if (data.arrays.split(entry)) entries.push_back(entry);
    reader.fail_at(path, fmt::format("data.arrays has no '{}' entry (split '{}'){}", name, shown(split), suggestion(name, entries)));
  }
}

void check(Reader& reader, const Field& field, DataConfig& data) {
  // The keys only some datasets have, and need (the datasets are exclusive, so the order is free).
  const auto require = [&](const char* key, bool needed, const std::string& example) {
    if (needed && !reader.given(join(field.path, key)))
      reader.fail(field, fmt::format("missing required key '{}'{}", key, example));
  };
  require("arrays", data.dataset == Dataset::arrays, " (dataset arrays), e.g. {train: {features: /train/x, labels: /train/y}}");
  require("csv", data.dataset == Dataset::csv, " (dataset csv), e.g. {label: species}");
  require("vectorizer", is_text(data.dataset),
          fmt::format(" (dataset {}), e.g. {{mode: tf_idf, max_tokens: 1200}}", to_string(data.dataset)));
  require("image_shape", data.dataset == Dataset::image_folder, "");
  check_split_name(reader, data, data.train_split, "train_split");
  check_split_name(reader, data, data.test_split, "test_split");
  if (!data.validation_split.empty()) check_split_name(reader, data, data.validation_split, "validation_split");
  for (const char* key : {"resize", "on_bad_file"})
    if (data.dataset != Dataset::image_folder && reader.given(join(field.path, key)))
      reader.fail_at(join(field.path, key), "only dataset image_folder has this key; remove it");

  const MeshConfig& mesh = reader.config->mesh;
  const std::vector<std::int64_t> example = data.example_shape();
  const std::string layout = join(field.path, "layout");
  data.layout_given = reader.given(layout);
  if (data.layout_given && data.layout.size() != example.size() + 1)
    reader.fail_at(layout,
                   fmt::format("the input x has rank {} (batch{}), but the layout has {} specs", example.size() + 1,
                               fmt::format(", {}", fmt::join(example, ", ")), data.layout.size()));
  if (!data.layout_given) {
    data.layout.assign(example.size() + 1, "unsharded");
    data.layout[0] = mesh.dims.front().name;
  }
  // The global batch is cut into equal shards along data.layout[0]; each feature axis likewise.
  const auto dim_where = [&](const std::string& name) { return reader.at("mesh.dims." + name).str(); };
  const int batch_shards = mesh.size_of(data.layout[0]);
  if (data.batch_size % batch_shards != 0)
    reader.fail_at("data.batch_size",
                   fmt::format("the global batch {} must be divisible by {}, the size of mesh dim '{}' ({}) that "
                               "shards the batch (data.layout[0])",
                               data.batch_size, batch_shards, data.layout[0], dim_where(data.layout[0])));
  for (size_t axis = 1; axis < data.layout.size(); ++axis) {
    const int shards = mesh.size_of(data.layout[axis]);
    if (example[axis - 1] % shards != 0)
      reader.fail_at(layout,
                     fmt::format("axis {} of the input x has {} elements, not divisible by {}, the size of mesh "
                                 "dim '{}' ({})",
                                 axis, example[axis - 1], shards, data.layout[axis], dim_where(data.layout[axis])));
  }
  if (reader.options->check_data_path && !std::filesystem::exists(data.path)) {
    // A typo of a path that is there (data/aclimdb for data/aclImdb) is named, not fetched again.
    const std::string near = did_you_mean_path(data.path);
    if (!near.empty()) reader.fail_at("data.path", fmt::format("'{}' does not exist{}", data.path, near));
    if (data.dataset == Dataset::text_folder)
      reader.fail_at("data.path",
                     fmt::format("'{}' does not exist (expected {}/<split>/<class>/*.txt)", data.path, data.path));
    reader.fail_at("data.path", fmt::format("'{}' does not exist (scripts/fetch_data.sh {} {} fetches it)", data.path,
                                            to_string(data.dataset), data.path));
  }
}

}  // namespace

// The one shape walk: each layer's own output_shape (core/nn) from the example shape on. Before each step it
// checks what the config's numbers imply: sizes they multiply into (overflow-checked: more than
// kMaxTensorElements is an error at the number), inputs a layer cannot take (a conv2d on flat pixels, a
// relayout of the wrong rank), and spatially sharded image axes (data.layout, relayout) that a window layer
// would cut into uneven bands (an error at that layout).
bool has_batch_norm(const Config& config) {
  const auto any = [](const std::vector<LayerConfig>& layers) {
    return std::any_of(layers.begin(), layers.end(), [](const LayerConfig& l) { return l.kind == LayerKind::batch_norm; });
  };
  return any(config.model) || std::any_of(config.blocks.begin(), config.blocks.end(),
                                          [&](const BlockConfig& block) { return any(block.layers); });
}

std::vector<Shape> model_shapes(const Config& config) {
  const DataConfig& data = config.data;
  const MeshConfig& mesh = config.mesh;
  const auto fail = [&](const std::string& at, const std::string& path, const std::string& what) {
    throw_config_error(config.where(at), fmt::format("{}: {}", path, what));
  };
  // The elements of a tensor of these extents, at most kMaxTensorElements.
  const auto elements = [&](const std::vector<std::int64_t>& extents, const std::string& at, const std::string& path,
                            const std::string& what) {
    std::int64_t total = 1;
    for (std::int64_t extent : extents)
      if (!checked_product(total, extent, kMaxTensorElements, &total))
        fail(at, path, fmt::format("{} has more than {} elements (the most a tensor may have)", what, kMaxTensorElements));
    return total;
  };
  const std::vector<std::int64_t> example = data.example_shape();
  const std::int64_t features = elements(example, "data", "data", "an example");
  elements({data.batch_size, features}, "data.batch_size", "data.batch_size",
           fmt::format("a batch of {} examples of {} elements each", data.batch_size, features));
  Shape input{data.batch_size};
  for (std::int64_t extent : example) input.push_back(extent);
  // The graph's layers in an order where inputs come first (its own errors are at the layer concerned).
  const ModelGraph graph = model_graph(config);
  const std::unique_ptr<nn::Model> model = make_model(config, graph);
  // Per layer: its output shape, the specs of its axes (batch first) and where they were set.
  struct Walked {
    Shape shape;
    std::vector<std::string> specs;
    std::string specs_at, specs_path;
  };
  const Walked start{input, data.layout, "data.layout", "data.layout"};
  std::vector<Walked> walked(graph.layers.size());
  for (int i : model->order()) {
    const nn::Model::Node& node = model->nodes()[size_t(i)];
    const auto walked_input = [&](int in) -> const Walked& { return in == nn::Model::kInputNode ? start : walked[size_t(in)]; };
    Shape shape = walked_input(node.inputs[0]).shape;
    std::vector<std::string> specs = walked_input(node.inputs[0]).specs;
    std::string specs_at = walked_input(node.inputs[0]).specs_at, specs_path = walked_input(node.inputs[0]).specs_path;
    const LayerConfig& layer = graph.layers[size_t(i)].layer;
    const std::string at = graph.layers[size_t(i)].at, path = join(at, to_string(layer.kind));
    const std::string name = fmt::format("layer '{}' ({})", layer.name, config.where(at).str());
    const std::string shape_text = fmt::format("[batch, {}]", fmt::join(shape.begin() + 1, shape.end(), ", "));
    const auto needs_image = [&] {
      if (shape.size() != 4)
        fail(at, path, fmt::format("{} takes image batches [batch, height, width, channels], but its input is {} (for "
                                   "MNIST: data.image_shape: [28, 28, 1])",
                                   to_string(layer.kind), shape_text));
    };
    // A window over the image's height and width: it fits, and a sharded axis splits into even bands.
    const auto window = [&](std::array<int, 2> kernel, std::array<int, 2> strides, PaddingKind padding_kind) {
      needs_image();
      const ops::Padding padding = padding_kind == PaddingKind::same ? ops::Padding::Same : ops::Padding::Valid;
      for (int axis = 1; axis <= 2; ++axis) {
        if (ops::window_output_extent(shape[axis], kernel[axis - 1], strides[axis - 1], padding) == 0)
          fail(at, path, fmt::format("{}-wide window does not fit the {} {} of its input {} with padding valid",
                                     a_number(kernel[axis - 1]), shape[axis], axis == 1 ? "rows" : "columns", shape_text));
        const std::string problem = ops::window_band_problem(name, axis, shape[axis], mesh.size_of(specs[axis]),
                                                             specs[axis], kernel[axis - 1], strides[axis - 1], padding);
        if (!problem.empty()) fail(specs_at, specs_path, problem);
      }
    };
    switch (layer.kind) {
      case LayerKind::flatten:
      case LayerKind::global_average_pool:
        if (layer.kind == LayerKind::global_average_pool && shape.size() != 3) needs_image();
        specs = {specs[0], "unsharded"};
        break;
      case LayerKind::dense:
        elements({shape.back(), layer.dense.units}, path, path, fmt::format("the kernel {} x {}", shape.back(), layer.dense.units));
        specs.back() = "unsharded";
        break;
      case LayerKind::conv2d: {
        const Conv2dConfig& conv = layer.conv2d;
        window(conv.kernel_size, conv.strides, conv.padding);
        elements({conv.kernel_size[0], conv.kernel_size[1], shape[3], conv.filters}, path, path,
                 fmt::format("the kernel {} x {} x {} x {}", conv.kernel_size[0], conv.kernel_size[1], shape[3], conv.filters));
        specs.back() = "unsharded";
        break;
      }
      case LayerKind::max_pool2d:
      case LayerKind::avg_pool2d: window(layer.pool2d.pool_size, layer.pool2d.strides, layer.pool2d.padding); break;
      case LayerKind::embedding:
        elements({layer.embedding.input_dim, layer.embedding.output_dim}, path, path,
                 fmt::format("the table {} x {}", layer.embedding.input_dim, layer.embedding.output_dim));
        specs.push_back("unsharded");
        break;
      case LayerKind::relayout:
        if (layer.relayout.specs.size() != shape.size())
          fail(path, path, fmt::format("the activations here are {} (rank {}), but the relayout has {} specs", shape_text,
                                       shape.size(), layer.relayout.specs.size()));
        for (size_t axis = 1; axis < shape.size(); ++axis) {
          const int shards = mesh.size_of(layer.relayout.specs[axis]);
          if (shape[axis] % shards != 0)
            fail(path, path, fmt::format("axis {} of the activations {} has {} elements, not divisible by {}, the size of "
                                         "mesh dim '{}'",
                                         axis, shape_text, shape[axis], shards, layer.relayout.specs[axis]));
        }
        specs = layer.relayout.specs;
        specs_at = specs_path = path;
        break;
      default:  // elementwise and normalizing layers keep the shape
        break;
    }
    // An input the layer itself refuses (a dense layer on [batch, 28, 28]) is the engine's error when it
    // builds the model, as it always was; the walk stops there. A merge's is an error here, at the merge.
    std::vector<Shape> inputs;
    for (int in : node.inputs) inputs.push_back(walked_input(in).shape);
    try {
      shape = node.layer->output_shape_of(inputs);
    } catch (const UsageError& e) {
      if (!is_merge(layer.kind)) break;
      std::vector<std::string> named;
      for (size_t k = 0; k < inputs.size(); ++k)
        named.push_back(fmt::format("'{}' {}", layer.inputs[k], shape_string(inputs[k])));
      fail(at, path, fmt::format("{} (inputs: {})", e.what(), fmt::join(named, ", ")));
    }
    elements(std::vector<std::int64_t>(shape.begin(), shape.end()), at, path,
             fmt::format("the layer's output for a batch of {}", data.batch_size));
    walked[size_t(i)] = {shape, specs, specs_at, specs_path};
  }
  std::vector<Shape> shapes;
  for (const Walked& w : walked) shapes.push_back(w.shape);
  return shapes;
}

namespace {

// The mesh dim that shards the batch (data.layout's first spec; "unsharded" when none does).
std::string batch_mesh_dim(const Config& config) {
  return config.data.layout.empty() ? "unsharded" : config.data.layout.front();
}

// train.accumulation_steps against the batch: k divides data.batch_size, the batch shards the micro-batch.
void check_accumulation(Reader& reader, const Config& config) {
  const std::int64_t k = config.train.accumulation_steps, batch = config.data.batch_size;
  if (k == 1) return;
  const std::string path = "train.accumulation_steps";
  if (batch % k != 0)
    reader.fail_at(path, fmt::format("{} micro-batches do not divide data.batch_size {} (the global batch of a step)",
                                     k, batch));
  const std::string batch_dim = batch_mesh_dim(config);
  const int shards = config.mesh.size_of(batch_dim);
  if ((batch / k) % shards != 0)
    reader.fail_at(path, fmt::format("the micro-batch of {} examples (data.batch_size {} / {}) is not divisible by "
                                     "mesh dim '{}' of size {}",
                                     batch / k, batch, k, batch_dim, shards));
}

// train.bitwise needs CPU meshes whose dims can shard a summed axis into nodes of its tree (core/bitwise.hpp)
// and micro-batches that are nodes of it; refused here rather than run with bits that depend on the mesh. (An op whose sums it
// does not order on some layout refuses at run time: softmax or layer norm over sharded features.)
void check_bitwise(Reader& reader, const Config& config) {
  if (!config.train.bitwise) return;
  const std::string path = "train.bitwise";
  if (config.mesh.devices == DeviceKind::gpu)
    reader.fail_at(path, "the canonical order runs on CPU meshes only (mesh.devices: gpu is not covered yet)");
  for (const MeshDimConfig& dim : config.mesh.dims)
    if (dim.size > bitwise::kLeaves || (dim.size & (dim.size - 1)) != 0)
      reader.fail_at(path, fmt::format("mesh dim '{}' has {} devices: the canonical order cuts each summed axis into "
                                       "{} leaves, so a mesh dim must have 1, 2, 4 or 8",
                                       dim.name, dim.size, bitwise::kLeaves));
  // Each device's share of a micro-batch must be a node of the tree over the step's batch.
  const std::int64_t k = config.train.accumulation_steps;
  const std::string batch_dim = batch_mesh_dim(config);
  const std::int64_t shards = config.mesh.size_of(batch_dim);
  if (k > 1 && ((k & (k - 1)) != 0 || k * shards > bitwise::kLeaves))
    reader.fail_at("train.accumulation_steps",
                   fmt::format("{} micro-batches on mesh dim '{}' of {} devices: train.bitwise cuts the step's batch "
                               "into {} leaves, so accumulation_steps times the batch's mesh dim must be 1, 2, 4 or 8",
                               k, batch_dim, shards, bitwise::kLeaves));
}

// `dtrain train --init-from PATH --init-skip PATTERN...` replace the config's train.init_from / init_skip;
// init_skip needs an init_from.
void apply_init_flags(Reader& reader, TrainConfig& train, const LoadOptions& options) {
  if (!options.init_from.empty()) {
    train.init_from = options.init_from;
    reader.locations["train.init_from"] = Where{"--init-from " + path_text(options.init_from), 0, 0};
  }
  if (!options.init_skip.empty()) {
    train.init_skip.clear();
    for (const std::string& pattern : options.init_skip) {
      const Where where{"--init-skip " + pattern, 0, 0};
      check_pattern(reader, where, "train.init_skip", pattern);
      reader.locations[item("train.init_skip", train.init_skip.size())] = where;
      train.init_skip.push_back(pattern);
    }
  }
  if (!train.init_skip.empty() && train.init_from.empty())
    reader.fail(reader.at("train.init_skip[0]"), "train.init_skip",
                "variables to leave as initialized, but no checkpoint to initialize the others from: give "
                "train.init_from (or --init-from)");
}

// `dtrain train|resume --profile START:STEPS` replaces train.profile.
void apply_profile_flag(Reader& reader, TrainConfig& train, const LoadOptions& options) {
  if (options.profile.empty()) return;
  const Where where{"--profile " + options.profile, 0, 0};
  long long start = 0, steps = 0;
  char end = 0;
  if (std::sscanf(options.profile.c_str(), "%lld:%lld%c", &start, &steps, &end) != 2 || start < 1 || steps < 1 ||
      steps > (1 << 20))
    throw_config_error(where, "expected START:STEPS, the first step traced (>= 1) and how many (1 to 1048576), e.g. "
                              "--profile 10:3");
  train.profile = ProfileConfig{start, steps};
  reader.locations["train.profile"] = where;
  reader.locations["train.profile.start_step"] = where;
  reader.locations["train.profile.steps"] = where;
}

// Validation settings need a validation split, and keep_best needs checkpoints.
void check_validation(Reader& reader, const Config& config) {
  const auto need_split = [&](const std::string& key) {
    if (!config.data.has_validation())
      reader.fail_at(key, "needs a validation set: add data.validation_split (e.g. 0.1, or train[90%:])");
  };
  if (reader.given("train.validation_every")) need_split("train.validation_every");
  if (config.train.early_stopping) need_split("train.early_stopping");
  if (config.train.reduce_lr_on_plateau) need_split("train.reduce_lr_on_plateau");
  // The best weights come back from the checkpoint DIR/best names, kept by the same monitor.
  if (config.train.early_stopping && config.train.early_stopping->restore_best_weights) {
    const std::string& monitor = config.train.early_stopping->monitor;
    if (config.checkpoint.keep_best != monitor)
      reader.fail_at("train.early_stopping.restore_best_weights",
                     fmt::format("restores the weights of the best validation from the checkpoint DIR/best names: set "
                                 "checkpoint.keep_best: {}{}",
                                 monitor,
                                 config.checkpoint.keep_best.empty()
                                     ? ""
                                     : fmt::format(" (it is {}, another monitor)", config.checkpoint.keep_best)));
  }
  if (!config.checkpoint.keep_best.empty()) {
    need_split("checkpoint.keep_best");
    if (config.checkpoint.every == CheckpointEvery::never)
      reader.fail_at("checkpoint.keep_best", "needs checkpoints, but checkpoint.every is never");
  }
}

std::string file_stem(const std::string& file) {
  const std::string stem = std::filesystem::path(file).stem().string();
  return stem.empty() ? "config" : stem;
}

// The top of a config is a map of sections (a file that is empty, or holds only comments, is none yet:
// --set may give them). Checked on the file before any --set applies, so a list is blamed on the file.
void check_top_level(const YAML::Node& root, const std::string& file, bool file_may_be_empty) {
  if (root.IsMap() || (file_may_be_empty && (!root.IsDefined() || root.IsNull()))) return;
  const YAML::Mark mark = root.Mark();
  throw_config_error(mark.is_null() ? Where{file, 0, 0} : Where{file, mark.line + 1, mark.column + 1},
                     fmt::format("config: expected a map with sections mesh, data, model, train (and layouts, "
                                 "checkpoint, comm, run_dir), got {}",
                                 describe(root)));
}

Config parse_tree(const YAML::Node& root, const std::string& file, std::vector<OverrideOrigin> origins,
                  const LoadOptions& options) {
  Config config;
  config.file = file;
  Reader reader(config, options, std::move(origins));
  const Field top{root, "", reader.where(root, Where{file, 0, 0})};
  check_top_level(root, file, false);
  read_keys(reader, top, config);
  apply_init_flags(reader, config.train, options);
  apply_profile_flag(reader, config.train, options);
  check_accumulation(reader, config);
  check_bitwise(reader, config);
  if (!reader.given("run_dir")) config.run_dir = "runs/" + file_stem(file);
  if (!options.run_dir.empty()) {
    config.run_dir = options.run_dir;
    reader.locations["run_dir"] = Where{"--run-dir " + path_text(options.run_dir), 0, 0};
  }
  if (!reader.given("checkpoint.dir")) {
    config.checkpoint.dir = config.run_dir + "/ckpt";
    reader.locations["checkpoint.dir"] = reader.at("run_dir");
  }
  check_validation(reader, config);
  return config;
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
    YAML::Node next;
    if (current.IsSequence()) {
      size_t index = 0;
      if (!parse(segment, index, false) || index >= current.size())
        fail(fmt::format("'{}' is a list of {}; '{}' is not an index in it", prefix, current.size(), segment));
      next.reset(current[index]);
    } else if (current.IsMap()) {
      next.reset(current[segment]);
    } else {
      fail(fmt::format("'{}' is {}, not a map", prefix, describe(current)));
    }
    if (i + 1 == segments.size()) {
      next = value;
    } else if (current.IsMap() && (!next.IsDefined() || next.IsNull())) {  // a missing map on the way
      YAML::Node created(YAML::NodeType::Map);
      current[segment] = created;
      changed.push_back(created);
      next.reset(created);
    }
    current.reset(next);
    prefix = join(prefix, segment);
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
  check_top_level(root, file, true);
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

// ---- printing: every key's value as the structs hold it ----

template <class T> std::string show(const T& value) {
  if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
  else if constexpr (std::is_enum_v<T>) return std::to_string(int(value));
  else if constexpr (std::is_arithmetic_v<T>) return fmt::format("{}", value);
  else if constexpr (std::is_same_v<T, std::string>) return "'" + value + "'";
  else return "(a struct)";
}
std::string show(const MeshDimConfig& dim) { return dim.name + ": " + show(dim.size); }
std::string show(const LayoutRule& rule) { return rule.pattern + ": " + fmt::format("[{}]", fmt::join(rule.specs, ", ")); }
std::string show(const ShuffleConfig& shuffle) { return fmt::format("{} seed {}", show(shuffle.enabled), shuffle.seed); }
std::string show(const ClipConfig& clip) { return fmt::format("global_norm {} value {}", clip.global_norm, clip.value); }
template <class T> std::string show(const std::optional<T>& value) { return value ? show(*value) : "none"; }
template <class T> std::string show(const std::vector<T>& values) {
  std::vector<std::string> shown;
  for (const T& value : values) shown.push_back(show(value));
  return fmt::format("[{}]", fmt::join(shown, ", "));
}
template <class T, size_t N> std::string show(const std::array<T, N>& values) { return show(std::vector<T>(values.begin(), values.end())); }

template <class T> std::string text(T& value) {
  if constexpr (requires { value.has_value(); }) return value ? "given " + text(*value) : "none";
  else return show(value);
}
// A key's value with the member its rule writes beside it.
template <class T, class R> std::string text(T& value, const R& rule) {
  if constexpr (std::is_same_v<R, ValidationSplit>) return text(value) + " " + show(*rule.fraction);
  else if constexpr (std::is_same_v<R, Every>) return text(value) + " " + show(*rule.steps);
  else if constexpr (std::is_same_v<R, Choice> && std::is_enum_v<T>) return (*rule.names)[size_t(value)];
  else return text(value);
}

// "path = value" lines, through the structs' visits (never through the dump).
struct Print {
  std::string path;
  std::vector<std::string>& lines;
  template <class T, class R> void operator()(T& member, const char* key, const R& rule, const char*, unsigned = 0) {
    const std::string here = join(path, key);
    if constexpr (std::is_same_v<R, Tagged>) lines.push_back(here + " = " + (*rule.kinds)[kind_of(member)]);
    if constexpr (std::is_same_v<T, std::vector<LayerConfig>>) {
      for (size_t i = 0; i < member.size(); ++i) {
        Print inner{item(here, i), lines};
        member[i].visit(inner);
      }
    } else if constexpr (std::is_same_v<T, std::vector<BlockConfig>>) {
      for (BlockConfig& block : member) (*this)(block.layers, join(key, block.name).c_str(), Layers{}, "");
    } else if constexpr (kVisitable<T>) {
      Print inner{here, lines};
      visit_fields(member, inner);
    } else if constexpr (kOptionalStruct<T>) {
      lines.push_back(here + (member ? " = given" : " = none"));
      if (member) (*this)(*member, key, rule, "");
    } else {
      lines.push_back(here + " = " + text(member, rule));
    }
  }
};

template <class T> std::vector<std::string> printed(T& value) {
  std::vector<std::string> lines;
  Print print{"", lines};
  visit_fields(value, print);
  return lines;
}
// The lines of one key (and of its sub-keys) among a struct's printed lines.
std::vector<std::string> lines_of(const std::vector<std::string>& lines, const std::string& key) {
  std::vector<std::string> result;
  for (const std::string& line : lines)
    if (line.rfind(key + " = ", 0) == 0 || line.rfind(key + ".", 0) == 0 || line.rfind(key + "[", 0) == 0)
      result.push_back(line);
  return result;
}

// ---- writing: the dump, YAML that reads back to the same structs ----

YAML::Node flow(YAML::Node node) {
  node.SetStyle(YAML::EmitterStyle::Flow);
  return node;
}
template <class T> YAML::Node list(const std::vector<T>& values) {
  YAML::Node node(YAML::NodeType::Sequence);
  for (const T& value : values) node.push_back(value);
  return flow(node);
}

// A scalar as it is (integers, booleans, strings), a list of them in flow style; the rules below write theirs.
template <class T, class R> YAML::Node encode(const T& m, const R&) { return YAML::Node(m); }
template <class T, class R> YAML::Node encode(const std::vector<T>& m, const R&) { return list(m); }
YAML::Node encode(const std::optional<std::int64_t>& m, const Int&) { return YAML::Node(*m); }
YAML::Node encode(double m, const Num&) { return YAML::Node(number_text(m)); }
template <class E> YAML::Node encode(E m, const Choice& rule) requires std::is_enum_v<E> { return YAML::Node((*rule.names)[size_t(m)]); }
template <class T> YAML::Node encode_keys(const T& member, int depth);
template <class T> YAML::Node encode(const T& m, const Sub&) { return encode_keys(m, 1); }
template <class T> YAML::Node encode(const std::optional<T>& m, const Sub& rule) { return encode(*m, rule); }
template <class T> YAML::Node encode(const T& m, const Tagged& rule) {
  YAML::Node node;
  node[(*rule.kinds)[kind_of(m)]] = encode_keys(m, 1);
  return flow(node);
}
YAML::Node encode(const std::vector<MeshDimConfig>& dims, const Dims&) {
  YAML::Node node(YAML::NodeType::Map);
  for (const MeshDimConfig& dim : dims) node[dim.name] = dim.size;
  return flow(node);
}
YAML::Node encode(const std::vector<double>& m, const Rates&) {
  std::vector<std::string> rates;
  for (double rate : m) rates.push_back(number_text(rate));
  return list(rates);
}
YAML::Node encode(const std::array<std::int64_t, 2>& m, const Seed&) { return list(std::vector<std::int64_t>(m.begin(), m.end())); }
YAML::Node encode(const std::array<int, 2>& m, const Pair&) { return list(std::vector<int>(m.begin(), m.end())); }
YAML::Node encode(const std::string& m, const ValidationSplit& rule) {
  return YAML::Node(*rule.fraction > 0 ? number_text(*rule.fraction) : m);
}
YAML::Node encode(const std::vector<int>& m, const ImageShape&) { return m.empty() ? YAML::Node("flat") : list(m); }
YAML::Node encode(const ShuffleConfig& m, const Shuffle&) {
  if (!m.enabled) return YAML::Node(false);
  YAML::Node node;
  node["seed"] = m.seed;
  return flow(node);
}
YAML::Node encode(CheckpointEvery m, const Every& rule) {
  return m == CheckpointEvery::steps ? YAML::Node(*rule.steps) : YAML::Node(kEvery[m == CheckpointEvery::epoch ? 0 : 1]);
}
YAML::Node encode(const ClipConfig& m, const Clip&) {
  YAML::Node node;
  node[kClipKinds[m.global_norm > 0 ? 0 : 1]] = number_text(m.global_norm > 0 ? m.global_norm : m.value);
  return flow(node);
}
YAML::Node encode(const std::vector<LayerConfig>& layers, const Layers&) {
  YAML::Node node(YAML::NodeType::Sequence);
  for (const LayerConfig& layer : layers) node.push_back(flow(encode_keys(layer, 1)));
  return node;
}
YAML::Node encode(const std::vector<BlockConfig>& blocks, const Blocks&) {
  YAML::Node node(YAML::NodeType::Map);
  for (const BlockConfig& block : blocks) node[block.name] = encode(block.layers, Layers{});
  return node;
}
YAML::Node encode(const std::vector<LayoutRule>& rules, const LayoutRules&) {
  YAML::Node node(YAML::NodeType::Map);
  for (const LayoutRule& rule : rules) node[rule.pattern] = list(rule.specs);
  return node;
}

// A map of a struct's keys; below the sections (depth >= 1) in flow style. A key marked kOmitDefault is
// left out while it prints as a fresh struct's of the same kind does (an off feature, an empty list).
struct Write {
  YAML::Node& node;
  int depth;
  const std::vector<std::string>& lines;  // the struct's printed lines
  const std::vector<std::string>& fresh;  // those of a fresh struct of its kind
  template <class T, class R> void operator()(T& member, const char* key, const R& rule, const char*, unsigned flags = 0) {
    if ((flags & kOmitDefault) && lines_of(lines, key) == lines_of(fresh, key)) return;
    YAML::Node child = encode(member, rule);
    if (depth >= 1) child.SetStyle(YAML::EmitterStyle::Flow);
    node[key] = child;
  }
};

template <class T> YAML::Node encode_keys(const T& member, int depth) {
  T copy = member, fresh;
  if constexpr (requires { kind_of(member); }) select(fresh, kind_of(member));
  const std::vector<std::string> lines = printed(copy), fresh_lines = printed(fresh);
  YAML::Node node(YAML::NodeType::Map);
  Write write{node, depth, lines, fresh_lines};
  visit_fields(copy, write);
  return node;
}

// ---- the schema reference ----

std::string rule_text(const Int& rule) {
  return rule.max == kNoLimit ? fmt::format("integer >= {}", rule.min) : fmt::format("integer in [{}, {}]", rule.min, rule.max);
}
std::string rule_text(const Num& rule) { return rule.what ? fmt::format("number {}", rule.what) : "number"; }
std::string rule_text(const Bool&) { return "true | false"; }
std::string rule_text(const Text& rule) { return rule.expected; }
std::string rule_text(const Choice& rule) { return fmt::format("{}", fmt::join(*rule.names, " | ")); }
std::string rule_text(const Tagged& rule) { return fmt::format("KIND or {{KIND: {{...}}}}, KIND {}", fmt::join(*rule.kinds, " | ")); }
template <class R> std::string rule_text(const R&) { return R::text; }

// One line per key: "- `path`: type; required | default VALUE. doc", sub-keys after their map.
struct Schema {
  std::string path;
  std::vector<std::string>& lines;
  template <class T> void nested(T& member, const std::string& here) {
    Schema inner{here, lines};
    visit_fields(member, inner);
  }
  template <class T, class R> void operator()(T& member, const char* key, const R& rule, const char* doc, unsigned flags = 0) {
    const std::string here = join(path, key);
    std::string value;
    if constexpr (!kVisitable<T> && !requires { member.has_value(); } && !std::is_same_v<R, Layers>) {
      YAML::Emitter out;
      out << encode(member, rule);
      value = fmt::format("default `{}`", out.c_str());
    }
    if (flags & kRequired) value = "required";
    lines.push_back(fmt::format("- `{}`: {}{}. {}", here, rule_text(rule), value.empty() ? "" : "; " + value, doc));
    if constexpr (std::is_same_v<R, Tagged>) {
      for (size_t kind = 0; kind < rule.kinds->size(); ++kind) {
        T fresh{};
        select(fresh, kind);
        nested(fresh, here + "." + (*rule.kinds)[kind]);
      }
    } else if constexpr (std::is_same_v<R, Layers>) {
      for (size_t kind = 0; kind < kLayerKinds.size(); ++kind) {
        LayerConfig layer;
        select(layer, kind);
        nested(layer, here + "[]");
      }
    } else if constexpr (kVisitable<T>) {
      nested(member, here);
    } else if constexpr (kOptionalStruct<T>) {
      typename T::value_type fresh{};
      nested(fresh, here);
    }
  }
};

}  // namespace

std::string dump_config(const Config& config) {
  YAML::Emitter out;
  out << encode_keys(config, 0);
  return std::string(out.c_str()) + "\n";
}

std::string describe_config(const Config& config) {
  Config copy = config;
  return fmt::format("{}\n", fmt::join(printed(copy), "\n"));
}

std::string config_schema() {
  std::vector<std::string> lines{"# The config's keys (generated from app/config.hpp's declarations)", ""};
  Config config;
  Schema schema{"", lines};
  config.visit(schema);
  std::set<std::string> seen;  // layer kinds share keys (activation, init, name): each once
  lines.erase(std::remove_if(lines.begin(), lines.end(), [&](const std::string& line) { return !seen.insert(line).second; }),
              lines.end());
  return fmt::format("{}\n", fmt::join(lines, "\n"));
}

}  // namespace dtrain
