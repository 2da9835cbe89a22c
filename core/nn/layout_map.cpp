#include "core/nn/layout_map.hpp"

#include <regex>

#include "core/error.hpp"

namespace dtrain::nn {

LayoutMap::LayoutMap(std::vector<LayoutRule> rules) : rules_(std::move(rules)), used_(rules_.size(), false) {
  for (const auto& rule : rules_) {
    try {
      std::regex check(rule.pattern);
    } catch (const std::regex_error& e) {
      throw UsageError(fmt::format("{}layout rule '{}' is not a valid regular expression: {}",
                                   rule.where.empty() ? "" : rule.where + ": ", rule.pattern, e.what()));
    }
  }
}

LayoutChoice LayoutMap::choose(const std::string& path, const Shape& shape, const MeshPtr& mesh,
                               const LayoutChoice* kernel, const std::string& kernel_path) {
  for (size_t i = 0; i < rules_.size(); ++i) {
    const LayoutRule& rule = rules_[i];
    if (!std::regex_match(path, std::regex(rule.pattern))) continue;
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
  if (kernel != nullptr && shape.size() == 1) {
    const Layout& k = kernel->layout;
    Layout layout({k.spec(k.rank() - 1)}, mesh);
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
