// Peak-rate estimation and max_budget autotuning (bfq_peak_rate.h, after
// block/bfq-iosched.c v5.18-rc1 bfq_update_peak_rate() and its helpers).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "base/clock.h"
#include "bfq_test_sched.h"
#include "core/block/bfq_data.h"
#include "core/block/bfq_peak_rate.h"

namespace mdsplit::bfq {
namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1'000'000;

// A BfqData on a virtual clock, with requests dispatched and completed one
// at a time (QD1) or back to back (the drive busy).
struct Device {
    explicit Device(uint64_t user_max_budget = 0, bool nonrot = true) {
        d.clock = &clock;
        d.nonrot = nonrot;
        d.timeout_ns = 125 * kMs;
        init_peak_rate(d, user_max_budget);
    }
    Request* rq(sector_t sector, uint32_t sectors = 8) {
        rqs.push_back(std::make_unique<Request>());
        rqs.back()->sector = sector;
        rqs.back()->nr_sectors = sectors;
        return rqs.back().get();
    }
    void at(uint64_t ns) { clock.advance_to(ns); }
    // One request dispatched at `ns` into a busy drive (rq_in_driver > 0).
    void dispatch_busy(uint64_t ns, sector_t sector, uint32_t sectors = 8) {
        at(ns);
        d.rq_in_driver = 1;
        update_peak_rate(d, rq(sector, sectors));
    }
    // A completion at `ns` (bfq_completed_request()).
    void complete(uint64_t ns) {
        at(ns);
        peak_rate_completion(d);
        d.last_completion_ns = ns;
    }
    // Sequential 8-sector requests every `gap_ns` from `from_ns` for `span_ns`.
    void sequential(uint64_t from_ns, uint64_t span_ns, uint64_t gap_ns) {
        sector_t s = d.last_position;
        for (uint64_t t = from_ns; t <= from_ns + span_ns; t += gap_ns, s += 8) {
            dispatch_busy(t, s);
            complete(t + gap_ns / 2);
        }
    }

    VirtualClock clock;
    BfqData d;
    std::vector<std::unique_ptr<Request>> rqs;
};

TEST(BfqPeakRateTest, EstimateStartsAtTwoThirdsOfTheReferenceRate) {
    EXPECT_EQ(Device(0, true).d.rate.peak_rate, 33000u * 2 / 3);
    EXPECT_EQ(Device(0, false).d.rate.peak_rate, 14000u * 2 / 3);
    EXPECT_EQ(Device().d.max_budget, kDefaultMaxBudget);
}

TEST(BfqPeakRateTest, CalcMaxBudgetIsTheSectorsOfOneTimeoutAtThePeakRate) {
    Device dev;
    dev.d.rate.peak_rate = 1u << kRateShift;          // 1 sector/us
    EXPECT_EQ(calc_max_budget(dev.d), 125u * 1000u);  // 125 ms
}

TEST(BfqPeakRateTest, SequentialIntervalOfOneSecondRaisesTheEstimateAndMaxBudget) {
    Device dev;
    dev.sequential(0, 1010 * kMs, 10 * kUs);  // 8 sectors / 10 us = 0.8 sector/us
    EXPECT_EQ(dev.d.rate.updates, 1u);
    EXPECT_GT(dev.d.rate.peak_rate, 33000u * 2 / 3);
    EXPECT_EQ(dev.d.max_budget, calc_max_budget(dev.d));
    EXPECT_GT(dev.d.max_budget, kDefaultMaxBudget);
}

TEST(BfqPeakRateTest, UserSetMaxBudgetIsNeverRetuned) {
    Device dev(8192);
    dev.sequential(0, 1010 * kMs, 10 * kUs);
    EXPECT_EQ(dev.d.rate.updates, 1u);  // the estimate still moves
    EXPECT_EQ(dev.d.max_budget, 8192u);
}

TEST(BfqPeakRateTest, RandomIntervalSlowerThanTheEstimateLeavesIt) {
    Device dev;
    sector_t s = 0;
    // Seeky 8-sector writes at QD1 every 100 us: 0.08 sector/us, below 0.34.
    for (uint64_t t = 0; t <= 1010 * kMs; t += 100 * kUs, s += 100000) {
        dev.at(t);
        dev.d.rq_in_driver = 0;
        update_peak_rate(dev.d, dev.rq(s));
        dev.complete(t + 20 * kUs);
    }
    EXPECT_EQ(dev.d.rate.updates, 0u);
    EXPECT_EQ(dev.d.rate.peak_rate, 33000u * 2 / 3);
    EXPECT_EQ(dev.d.max_budget, kDefaultMaxBudget);
}

TEST(BfqPeakRateTest, RandomIntervalFasterThanTheEstimateEntersWithTheSmallestWeight) {
    Device dev;
    sector_t s = 0;
    for (uint64_t t = 0; t <= 1010 * kMs; t += 10 * kUs, s += 100000) dev.dispatch_busy(t, s);
    ASSERT_EQ(dev.d.rate.updates, 1u);
    // No sequential sample: weight 0, divisor 10; rate 0.8 sector/us.
    uint64_t rate = (uint64_t(8) * 100001 << kRateShift) / 1'000'000;  // closed at 1 s
    EXPECT_EQ(dev.d.rate.peak_rate, 22000u * 9 / 10 + rate / 10);
}

TEST(BfqPeakRateTest, IntervalCutShortByA100MsIdleIsNotFolded) {
    Device dev;
    dev.sequential(0, 200 * kMs, 10 * kUs);  // under BFQ_RATE_MIN_INTERVAL
    dev.d.rq_in_driver = 0;
    dev.at(400 * kMs);
    update_peak_rate(dev.d, dev.rq(dev.d.last_position));
    EXPECT_EQ(dev.d.rate.updates, 0u);
    EXPECT_EQ(dev.d.rate.peak_rate_samples, 1u);  // a new interval from this dispatch
    EXPECT_EQ(dev.d.rate.first_dispatch_ns, 400 * kMs);
}

TEST(BfqPeakRateTest, VeryLateCompletionRestartsTheInterval) {
    Device dev;
    dev.sequential(0, 10 * kMs, 10 * kUs);
    ASSERT_GT(dev.d.rate.peak_rate_samples, 1u);
    // 8 sectors in 20 ms: under 1/1024 sector/us.
    dev.complete(dev.d.last_completion_ns + 20 * kMs);
    EXPECT_EQ(dev.d.rate.peak_rate_samples, 0u);
}

TEST(BfqPeakRateTest, MaxBudgetIsTheDefaultUntil194BudgetsWereAssigned) {
    Device dev(8192);
    dev.d.budgets_assigned = kStatsMinBudgets - 1;
    EXPECT_EQ(max_budget(dev.d), kDefaultMaxBudget);
    EXPECT_EQ(min_budget(dev.d), kDefaultMaxBudget / 32);
    dev.d.budgets_assigned = kStatsMinBudgets;
    EXPECT_EQ(max_budget(dev.d), 8192u);
    EXPECT_EQ(min_budget(dev.d), 8192u / 32);
}

// One sequential reader at QD1 through a scheduler, 8 sectors per 10 us,
// for 1.1 s: one peak-rate interval closes.
void run_sequential_reader(bfq_test::Sched& s) {
    TaskContext& a = s.task(1);
    sector_t sector = 0;
    for (uint64_t t = 0; t < 1100 * kMs; t += 10 * kUs, sector += 8) {
        s.insert(a, sector);
        Request* rq = s.sched->dispatch();
        ASSERT_NE(rq, nullptr);
        s.advance(10 * kUs);
        s.sched->completed(rq);
    }
}

TEST(BfqPeakRateTest, SchedulerAutotunesWhenMaxBudgetIsNotSet) {
    bfq_test::Sched s(GroupCounting::Fixed, 8 * kMs, 0);
    run_sequential_reader(s);
    EXPECT_EQ(s.sched->data().rate.updates, 1u);
    EXPECT_EQ(s.sched->data().max_budget, calc_max_budget(s.sched->data()));
}

TEST(BfqPeakRateTest, SchedulerKeepsAUserSetMaxBudget) {
    bfq_test::Sched s(GroupCounting::Fixed, 8 * kMs, 4096);
    run_sequential_reader(s);
    EXPECT_EQ(s.sched->data().rate.updates, 1u);
    EXPECT_EQ(s.sched->data().max_budget, 4096u);
}

}  // namespace
}  // namespace mdsplit::bfq
