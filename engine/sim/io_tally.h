// What a closed-loop workload did, as fio sums up a job: I/Os, bytes,
// errors and completion latencies. The closed-loop driver (workload.h)
// counts with it; io_slots.h holds the rest (the spec, the region, the I/O
// slots).
#pragma once

#include <cstdint>

#include "core/block/task_context.h"

namespace mdsplit {

struct IoTally {
    uint64_t ios = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    uint64_t elapsed_ns = 0;
    uint64_t total_latency_ns = 0;
    uint64_t max_latency_ns = 0;

    // One completion of a `length`-byte I/O issued `latency_ns` ago: a
    // failed one counts as an error, not as an I/O.
    void record(const IoCompletion& c, uint64_t length, uint64_t latency_ns) {
        total_latency_ns += latency_ns;
        if (latency_ns > max_latency_ns) max_latency_ns = latency_ns;
        if (c.error) {
            errors++;
        } else {
            ios++;
            bytes += length - c.resid;
        }
    }
    double iops() const { return elapsed_ns ? double(ios) * 1e9 / double(elapsed_ns) : 0; }
    double bandwidth_bps() const {
        return elapsed_ns ? double(bytes) * 1e9 / double(elapsed_ns) : 0;
    }
    double mean_latency_ns() const { return ios ? double(total_latency_ns) / double(ios) : 0; }
};

}  // namespace mdsplit
