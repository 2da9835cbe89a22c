// Keras-style LayoutMap: ordered rules, regex (full match) over variable paths -> sharding specs. The
// first matching rule wins; unmatched variables are replicated, except that a bias takes its kernel's
// last-axis sharding unless a rule names it.
#pragma once
#include <string>
#include <vector>

#include "core/layout.hpp"

namespace dtrain::nn {

struct LayoutRule {
  std::string pattern;
  std::vector<std::string> specs;
  std::string where;  // "file:line:col" of the rule in its config, for messages; may be empty
};

struct LayoutChoice {
  Layout layout;
  std::string reason;  // "rule 'dense1/kernel'", "follows dense1/kernel", "replicated (no rule)"
};

class LayoutMap {
 public:
  LayoutMap() = default;
  explicit LayoutMap(std::vector<LayoutRule> rules);
  const std::vector<LayoutRule>& rules() const { return rules_; }
  // The layout of a variable; `kernel` is the followed variable's layout for a bias (or null).
  // Throws UsageError (prefixed with the rule's location) on rank or divisibility mismatches.
  LayoutChoice choose(const std::string& path, const Shape& shape, const MeshPtr& mesh, const LayoutChoice* kernel,
                      const std::string& kernel_path);
  // Rules that matched no variable (a warning for the user).
  std::vector<LayoutRule> unused_rules() const;

 private:
  std::vector<LayoutRule> rules_;
  std::vector<bool> used_;
};

}  // namespace dtrain::nn
