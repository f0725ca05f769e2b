// ResponseOrder (stack/response_order.h): a loop that runs late does not
// fire a timer due after a completion it delivered to a job before the job
// answers, as the virtual clock would not. Late passes are made by moving a
// VirtualClock past several deadlines before the loop runs.
#include "stack/response_order.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"

namespace mdsplit {
namespace {

constexpr uint64_t kThink = 150;
int job;  // the job's key

// A completion at its timer's time: the job now owes an answer.
struct Fixture {
    VirtualClock clock;
    EventLoop loop{clock};
    ResponseOrder order{loop, ResponseOrderOptions{1000}};
    uint64_t think = 0;
    std::vector<uint64_t> fired;  // tags of the other timers, in order
};

void complete_to_job(void* arg, uint64_t) {
    auto* f = static_cast<Fixture*>(arg);
    f->order.owe(&job, f->think);
}

void complete_deferred(void* arg, uint64_t) {
    auto* f = static_cast<Fixture*>(arg);
    f->loop.defer(&complete_to_job, f);
}

void record(void* arg, uint64_t tag) { static_cast<Fixture*>(arg)->fired.push_back(tag); }

TEST(ResponseOrderTest, LatePassHoldsATimerDueAfterTheCompletionUntilTheJobAnswers) {
    Fixture f;
    f.loop.schedule_at(100, &complete_to_job, &f);
    f.loop.schedule_at(200, &record, &f, 1);
    f.clock.advance_to(300);  // the loop runs late: both are overdue
    f.loop.run_ready();
    EXPECT_TRUE(f.fired.empty());
    f.order.answered(&job);
    f.loop.run_ready();
    EXPECT_EQ(f.fired, std::vector<uint64_t>{1});
}

TEST(ResponseOrderTest, ATimerDueWithinTheJobsThinkTimeFiresInTheSamePass) {
    Fixture f;
    f.think = kThink;  // the job answers at 250 on the virtual clock
    f.loop.schedule_at(100, &complete_to_job, &f);
    f.loop.schedule_at(200, &record, &f, 1);
    f.loop.schedule_at(260, &record, &f, 2);
    f.clock.advance_to(300);
    f.loop.run_ready();
    EXPECT_EQ(f.fired, std::vector<uint64_t>{1});
}

TEST(ResponseOrderTest, DeferredWorkOwesAtTheTimeOfTheEventThatDeferredIt) {
    Fixture f;
    f.loop.schedule_at(100, &complete_deferred, &f);
    f.loop.schedule_at(200, &record, &f, 1);
    f.clock.advance_to(300);
    f.loop.run_ready();
    EXPECT_TRUE(f.fired.empty());
}

TEST(ResponseOrderTest, AHoldExpiresAfterMaxHoldOfLoopTime) {
    Fixture f;  // max_hold 1000
    f.loop.schedule_at(100, &complete_to_job, &f);
    f.loop.schedule_at(200, &record, &f, 1);
    f.clock.advance_to(300);
    f.loop.run_ready();
    EXPECT_EQ(f.loop.next_deadline(), 1300u);  // the held timer's earliest time
    f.clock.advance_to(1300);
    f.loop.run_ready();
    EXPECT_EQ(f.fired, std::vector<uint64_t>{1});
}

TEST(ResponseOrderTest, AnOnTimeLoopFiresEachTimerAtItsTimeAfterTheAnswer) {
    Fixture f;  // the virtual clock's order: completion, answer, next timer
    f.loop.schedule_at(100, &complete_to_job, &f);
    f.loop.schedule_at(200, &record, &f, 1);
    ASSERT_TRUE(f.loop.wait_for_next());
    f.loop.run_ready();
    f.order.answered(&job);
    ASSERT_TRUE(f.loop.wait_for_next());
    EXPECT_EQ(f.clock.now_ns(), 200u);
    f.loop.run_ready();
    EXPECT_EQ(f.fired, std::vector<uint64_t>{1});
}

}  // namespace
}  // namespace mdsplit
