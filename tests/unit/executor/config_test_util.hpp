#pragma once
// What the configuration tests share: the expectation of a typed invalid_config error, and an
// environment variable set for one scope.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "gpubatch/error.hpp"

namespace gpubatch::testing {

// Expects Error(invalid_config) whose message mentions `needle`.
template <typename F>
void expect_invalid(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected invalid_config mentioning \"" << needle << "\"";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_config) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message \"" << e.what() << "\" does not mention \"" << needle << "\"";
  }
}

// Sets an environment variable until the end of the scope (then restores or removes it).
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~EnvGuard() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace gpubatch::testing
