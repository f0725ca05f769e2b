// One stack driven by several submitter threads (fio jobs with thread=1 on
// the same device, e.g. the BFQ experiment). The stack stays single-owner:
// every call runs under one mutex. A thread that must wait for completions
// either becomes the poller (it sleeps, unlocked, on the ring's completion
// eventfd or until the next timer, then runs the loop for everyone) or waits
// on a condition variable of its own. After each pass of the loop the
// runner wakes exactly the waiters whose completions are in, and a poller
// that leaves with its own completions hands polling to one waiter: one
// wake-up per completion, never every waiter for every pass (with 8 psync
// writers that herd cost more host time than the model's requests). A
// stack with one user bypasses all of this and blocks in the ring
// directly; an exclusive stack (one user for its whole life, known when it
// is made) also takes no lock.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "stack/stack.h"

namespace mdsplit {

class SharedStack {
public:
    // exclusive: exactly one user ever attaches, and never two threads use
    // the stack at once (one fio job): calls take no lock.
    explicit SharedStack(std::unique_ptr<Stack> stack, bool exclusive = false);
    ~SharedStack();
    SharedStack(const SharedStack&) = delete;
    SharedStack& operator=(const SharedStack&) = delete;

    // Throws std::logic_error when a second user attaches to an exclusive stack.
    void attach();
    // Returns true when the caller was the last user.
    bool detach() {
        std::lock_guard<std::mutex> l(mu_);
        return --users_ == 0;
    }

    void queue(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
               uint64_t cookie);
    void commit(TaskContext& task);
    // Buffered jobs (direct=0): the page cache above the virtual device.
    void queue_buffered(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
                        uint64_t cookie);
    void fsync(TaskContext& task, uint64_t cookie);
    void sync_file_range(TaskContext& task, uint64_t offset, uint64_t length, unsigned flags,
                         uint64_t cookie);
    void invalidate();
    uint64_t sync_buffered();
    int sync_members();
    void set_buffered_iodepth(uint32_t iodepth);
    // Waits until `out` plus the task's new completions hold `min` or
    // timeout_ns passes, then moves the task's completions into `out`.
    void reap(TaskContext& task, size_t min, uint64_t timeout_ns, std::vector<IoCompletion>& out);
    // Waits until the task has nothing in flight.
    void drain(TaskContext& task);
    // Stack::task_exited, under the lock (after drain: the job is done).
    void task_exited(TaskContext& task);
    std::string stats_json();
    // Sidecar files (mdsplit_stats) are written when the device's last user
    // leaves, so that each covers every job that ran on the device.
    void add_sidecar(std::string path) {
        std::lock_guard<std::mutex> l(mu_);
        sidecars_.push_back(std::move(path));
    }
    std::vector<std::string> take_sidecars() {
        std::lock_guard<std::mutex> l(mu_);
        return std::move(sidecars_);
    }
    void flush_traces();
    // Stack::stop_md, under the lock: the last user that ran stops the
    // array even while users that never run still hold the stack.
    void stop_md();
    // Stack::record_member_failures / take_member_failures, under the lock.
    bool record_member_failures(MemberFailures& run);
    void take_member_failures(const MemberFailures& run);
    uint64_t size_bytes() const { return stack_->size_bytes(); }
    // Stack::register_io_buffer, for an exclusive stack only: a shared one
    // serves the buffers of several jobs, and the ring registers one region.
    bool register_io_buffer(void* base, size_t len) {
        return exclusive_ && stack_->register_io_buffer(base, len);
    }
    Stack& stack() { return *stack_; }
    // A submitter's lag accounting (HostLag::attach_job), under the lock.
    TaskLagHook* attach_lag_job(const std::string& name, uint32_t depth, uint64_t think_ns) {
        Guard g(*this);
        return stack_->host_lag().attach_job(name, depth, think_ns);
    }
    // Stack::host_lag_verdict, under the lock.
    std::string host_lag_verdict() {
        Guard g(*this);
        return stack_->host_lag_verdict();
    }

private:
    void reap_locked(std::unique_lock<std::mutex>& lock, TaskContext& task, size_t min,
                     uint64_t timeout_ns);
    // Moves the task's completions into `out` (callers hold mu_ when shared).
    static void take_completions(TaskContext& task, std::vector<IoCompletion>& out);
    void wait_unlocked(std::unique_lock<std::mutex>& lock, uint64_t deadline);
    // A thread waiting while another polls: until its task has `min`
    // completions, it is asked to poll, or `deadline` (at most 10 ms).
    struct Waiter {
        TaskContext* task;
        size_t min;
        std::condition_variable cv;
        bool woken = false;
    };
    void wait_for_poller(std::unique_lock<std::mutex>& lock, TaskContext& task, size_t min,
                         uint64_t deadline);
    // After a pass of the loop: wakes each waiter whose completions are in.
    void wake_ready_waiters();
    // Nobody polls: one waiter takes over (callers hold mu_).
    void hand_over_polling();
    // Wakes a sleeping poller when new work is due before it would wake.
    void kick_poller_if_late();

    // mu_, unless the stack is exclusive.
    class Guard {
    public:
        explicit Guard(SharedStack& s) : mu_(s.exclusive_ ? nullptr : &s.mu_) {
            if (mu_) mu_->lock();
        }
        ~Guard() {
            if (mu_) mu_->unlock();
        }
        Guard(const Guard&) = delete;
        Guard& operator=(const Guard&) = delete;

    private:
        std::mutex* mu_;
    };

    std::unique_ptr<Stack> stack_;
    const bool exclusive_;
    std::mutex mu_;
    std::vector<Waiter*> waiters_;
    bool polling_ = false;
    uint64_t poller_wakes_at_ = 0;  // while polling_
    int kick_fd_ = -1;              // eventfd the poller also waits on
    int users_ = 0;
    std::vector<std::string> sidecars_;
};

}  // namespace mdsplit
