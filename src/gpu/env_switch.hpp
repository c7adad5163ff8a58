#pragma once
// A two-word switch read from the environment (GPUBATCH_EW_VECTOR=on|off, GPUBATCH_COPY_RESULTS=
// kernel|engine, ...): `unset` when absent or empty, true for `yes`, false for `no`, anything else
// an invalid_config Error naming both words.
#include <cstdlib>
#include <string>

#include "gpubatch/error.hpp"

namespace gpubatch::gpu {

inline bool env_switch(const char* name, bool unset, const char* yes, const char* no) {
  const char* env = std::getenv(name);
  if (!env || !*env) return unset;
  const std::string v = env;
  if (v == yes) return true;
  if (v == no) return false;
  throw Error(ErrorCode::invalid_config,
              std::string(name) + "='" + v + "' is neither '" + yes + "' nor '" + no + "'");
}

}  // namespace gpubatch::gpu
