#include "core/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace dtrain {

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

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates, std::size_t max_length) {
  if (word.size() > max_length) return "";
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

}  // namespace dtrain
