// EventLoop on a VirtualClock (and briefly on the RealClock): timers fire in
// deadline order, cancelled timers never run, deferred callbacks run on the
// next turn, and the virtual clock only moves when the loop waits for the
// next timer. The loop plays the part of the kernel's hrtimers and softirq
// completions (hrtimer_start / hrtimer_cancel, blk_mq_complete_request).
#include "base/event_loop.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <vector>

#include "base/clock.h"

namespace mdsplit {
namespace {

// What a callback saw: its tag and the time it ran at.
struct Firing {
    uint64_t tag;
    uint64_t at_ns;
    bool operator==(const Firing&) const = default;
};

void PrintTo(const Firing& f, std::ostream* os) {
    *os << "{tag " << f.tag << " at " << f.at_ns << "}";
}

struct FiringLog {
    EventLoop* loop = nullptr;
    std::vector<Firing> firings;
};

void record_firing(void* arg, uint64_t tag) {
    auto* log = static_cast<FiringLog*>(arg);
    log->firings.push_back(Firing{tag, log->loop->now()});
}

// Runs the loop on the virtual clock until nothing is pending.
void run_until_idle(EventLoop& loop) {
    loop.run_ready();
    while (loop.has_pending()) {
        if (!loop.wait_for_next()) break;
        loop.run_ready();
    }
}

TEST(EventLoopTest, VirtualClockOnlyMovesForward) {
    VirtualClock clock;
    EXPECT_TRUE(clock.is_virtual());
    EXPECT_EQ(clock.now_ns(), 0u);
    clock.advance_to(500);
    EXPECT_EQ(clock.now_ns(), 500u);
    clock.advance_to(200);  // never backwards
    EXPECT_EQ(clock.now_ns(), 500u);
    RealClock real;
    EXPECT_FALSE(real.is_virtual());
}

// Timers fire in deadline order whatever the order they were armed in, and
// the virtual clock jumps exactly to each deadline.
TEST(EventLoopTest, TimersFireInDeadlineOrderAtTheirDeadline) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    loop.schedule_at(3000, &record_firing, &log, 3);
    loop.schedule_at(1000, &record_firing, &log, 1);
    loop.schedule_at(2000, &record_firing, &log, 2);
    EXPECT_TRUE(loop.has_pending());

    EXPECT_EQ(loop.run_ready(), 0u);  // nothing is due at t=0
    EXPECT_EQ(clock.now_ns(), 0u);

    ASSERT_TRUE(loop.wait_for_next());
    EXPECT_EQ(clock.now_ns(), 1000u);
    EXPECT_EQ(loop.run_ready(), 1u);

    run_until_idle(loop);
    EXPECT_EQ(log.firings, (std::vector<Firing>{{1, 1000}, {2, 2000}, {3, 3000}}));
    EXPECT_FALSE(loop.has_pending());
    EXPECT_FALSE(loop.wait_for_next());  // nothing left: the caller stops
    EXPECT_EQ(clock.now_ns(), 3000u);
}

// Timers with the same deadline fire in the order they were armed.
TEST(EventLoopTest, EqualDeadlinesFireInArmingOrder) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    for (uint64_t tag = 0; tag < 8; tag++) loop.schedule_at(700, &record_firing, &log, tag);
    run_until_idle(loop);
    ASSERT_EQ(log.firings.size(), 8u);
    for (uint64_t tag = 0; tag < 8; tag++) {
        EXPECT_EQ(log.firings[tag].tag, tag);
        EXPECT_EQ(log.firings[tag].at_ns, 700u);
    }
}

// A timer whose deadline has already passed runs on the next run_ready()
// without moving the clock.
TEST(EventLoopTest, PastDeadlineRunsImmediately) {
    VirtualClock clock;
    clock.advance_to(10'000);
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    loop.schedule_at(5'000, &record_firing, &log, 7);
    EXPECT_EQ(loop.run_ready(), 1u);
    EXPECT_EQ(log.firings, (std::vector<Firing>{{7, 10'000}}));
}

// hrtimer_cancel(): a cancelled timer never runs, the others still do.
TEST(EventLoopTest, CancelledTimerNeverRuns) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    loop.schedule_at(100, &record_firing, &log, 1);
    uint64_t doomed = loop.schedule_at(200, &record_firing, &log, 2);
    loop.schedule_at(300, &record_firing, &log, 3);
    loop.cancel(doomed);
    run_until_idle(loop);
    EXPECT_EQ(log.firings, (std::vector<Firing>{{1, 100}, {3, 300}}));
    EXPECT_FALSE(loop.has_pending());
}

// Cancelling the only timer leaves nothing pending.
TEST(EventLoopTest, CancellingTheOnlyTimerLeavesNothingPending) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    uint64_t id = loop.schedule_at(1'000'000, &record_firing, &log, 1);
    loop.cancel(id);
    EXPECT_FALSE(loop.has_pending());
    run_until_idle(loop);
    EXPECT_TRUE(log.firings.empty());
}

// A callback may cancel a later timer (as an idle timer is disarmed when a
// request arrives) and arm a new one.
struct Rearm {
    EventLoop* loop;
    FiringLog* log;
    uint64_t victim_id;
};

void cancel_victim_and_rearm(void* arg, uint64_t tag) {
    auto* r = static_cast<Rearm*>(arg);
    record_firing(r->log, tag);
    r->loop->cancel(r->victim_id);
    r->loop->schedule_at(r->loop->now() + 50, &record_firing, r->log, 99);
}

TEST(EventLoopTest, CallbackCancelsAndRearms) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    Rearm rearm{&loop, &log, 0};
    loop.schedule_at(100, &cancel_victim_and_rearm, &rearm, 1);
    rearm.victim_id = loop.schedule_at(120, &record_firing, &log, 2);
    run_until_idle(loop);
    EXPECT_EQ(log.firings, (std::vector<Firing>{{1, 100}, {99, 150}}));
}

// Cancelling a timer that has already fired must not hide timers armed later
// from has_pending(). EventLoop::cancel() inserts every id into `cancelled_`
// and only run_due_timers() erases ids it pops, so a stale id stays there
// forever and has_pending()'s `timers_.size() > cancelled_.size()` then
// undercounts: a live timer is reported as nothing pending and
// Stack::drain() / run_until_idle() stop before it fires. Disabled until
// engine/core/event_loop.cpp is fixed (see the report of this change).
TEST(EventLoopTest, CancelAfterFireDoesNotHideLaterTimers) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    uint64_t fired = loop.schedule_at(100, &record_firing, &log, 1);
    run_until_idle(loop);
    loop.cancel(fired);  // too late: it already ran (a harmless no-op in the kernel)
    loop.schedule_at(200, &record_firing, &log, 2);
    EXPECT_TRUE(loop.has_pending());
    run_until_idle(loop);
    EXPECT_EQ(log.firings, (std::vector<Firing>{{1, 100}, {2, 200}}));
}

// A cancelled timer must not move virtual time: with only a cancelled timer
// left, waiting has nothing to wait for. Today wait_for_next() advances the
// clock to timers_.front().deadline even when that timer is cancelled, so a
// virtual run's elapsed time can end at a disarmed timer's deadline (e.g. an
// idle timer cancelled by the last request). Disabled until
// engine/core/event_loop.cpp skips cancelled timers (see the report).
TEST(EventLoopTest, CancelledTimerDoesNotMoveVirtualTime) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    uint64_t id = loop.schedule_at(8'000'000, &record_firing, &log, 1);
    loop.cancel(id);
    EXPECT_FALSE(loop.wait_for_next());
    EXPECT_EQ(clock.now_ns(), 0u);
}

// Deferred work runs on the next turn, in FIFO order, and before timers that
// are not yet due; the clock does not move for it.
TEST(EventLoopTest, DeferredRunsInOrderWithoutMovingTheClock) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    loop.schedule_at(10, &record_firing, &log, 100);
    loop.defer(&record_firing, &log, 1);
    loop.defer(&record_firing, &log, 2);
    loop.defer(&record_firing, &log, 3);
    EXPECT_TRUE(loop.has_pending());
    EXPECT_TRUE(loop.wait_for_next());  // deferred work pending: no wait, no clock move
    EXPECT_EQ(clock.now_ns(), 0u);
    EXPECT_EQ(loop.run_ready(), 3u);
    EXPECT_EQ(log.firings, (std::vector<Firing>{{1, 0}, {2, 0}, {3, 0}}));
    run_until_idle(loop);
    EXPECT_EQ(log.firings.back(), (Firing{100, 10}));
}

// Work deferred by a deferred callback runs after everything deferred
// before it, still within the same run_ready() call.
struct Chain {
    EventLoop* loop;
    FiringLog* log;
    int remaining;
};

void defer_again(void* arg, uint64_t tag) {
    auto* c = static_cast<Chain*>(arg);
    record_firing(c->log, tag);
    if (c->remaining-- > 0) c->loop->defer(&defer_again, c, tag + 10);
}

TEST(EventLoopTest, DeferFromCallbackRunsOnTheNextPass) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    Chain chain{&loop, &log, 2};
    loop.defer(&defer_again, &chain, 1);
    loop.defer(&record_firing, &log, 2);
    EXPECT_EQ(loop.run_ready(), 4u);
    std::vector<uint64_t> tags;
    for (const Firing& f : log.firings) tags.push_back(f.tag);
    EXPECT_EQ(tags, (std::vector<uint64_t>{1, 2, 11, 21}));
    EXPECT_FALSE(loop.has_pending());
}

// A timer that defers work: the deferred callback runs at the timer's time,
// in the same run_ready() call.
void defer_from_timer(void* arg, uint64_t tag) {
    auto* log = static_cast<FiringLog*>(arg);
    record_firing(log, tag);
    log->loop->defer(&record_firing, log, tag + 1);
}

TEST(EventLoopTest, TimerDefersWorkAtItsTime) {
    VirtualClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    loop.schedule_at(400, &defer_from_timer, &log, 5);
    ASSERT_TRUE(loop.wait_for_next());
    EXPECT_EQ(loop.run_ready(), 2u);
    EXPECT_EQ(log.firings, (std::vector<Firing>{{5, 400}, {6, 400}}));
}

// A completion source counts as pending work while it has I/O in flight.
class CountingSource final : public CompletionSource {
public:
    size_t poll() override {
        size_t n = ready;
        in_flight_now -= ready;
        ready = 0;
        polls++;
        return n;
    }
    void wait(uint64_t) override { waits++; }
    size_t in_flight() const override { return in_flight_now; }
    size_t ready = 0;
    size_t in_flight_now = 0;
    int polls = 0;
    int waits = 0;
};

TEST(EventLoopTest, CompletionSourceIsPolledAndKeepsTheLoopPending) {
    RealClock clock;
    EventLoop loop(clock);
    CountingSource source;
    loop.add_source(&source);
    EXPECT_FALSE(loop.has_pending());
    source.in_flight_now = 2;
    EXPECT_TRUE(loop.has_pending());
    source.ready = 2;
    EXPECT_EQ(loop.run_ready(), 2u);
    EXPECT_GE(source.polls, 1);
    EXPECT_FALSE(loop.has_pending());
}

// On the virtual clock a source's completions are taken by settle() only,
// never in passing, so when the host finished them does not matter.
TEST(EventLoopTest, VirtualClockTakesRealCompletionsOnlyWhenSettling) {
    VirtualClock clock;
    EventLoop loop(clock);
    CountingSource source;
    loop.add_source(&source);
    source.in_flight_now = 2;
    source.ready = 2;
    EXPECT_EQ(loop.run_ready(), 0u);
    EXPECT_TRUE(loop.has_pending());
    EXPECT_EQ(loop.settle(), 2u);
    EXPECT_FALSE(loop.has_pending());
}

// The virtual clock does not pass a real request's due time before a settle().
TEST(EventLoopTest, VirtualClockSettlesBeforeARealRequestIsDue) {
    VirtualClock clock;
    EventLoop loop(clock);
    CountingSource source;
    loop.add_source(&source);
    source.in_flight_now = 1;
    loop.add_real_io(500);
    EXPECT_FALSE(loop.must_settle_before(499));
    EXPECT_TRUE(loop.must_settle_before(500));
    loop.note_untracked_io(+1);  // the request in flight is a write-behind copy
    EXPECT_FALSE(loop.must_settle_before(500));
}

// On the real clock the loop sleeps until the next deadline.
TEST(EventLoopTest, RealClockSleepsUntilTheDeadline) {
    RealClock clock;
    EventLoop loop(clock);
    FiringLog log{&loop, {}};
    uint64_t start = clock.now_ns();
    uint64_t deadline = start + 2'000'000;  // 2 ms
    loop.schedule_at(deadline, &record_firing, &log, 1);
    while (log.firings.empty()) {
        ASSERT_TRUE(loop.wait_for_next());
        loop.run_ready();
    }
    EXPECT_GE(log.firings[0].at_ns, deadline);
    EXPECT_LT(log.firings[0].at_ns - start, 1'000'000'000u);  // not stuck for a second
    EXPECT_FALSE(loop.has_pending());
    EXPECT_FALSE(loop.wait_for_next());
}

}  // namespace
}  // namespace mdsplit
