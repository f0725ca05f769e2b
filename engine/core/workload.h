// A closed-loop synthetic workload for virtual-time runs (the Python
// bindings): like one fio job, it keeps `iodepth` I/Os in flight,
// submitting in batches inside a plug, sequential or random.
#pragma once

#include <cstdint>
#include <string>

#include "core/stack.h"

namespace mdsplit {

struct WorkloadSpec {
    Op op = Op::Read;
    bool random = false;
    uint64_t block_size = 4096;
    uint64_t offset = 0;        // start of the region
    uint64_t size = 0;          // region size (0 = device size - offset)
    uint64_t total_bytes = 0;   // stop after this many bytes (0 = one pass of the region)
    uint32_t iodepth = 1;
    uint32_t batch = 1;         // I/Os queued per commit (fio's iodepth_batch)
    uint64_t seed = 1;
    uint32_t pid = 1;
};

struct WorkloadResult {
    uint64_t ios = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    uint64_t elapsed_ns = 0;
    uint64_t total_latency_ns = 0;
    uint64_t max_latency_ns = 0;
    double iops() const { return elapsed_ns ? double(ios) * 1e9 / double(elapsed_ns) : 0; }
    double bandwidth_bps() const { return elapsed_ns ? double(bytes) * 1e9 / double(elapsed_ns) : 0; }
    double mean_latency_ns() const { return ios ? double(total_latency_ns) / double(ios) : 0; }
};

// Runs the workload to completion on `stack` (any clock).
WorkloadResult run_workload(Stack& stack, const WorkloadSpec& spec);

}  // namespace mdsplit
