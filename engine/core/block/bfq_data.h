// Device-wide BFQ state (struct bfq_data, block/bfq-iosched.h) shared by the
// B-WF2Q+ engine (bfq_wf2q.*) and the scheduler (bfq_scheduler.*), with the
// bookkeeping behind the symmetry test bfq_asymmetric_scenario():
// the queue-weights counters and the number of groups with pending requests,
// counted in one of two ways:
//
// legacy (v4.20 .. 6.1): a non-root group is counted from the activation of
//   its entity (__bfq_activate_entity) until the first of its leaf queues
//   has all its requests completed while the group is no longer active
//   (bfq_weights_tree_remove's walk up the hierarchy); the root group is
//   never counted; asymmetric when the count is > 0.
// fixed (6.2, "block, bfq: do not idle if only one group is activated",
//   Yu Kuai): a group, the root included, is counted while at least one of
//   its queues is busy or has requests in flight
//   (bfq_add/del_bfqq_in_groups_with_pending_reqs); asymmetric when the
//   count is > 1.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/intrusive_list.h"
#include "config/stack_config.h"
#include "core/block/bfq_group.h"
#include "core/block/bfq_peak_rate.h"
#include "core/block/bfq_queue.h"
#include "core/block/request.h"

namespace mdsplit::bfq {

inline constexpr sector_t kSeekThr = 8 * 100;       // BFQQ_SEEK_THR
inline constexpr uint32_t kSectThrNonrot = 2 * 32;  // BFQQ_SECT_THR_NONROT

struct BfqData {
    const Clock* clock = nullptr;
    GroupCounting group_counting = GroupCounting::Fixed;
    uint64_t slice_idle_ns = 8'000'000;  // bfq_slice_idle
    uint64_t timeout_ns = 125'000'000;   // bfq_timeout (timeout_sync)
    // bfqd->bfq_max_budget, sectors: the user's value, or autotuned from
    // the peak rate while user_max_budget is 0 (bfq_peak_rate.h).
    uint64_t max_budget = kDefaultMaxBudget;
    uint64_t user_max_budget = 0;  // bfqd->bfq_user_max_budget (sysfs max_budget)
    PeakRate rate;                 // the peak-rate estimator's fields
    bool strict_guarantees = false;
    bool nonrot = true;  // blk_queue_nonrot()

    BfqGroup* root_group = nullptr;
    BfqQueue* in_service_queue = nullptr;
    uint32_t busy_queues[kIoprioClasses] = {0, 0, 0};
    uint32_t wr_busy_queues = 0;  // always 0: no weight raising (low_latency off)
    // queue_weights_tree: (weight, number of counted queues with that
    // weight), ascending by weight, no zero counts. A sorted vector: it
    // holds one entry per distinct weight in use, and a queue enters and
    // leaves it with nearly every request of a psync-like job.
    std::vector<std::pair<uint32_t, uint32_t>> queue_weights;
    uint32_t num_groups_with_pending_reqs = 0;

    uint32_t queued = 0;        // requests in the scheduler
    uint32_t rq_in_driver = 0;  // dispatched, not completed
    uint32_t max_rq_in_driver = 0;
    int hw_tag = -1;  // device queueing detected (bfq_update_hw_tag)
    uint32_t hw_tag_samples = 0;
    uint64_t budgets_assigned = 0;

    // Injection state (bfq_update_inject_limit).
    uint64_t last_empty_occupied_ns = 0;
    bool wait_dispatch = false;
    Request* waited_rq = nullptr;
    bool rqs_injected = false;

    uint64_t last_completion_ns = 0;
    // The queue of the last completed request (bfq_completed_request();
    // bfq_check_waker()'s candidate waker).
    BfqQueue* last_completed_rq_bfqq = nullptr;
    sector_t last_position = 0;
    uint64_t last_budget_start_ns = 0;
    uint64_t last_idling_start_ns = 0;

    // Queues on an active tree, most recently activated first
    // (bfqd->active_list): intrusive, through BfqQueue::active_link.
    IntrusiveList<BfqQueue, &BfqQueue::active_link> active_list;

    // Statistics of the symmetry test (counted where idling is decided,
    // idling_needed_for_service_guarantees()).
    uint64_t asymmetric_checks = 0;
    uint64_t asymmetric_true = 0;
    uint32_t max_groups_with_pending_reqs = 0;

    // The scheduler's notion of now: now_fn(now_ctx) when set (the event
    // loop's time of the current turn, what the rest of the scheduler uses),
    // else the clock.
    uint64_t (*now_fn)(const void* ctx) = nullptr;
    const void* now_ctx = nullptr;
    uint64_t now() const { return now_fn ? now_fn(now_ctx) : clock->now_ns(); }
    uint32_t tot_busy_queues() const { return busy_queues[0] + busy_queues[1] + busy_queues[2]; }
    // BFQ_RQ_SEEKY(): rq lies more than BFQQ_SEEK_THR sectors from
    // last_pos (get_sdist(): 0 when last_pos is 0) and, on flash, is small.
    bool rq_seeky(sector_t last_pos, const Request* rq) const {
        sector_t sdist =
            last_pos ? (rq->sector > last_pos ? rq->sector - last_pos : last_pos - rq->sector) : 0;
        return sdist > kSeekThr && (!nonrot || rq->nr_sectors < kSectThrNonrot);
    }
    bool legacy_counting() const { return group_counting == GroupCounting::Legacy; }

    // bfq_weights_tree_add() / bfq_weights_tree_remove(). In the legacy
    // variant the removal also performs the delayed decrement of
    // num_groups_with_pending_reqs for the queue's inactive ancestors.
    void weights_tree_add(BfqQueue* bfqq);
    void weights_tree_remove(BfqQueue* bfqq);
    // __bfq_weights_tree_remove(): the counter only.
    void weights_counter_remove(BfqQueue* bfqq);
    // Fixed variant: bfq_add/del_bfqq_in_groups_with_pending_reqs().
    void add_bfqq_in_groups_with_pending_reqs(BfqQueue* bfqq);
    void del_bfqq_in_groups_with_pending_reqs(BfqQueue* bfqq);
    // Legacy variant: a group entity is activated (__bfq_activate_entity).
    void group_entity_activated(BfqEntity* entity);

    // bfq_asymmetric_scenario(): varied queue weights (unless bfqq has the
    // smallest weight) || several classes busy || the groups test.
    bool asymmetric_scenario(const BfqQueue* bfqq) const;
    // Its three terms.
    bool varied_queue_weights(const BfqQueue* bfqq) const;
    bool multiple_classes_busy() const;
    bool groups_asymmetric() const;  // the groups test, per variant
};

// The terms of bfq_better_to_idle() for one queue, as evaluated now
// (introspection for tests and statistics): idling_boosts_thr_without_issues
// and the three terms of idling_needed_for_service_guarantees, the
// asymmetric one split into bfq_asymmetric_scenario's three.
struct IdlingTerms {
    bool boosts_throughput = false;
    bool weight_raised = false;  // wr_coeff > 1 && ...: never (no weight raising)
    bool varied_queue_weights = false;
    bool multiple_classes_busy = false;
    bool groups = false;
    bool asymmetric = false;
    bool lone_busy_queue = false;  // bfq_tot_busy_queues(bfqd) == 1
    bool needed_for_guarantees() const { return weight_raised || asymmetric || lone_busy_queue; }
};

}  // namespace mdsplit::bfq
