#include "core/suggest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
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
  const std::string found = closest_name(word, candidates, max_length);
  return found.empty() ? "" : fmt::format("; did you mean '{}'?", found);
}

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates, std::size_t max_length) {
  if (word.size() > max_length) return "";
  std::string best;
  int best_distance = std::numeric_limits<int>::max();
  for (const std::string& candidate : candidates) {
    const int distance = edit_distance(word, candidate);
    if (distance < best_distance) best_distance = distance, best = candidate;
  }
  const int allowed = std::max<int>(2, int(word.size()) / 3);
  if (!best.empty() && best_distance <= allowed) return best;
  std::string begun;  // the one candidate that begins with the word
  for (const std::string& candidate : candidates) {
    if (word.size() < 3 || candidate.size() <= word.size() || candidate.compare(0, word.size(), word) != 0) continue;
    if (!begun.empty()) return "";
    begun = candidate;
  }
  return begun;
}

std::string did_you_mean_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path whole(path);
  fs::path at;  // the existing prefix
  auto part = whole.begin();
  for (; part != whole.end(); ++part) {
    if (!fs::exists(at / *part, error)) break;
    at /= *part;
  }
  if (part == whole.end() || part->empty()) return "";
  const std::string missing = part->string();
  const fs::path folder = at.empty() ? fs::path(".") : at;
  std::vector<std::string> siblings;
  constexpr size_t kMostRead = 10000;  // a huge folder is not worth a suggestion
  for (fs::directory_iterator it(folder, error), end; !error && it != end && siblings.size() < kMostRead; it.increment(error))
    siblings.push_back(it->path().filename().string());
  const auto lower = [](std::string text) {
    for (char& c : text) c = char(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  std::string found;
  for (const std::string& sibling : siblings)
    if (lower(sibling) == lower(missing)) found = sibling;
  if (found.empty()) found = closest_name(missing, siblings);
  if (found.empty()) return "";
  fs::path suggested = at / found;
  for (++part; part != whole.end(); ++part) suggested /= *part;
  return fmt::format("; did you mean '{}'?", suggested.string());
}

}  // namespace dtrain
