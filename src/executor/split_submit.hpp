#pragma once
// Out-of-memory splitting on the executor's side of the seam (src/executor/split_submit.cpp).
#include <memory>
#include <span>

#include "gpubatch/batch_device.hpp"

namespace gpubatch::detail {

// submit(), and when the device answers out_of_memory, the batch halved and each half submitted
// again, down to single requests: only a request that cannot fit alone fails (out_of_memory, from
// take_result). Other errors, and out_of_memory for a batch of one, propagate as from submit().
// (src/executor/split_submit.cpp)
std::unique_ptr<InFlightBatch> submit_splitting_on_oom(BatchDevice& device,
                                                       std::span<const Request* const> requests,
                                                       ParallelRunner& parallel = inline_runner());

}  // namespace gpubatch::detail
