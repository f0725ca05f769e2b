// time_scale = "auto": the smallest slow-motion factor this host keeps up
// with, measured at setup. A copy of the stack whose members store nothing
// (null backends, the same timing models, schedulers and md) runs the jobs
// that will share the device -- each job's direction, block size, random or
// sequential, iodepth, think time and start delay (relative to the first),
// one submitter thread per job -- on
// the real clock for a fraction of a second per factor tried. Its lag is
// measured as a run's is (host_lag.h); a factor keeps up when the host's
// share of that run is at most the target share. The first factor tried is
// 1; each next one comes from the share measured at the last
// (time_scale_for_share, at least twice the last), until one keeps up in
// two probes in a row, and four times that is taken (at most six probes; the
// last factor tried when none kept up). What it
// leaves out: fio's own per-I/O work (the run's verdict measures it) and a
// real backend's speed (the members store nothing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "config/stack_config.h"
#include "core/block/task_context.h"
#include "stack/host_lag.h"

namespace mdsplit {

// One job that will use the device.
struct AutoScaleJob {
    std::string name;
    Op op = Op::Read;
    uint64_t block_bytes = 4096;
    bool random = false;
    uint32_t iodepth = 1;
    uint64_t think_ns = 0;
    uint64_t start_ns = 0;  // fio's startdelay: the probe starts the jobs as far apart
    SchedIdentity sched;
};

/**
 * calibrate_time_scale() - the smallest factor this host keeps up with
 * @config: the stack (its members are replaced by null backends)
 * @jobs: the jobs that share the device (at least one)
 * @clock: the real clock the stack will run on
 *
 * Never touches a member. Throws std::runtime_error when the copy cannot
 * be built (the real stack would fail the same way).
 */
TimeScaleCalibration calibrate_time_scale(const StackConfig& config,
                                          const std::vector<AutoScaleJob>& jobs, Clock& clock,
                                          const HostLagOptions& options = {});

}  // namespace mdsplit
