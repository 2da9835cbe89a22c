#include "core/nn/layout_map.hpp"

#include <re2/re2.h>

#include "core/error.hpp"

namespace dtrain::nn {

std::shared_ptr<const re2::RE2> compile_layout_pattern(const std::string& pattern, std::string* error) {
  if (pattern.size() > kMaxLayoutPatternLength) {
    *error = fmt::format("it has {} characters; a layout pattern has at most {}", pattern.size(),
                         kMaxLayoutPatternLength);
    return nullptr;
  }
  re2::RE2::Options options;
  options.set_log_errors(false);
  // RE2::FullMatch anchors at both ends: a rule matches the whole variable path, as std::regex_match did.
  auto compiled = std::make_shared<const re2::RE2>(pattern, options);
  if (!compiled->ok()) {
    *error = compiled->error();
    return nullptr;
  }
  return compiled;
}

bool layout_pattern_matches(const re2::RE2& pattern, const std::string& path) {
  return re2::RE2::FullMatch(path, pattern);
}

LayoutMap::LayoutMap(std::vector<LayoutRule> rules) : rules_(std::move(rules)), used_(rules_.size(), false) {
  for (const auto& rule : rules_) {
    std::string error;
    auto compiled = compile_layout_pattern(rule.pattern, &error);
    if (!compiled)
      throw UsageError(fmt::format("{}layout rule '{}' is not a valid regular expression: {}",
                                   rule.where.empty() ? "" : rule.where + ": ",
                                   rule.pattern.size() > 64 ? rule.pattern.substr(0, 64) + "..." : rule.pattern,
                                   error));
    compiled_.push_back(std::move(compiled));
  }
}

LayoutChoice LayoutMap::choose(const std::string& path, const Shape& shape, const MeshPtr& mesh,
                               const LayoutChoice* kernel, const std::string& kernel_path) {
  for (size_t i = 0; i < rules_.size(); ++i) {
    const LayoutRule& rule = rules_[i];
    if (!layout_pattern_matches(*compiled_[i], path)) continue;
    used_[i] = true;
    const std::string prefix = rule.where.empty() ? "" : rule.where + ": ";
    DTRAIN_CHECK_USAGE(rule.specs.size() == shape.size(),
                       "{}layout rule '{}' gives {} specs to '{}', which has shape {} (rank {})", prefix, rule.pattern,
                       rule.specs.size(), path, shape_string(shape), shape.size());
    try {
      Layout layout(rule.specs, mesh);
      layout.check_shape(shape);
      return {layout, fmt::format("rule '{}'", rule.pattern)};
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}layout rule '{}' for '{}': {}", prefix, rule.pattern, path, e.what()));
    }
  }
  if (kernel != nullptr && int(shape.size()) < kernel->layout.rank()) {
    // A bias takes its kernel's sharding of the trailing axes it shares (attention's [heads, key_dim] too).
    const Layout& k = kernel->layout;
    std::vector<std::string> specs;
    for (int axis = k.rank() - int(shape.size()); axis < k.rank(); ++axis) specs.push_back(k.spec(axis));
    Layout layout(specs, mesh);
    layout.check_shape(shape);
    return {layout, fmt::format("follows {}", kernel_path)};
  }
  return {Layout::replicated(mesh, int(shape.size())), "replicated (no rule)"};
}

std::vector<LayoutRule> LayoutMap::unused_rules() const {
  std::vector<LayoutRule> unused;
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (!used_[i]) unused.push_back(rules_[i]);
  }
  return unused;
}

}  // namespace dtrain::nn
