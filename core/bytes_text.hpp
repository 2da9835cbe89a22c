// Sizes for people, in one style everywhere (plan, inspect, errors): binary units, "512 B", "52.3 KiB",
// "1.25 MiB", "3.40 GiB".
#pragma once
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace dtrain {

inline std::string bytes_text(double bytes) {
  if (bytes >= double(1 << 30)) return fmt::format("{:.2f} GiB", bytes / double(1 << 30));
  if (bytes >= double(1 << 20)) return fmt::format("{:.2f} MiB", bytes / double(1 << 20));
  if (bytes >= double(1 << 10)) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", int64_t(bytes));
}

}  // namespace dtrain
