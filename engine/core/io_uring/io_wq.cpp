// Follows io_uring/io-wq.c (fs/io-wq.c in 5.9): the bound on the pool,
// the same for both implementations (io_wq.h), and the choice of one.
#include <algorithm>

#include "core/io_uring/io_wq.h"

namespace mdsplit {

// io_uring's io_wq_create(): at most 4 x CPUs workers, and io-wq creates
// them on demand, so never more than the requests in flight (iodepth).
uint32_t BufferedIo::max_workers() const {
    uint32_t bound = 4 * wq_->cpus();
    return iodepth_ ? std::min(iodepth_, bound) : bound;
}

std::unique_ptr<IoWq> make_io_wq(BufferedIo& io, bool virtual_clock) {
    if (virtual_clock) return std::make_unique<IoWqVirtual>(io);
    return std::make_unique<IoWqThreads>(io);
}

}  // namespace mdsplit
