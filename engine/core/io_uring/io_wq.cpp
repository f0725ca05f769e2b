// Follows io_uring/io-wq.c (fs/io-wq.c in 5.9): the bound on the pool,
// the same for both implementations (io_wq.h), and the choice of one, made
// once with the submitter's CPU (submitter_cpu.h): the execution mode.
#include <algorithm>

#include "core/io_uring/io_wq.h"
#include "core/io_uring/submitter_cpu.h"

namespace mdsplit {

// io_uring's io_wq_create(): at most 4 x CPUs workers, and io-wq creates
// them on demand, so never more than the requests in flight (iodepth).
uint32_t BufferedIo::max_workers() const {
    uint32_t bound = 4 * wq_->cpus();
    return iodepth_ ? std::min(iodepth_, bound) : bound;
}

BufferedExec make_buffered_exec(BufferedIo& io, bool virtual_clock) {
    BufferedExec exec;
    if (virtual_clock) {
        exec.cpu = std::make_unique<SubmitterCpuModelled>(io);
        exec.wq = std::make_unique<IoWqVirtual>(io);
    } else {
        exec.cpu = std::make_unique<SubmitterCpuReal>(io);
        exec.wq = std::make_unique<IoWqThreads>(io);
    }
    return exec;
}

}  // namespace mdsplit
