// Keras-style LayoutMap: ordered rules, regex (full match) over variable paths -> sharding specs. The
// first matching rule wins; unmatched variables are replicated, except that a bias takes its kernel's
// last-axis sharding unless a rule names it.
// Patterns are RE2 regular expressions (https://github.com/google/re2/wiki/Syntax): matching takes linear
// time and bounded stack whatever the pattern or the path, so no input can hang or crash the matcher. RE2
// has no backreferences or lookaround; everything else a layout rule needs (., *, +, ?, |, groups, [...],
// {m,n}, \d, \w) reads as in ECMAScript.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/layout.hpp"

namespace re2 {
class RE2;
}

namespace dtrain::nn {

// A pattern longer than this is refused (a clear error rather than a huge automaton).
inline constexpr size_t kMaxLayoutPatternLength = 4096;

struct LayoutRule {
  std::string pattern;
  std::vector<std::string> specs;
  std::string where;  // "file:line:col" of the rule in its config, for messages; may be empty
};

// Compiles `pattern` (RE2 syntax, anchored at both ends). On failure returns null and sets *error to a
// readable reason; never throws for any input.
std::shared_ptr<const re2::RE2> compile_layout_pattern(const std::string& pattern, std::string* error);
// Whether `path` matches the whole of the compiled pattern.
bool layout_pattern_matches(const re2::RE2& pattern, const std::string& path);

struct LayoutChoice {
  Layout layout;
  std::string reason;  // "rule 'dense1/kernel'", "follows dense1/kernel", "replicated (no rule)"
};

class LayoutMap {
 public:
  LayoutMap() = default;
  // Throws UsageError (prefixed with the rule's location) for a pattern that is not a valid RE2 regex.
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
  std::vector<std::shared_ptr<const re2::RE2>> compiled_;
  std::vector<bool> used_;
};

}  // namespace dtrain::nn
