// GPUBATCH_POLL_PAUSE_US checked where a Device or an executor is made (include/gpubatch/batch_device.hpp).
#include <cstdlib>
#include <string>

#include "gpubatch/batch_device.hpp"
#include "gpubatch/error.hpp"

namespace gpubatch::detail {

void check_poll_pause() {
  const char* env = std::getenv("GPUBATCH_POLL_PAUSE_US");
  long us = 0;
  if (!parse_poll_pause(env, us))
    throw Error(ErrorCode::invalid_config,
                std::string("GPUBATCH_POLL_PAUSE_US='") + env + "' is not a number of microseconds in [0, 10000]");
}

}  // namespace gpubatch::detail
