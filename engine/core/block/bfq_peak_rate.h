// Peak-rate estimation and max_budget autotuning, block/bfq-iosched.c as in
// v5.18-rc1 (seed 004's base): bfq_update_peak_rate(),
// bfq_reset_rate_computation(), bfq_update_rate_reset(),
// update_thr_responsiveness_params(), bfq_calc_max_budget(),
// bfq_max_budget(), bfq_min_budget(), and the late-completion reset of
// bfq_completed_request(). The same text is in Debian's linux-source-6.1
// (read there) and in the searchable index's torvalds/linux copy of
// bfq-iosched.c (its pre-6.2 group-counting comments, i.e. a 5.x tree).
//
// What it does. On every dispatch (bfq_dispatch_remove()) bfq adds the
// request to an observation interval: samples, sectors, how many were
// "sequential" (the drive busy or a completion less than BFQ_MIN_TT ago,
// and not BFQ_RQ_SEEKY against the last dispatched position). Once the
// interval lasts BFQ_RATE_REF_INTERVAL (1 s), or the device sat idle for
// 100 ms, or a completion came so late that the rate it implies is under
// 1/1024 sector/us, the interval closes: with at least 32 samples over at
// least 300 ms, its rate (sectors/us << 16) enters the estimate through a
// low-pass filter whose weight grows with the sequential share and the
// interval's length (divisor 10 .. 2), unless the interval was mostly
// random (< 3/4 sequential) and slower than the estimate, or implausibly
// fast (> 20 sectors/us). The estimate starts at 2/3 of the reference
// rate of the device class (ref_rate[]: 14000 rotational, 33000 flash).
//
// Autotuning. While the user has not set max_budget (sysfs max_budget 0,
// bfq_user_max_budget == 0, the kernel's default), every update of the
// estimate sets bfq_max_budget to what the device moves in one budget
// timeout at the estimated rate (bfq_calc_max_budget()). bfq_max_budget()
// and bfq_min_budget() answer the default (16384, /32) until 194 budgets
// have been assigned (bfq_stats_min_budgets), and __bfq_bfqq_recalc_budget()
// then caps a queue's max_budget at the tuned value. A user-set value is
// never touched.
//
// Times are the scheduler's device time (BfqData::now()). The budget
// timeout enters bfq_calc_max_budget() in ms as the model keeps it
// (timeout_sync, 125 ms by default; the kernel's HZ/8 is 31 jiffies =
// 124 ms at HZ 250: 0.8 % less), as bfqq_charge_time() does.
// in_serv_last_pos (only read by queue merging, not modelled) is not kept.
#pragma once

#include <cstdint>

#include "core/block/request.h"

namespace mdsplit::bfq {

struct BfqData;

// BFQ_RATE_SHIFT: rates are sectors/us << 16.
inline constexpr uint32_t kRateShift = 16;
// ref_rate[]: reference peak rates, rotational and non-rotational.
inline constexpr uint32_t kRefRate[2] = {14000, 33000};
// bfq_default_max_budget, sectors.
inline constexpr uint64_t kDefaultMaxBudget = 16 * 1024;
// bfq_stats_min_budgets: assigned budgets before the tuned values are used.
inline constexpr uint64_t kStatsMinBudgets = 194;

// The estimator's fields of struct bfq_data.
struct PeakRate {
    uint32_t peak_rate = 0;  // sectors/us << kRateShift
    uint32_t peak_rate_samples = 0;
    uint32_t sequential_samples = 0;
    uint64_t tot_sectors_dispatched = 0;
    uint32_t last_rq_max_size = 0;
    uint64_t first_dispatch_ns = 0;
    uint64_t last_dispatch_ns = 0;
    uint64_t delta_from_first_ns = 0;
    uint64_t updates = 0;  // statistics: estimate updates (not a kernel field)
};

/// bfq_init_queue(): the estimate starts at 2/3 of the reference rate of
/// the device class, bfq_max_budget at the default. @user_max_budget is the
/// sysfs max_budget (0: autotune).
void init_peak_rate(BfqData& bfqd, uint64_t user_max_budget);

/// bfq_calc_max_budget(): sectors the device moves in one budget timeout
/// at the estimated peak rate.
uint64_t calc_max_budget(const BfqData& bfqd);

/// bfq_max_budget(): the default until kStatsMinBudgets budgets were
/// assigned, then bfqd->bfq_max_budget.
uint64_t max_budget(const BfqData& bfqd);

/// bfq_min_budget(): 1/32 of bfq_max_budget()'s value.
uint64_t min_budget(const BfqData& bfqd);

/// bfq_reset_rate_computation(): open a new observation interval at the
/// dispatch of @rq, or (null) ask for one at the next dispatch.
void reset_rate_computation(BfqData& bfqd, const Request* rq);

/// bfq_update_rate_reset(): close the interval, fold its rate into the
/// estimate when it is long and trustworthy enough, retune max_budget
/// (update_thr_responsiveness_params()), and reset.
void update_rate_reset(BfqData& bfqd, const Request* rq);

/// bfq_update_peak_rate(): account the dispatch of @rq (called before
/// rq_in_driver counts it, as from bfq_dispatch_remove()); also records
/// bfqd->last_position.
void update_peak_rate(BfqData& bfqd, const Request* rq);

/// bfq_completed_request()'s check, before last_completion is updated: a
/// completion so late that it implies under 1/1024 sector/us ends the
/// interval.
void peak_rate_completion(BfqData& bfqd);

}  // namespace mdsplit::bfq
