#include "stack/shared_stack.h"

#include "core/io_uring/buffered_io.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <stdexcept>

namespace mdsplit {

SharedStack::SharedStack(std::unique_ptr<Stack> stack, bool exclusive)
    : stack_(std::move(stack)), exclusive_(exclusive) {
    if (!exclusive_) kick_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

void SharedStack::attach() {
    std::lock_guard<std::mutex> l(mu_);
    if (exclusive_ && users_ > 0)
        throw std::logic_error("mdsplit: a second user attached to an exclusive stack");
    users_++;
}

SharedStack::~SharedStack() {
    if (kick_fd_ >= 0) close(kick_fd_);
}

void SharedStack::kick_poller_if_late() {
    if (polling_ && kick_fd_ >= 0 &&
        (stack_->loop().next_deadline() < poller_wakes_at_ || stack_->loop().has_deferred())) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t r = write(kick_fd_, &one, sizeof(one));
    }
}

void SharedStack::queue(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
                        uint64_t cookie) {
    Guard g(*this);
    stack_->begin_batch(task);
    stack_->queue(task, op, offset, length, buffer, cookie);
    kick_poller_if_late();
}

void SharedStack::queue_buffered(TaskContext& task, Op op, uint64_t offset, uint64_t length,
                                 void* buffer, uint64_t cookie) {
    Guard g(*this);
    stack_->begin_batch(task);
    stack_->queue_buffered(task, op, offset, length, buffer, cookie);
    kick_poller_if_late();
}

void SharedStack::fsync(TaskContext& task, uint64_t cookie) {
    Guard g(*this);
    stack_->begin_batch(task);
    stack_->fsync(task, cookie);
    kick_poller_if_late();
}

void SharedStack::sync_file_range(TaskContext& task, uint64_t offset, uint64_t length,
                                  unsigned flags, uint64_t cookie) {
    Guard g(*this);
    stack_->begin_batch(task);
    stack_->sync_file_range(task, offset, length, flags, cookie);
    kick_poller_if_late();
}

void SharedStack::invalidate() {
    Guard g(*this);
    stack_->invalidate();
}

uint64_t SharedStack::sync_buffered() {
    Guard g(*this);
    return stack_->sync_buffered();
}

int SharedStack::sync_members() {
    Guard g(*this);
    return stack_->sync_members();
}

void SharedStack::set_buffered_iodepth(uint32_t iodepth) {
    Guard g(*this);
    stack_->buffered().set_iodepth(iodepth);
}

void SharedStack::commit(TaskContext& task) {
    Guard g(*this);
    stack_->commit(task);
    kick_poller_if_late();
}

// Sleeps without the lock until the ring reports a completion, the next
// timer is due, another thread kicks (it armed an earlier timer), or
// `deadline`; at most 10 ms.
void SharedStack::wait_unlocked(std::unique_lock<std::mutex>& lock, uint64_t deadline) {
    EventLoop& loop = stack_->loop();
    EventLoop::precise_sleeps();
    uint64_t now = loop.refresh();
    uint64_t until = std::min({deadline, loop.next_deadline(), now + 10'000'000});
    if (loop.has_deferred() || until <= now) return;
    pollfd fds[2];
    nfds_t n = 0;
    int ring_fd = stack_->completion_fd();
    if (ring_fd >= 0) fds[n++] = pollfd{ring_fd, POLLIN, 0};
    if (kick_fd_ >= 0) fds[n++] = pollfd{kick_fd_, POLLIN, 0};
    polling_ = true;
    poller_wakes_at_ = until;
    lock.unlock();
    uint64_t wait = until - now;
    timespec ts{time_t(wait / 1'000'000'000), long(wait % 1'000'000'000)};
    if (n && ppoll(fds, n, &ts, nullptr) > 0) {
        for (nfds_t i = 0; i < n; i++) {
            if (fds[i].revents & POLLIN) {
                uint64_t count;
                [[maybe_unused]] ssize_t r = read(fds[i].fd, &count, sizeof(count));
            }
        }
    } else if (!n) {
        nanosleep(&ts, nullptr);
    }
    lock.lock();
    polling_ = false;
}

void SharedStack::reap(TaskContext& task, size_t min, uint64_t timeout_ns,
                       std::vector<IoCompletion>& out) {
    size_t want = min > out.size() ? min - out.size() : 0;
    if (exclusive_) {
        stack_->reap(task, want, timeout_ns);
        stack_->host_lag().handed(task);
        take_completions(task, out);
    } else {
        std::unique_lock<std::mutex> lock(mu_);
        reap_locked(lock, task, want, timeout_ns);
        // Under the lock: another thread's reap may be completing this
        // task's I/O into task.completions right now (TSan found it).
        stack_->host_lag().handed(task);
        take_completions(task, out);
    }
}

void SharedStack::take_completions(TaskContext& task, std::vector<IoCompletion>& out) {
    if (out.empty()) {
        out.swap(task.completions);  // keeps both buffers' capacity
    } else {
        out.insert(out.end(), task.completions.begin(), task.completions.end());
    }
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
        wake_ready_waiters();
        if (task.completions.size() >= min || loop.now() >= deadline) {
            hand_over_polling();
            return;
        }
        stack_->answered(task);  // it answers nothing before more completions
        if (!polling_) {
            wait_unlocked(lock, deadline);
        } else {
            wait_for_poller(lock, task, min, deadline);
        }
    }
}

void SharedStack::wait_for_poller(std::unique_lock<std::mutex>& lock, TaskContext& task, size_t min,
                                  uint64_t deadline) {
    EventLoop::precise_sleeps();
    Waiter w{&task, min, {}, false};
    waiters_.push_back(&w);
    uint64_t now = stack_->loop().now();
    uint64_t wait = std::min<uint64_t>(deadline > now ? deadline - now : 0, 10'000'000);
    w.cv.wait_for(lock, std::chrono::nanoseconds(wait), [&] { return w.woken; });
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &w));
    stack_->loop().refresh();
}

void SharedStack::wake_ready_waiters() {
    for (Waiter* w : waiters_) {
        if (w->woken) continue;
        if (w->task->completions.size() >= w->min) {
            w->woken = true;
            w->cv.notify_one();
        } else {
            stack_->answered(*w->task);  // still waiting: it owes no answer
        }
    }
}

void SharedStack::hand_over_polling() {
    if (polling_) return;
    for (Waiter* w : waiters_) {
        if (w->woken) return;  // already on its way: it polls if nobody does
    }
    if (!waiters_.empty()) {
        waiters_.front()->woken = true;
        waiters_.front()->cv.notify_one();
    }
}

void SharedStack::drain(TaskContext& task) {
    std::unique_lock<std::mutex> lock(mu_);
    stack_->answered(task);
    while (task.in_flight) reap_locked(lock, task, task.completions.size() + 1, 10'000'000);
    task.completions.clear();
}

void SharedStack::task_exited(TaskContext& task) {
    Guard g(*this);
    stack_->task_exited(task);
    kick_poller_if_late();
}

std::string SharedStack::stats_json() {
    Guard g(*this);
    return stack_->stats_json();
}

void SharedStack::flush_traces() {
    Guard g(*this);
    stack_->flush_traces();
}

void SharedStack::stop_md() {
    Guard g(*this);
    stack_->stop_md();
}

bool SharedStack::record_member_failures(MemberFailures& run) {
    Guard g(*this);
    return stack_->record_member_failures(run);
}

void SharedStack::take_member_failures(const MemberFailures& run) {
    Guard g(*this);
    stack_->take_member_failures(run);
}

}  // namespace mdsplit
