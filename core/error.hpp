// Errors thrown by the library. Messages read "[where] what"; only app/ catches, prints and picks the
// exit code: UsageError (bad config or arguments) -> 2, any other Error -> 1.
#pragma once
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace dtrain {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The user's input is wrong (config, arguments, data they pointed at): exit code 2.
struct UsageError : Error {
  using Error::Error;
};

}  // namespace dtrain

#define DTRAIN_CHECK(cond, ...)                                  \
  do {                                                           \
    if (!(cond)) throw ::dtrain::Error(fmt::format(__VA_ARGS__)); \
  } while (0)

#define DTRAIN_CHECK_USAGE(cond, ...)                                 \
  do {                                                                \
    if (!(cond)) throw ::dtrain::UsageError(fmt::format(__VA_ARGS__)); \
  } while (0)
