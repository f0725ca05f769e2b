#include "core/shared_stack.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace mdsplit {

void SharedStack::queue(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
                        uint64_t cookie) {
    std::lock_guard<std::mutex> l(mu_);
    stack_->begin_batch(task);
    stack_->queue(task, op, offset, length, buffer, cookie);
}

void SharedStack::commit(TaskContext& task) {
    std::lock_guard<std::mutex> l(mu_);
    stack_->commit(task);
}

// Sleeps without the lock until the ring reports a completion, the next
// timer is due, or `deadline`; at most 1 ms so that timers armed meanwhile
// by another thread are not missed for long.
void SharedStack::wait_unlocked(std::unique_lock<std::mutex>& lock, uint64_t deadline) {
    EventLoop& loop = stack_->loop();
    uint64_t now = loop.now();
    uint64_t until = std::min({deadline, loop.next_deadline(), now + 1'000'000});
    if (loop.has_deferred() || until <= now) return;
    int fd = stack_->completion_fd();
    polling_ = true;
    lock.unlock();
    uint64_t wait = until - now;
    timespec ts{time_t(wait / 1'000'000'000), long(wait % 1'000'000'000)};
    if (fd >= 0) {
        pollfd p{fd, POLLIN, 0};
        if (ppoll(&p, 1, &ts, nullptr) > 0) {
            uint64_t count;
            [[maybe_unused]] ssize_t r = read(fd, &count, sizeof(count));
        }
    } else {
        nanosleep(&ts, nullptr);
    }
    lock.lock();
    polling_ = false;
}

void SharedStack::reap(TaskContext& task, size_t min, uint64_t timeout_ns,
                       std::vector<IoCompletion>& out) {
    std::unique_lock<std::mutex> lock(mu_);
    reap_locked(lock, task, min > out.size() ? min - out.size() : 0, timeout_ns);
    out.insert(out.end(), task.completions.begin(), task.completions.end());
    task.completions.clear();
}

void SharedStack::reap_locked(std::unique_lock<std::mutex>& lock, TaskContext& task, size_t min,
                              uint64_t timeout_ns) {
    if (users_ <= 1) {  // the common case: nobody to share the ring with
        stack_->reap(task, min, timeout_ns);
        return;
    }
    EventLoop& loop = stack_->loop();
    uint64_t deadline = timeout_ns > std::numeric_limits<uint64_t>::max() - loop.now()
                            ? std::numeric_limits<uint64_t>::max()
                            : loop.now() + timeout_ns;
    for (;;) {
        stack_->reap(task, 0, 0);  // runs whatever is ready, for every task
        delivered_.notify_all();
        if (task.completions.size() >= min || loop.now() >= deadline) return;
        if (!polling_) {
            wait_unlocked(lock, deadline);
        } else {
            delivered_.wait_for(lock, std::chrono::milliseconds(1));
        }
    }
}

void SharedStack::drain(TaskContext& task) {
    std::unique_lock<std::mutex> lock(mu_);
    while (task.in_flight) reap_locked(lock, task, task.completions.size() + 1, 10'000'000);
    task.completions.clear();
}

std::string SharedStack::stats_json() {
    std::lock_guard<std::mutex> l(mu_);
    return stack_->stats_json();
}

void SharedStack::flush_traces() {
    std::lock_guard<std::mutex> l(mu_);
    stack_->flush_traces();
}

}  // namespace mdsplit
