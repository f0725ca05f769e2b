// One io_uring ring per stack, shared by all io_uring members: the event
// loop blocks in it, and each CQE goes back to the backend that issued it.
#pragma once

#include <liburing.h>

#include "core/event_loop.h"
#include "core/request.h"

namespace mdsplit {

class IoUringRing final : public CompletionSource {
public:
    // single_issuer: only one thread ever submits to or waits on the ring
    // (the first to use it, not necessarily the one constructing it), which
    // lets completions run as deferred task work, as fio's own io_uring
    // engine sets the ring up (IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN).
    explicit IoUringRing(unsigned entries, bool single_issuer = false);
    ~IoUringRing() override;
    IoUringRing(const IoUringRing&) = delete;
    IoUringRing& operator=(const IoUringRing&) = delete;

    // An SQE for rq; submits the batch first when the SQ ring is full.
    io_uring_sqe* get_sqe();
    void submit_pending();

    size_t poll() override;
    void wait(uint64_t timeout_ns) override;
    size_t in_flight() const override { return in_flight_; }
    // An eventfd signalled on every completion, for threads that wait on the
    // ring without touching it (io_uring_register_eventfd). Created on first use.
    int completion_eventfd();
    void note_prepared() {
        in_flight_++;
        pending_++;
    }
    // The IORING_SETUP_* flags the kernel accepted.
    unsigned setup_flags() const { return flags_; }

private:
    size_t reap();
    // A ring created disabled (single issuer) is enabled by its first user:
    // that thread becomes the ring's submitter task.
    void enable() {
        if (disabled_) enable_rings();
    }
    void enable_rings();
    io_uring ring_;
    unsigned flags_ = 0;
    bool disabled_ = false;
    int eventfd_ = -1;
    size_t in_flight_ = 0;
    unsigned pending_ = 0;
};

}  // namespace mdsplit
