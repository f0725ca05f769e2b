// One io_uring ring per stack, shared by all io_uring members: the event
// loop blocks in it, and each CQE goes back to the backend that issued it.
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>

#include "base/event_loop.h"
#include "core/block/request.h"

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

    // Registers [base, base + len) as fixed buffer 0 (io_uring_register_buffers,
    // fio's fixedbufs): a read or write wholly inside it is issued as
    // READ_FIXED / WRITE_FIXED, and the kernel uses the pages it pinned once
    // instead of pinning them for every I/O (io_import_fixed vs
    // iov_iter_get_pages in bio_iov_iter_get_pages). Returns false, and leaves
    // every I/O as it was, when the kernel refuses (memlock limit, file-backed
    // memory, a region over 1 GiB).
    bool register_buffer(void* base, size_t len);
    // Index of the fixed buffer holding [p, p + len), or -1.
    int fixed_buffer_index(const void* p, size_t len) const {
        auto a = reinterpret_cast<uintptr_t>(p);
        return fixed_len_ && a >= fixed_base_ && a + len <= fixed_base_ + fixed_len_ ? 0 : -1;
    }
    size_t registered_buffer_bytes() const { return fixed_len_; }
    // I/Os issued from the registered buffer (READ_FIXED / WRITE_FIXED).
    uint64_t fixed_buffer_ios() const { return fixed_ios_; }
    void note_fixed_buffer_io() { fixed_ios_++; }

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
    uintptr_t fixed_base_ = 0;
    size_t fixed_len_ = 0;
    uint64_t fixed_ios_ = 0;
};

}  // namespace mdsplit
