// The message of the UsageError that `call` throws, or "no error": for tests that check what an error names.
#pragma once
#include <string>

#include "core/error.hpp"

namespace dtrain::testing {

template <typename Call>
std::string usage_error_message(Call&& call) {
  try {
    call();
  } catch (const UsageError& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace dtrain::testing
