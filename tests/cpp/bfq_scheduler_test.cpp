// The BFQ scheduler on its own (block/bfq-iosched.c): the symmetry test
// bfq_asymmetric_scenario() under the legacy and the fixed (6.2) counting of
// groups with pending requests, idling with the slice timer, the budget
// feedback per expiration reason, injection, and the elevator merge through
// a member queue.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "bfq_test_sched.h"
#include "config/config_loader.h"
#include "core/block/bfq_scheduler.h"
#include "core/trace/trace_event.h"
#include "core/trace/tracer.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

using bfq::Expiration;
using bfq_test::kMs;
using bfq_test::Sched;

// --- bfq_asymmetric_scenario(), per variant --------------------------------

TEST(BfqAsymmetricTest, RootGroupOnlyIsSymmetricInBothVariants) {
    for (GroupCounting counting : {GroupCounting::Legacy, GroupCounting::Fixed}) {
        Sched s(counting);
        TaskContext& a = s.task(1);
        TaskContext& b = s.task(2);
        s.insert(a, 0);
        s.insert(b, 1000);
        // legacy never counts the root group; fixed counts it (one group)
        EXPECT_EQ(s.groups_counted(), counting == GroupCounting::Legacy ? 0u : 1u);
        EXPECT_FALSE(s.asymmetric(a));
        EXPECT_FALSE(s.asymmetric(b));
    }
}

TEST(BfqAsymmetricTest, OneNonRootGroupIsAsymmetricOnlyInLegacy) {
    {
        Sched s(GroupCounting::Legacy);
        TaskContext& a = s.task(1, "g1");
        TaskContext& b = s.task(2, "g1");
        s.insert(a, 0);
        s.insert(b, 1000);
        EXPECT_EQ(s.groups_counted(), 1u);  // "> 0": the seed's bug
        EXPECT_TRUE(s.asymmetric(a));
    }
    {
        Sched s(GroupCounting::Fixed);
        TaskContext& a = s.task(1, "g1");
        TaskContext& b = s.task(2, "g1");
        s.insert(a, 0);
        s.insert(b, 1000);
        EXPECT_EQ(s.groups_counted(), 1u);  // "> 1": one active group does not idle
        EXPECT_FALSE(s.asymmetric(a));
    }
}

TEST(BfqAsymmetricTest, TwoActiveGroupsAreAsymmetricInBothVariants) {
    for (GroupCounting counting : {GroupCounting::Legacy, GroupCounting::Fixed}) {
        Sched s(counting);
        TaskContext& a = s.task(1, "g1");
        TaskContext& b = s.task(2, "g2", 4, IoprioClass::BE, 300);
        s.insert(a, 0);
        s.insert(b, 1000);
        EXPECT_EQ(s.groups_counted(), 2u);
        EXPECT_TRUE(s.asymmetric(a));
        EXPECT_TRUE(s.asymmetric(b));
    }
}

TEST(BfqAsymmetricTest, RootPlusOneGroupCountsTheRootOnlyWhenFixed) {
    for (GroupCounting counting : {GroupCounting::Legacy, GroupCounting::Fixed}) {
        Sched s(counting);
        TaskContext& a = s.task(1);
        TaskContext& b = s.task(2, "g1");
        s.insert(a, 0);
        s.insert(b, 1000);
        EXPECT_EQ(s.groups_counted(), counting == GroupCounting::Legacy ? 1u : 2u);
        EXPECT_TRUE(s.asymmetric(a));
    }
}

TEST(BfqAsymmetricTest, VariedWeightsUnlessTheQueueHasTheSmallestWeight) {
    for (GroupCounting counting : {GroupCounting::Legacy, GroupCounting::Fixed}) {
        Sched s(counting);
        TaskContext& heavy = s.task(1, "", 0);  // weight (8 - 0) * 10 = 80
        TaskContext& light = s.task(2, "", 4);  // weight 40
        s.insert(heavy, 0);
        s.insert(light, 1000);
        EXPECT_EQ(s.queue(heavy)->entity.weight, 80u);
        EXPECT_EQ(s.queue(light)->entity.weight, 40u);
        EXPECT_TRUE(s.asymmetric(heavy));
        EXPECT_FALSE(s.asymmetric(light));  // smallest weight: never below its share
    }
}

TEST(BfqAsymmetricTest, SeveralBusyClassesAreAsymmetric) {
    Sched s(GroupCounting::Fixed);
    TaskContext& rt = s.task(1, "", 4, IoprioClass::RT);
    TaskContext& be = s.task(2, "", 4, IoprioClass::BE);
    s.insert(rt, 0);
    s.insert(be, 1000);
    EXPECT_TRUE(s.asymmetric(be));
    EXPECT_TRUE(s.asymmetric(rt));
}

TEST(BfqAsymmetricTest, GroupsStopCountingWhenTheirRequestsComplete) {
    for (GroupCounting counting : {GroupCounting::Legacy, GroupCounting::Fixed}) {
        Sched s(counting);
        TaskContext& a = s.task(1, "g1");
        s.insert(a, 0);
        EXPECT_EQ(s.groups_counted(), 1u);
        Request* rq = s.sched->dispatch();
        ASSERT_NE(rq, nullptr);
        // In flight: the group still has a pending request.
        EXPECT_EQ(s.groups_counted(), 1u);
        s.sched->completed(rq);
        s.advance(20 * kMs);  // past any idling: the queue expires
        EXPECT_EQ(s.groups_counted(), 0u)
            << (counting == GroupCounting::Legacy ? "legacy" : "fixed");
    }
}

// --- idling, budgets, injection -------------------------------------------

TEST(BfqSchedulerTest, IdlesForTheInServiceQueueWhenAsymmetric) {
    Sched s(GroupCounting::Legacy);
    TaskContext& a = s.task(1, "g1");
    s.insert(a, 0);
    Request* rq = s.sched->dispatch();
    ASSERT_NE(rq, nullptr);
    EXPECT_EQ(s.sched->dispatch(), nullptr);  // kept in service, waiting
    s.advance(1 * kMs);
    s.sched->completed(rq);
    EXPECT_TRUE(s.sched->idle_timer_pending());
    const bfq::BfqQueue* q = s.queue(a);
    EXPECT_TRUE(q->wait_request);
    EXPECT_EQ(q->stats.idle_periods, 1u);
    s.advance(8 * kMs);  // slice_idle: TOO_IDLE
    EXPECT_FALSE(s.sched->idle_timer_pending());
    EXPECT_EQ(q->stats.expirations[unsigned(Expiration::TooIdle)], 1u);
    EXPECT_EQ(q->stats.idle_ns, 8 * kMs);
    EXPECT_EQ(q->stats.idle_timeouts, 1u);
    // TOO_IDLE with nothing in flight shrinks the budget by 4 * min_budget:
    // 2/3 * 16384 - 4 * 16384 / 32.
    EXPECT_EQ(q->max_budget, 10922u - 2048u);
}

// Slow motion: the scheduler runs on device time, so slice_idle (8 ms of
// device time) lasts 8 ms x time_scale on the loop's clock, and the
// statistics are in device time.
TEST(BfqSchedulerTest, SlowMotionStretchesSliceIdleOnTheLoopClock) {
    Sched s(GroupCounting::Legacy, 8 * kMs, 16384, 32.0);
    TaskContext& a = s.task(1, "g1");
    s.insert(a, 0);
    Request* rq = s.sched->dispatch();
    ASSERT_NE(rq, nullptr);
    s.advance(32 * kMs);
    s.sched->completed(rq);
    ASSERT_TRUE(s.sched->idle_timer_pending());
    s.advance(255 * kMs);
    EXPECT_TRUE(s.sched->idle_timer_pending());
    s.advance(1 * kMs);  // 256 ms of loop time = slice_idle
    EXPECT_FALSE(s.sched->idle_timer_pending());
    const bfq::BfqQueue* q = s.queue(a);
    EXPECT_EQ(q->stats.expirations[unsigned(Expiration::TooIdle)], 1u);
    EXPECT_EQ(q->stats.idle_ns, 8 * kMs);
}

// bfq_exit_icq(): the in-service queue of a task that exits stops idling
// and the next queue is served at once.
TEST(BfqSchedulerTest, AnExitedTaskIsNotIdledFor) {
    Sched s(GroupCounting::Legacy);
    TaskContext& a = s.task(1, "g1");
    TaskContext& b = s.task(2, "g1");
    s.insert(a, 0);
    Request* rq = s.sched->dispatch();
    s.insert(b, 1000);
    s.advance(1 * kMs);
    s.sched->completed(rq);
    ASSERT_TRUE(s.sched->idle_timer_pending());
    EXPECT_EQ(s.sched->dispatch(), nullptr);  // idling for a
    s.sched->task_exited(a);
    EXPECT_FALSE(s.sched->idle_timer_pending());
    Request* next = s.sched->dispatch();
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(next->sector, 1000u);
}

TEST(BfqSchedulerTest, ANewRequestEndsTheIdlingAndIsDispatched) {
    Sched s(GroupCounting::Legacy);
    TaskContext& a = s.task(1, "g1");
    s.insert(a, 0);
    Request* rq = s.sched->dispatch();
    s.advance(1 * kMs);
    s.sched->completed(rq);
    s.advance(3 * kMs);
    s.insert(a, 8);
    EXPECT_FALSE(s.sched->idle_timer_pending());
    const bfq::BfqQueue* q = s.queue(a);
    EXPECT_EQ(q->stats.idle_ns, 3 * kMs);
    Request* next = s.sched->dispatch();
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(next->sector, 8u);
    EXPECT_EQ(q->stats.slices, 1u);  // same service slot
}

// Two equal queues in the root group (fixed counting): no term holds, so the
// in-service queue expires as soon as it is empty.
TEST(BfqSchedulerTest, NoIdlingWhenSymmetricAndTheBudgetFollowsTheService) {
    Sched s(GroupCounting::Fixed);
    TaskContext& a = s.task(1);
    TaskContext& b = s.task(2);
    s.insert(a, 0);
    s.insert(b, 100000);
    Request* rq = s.sched->dispatch();
    ASSERT_EQ(rq->pid, 1u);
    Request* next = s.sched->dispatch();  // expires the empty queue, serves b
    ASSERT_NE(next, nullptr);
    EXPECT_EQ(next->pid, 2u);
    const bfq::BfqQueue* q = s.queue(a);
    EXPECT_EQ(q->stats.expirations[unsigned(Expiration::NoMoreRequests)], 1u);
    EXPECT_EQ(q->max_budget, 16384u / 32);  // max(service, min_budget)
    s.sched->completed(rq);
    EXPECT_EQ(q->stats.idle_periods, 0u);
}

// --- the terms of bfq_better_to_idle(), each alone ---------------------------
// Each scenario makes exactly one term true for the in-service queue A (its
// only request dispatched, B waiting unless A is alone), and checks that A
// then keeps the device: the next dispatch returns nothing (B is not
// injected: A's inject limit is 0) and A's completion arms the idle timer.

// Runs the scenario's first dispatch; returns A's request.
Request* dispatch_a(Sched& s, const TaskContext& a) {
    Request* rq = s.sched->dispatch();
    EXPECT_NE(rq, nullptr);
    EXPECT_EQ(rq ? rq->pid : 0u, a.pid);
    return rq;
}

// Checks that A plugs the device and idles after its completion.
void expect_idles_for(Sched& s, const TaskContext& a, Request* rq) {
    EXPECT_EQ(s.sched->dispatch(), nullptr);
    s.advance(1 * kMs);
    s.sched->completed(rq);
    EXPECT_TRUE(s.sched->idle_timer_pending());
    EXPECT_TRUE(s.queue(a)->wait_request);
}

// Counts the true terms of idling_needed_for_service_guarantees.
int true_terms(const bfq::IdlingTerms& t) {
    return int(t.boosts_throughput) + int(t.weight_raised) + int(t.varied_queue_weights) +
           int(t.multiple_classes_busy) + int(t.groups) + int(t.lone_busy_queue);
}

// tot_busy_queues == 1: a lone queue in the root group, symmetric in every
// other respect, is idled for (v5.18-rc1 idling_needed_for_service_guarantees).
TEST(BfqIdlingTermTest, ALoneBusyQueueIsIdledFor) {
    Sched s(GroupCounting::Fixed);
    TaskContext& a = s.task(1);
    s.insert(a, 0);
    Request* rq = dispatch_a(s, a);
    bfq::IdlingTerms t = s.sched->idling_terms(s.queue(a));
    EXPECT_TRUE(t.lone_busy_queue);
    EXPECT_EQ(true_terms(t), 1);
    expect_idles_for(s, a, rq);
}

// varied_queue_weights: two root-group queues of ioprio 0 (weight 80) and 7
// (weight 10); the heavier one is served first and idled for.
TEST(BfqIdlingTermTest, TwoQueuesOfDifferentWeightsIdleForTheHeavierOne) {
    Sched s(GroupCounting::Fixed);
    TaskContext& a = s.task(1, "", 0);
    TaskContext& b = s.task(2, "", 7);
    s.insert(a, 0);
    s.insert(b, 100000);
    Request* rq = dispatch_a(s, a);
    bfq::IdlingTerms t = s.sched->idling_terms(s.queue(a));
    EXPECT_TRUE(t.varied_queue_weights);
    EXPECT_EQ(true_terms(t), 1);
    expect_idles_for(s, a, rq);
}

// The group term: two non-root groups of equal weights with one equal queue
// each count 2 groups, > 1 under the patched counting.
TEST(BfqIdlingTermTest, TwoGroupsIdleUnderTheFixedCounting) {
    Sched s(GroupCounting::Fixed);
    TaskContext& a = s.task(1, "g1");
    TaskContext& b = s.task(2, "g2");
    s.insert(a, 0);
    s.insert(b, 100000);
    Request* rq = dispatch_a(s, a);
    bfq::IdlingTerms t = s.sched->idling_terms(s.queue(a));
    EXPECT_TRUE(t.groups);
    EXPECT_EQ(s.groups_counted(), 2u);
    EXPECT_EQ(true_terms(t), 1);
    expect_idles_for(s, a, rq);
}

// The group term in the v5.18-rc1 form: one non-root group with two equal
// queues is counted (> 0) and idled for; the patched form does not idle.
TEST(BfqIdlingTermTest, OneNonRootGroupIdlesOnlyUnderTheLegacyCounting) {
    for (GroupCounting counting : {GroupCounting::Legacy, GroupCounting::Fixed}) {
        Sched s(counting);
        TaskContext& a = s.task(1, "g1");
        TaskContext& b = s.task(2, "g1");
        s.insert(a, 0);
        s.insert(b, 100000);
        Request* rq = dispatch_a(s, a);
        bfq::IdlingTerms t = s.sched->idling_terms(s.queue(a));
        if (counting == GroupCounting::Legacy) {
            EXPECT_TRUE(t.groups);
            EXPECT_EQ(true_terms(t), 1);
            expect_idles_for(s, a, rq);
        } else {
            EXPECT_EQ(true_terms(t), 0);
            Request* next = s.sched->dispatch();
            ASSERT_NE(next, nullptr);
            EXPECT_EQ(next->pid, b.pid);
        }
    }
}

// multiple_classes_busy: a best-effort queue of ioprio 7 (weight 10) beside
// an idle-class queue (ioprio 7 too, so the weights are equal).
TEST(BfqIdlingTermTest, AnIdleClassQueueBesideABestEffortOneMakesItIdle) {
    Sched s(GroupCounting::Fixed);
    TaskContext& a = s.task(1, "", 7, IoprioClass::BE);
    TaskContext& b = s.task(2, "", 7, IoprioClass::Idle);
    s.insert(a, 0);
    s.insert(b, 100000);
    Request* rq = dispatch_a(s, a);
    bfq::IdlingTerms t = s.sched->idling_terms(s.queue(a));
    EXPECT_TRUE(t.multiple_classes_busy);
    EXPECT_EQ(true_terms(t), 1);
    expect_idles_for(s, a, rq);
}

// The idle-class queue itself never idles (bfq_better_to_idle), even though
// the scenario is asymmetric for it.
TEST(BfqIdlingTermTest, AnIdleClassQueueIsNeverIdledFor) {
    Sched s(GroupCounting::Fixed);
    TaskContext& b = s.task(2, "", 7, IoprioClass::Idle);
    s.insert(b, 100000);
    Request* rq = s.sched->dispatch();
    ASSERT_NE(rq, nullptr);
    EXPECT_TRUE(s.sched->idling_terms(s.queue(b)).lone_busy_queue);
    EXPECT_FALSE(s.sched->better_to_idle_now(s.queue(b)));
    s.advance(1 * kMs);
    s.sched->completed(rq);
    EXPECT_FALSE(s.sched->idle_timer_pending());
}

TEST(BfqSchedulerTest, BudgetExhaustionExpiresAndQuadruplesTheBudget) {
    Sched s(GroupCounting::Fixed, 8 * kMs, 96);
    // bfq_max_budget() gives the user's 96 once 194 budgets were assigned
    // (before, the default): a new queue gets 2/3 * 96 = 64 sectors.
    s.sched->data().budgets_assigned = bfq::kStatsMinBudgets;
    TaskContext& a = s.task(1);
    for (int i = 0; i < 12; i++) s.insert(a, sector_t(i) * 8);
    std::vector<Request*> out;
    for (int i = 0; i < 8; i++) {
        Request* rq = s.sched->dispatch();
        ASSERT_NE(rq, nullptr);
        out.push_back(rq);
    }
    const bfq::BfqQueue* q = s.queue(a);
    EXPECT_EQ(q->stats.expirations[unsigned(Expiration::BudgetExhausted)], 0u);
    ASSERT_NE(s.sched->dispatch(), nullptr);  // 9th: a new slot
    EXPECT_EQ(q->stats.expirations[unsigned(Expiration::BudgetExhausted)], 1u);
    EXPECT_EQ(q->max_budget, 96u);  // min(64 * 4, max_budget)
    EXPECT_EQ(q->stats.slices, 2u);
}

TEST(BfqSchedulerTest, BudgetTimeoutExpiresASlowQueue) {
    Sched s(GroupCounting::Fixed);
    TaskContext& a = s.task(1);
    s.insert(a, 0);
    s.insert(a, 100000);
    Request* rq = s.sched->dispatch();
    s.advance(130 * kMs);  // longer than timeout_sync (125 ms)
    s.sched->completed(rq);
    const bfq::BfqQueue* q = s.queue(a);
    EXPECT_EQ(q->stats.expirations[unsigned(Expiration::BudgetTimeout)], 1u);
    // Charged for the time it held the device: max_budget * min(130, 125) / 125.
    EXPECT_EQ(q->stats.charged_sectors, 16384u);
}

TEST(BfqSchedulerTest, InjectionStartsOnceABaselineServiceTimeIsKnown) {
    Sched s(GroupCounting::Legacy, 20 * kMs);
    TaskContext& a = s.task(1, "g1");
    TaskContext& b = s.task(2, "g1");
    s.insert(a, 0);
    s.insert(b, 50000);
    Request* a1 = s.sched->dispatch();
    ASSERT_EQ(a1->pid, 1u);
    // The in-service queue idles; its inject limit is 0 (short think time,
    // no baseline): nothing is injected.
    EXPECT_EQ(s.sched->dispatch(), nullptr);
    s.advance(1 * kMs);
    s.sched->completed(a1);
    EXPECT_EQ(s.queue(a)->inject_limit, 0u);
    EXPECT_EQ(s.sched->dispatch(), nullptr);
    // A's next request arrives with nothing in the drive, 10 ms after the
    // limit was reset (msecs_to_jiffies(10): 3 jiffies, 12 ms at HZ 250):
    // its total service time becomes the baseline.
    s.advance(12 * kMs);
    s.insert(a, 8);
    Request* a2 = s.sched->dispatch();
    ASSERT_EQ(a2->pid, 1u);
    s.advance(1 * kMs);
    s.sched->completed(a2);
    EXPECT_EQ(s.queue(a)->inject_limit, 1u);
    EXPECT_EQ(s.queue(a)->last_serv_time_ns, 1 * kMs);
    // Idling again: B's request is injected into the service hole.
    Request* inj = s.sched->dispatch();
    ASSERT_NE(inj, nullptr);
    EXPECT_EQ(inj->pid, 2u);
    EXPECT_EQ(s.queue(b)->stats.injected, 1u);
    EXPECT_EQ(s.sched->dispatch(), nullptr);  // limit reached (1 in the drive)
}

TEST(BfqSchedulerTest, GroupWeightsAndIoprioGiveTheEntityWeights) {
    Sched s(GroupCounting::Fixed);
    TaskContext& a = s.task(1, "g1", 7, IoprioClass::BE, 250);
    TaskContext& b = s.task(2, "g2/sub", 0);
    s.insert(a, 0);
    s.insert(b, 1000);
    EXPECT_EQ(s.queue(a)->entity.weight, 10u);
    EXPECT_EQ(s.queue(b)->entity.weight, 80u);
    EXPECT_EQ(s.sched->find_group("g1")->entity.weight, 250u);
    EXPECT_EQ(s.sched->find_group("g2/sub")->entity.weight, 100u);
    EXPECT_EQ(s.sched->find_group("g2/sub")->parent, s.sched->find_group("g2"));
}

// --- through a member queue --------------------------------------------------

TEST(BfqSchedulerTest, ElevatorBackMergeIntoAQueuedRequest) {
    const char* toml = R"(
[device]
kind = "passthrough"
scheduler = "bfq"

[[members]]
path = "m0"
size = "64m"
backend = "null"
model = { command = "1ms", bandwidth = 0, random_penalty = "0", parallelism = 4 }

[bfq]
group_counting = "legacy"
)";
    StackConfig config = load_stack_text(toml, ".", "<test>");
    VirtualClock clock;
    StackOptions options;
    Stack stack(config, clock, options);
    TraceRecorder recorder;
    stack.tracer().add_global_sink(&recorder);
    TaskContext one, two;
    one.pid = 1;
    two.pid = 2;
    one.sched.group = two.sched.group = "g1";  // legacy + non-root: the in-service queue idles
    std::vector<char> buf(3 * 4096);
    stack.begin_batch(one);
    stack.queue(one, Op::Write, 0, 4096, buf.data(), 1);
    stack.commit(one);
    stack.loop().run_ready();  // A is dispatched; queue one stays in service
    stack.begin_batch(two);
    stack.queue(two, Op::Write, 1 << 20, 4096, buf.data() + 4096, 2);
    stack.commit(two);
    stack.loop().run_ready();  // B waits in bfq (no injection yet)
    stack.begin_batch(two);
    stack.queue(two, Op::Write, (1 << 20) + 4096, 4096, buf.data() + 8192, 3);
    stack.commit(two);  // C: back merge into B, outside any plug
    stack.drain();
    EXPECT_EQ(one.completions.size(), 1u);
    EXPECT_EQ(two.completions.size(), 2u);
    MemberQueue* m = stack.members()[0];
    EXPECT_EQ(m->stats().merges[1], 1u);
    EXPECT_EQ(m->stats().ios[1], 2u);
    int merges = 0;
    for (const TraceEvent& e : recorder.events) merges += e.action == TraceAction::BackMerge;
    EXPECT_EQ(merges, 1);
    std::string json = stack.stats_json();
    EXPECT_NE(json.find("\"bfq\": {\"scheduler\": \"bfq\""), std::string::npos);
}

}  // namespace
}  // namespace mdsplit
