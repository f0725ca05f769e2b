// Response order: the real clock keeps the virtual clock's order between a
// completion and the job's answer to it (conservative ordering).
//
// On the virtual clock a job answers a completion at the completion's time
// plus its think time, before any later event: the clock does not move
// while the job has something to do. On the real clock the event loop can
// run late and then fires, in one pass, an overdue completion and an
// overdue later timer (a blk-mq delayed re-run, BLK_MQ_BUDGET_DELAY) before
// the job's thread has even been woken: the timer then sees a state the
// model never had (bfq finds the in-service writer's think gap open and
// injects for good, docs/sidecar-lag.md). So from the moment a completion
// is delivered to a job the job owes an answer: every timer due after the
// completion's event time plus the job's think time (EventLoop::add_hold)
// waits until the job answers -- it hands its next batch to the block
// layer (commit), waits in the engine for more completions than it has
// (it answers nothing before them), or leaves -- or until max_hold_ns of
// loop time has passed, for a job that never answers (fio ends it). The
// wait is the host's: the held events run late and that lateness is
// measured as lag (host_lag.h), not turned into a different answer. On the
// virtual clock nothing is overdue and the job answers before the clock
// moves, so the same rule, with time as a parameter, changes nothing
// there. docs/sidecar-lag.md, "Response order on the real clock".
#pragma once

#include <cstdint>
#include <vector>

#include "base/event_loop.h"

namespace mdsplit {

struct ResponseOrderOptions {
    // A job that does not answer within this much loop time releases its
    // hold (fio ending the job, a rate-limited job sleeping). 1 ms .. 1 s.
    uint64_t max_hold_ns = 20'000'000;
};

class ResponseOrder {
public:
    explicit ResponseOrder(EventLoop& loop, ResponseOrderOptions options = {})
        : loop_(loop), options_(options) {}
    ~ResponseOrder();
    ResponseOrder(const ResponseOrder&) = delete;
    ResponseOrder& operator=(const ResponseOrder&) = delete;

    // A completion was delivered to `job` (one per submitter, any key) at
    // the loop's event time; the job thinks think_ns before it submits.
    void owe(const void* job, uint64_t think_ns);
    // The job called the engine again (queue, reap, exit): nothing owed.
    void answered(const void* job);
    // Jobs owing an answer now.
    size_t owing() const { return owed_.size(); }

private:
    struct Owed {
        const void* job;
        uint64_t hold, expires;
    };
    EventLoop& loop_;
    ResponseOrderOptions options_;
    std::vector<Owed> owed_;
};

}  // namespace mdsplit
