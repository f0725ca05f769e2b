// Host lag accounting (stack/host_lag.h, docs/sidecar-lag.md): the
// definitions on a hand-driven clock.
#include "stack/host_lag.h"

#include <gtest/gtest.h>

namespace mdsplit {
namespace {

// Percentiles come within 3 % of the sample; the max is exact.
TEST(HostLagTest, HistogramPercentilesWithinThreePercent) {
    LagHistogram h;
    for (uint64_t ns = 1; ns <= 100'000; ns++) h.record(ns * 10);
    EXPECT_NEAR(double(h.percentile(0.5)), 500'000.0, 15'000.0);
    EXPECT_NEAR(double(h.percentile(0.99)), 990'000.0, 30'000.0);
    EXPECT_EQ(h.max(), 1'000'000u);
}

// The factor from a share: k s (1 - t) / ((1 - s) t), a power of two.
TEST(HostLagTest, SuggestedFactorFromTheMeasuredShare) {
    EXPECT_EQ(time_scale_for_share(1, 0.5, 0.025), 64.0);  // 39 -> 64
    EXPECT_EQ(time_scale_for_share(4, 0.01, 0.025), 4.0);  // keeps up: unchanged
    EXPECT_EQ(time_scale_for_share(512, 0.9, 0.025), 1000.0);
}

// QD1: completion lag is hand-over minus modelled completion; the next
// I/O's submission lag is its arrival minus that hand-over minus think time.
TEST(HostLagTest, SubmissionAndCompletionLagOfAQd1Job) {
    VirtualClock clock;
    EventLoop loop(clock);
    HostLag lag(loop, 0);
    TaskContext task;
    task.lag = lag.attach_job("j", 1, 5);
    lag.queued(task, 1);  // at 0
    clock.advance_to(100);
    task.complete(IoCompletion{1, 0, 0});  // done (no member late): model 100
    clock.advance_to(130);
    lag.handed(task);  // completion lag 30
    task.completions.clear();
    clock.advance_to(150);
    lag.queued(task, 2);  // submission lag 150 - 130 - 5 = 15
    clock.advance_to(250);
    task.complete(IoCompletion{2, 0, 0});
    lag.handed(task);
    const LagFigures& d = lag.device();
    EXPECT_EQ(d.requests, 2u);
    EXPECT_EQ(d.completion.max(), 30u);
    EXPECT_EQ(d.submission.max(), 15u);
    EXPECT_EQ(d.lag_ns, 45u);
    EXPECT_EQ(d.late, 2u);  // 30 and 15, each above 5 % of its modelled 100
}

}  // namespace
}  // namespace mdsplit
