#pragma once
// Everything a user of gpubatch needs, in one include.
#include "gpubatch/config.hpp"
#include "gpubatch/custom_kernel.hpp"
#include "gpubatch/device.hpp"
#include "gpubatch/error.hpp"
#include "gpubatch/executor.hpp"
#include "gpubatch/graph.hpp"
#include "gpubatch/log.hpp"
#include "gpubatch/metrics_server.hpp"
#include "gpubatch/ops.hpp"
#include "gpubatch/reference.hpp"
#include "gpubatch/stats.hpp"
