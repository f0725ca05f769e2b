#include "core/drivers/io_uring_ring.h"

#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/drivers/io_uring_backend.h"

namespace mdsplit {

namespace {
constexpr uint64_t kNoTimeoutNs = uint64_t(1) << 62;  // ~146 years
}  // namespace

// Completions as fio's engines/io_uring.c asks for them: task work that does
// not interrupt the submitter with an IPI (COOP_TASKRUN, flagged in the SQ
// ring so a peek knows to enter), and with a single issuer deferred until
// the submitter enters to reap (DEFER_TASKRUN). Older kernels refuse the
// flags with EINVAL: fall back step by step.
IoUringRing::IoUringRing(unsigned entries, bool single_issuer) {
    constexpr unsigned kCoop = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
    constexpr unsigned kSingle =
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED;
    unsigned tries[] = {kCoop | kSingle, kCoop, 0};
    int ret = -EINVAL;
    for (unsigned flags : tries) {
        if ((flags & kSingle) && !single_issuer) continue;
        ret = io_uring_queue_init(entries, &ring_, flags);
        if (ret != -EINVAL) {
            flags_ = flags;
            break;
        }
    }
    if (ret < 0)
        throw std::runtime_error(std::string("mdsplit: io_uring_queue_init: ") + strerror(-ret));
    disabled_ = flags_ & IORING_SETUP_R_DISABLED;
}

IoUringRing::~IoUringRing() {
    io_uring_queue_exit(&ring_);
    if (eventfd_ >= 0) close(eventfd_);
}

int IoUringRing::completion_eventfd() {
    if (eventfd_ < 0) {
        eventfd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (eventfd_ < 0 || io_uring_register_eventfd(&ring_, eventfd_) < 0)
            throw std::runtime_error(std::string("mdsplit: io_uring_register_eventfd: ") +
                                     strerror(errno));
    }
    return eventfd_;
}

bool IoUringRing::register_buffer(void* base, size_t len) {
    if (fixed_len_ || !base || !len) return false;
    iovec iov{base, len};
    if (io_uring_register_buffers(&ring_, &iov, 1) < 0) return false;
    fixed_base_ = reinterpret_cast<uintptr_t>(base);
    fixed_len_ = len;
    return true;
}

// io_uring_enable_rings(), which liburing 2.3 declares but does not export.
void IoUringRing::enable_rings() {
    disabled_ = false;
    long ret =
        syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
    if (ret < 0)
        throw std::runtime_error(std::string("mdsplit: io_uring enable rings: ") + strerror(errno));
}

io_uring_sqe* IoUringRing::get_sqe() {
    enable();
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (!sqe) {
        submit_pending();
        reap();
        sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
}

// Submits with IORING_ENTER_GETEVENTS, as fio's commit does: the same
// io_uring_enter() posts the completions that are ready, for reap() to see.
void IoUringRing::submit_pending() {
    enable();
    while (pending_) {
        int ret = io_uring_submit_and_get_events(&ring_);
        if (ret >= 0) {
            pending_ -= unsigned(ret) < pending_ ? unsigned(ret) : pending_;
            if (ret == 0) break;
        } else if (ret != -EINTR && ret != -EAGAIN) {
            break;
        }
    }
}

// What the CQ ring holds now, without entering the kernel (fio's
// fio_ioring_cqring_reap()): completions still in task work are posted by
// the next submit or wait, which enter anyway.
size_t IoUringRing::reap() {
    size_t total = 0;
    for (;;) {
        // Head re-read each time: a callback may submit, and a full SQ ring
        // makes get_sqe() reap from here.
        unsigned head = *ring_.cq.khead;
        if (head == io_uring_smp_load_acquire(ring_.cq.ktail)) break;
        io_uring_cqe* cqe = &ring_.cq.cqes[io_uring_cqe_index(&ring_, head, ring_.cq.ring_mask)];
        auto* rq = static_cast<Request*>(io_uring_cqe_get_data(cqe));
        int res = cqe->res;
        io_uring_cq_advance(&ring_, 1);  // consumed before its callback runs
        in_flight_--;
        total++;
        static_cast<IoUringBackend*>(rq->ring_owner)->on_cqe(rq, res);
    }
    return total;
}

size_t IoUringRing::poll() {
    submit_pending();
    return reap();
}

void IoUringRing::wait(uint64_t timeout_ns) {
    submit_pending();
    io_uring_cqe* cqe = nullptr;
    // No deadline worth a kernel timer (fio's getevents without a timeout):
    // a plain io_uring_enter(0, 1, GETEVENTS), as fio's engine waits.
    if (timeout_ns >= kNoTimeoutNs) {
        io_uring_wait_cqe(&ring_, &cqe);
        return;
    }
    __kernel_timespec ts{int64_t(timeout_ns / 1'000'000'000), int64_t(timeout_ns % 1'000'000'000)};
    io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
}

}  // namespace mdsplit
