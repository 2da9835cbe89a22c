// The indefinite article before a number, as the number is read aloud: "an 8-wide window", "an 11x11 image",
// "a 3-dim mesh". Messages that put "a" before a value write it through this, so "a 8 MB stack" never prints.
#pragma once
#include <cstdint>
#include <string>

namespace dtrain {

// "an 8", "an 11", "an 18000", "a 180", "a 3", "a -8" (minus is read first).
inline std::string a_number(std::int64_t value) {
  const std::string digits = std::to_string(value);
  if (value < 0) return "a " + digits;
  // The first word read aloud is that of the leading group of up to three digits (18,000: "eighteen thousand").
  const size_t lead = digits.size() % 3 == 0 ? 3 : digits.size() % 3;
  const std::string group = digits.substr(0, lead);
  const bool vowel = group[0] == '8' || group == "11" || group == "18";
  return (vowel ? "an " : "a ") + digits;
}

}  // namespace dtrain
