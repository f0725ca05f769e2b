// The event loop that owns one stack: timers, deferred callbacks and the
// backends' completion sources. On the real clock it blocks in the io_uring
// ring until a completion or the next timer; on the virtual clock it jumps
// the clock to the next timer, so a run is deterministic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_set>
#include <vector>

#include "core/clock.h"

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
};

class EventLoop {
public:
    explicit EventLoop(Clock& clock)
        : clock_(clock), virtual_(clock.is_virtual()), now_(clock.now_ns()) {}

    Clock& clock() { return clock_; }
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
    uint64_t next_deadline() const;
    bool has_deferred() const { return !deferred_.empty(); }

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
    };
    size_t run_due_timers();
    void drop_cancelled_top();

    Clock& clock_;
    bool virtual_;
    uint64_t now_;
    std::vector<Timer> timers_;  // min-heap on (deadline, id)
    std::unordered_set<uint64_t> armed_;      // scheduled, not yet fired or cancelled
    std::unordered_set<uint64_t> cancelled_;  // still in the heap, to skip
    std::deque<Deferred> deferred_;
    std::vector<CompletionSource*> sources_;
    uint64_t next_timer_id_ = 1;
};

}  // namespace mdsplit
