// "Did you mean ...?" for a word that names nothing known (a config key, a command, a split, a variable path):
// the closest candidate by edit distance, when it is close enough to be a typo.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace dtrain {

// Edit distance counting a swap of two neighbours as one edit (optimal string alignment).
int edit_distance(const std::string& a, const std::string& b);

// "; did you mean 'x'?" for the closest of `candidates` when at most max(2, |word| / 3) edits away; else for
// the one candidate the word (3 characters or more) begins, Keras' shortened names (val_acc: val_accuracy);
// else "". A word longer than `max_length` gets none (the distance costs |word| x |candidate|).
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates,
                         std::size_t max_length = 256);
// The candidate did_you_mean names, or "".
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates,
                         std::size_t max_length = 256);

// For a path that does not exist: "; did you mean 'data/aclImdb'?" when its first missing part has a sibling
// that differs only by case, or by a typo (did_you_mean), the rest of the path kept; else "".
std::string did_you_mean_path(const std::string& path);

}  // namespace dtrain
