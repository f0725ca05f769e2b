// Peak-rate estimation and max_budget autotuning (bfq_peak_rate.h), after
// block/bfq-iosched.c v5.18-rc1, function by function.
#include "core/block/bfq_peak_rate.h"

#include <algorithm>

#include "core/block/bfq_data.h"

namespace mdsplit::bfq {

namespace {

constexpr uint64_t kNsPerUs = 1000;
constexpr uint64_t kNsPerMs = 1'000'000;
constexpr uint64_t kMinTtNs = 2 * kNsPerMs;                // BFQ_MIN_TT
constexpr uint32_t kRateMinSamples = 32;                   // BFQ_RATE_MIN_SAMPLES
constexpr uint64_t kRateMinIntervalNs = 300 * kNsPerMs;    // BFQ_RATE_MIN_INTERVAL
constexpr uint64_t kRateRefIntervalNs = 1'000'000'000;     // BFQ_RATE_REF_INTERVAL
constexpr uint64_t kIdleResetNs = 100 * kNsPerMs;          // "device idle for very long"
constexpr uint64_t kMaxRate = uint64_t(20) << kRateShift;  // 20 sectors/us

}  // namespace

// bfq_init_queue(): peak_rate = ref_rate[nonrot] * 2 / 3; bfq_max_budget =
// bfq_default_max_budget; bfq_max_budget_store() for a user value.
void init_peak_rate(BfqData& bfqd, uint64_t user_max_budget) {
    bfqd.rate = PeakRate{};
    bfqd.rate.peak_rate = kRefRate[bfqd.nonrot ? 1 : 0] * 2 / 3;
    bfqd.user_max_budget = user_max_budget;
    bfqd.max_budget = user_max_budget ? user_max_budget : kDefaultMaxBudget;
}

// bfq_calc_max_budget(): peak_rate * USEC_PER_MSEC * timeout_ms >> BFQ_RATE_SHIFT.
uint64_t calc_max_budget(const BfqData& bfqd) {
    uint64_t timeout_ms = bfqd.timeout_ns / kNsPerMs;
    return (uint64_t(bfqd.rate.peak_rate) * 1000 * timeout_ms) >> kRateShift;
}

// bfq_max_budget()
uint64_t max_budget(const BfqData& bfqd) {
    return bfqd.budgets_assigned < kStatsMinBudgets ? kDefaultMaxBudget : bfqd.max_budget;
}

// bfq_min_budget()
uint64_t min_budget(const BfqData& bfqd) { return max_budget(bfqd) / 32; }

// bfq_reset_rate_computation()
void reset_rate_computation(BfqData& bfqd, const Request* rq) {
    PeakRate& r = bfqd.rate;
    if (!rq) {
        r.peak_rate_samples = 0;  // full re-init on the next dispatch
        return;
    }
    r.last_dispatch_ns = r.first_dispatch_ns = bfqd.now();
    r.peak_rate_samples = 1;
    r.sequential_samples = 0;
    r.tot_sectors_dispatched = r.last_rq_max_size = rq->nr_sectors;
}

namespace {

// update_thr_responsiveness_params(): only the max_budget part (the
// weight-raising duration it also derives in some versions is not
// modelled: no weight raising).
void update_thr_responsiveness_params(BfqData& bfqd) {
    if (bfqd.user_max_budget == 0) bfqd.max_budget = calc_max_budget(bfqd);
}

// The rate of the closing interval, or 0 when it is too short to measure.
uint64_t interval_rate(BfqData& bfqd) {
    PeakRate& r = bfqd.rate;
    // A completion after the last dispatch extends the interval to it.
    if (bfqd.last_completion_ns > r.first_dispatch_ns)
        r.delta_from_first_ns =
            std::max(r.delta_from_first_ns, bfqd.last_completion_ns - r.first_dispatch_ns);
    uint64_t us = r.delta_from_first_ns / kNsPerUs;
    return us ? (r.tot_sectors_dispatched << kRateShift) / us : kMaxRate + 1;
}

// The low-pass filter: weight 0..8 from the sequential share and the
// interval's length, divisor 10 - weight.
void fold_rate(BfqData& bfqd, uint64_t rate) {
    PeakRate& r = bfqd.rate;
    uint64_t weight = 9 * uint64_t(r.sequential_samples) / r.peak_rate_samples;
    weight = std::min<uint64_t>(8, weight * r.delta_from_first_ns / kRateRefIntervalNs);
    uint64_t divisor = 10 - weight;
    uint64_t peak = uint64_t(r.peak_rate) * (divisor - 1) / divisor + rate / divisor;
    r.peak_rate = uint32_t(std::max<uint64_t>(1, peak));
    r.updates++;
}

}  // namespace

// bfq_update_rate_reset()
void update_rate_reset(BfqData& bfqd, const Request* rq) {
    PeakRate& r = bfqd.rate;
    if (r.peak_rate_samples >= kRateMinSamples && r.delta_from_first_ns >= kRateMinIntervalNs) {
        uint64_t rate = interval_rate(bfqd);
        // Not updated: mostly random and no faster than the estimate, or
        // unreasonably fast.
        bool random_and_slower =
            r.sequential_samples < (3 * r.peak_rate_samples) >> 2 && rate <= r.peak_rate;
        if (!random_and_slower && rate <= kMaxRate) {
            fold_rate(bfqd, rate);
            update_thr_responsiveness_params(bfqd);
        }
    }
    reset_rate_computation(bfqd, rq);
}

// bfq_update_peak_rate()
void update_peak_rate(BfqData& bfqd, const Request* rq) {
    PeakRate& r = bfqd.rate;
    uint64_t now = bfqd.now();
    if (r.peak_rate_samples == 0) {  // first dispatch
        reset_rate_computation(bfqd, rq);
    } else if (now - r.last_dispatch_ns > kIdleResetNs && bfqd.rq_in_driver == 0) {
        // Device idle for very long: close the interval at the last dispatch.
        update_rate_reset(bfqd, rq);
    } else {
        r.peak_rate_samples++;
        if ((bfqd.rq_in_driver > 0 || now - bfqd.last_completion_ns < kMinTtNs) &&
            !bfqd.rq_seeky(bfqd.last_position, rq))
            r.sequential_samples++;
        r.tot_sectors_dispatched += rq->nr_sectors;
        // Reset the max observed request size every 32 dispatches.
        r.last_rq_max_size = r.peak_rate_samples % 32
                                 ? std::max<uint32_t>(rq->nr_sectors, r.last_rq_max_size)
                                 : rq->nr_sectors;
        r.delta_from_first_ns = now - r.first_dispatch_ns;
        if (r.delta_from_first_ns >= kRateRefIntervalNs) update_rate_reset(bfqd, rq);
    }
    bfqd.last_position = rq->end_sector();
    r.last_dispatch_ns = now;
}

// bfq_completed_request(): delta_us > BFQ_MIN_TT in us and
// (last_rq_max_size << BFQ_RATE_SHIFT) / delta_us < 1 << (BFQ_RATE_SHIFT - 10).
void peak_rate_completion(BfqData& bfqd) {
    uint64_t delta_us = (bfqd.now() - bfqd.last_completion_ns) / kNsPerUs;
    if (delta_us > kMinTtNs / kNsPerUs &&
        (uint64_t(bfqd.rate.last_rq_max_size) << kRateShift) / delta_us <
            (uint64_t(1) << (kRateShift - 10)))
        update_rate_reset(bfqd, nullptr);
}

}  // namespace mdsplit::bfq
