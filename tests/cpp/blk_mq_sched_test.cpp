// The scheduler dispatch loop of a member queue (block/blk-mq-sched.c
// blk_mq_do_dispatch_sched / __blk_mq_do_dispatch_sched, 6.1
// source) and its delayed re-run (blk_mq_delay_run_hw_queues with
// BLK_MQ_BUDGET_DELAY, kblockd delayed work in jiffies: base/jiffies.h),
// driven by a scheduler that gives a set number of requests and then holds
// the rest, as bfq does while it idles.
#include <gtest/gtest.h>

#include "member_queue_rig.h"

#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <vector>

#include "base/jiffies.h"
#include "core/block/io_scheduler.h"

namespace mdsplit {
namespace {

constexpr uint64_t kMs = 1'000'000;

// Gives `give` requests in FIFO order, then returns null while it still
// holds some (has_work() stays true); records when dispatch() was asked.
class HoldingScheduler final : public IoScheduler {
public:
    HoldingScheduler(EventLoop& loop, size_t give) : loop_(loop), give_(give) {}
    const char* name() const override { return "holding"; }
    Request* find_merge(const Bio*, const TaskContext*, bool&) override { return nullptr; }
    void merged(Request*, bool) override {}
    void insert(Request* rq, const TaskContext*) override { queue_.push_back(rq); }
    Request* dispatch() override {
        asked.push_back(loop_.now());
        if (queue_.empty() || give_ == 0) return nullptr;
        give_--;
        Request* rq = queue_.front();
        queue_.pop_front();
        return rq;
    }
    bool has_work() const override { return !queue_.empty(); }
    void completed(Request*) override {}
    void write_json(JsonWriter&) const override {}
    // Gives everything from now on.
    void release() { give_ = std::numeric_limits<size_t>::max(); }
    std::vector<uint64_t> asked;

private:
    EventLoop& loop_;
    std::deque<Request*> queue_;
    size_t give_;
};

struct HeldQueue {
    PlugHarness h;
    MemberQueue* m = nullptr;
    HoldingScheduler* s = nullptr;

    HeldQueue(size_t give, uint32_t hz = jiffies::kConfigHz) {
        MemberQueueLimits limits = member_limits(512 * kKiB);
        limits.hz = hz;
        m = &h.add_member(limits);
        auto sched = std::make_unique<HoldingScheduler>(h.loop(), give);
        s = sched.get();
        m->set_scheduler(std::move(sched));
    }
    ~HeldQueue() {
        s->release();
        m->run_queue();
        h.run_until_idle();
    }
    // At time `t`, `n` requests are inserted and the queue run.
    void insert_at(uint64_t t, int n) {
        h.clock().advance_to(t);
        for (int i = 0; i < n; i++) h.submit(*m, Op::Read, sector_t(8 * (next_++)), 8);
        h.loop().run_ready();
    }
    // Runs the loop's timers up to time `t`.
    void run_to(uint64_t t) {
        while (h.loop().has_pending() && h.loop().next_deadline() <= t) {
            if (!h.loop().wait_for_next()) break;
            h.loop().run_ready();
        }
        h.clock().advance_to(t);
    }
    // Times after `from` at which dispatch() was asked.
    std::vector<uint64_t> asked_after(uint64_t from) const {
        std::vector<uint64_t> out;
        for (uint64_t t : s->asked)
            if (t > from) out.push_back(t);
        return out;
    }
    int next_ = 0;
};

// msecs_to_jiffies rounds up: BLK_MQ_BUDGET_DELAY (3 ms) is 1 jiffy at HZ
// 250 and 100, 3 at HZ 1000.
TEST(JiffiesTest, MsecsRoundUpToWholeJiffies) {
    EXPECT_EQ(jiffies::from_msecs(3, 250), 1u);
    EXPECT_EQ(jiffies::from_msecs(3, 100), 1u);
    EXPECT_EQ(jiffies::from_msecs(3, 1000), 3u);
    EXPECT_EQ(jiffies::from_msecs(3, 300), 1u);
}

// A timer fires at the tick of jiffies + delay, not delay after arming.
TEST(JiffiesTest, TimerFiresAtATick) {
    EXPECT_EQ(jiffies::timer_fires_ns(1 * kMs, 1, 250), 4 * kMs);
    EXPECT_EQ(jiffies::timer_fires_ns(3'999'999, 1, 250), 4 * kMs);
    EXPECT_EQ(jiffies::timer_fires_ns(4 * kMs, 1, 250), 8 * kMs);
    EXPECT_EQ(jiffies::timer_fires_ns(500'000, 3, 1000), 3 * kMs);
}

// A run that dispatched and ended with the scheduler holding requests asks
// the scheduler again in a second pass that gives nothing.
TEST(BlkMqSchedTest, RunRepeatsPassesUntilOneGivesNothing) {
    HeldQueue q(2);
    q.insert_at(kMs, 3);
    // Pass 1: two requests, then null; pass 2: null at once.
    EXPECT_EQ(q.s->asked, (std::vector<uint64_t>{kMs, kMs, kMs, kMs}));
}

// That last, empty pass arms the delayed re-run although the run dispatched.
TEST(BlkMqSchedTest, RunThatDispatchedAndKeptWorkArmsTheReRun) {
    HeldQueue q(2);
    q.insert_at(kMs, 3);
    q.run_to(5 * kMs);
    EXPECT_EQ(q.asked_after(kMs), (std::vector<uint64_t>{4 * kMs + 1}));
}

// At HZ 250 the 3 ms re-run is one jiffy: it fires at the next tick.
TEST(BlkMqSchedTest, ReRunFiresAtTheNextTickAtHz250) {
    HeldQueue q(0, 250);
    q.insert_at(3 * kMs, 1);
    q.run_to(4 * kMs + 1);
    EXPECT_EQ(q.asked_after(3 * kMs), (std::vector<uint64_t>{4 * kMs + 1}));
}

// At HZ 1000 it is three jiffies: the third tick after the run.
TEST(BlkMqSchedTest, ReRunFiresThreeTicksLaterAtHz1000) {
    HeldQueue q(0, 1000);
    q.insert_at(kMs / 2, 1);
    q.run_to(4 * kMs);
    EXPECT_EQ(q.asked_after(kMs / 2), (std::vector<uint64_t>{3 * kMs + 1}));
}

// A pending re-run is left where it is by later runs that keep work.
TEST(BlkMqSchedTest, PendingReRunIsNotPushedOn) {
    HeldQueue q(0, 1000);
    q.insert_at(kMs / 2, 1);
    q.insert_at(2 * kMs, 1);
    q.run_to(4 * kMs);
    EXPECT_EQ(q.asked_after(2 * kMs), (std::vector<uint64_t>{3 * kMs + 1}));
}

// A run after which the scheduler holds nothing arms no re-run.
TEST(BlkMqSchedTest, RunThatEmptiedTheSchedulerArmsNoReRun) {
    HeldQueue q(1);
    q.insert_at(kMs, 1);
    q.run_to(20 * kMs);
    EXPECT_EQ(q.s->asked, (std::vector<uint64_t>{kMs}));
}

}  // namespace
}  // namespace mdsplit
