#include "backends/io_uring_ring.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backends/io_uring_backend.h"

namespace mdsplit {

IoUringRing::IoUringRing(unsigned entries) {
    int ret = io_uring_queue_init(entries, &ring_, 0);
    if (ret < 0)
        throw std::runtime_error(std::string("mdsplit: io_uring_queue_init: ") + strerror(-ret));
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

io_uring_sqe* IoUringRing::get_sqe() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (!sqe) {
        submit_pending();
        reap();
        sqe = io_uring_get_sqe(&ring_);
    }
    return sqe;
}

void IoUringRing::submit_pending() {
    while (pending_) {
        int ret = io_uring_submit(&ring_);
        if (ret >= 0) {
            pending_ -= unsigned(ret) < pending_ ? unsigned(ret) : pending_;
            if (ret == 0) break;
        } else if (ret != -EINTR && ret != -EAGAIN) {
            break;
        }
    }
}

size_t IoUringRing::reap() {
    io_uring_cqe* cqes[64];
    size_t total = 0;
    for (;;) {
        unsigned n = io_uring_peek_batch_cqe(&ring_, cqes, 64);
        if (!n) break;
        for (unsigned i = 0; i < n; i++) {
            auto* rq = static_cast<Request*>(io_uring_cqe_get_data(cqes[i]));
            int res = cqes[i]->res;
            io_uring_cqe_seen(&ring_, cqes[i]);
            in_flight_--;
            static_cast<IoUringBackend*>(rq->ring_owner)->on_cqe(rq, res);
        }
        total += n;
    }
    return total;
}

size_t IoUringRing::poll() {
    submit_pending();
    return reap();
}

void IoUringRing::wait(uint64_t timeout_ns) {
    submit_pending();
    __kernel_timespec ts{int64_t(timeout_ns / 1'000'000'000), int64_t(timeout_ns % 1'000'000'000)};
    io_uring_cqe* cqe = nullptr;
    io_uring_wait_cqe_timeout(&ring_, &cqe, &ts);
}

}  // namespace mdsplit
