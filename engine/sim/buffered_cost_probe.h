// What each step of the buffered read path (BufferedCosts' fields) costs on
// this machine, in this process, measured with the real components: the
// page cache's lookup and insertion (with eviction), a 4 KiB copy out of a
// cold page, a 4 KiB O_DIRECT read submitted through a real stack down to
// io_uring (the bio going to the driver: ->readpage), a page-wait callback
// armed, deferred work run by the event loop (task_work), a work item handed
// to a sleeping worker thread (io_queue_async_work + the wake-up), a
// completion recorded (io_cqring_add_event).
//
// The virtual-clock sweep (seed 003) charges these measured figures on a
// modelled machine with more CPUs than this one: a real-clock run on a
// 2-CPU machine cannot give io-wq workers CPUs of their own, which is what
// the thread's rasync-off columns measure. fio's own per-I/O costs
// (fio_submit_ns, fio_complete_ns) are not measured here: the harness takes
// them from fio's null engine.
#pragma once

#include <cstdint>
#include <string>

#include "core/io_uring/buffered_io.h"

namespace mdsplit {

struct BufferedCostProbeOptions {
    // Where the probe's scratch member file goes (O_DIRECT reads of real
    // blocks, written first: a hole would be read without any device I/O).
    std::string scratch_dir = "/var/tmp";
    uint64_t scratch_bytes = 64ull << 20;
    uint32_t reads = 2000;   // O_DIRECT reads per submission figure
    uint32_t wakeups = 500;  // hand-offs to a sleeping worker
};

// Starts from `base` (fio's costs, cpus) and replaces every figure the probe
// measures. Throws std::runtime_error when the scratch file cannot be made.
BufferedCosts measure_buffered_costs(const BufferedCostProbeOptions& options,
                                     BufferedCosts base = BufferedCosts{});

}  // namespace mdsplit
