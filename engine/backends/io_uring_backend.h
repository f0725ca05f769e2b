// A member on a regular file or block device, driven through io_uring.
#pragma once

#include <string>

#include "backends/backend.h"
#include "backends/io_uring_ring.h"

namespace mdsplit {

class IoUringBackend final : public Backend {
public:
    // Opens (creating sparse at `size` when missing) path; O_DIRECT if direct.
    // Throws std::runtime_error with a one-line message on failure.
    IoUringBackend(IoUringRing& ring, const std::string& path, uint64_t size, bool direct,
                   bool writable);
    ~IoUringBackend() override;

    void submit(Request* rq) override;
    void kick() override { ring_.submit_pending(); }
    uint64_t size_bytes() const override { return size_; }
    const char* kind() const override { return "io_uring"; }

    // Called by the ring for each CQE of this backend.
    void on_cqe(Request* rq, int res);

private:
    IoUringRing& ring_;
    int fd_ = -1;
    uint64_t size_ = 0;
};

}  // namespace mdsplit
