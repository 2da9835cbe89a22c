// What a call throws, for tests that check the kind of an error and what it names.
#pragma once
#include <string>

#include "core/error.hpp"

namespace dtrain::testing {

// The message of the UsageError that `call` throws, or "no error".
template <typename Call>
std::string usage_error_message(Call&& call) {
  try {
    call();
  } catch (const UsageError& error) {
    return error.what();
  }
  return "no error";
}

// "usage" (UsageError: exit 2), "error" (another dtrain::Error: exit 1) or "none"; the message into *message.
template <typename Fn>
std::string thrown(Fn&& fn, std::string* message = nullptr) {
  try {
    fn();
  } catch (const UsageError& e) {
    if (message) *message = e.what();
    return "usage";
  } catch (const Error& e) {
    if (message) *message = e.what();
    return "error";
  }
  return "none";
}

}  // namespace dtrain::testing
