// Waker detection, bfq_check_waker() as in v5.18-rc1 (bfq_waker.h): which
// completions count as a wake-up, how three in a row confirm a waker, and
// the woken_list links; then, through the scheduler, the waker's requests
// injected during the woken queue's idle regardless of the inject limit.
#include <gtest/gtest.h>

#include "bfq_test_sched.h"
#include "core/block/bfq_scheduler.h"
#include "core/block/bfq_waker.h"

namespace mdsplit {
namespace {

using bfq::BfqData;
using bfq::BfqQueue;

using bfq_test::kMs;

// A device with a long-think-time sync queue q and two other queues.
struct Wakers {
    Wakers() {
        bfqd.slice_idle_ns = 8 * kMs;
        q.has_short_ttime = false;
    }
    // w's request completed at t, then q's new request arrived at t + gap.
    void wake(BfqQueue& w, uint64_t t, uint64_t gap = 100'000) {
        bfqd.last_completed_rq_bfqq = &w;
        bfqd.last_completion_ns = t;
        bfq::check_waker(bfqd, &q, t + gap);
    }
    BfqData bfqd;
    BfqQueue q, w1, w2;
};

TEST(BfqWakerTest, ThreeWakeUpsInARowByOneQueueMakeItTheWaker) {
    Wakers s;
    s.wake(s.w1, 10 * kMs);
    s.wake(s.w1, 20 * kMs);
    EXPECT_EQ(s.q.waker_bfqq, nullptr);
    EXPECT_EQ(s.q.tentative_waker_bfqq, &s.w1);
    s.wake(s.w1, 30 * kMs);
    EXPECT_EQ(s.q.waker_bfqq, &s.w1);
    EXPECT_EQ(s.q.tentative_waker_bfqq, nullptr);
    EXPECT_EQ(bfq::first_woken(&s.w1), &s.q);
    EXPECT_EQ(s.q.stats.wakers_set, 1u);
}

TEST(BfqWakerTest, AQueueWithAShortThinkTimeGetsNoWaker) {
    Wakers s;
    s.q.has_short_ttime = true;
    for (int i = 1; i <= 3; i++) s.wake(s.w1, i * 10 * kMs);
    EXPECT_EQ(s.q.waker_bfqq, nullptr);
    EXPECT_EQ(s.q.num_waker_detections, 0u);
}

TEST(BfqWakerTest, ACompletionFourMillisecondsBeforeIsNoWakeUp) {
    Wakers s;
    for (int i = 1; i <= 3; i++) s.wake(s.w1, i * 10 * kMs, 4 * kMs);
    EXPECT_EQ(s.q.waker_bfqq, nullptr);
    EXPECT_EQ(s.q.num_waker_detections, 0u);
}

TEST(BfqWakerTest, AQueueWithRequestsInTheDriveIsNotChecked) {
    Wakers s;
    s.q.dispatched = 1;  // v5.18-rc1: bfqq->dispatched > 0 returns
    for (int i = 1; i <= 3; i++) s.wake(s.w1, i * 10 * kMs);
    EXPECT_EQ(s.q.num_waker_detections, 0u);
}

TEST(BfqWakerTest, ItsOwnCompletionIsNoWakeUp) {
    Wakers s;
    for (int i = 1; i <= 3; i++) s.wake(s.q, i * 10 * kMs);
    EXPECT_EQ(s.q.num_waker_detections, 0u);
}

TEST(BfqWakerTest, AnotherCandidateRestartsTheCount) {
    Wakers s;
    s.wake(s.w1, 10 * kMs);
    s.wake(s.w1, 20 * kMs);
    s.wake(s.w2, 30 * kMs);
    s.wake(s.w1, 40 * kMs);
    EXPECT_EQ(s.q.tentative_waker_bfqq, &s.w1);
    EXPECT_EQ(s.q.num_waker_detections, 1u);
    EXPECT_EQ(s.q.waker_bfqq, nullptr);
}

TEST(BfqWakerTest, DetectionsSpreadOverMoreThan128SliceIdleRestart) {
    Wakers s;
    s.wake(s.w1, 10 * kMs);
    s.wake(s.w1, 20 * kMs);
    s.wake(s.w1, 10 * kMs + 128 * 8 * kMs + 1);  // past 128 * slice_idle from the first
    EXPECT_EQ(s.q.num_waker_detections, 1u);
    EXPECT_EQ(s.q.waker_bfqq, nullptr);
}

TEST(BfqWakerTest, TheCurrentWakersWakeUpsAreNotCounted) {
    Wakers s;
    for (int i = 1; i <= 3; i++) s.wake(s.w1, i * 10 * kMs);
    s.wake(s.w2, 40 * kMs);
    s.wake(s.w1, 50 * kMs);  // v5.18-rc1: last_completed_rq_bfqq == waker_bfqq returns
    EXPECT_EQ(s.q.tentative_waker_bfqq, &s.w2);
    EXPECT_EQ(s.q.num_waker_detections, 1u);
}

TEST(BfqWakerTest, ANewWakerTakesTheQueueFromTheOldWakersWokenList) {
    Wakers s;
    for (int i = 1; i <= 3; i++) s.wake(s.w1, i * 10 * kMs);
    for (int i = 4; i <= 6; i++) s.wake(s.w2, i * 10 * kMs);
    EXPECT_EQ(s.q.waker_bfqq, &s.w2);
    EXPECT_EQ(bfq::first_woken(&s.w1), nullptr);
    EXPECT_EQ(bfq::first_woken(&s.w2), &s.q);
}

TEST(BfqWakerTest, AWakerThatGoesAwayLeavesItsWokenQueuesWithout) {
    Wakers s;
    for (int i = 1; i <= 3; i++) s.wake(s.w1, i * 10 * kMs);
    bfq::forget_waker_links(s.bfqd, &s.w1);
    EXPECT_EQ(s.q.waker_bfqq, nullptr);
    EXPECT_EQ(bfq::first_woken(&s.w1), nullptr);
    EXPECT_EQ(s.bfqd.last_completed_rq_bfqq, nullptr);
}

// --- through the scheduler ----------------------------------------------------

using bfq_test::Sched;

// Dispatch, letting the idle timer run out if bfq holds the request.
Request* dispatch_waiting(Sched& s) {
    for (int i = 0; i < 100; i++) {
        if (Request* rq = s.sched->dispatch()) return rq;
        s.advance(kMs / 2);
    }
    return nullptr;
}

// t's request at sector, dispatched, served for 1 ms.
void serve(Sched& s, TaskContext& t, sector_t sector) {
    s.insert(t, sector);
    Request* rq = dispatch_waiting(s);
    ASSERT_NE(rq, nullptr);
    s.advance(kMs);
    s.sched->completed(rq);
}

// b's requests complete just before a issues its next one: a's think time
// (b's service and more) is over slice_idle / 2, so a loses
// has_short_ttime and b becomes its waker.
void follow(Sched& s, TaskContext& a, TaskContext& b) {
    for (int i = 0; i < 120 && !(s.queue(a) && s.queue(a)->waker_bfqq); i++) {
        serve(s, b, 1000 + 8 * i);
        s.advance(kMs / 10);
        serve(s, a, 100000 + 8 * i);
        s.advance(kMs / 10);
    }
}

TEST(BfqWakerSchedulerTest, AReaderThatFollowsAnothersCompletionsGetsItAsWaker) {
    Sched s(GroupCounting::Fixed, 2 * kMs);
    TaskContext& a = s.task(1);
    TaskContext& b = s.task(2);
    follow(s, a, b);
    EXPECT_FALSE(s.queue(a)->has_short_ttime);
    EXPECT_EQ(s.queue(a)->waker_bfqq, s.queue(b));
}

TEST(BfqWakerSchedulerTest, TheWakersRequestIsInjectedWhileTheWokenQueueIdles) {
    Sched s(GroupCounting::Fixed, 2 * kMs);
    // Two groups of unequal weights: bfq idles for a (asymmetric), and b's
    // arrival does not preempt a (lower group weight, no service hole).
    TaskContext& a = s.task(1, "g1", 4, IoprioClass::BE, 200);
    TaskContext& b = s.task(2, "g2", 4, IoprioClass::BE, 100);
    follow(s, a, b);
    ASSERT_EQ(s.queue(a)->waker_bfqq, s.queue(b));
    ASSERT_TRUE(s.sched->idle_timer_pending());
    ASSERT_EQ(s.sched->data().in_service_queue, s.queue(a));
    s.insert(b, 5000);
    Request* rq = s.sched->dispatch();
    ASSERT_NE(rq, nullptr);
    EXPECT_EQ(rq->pid, 2u);
    EXPECT_EQ(s.sched->data().in_service_queue, s.queue(a));
    EXPECT_EQ(s.queue(b)->stats.injected_waker, 1u);
}

}  // namespace
}  // namespace mdsplit
