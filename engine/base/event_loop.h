// The event loop that owns one stack: timers, deferred callbacks and the
// backends' completion sources. On the real clock it blocks in the io_uring
// ring until a completion or the next timer; on the virtual clock it jumps
// the clock to the next timer, so a run is deterministic.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_set>
#include <vector>

#include "base/clock.h"
#include "base/fifo.h"

namespace mdsplit {

using EventCallback = void (*)(void* arg, uint64_t tag);

// Something the loop can poll for completions and block on (an io_uring
// ring). poll() runs the completion callbacks it reaps.
class CompletionSource {
public:
    virtual ~CompletionSource() = default;
    virtual size_t poll() = 0;
    // Blocks until at least one completion is ready or timeout_ns passes.
    virtual void wait(uint64_t timeout_ns) = 0;
    virtual size_t in_flight() const = 0;
    // A file descriptor that polls readable when completions are ready (an
    // io_uring ring fd), or -1. Only used while other threads may post() to
    // the loop: the loop then waits on this fd and its wake-up eventfd at
    // once; without one it waits in slices of kRemoteWaitSliceNs.
    virtual int poll_fd() const { return -1; }
};

class EventLoop {
public:
    explicit EventLoop(Clock& clock)
        : clock_(clock), virtual_(clock.is_virtual()), now_(clock.now_ns()) {}
    ~EventLoop();
    EventLoop(const EventLoop&) = delete;
    EventLoop& operator=(const EventLoop&) = delete;

    Clock& clock() { return clock_; }
    const Clock& clock() const { return clock_; }
    // The time of the current pass: read once per pass (refresh()), since a
    // clock read costs tens of ns in a VM and one I/O asks many times.
    uint64_t now() const { return virtual_ ? clock_.now_ns() : now_; }
    uint64_t refresh() { return now_ = clock_.now_ns(); }

    uint64_t schedule_at(uint64_t deadline_ns, EventCallback cb, void* arg, uint64_t tag = 0);
    void cancel(uint64_t timer_id);
    void defer(EventCallback cb, void* arg, uint64_t tag = 0);
    void add_source(CompletionSource* source) { sources_.push_back(source); }

    // Runs everything that is ready now. Returns the number of callbacks run.
    size_t run_ready();
    // Waits for the next event: blocks in a source (real clock) or advances the
    // virtual clock to the next timer. Returns false when nothing is pending.
    bool wait_for_next(uint64_t max_wait_ns = 1'000'000'000);
    bool has_pending() const;
    // The earliest timer (UINT64_MAX when none), and whether deferred work is
    // waiting: what a thread about to sleep for this loop must know.
    uint64_t next_deadline() const;
    bool has_deferred() const { return !deferred_.empty(); }

    // ---- Holds (the policy: stack/response_order.h) ------------------------
    // A hold keeps every timer due after `horizon` from firing until it is
    // released or the loop's time reaches `expires`; timers due at or before
    // the horizon fire as usual. next_deadline() says when a held timer may
    // fire without a release (its hold's expiry).
    uint64_t add_hold(uint64_t horizon, uint64_t expires);
    void release_hold(uint64_t id);
    size_t holds() const { return holds_.size(); }
    // The model time of the event being run: a timer's deadline, and for
    // deferred work the event time of whoever deferred it; now() otherwise
    // (a backend's completion, a call from fio). On the real clock a late
    // loop runs an event after its time; this is the time it stands for.
    uint64_t event_time() const { return event_at_ != kNoEvent ? event_at_ : now(); }

    // ---- Real I/O under the virtual clock (see event_loop.cpp) ------------
    // A real request is due at due_ns (its model's completion time, or its
    // issue time): the clock does not pass that before settle().
    void add_real_io(uint64_t due_ns);
    void remove_real_io(uint64_t due_ns);
    // Runs cb once the next settle() has taken every real completion.
    void defer_until_settled(EventCallback cb, void* arg, uint64_t tag = 0);
    // Whether the clock may not move to t before a settle().
    bool must_settle_before(uint64_t t) const;
    // Waits for and reaps everything the sources have in flight (all: also
    // untracked I/O, the write-behind copies), then releases the
    // defer_until_settled() callbacks. Returns work done.
    size_t settle(bool all = false);
    // I/O in a source that no virtual time waits for (write-behind copies).
    void note_untracked_io(int64_t delta) { untracked_ += delta; }
    // ---- end of real I/O under the virtual clock ---------------------------

    // ---- Posting from other threads (buffered-I/O worker threads) --------
    // Everything above is for the loop's own thread. Worker threads (the
    // io-wq emulation of buffered_io.h) hand work back with post(): the
    // callback runs on the loop thread at its next run_ready() pass, and a
    // loop blocked in wait_for_next() wakes up (an eventfd polled together
    // with the completion source's poll_fd()).
    //
    // Thread-safe: runs cb(arg, tag) on the loop thread soon.
    void post(EventCallback cb, void* arg, uint64_t tag = 0);
    // Loop thread only: +1 when work is handed to another thread that will
    // post() back, -1 when that post has been handled. While the count is
    // above zero the loop has pending work and wait_for_next() waits for
    // posts as well as for its sources and timers.
    void expect_remote(int64_t delta);
    int64_t remote_expected() const { return remote_expected_; }
    // Loop thread, before any post(): use `fd`, an eventfd someone else owns,
    // for wake-ups instead of a private one. With covers_sources (the io_uring
    // ring's registered completion eventfd) it is also signalled on every
    // completion, so waiting on it alone covers posts and completions, and
    // whoever else waits on it (SharedStack) wakes on posts too.
    void set_wake_fd(int fd, bool covers_sources);
    bool has_posted() const { return posted_nonempty_.load(std::memory_order_acquire); }
    static constexpr uint64_t kRemoteWaitSliceNs = 50'000;
    // ---- end of cross-thread posting --------------------------------------

    // The calling thread's timed sleeps end on time (timer slack 1 ns, once
    // per thread): every thread that sleeps for the loop's modelled time.
    static void precise_sleeps();

private:
    struct Timer {
        uint64_t deadline;
        uint64_t id;
        EventCallback cb;
        void* arg;
        uint64_t tag;
        bool operator>(const Timer& o) const {
            return deadline != o.deadline ? deadline > o.deadline : id > o.id;
        }
    };
    struct Deferred {
        EventCallback cb;
        void* arg;
        uint64_t tag;
        uint64_t at = kNoEvent;  // event_time() when deferred
    };
    struct Hold {
        uint64_t id, horizon, expires;
    };
    static constexpr uint64_t kNoEvent = ~uint64_t(0);
    // A live hold keeps a timer due at `deadline` (at the pass time now).
    bool held(uint64_t deadline, uint64_t now) const;
    // Real clock: waits shorter than this are spun, not slept (a wake-up
    // costs tens of us on a busy host, and the modelled time would pass).
    static constexpr uint64_t kSpinWaitNs = 20'000;
    void spin_until(uint64_t until);
    size_t run_due_timers();
    void drop_cancelled_top();

    Clock& clock_;
    bool virtual_;
    uint64_t now_;
    std::vector<Timer> timers_;               // min-heap on (deadline, id)
    std::unordered_set<uint64_t> armed_;      // scheduled, not yet fired or cancelled
    std::unordered_set<uint64_t> cancelled_;  // still in the heap, to skip
    Fifo<Deferred> deferred_;
    std::vector<CompletionSource*> sources_;
    uint64_t next_timer_id_ = 1;
    std::vector<Hold> holds_;
    uint64_t next_hold_id_ = 1;
    uint64_t event_at_ = kNoEvent;           // see event_time()
    std::multiset<uint64_t> real_due_;       // virtual clock: real requests' due times
    std::vector<Deferred> settled_waiters_;  // virtual clock: run at the next settle()
    int64_t untracked_ = 0;

    // Cross-thread posting (see post()).
    size_t run_posted();
    void ensure_wake_fd();
    void wait_remote(uint64_t timeout_ns, CompletionSource* source);
    std::mutex posted_mutex_;
    std::vector<Deferred> posted_;              // guarded by posted_mutex_
    std::vector<Deferred> posted_running_;      // loop thread: the batch being run
    std::atomic<bool> posted_nonempty_{false};  // set under posted_mutex_
    std::once_flag wake_fd_once_;
    int wake_fd_ = -1;  // eventfd, created on first use
    bool wake_fd_owned_ = false;
    bool wake_covers_sources_ = false;
    int64_t remote_expected_ = 0;  // loop thread
};

}  // namespace mdsplit
