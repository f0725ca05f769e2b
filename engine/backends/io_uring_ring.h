// One io_uring ring per stack, shared by all io_uring members: the event
// loop blocks in it, and each CQE goes back to the backend that issued it.
#pragma once

#include <liburing.h>

#include "core/event_loop.h"
#include "core/request.h"

namespace mdsplit {

class IoUringRing final : public CompletionSource {
public:
    explicit IoUringRing(unsigned entries);
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

private:
    size_t reap();
    io_uring ring_;
    int eventfd_ = -1;
    size_t in_flight_ = 0;
    unsigned pending_ = 0;
};

}  // namespace mdsplit
