// A bfq_queue (struct bfq_queue, block/bfq-iosched.h): the requests of one
// process (a sync queue per task) or of all the async I/O of one group and
// priority, scheduled as a leaf entity of its group.
#pragma once

#include <cstdint>
#include <limits>

#include "base/intrusive_list.h"
#include "base/units.h"
#include "core/block/bfq_entity.h"
#include "core/block/bfq_stats.h"
#include "core/block/request.h"

namespace mdsplit::bfq {

// A time that has not happened yet: "minus infinity" for the timestamps the
// kernel initialises from jiffies arithmetic (e.g. decrease_time_jif).
inline constexpr int64_t kNever = std::numeric_limits<int64_t>::min() / 4;

// struct bfq_ttime: think-time statistics (bfq_update_io_thinktime).
struct BfqTtime {
    uint64_t last_end_request = 0;  // completion time of the last request
    uint64_t ttime_total = 0;
    uint32_t ttime_samples = 0;
    uint64_t ttime_mean = 0;
};

struct BfqGroup;

// A queued request's links in its queue's sort list and FIFO; the
// scheduler's per-request data (rq->sched_data) embeds one, so queueing and
// dispatching a request allocates nothing.
struct BfqRqNode {
    Request* rq = nullptr;
    ListHook<BfqRqNode> sort_link;
    ListHook<BfqRqNode> fifo_link;
};

// Order of the sort list (elv_rb_add()): ascending rq->sector; with
// insert_sorted(), equal sectors stay in insertion order.
struct BfqSectorOrder {
    bool operator()(const BfqRqNode* a, const BfqRqNode* b) const {
        return a->rq->sector < b->rq->sector;
    }
};

// The queue's requests by position (sort_list), in BfqSectorOrder. A queue
// holds at most its process's queue depth of requests, and a new request is
// placed from the tail.
using BfqSortList = IntrusiveList<BfqRqNode, &BfqRqNode::sort_link>;
// The queue's requests in arrival order (bfqq->fifo).
using BfqFifo = IntrusiveList<BfqRqNode, &BfqRqNode::fifo_link>;

struct BfqQueue {
    BfqEntity entity;
    BfqGroup* group = nullptr;  // bfqq_group()
    uint32_t pid = 0;
    bool sync = true;
    // I/O priority: class 1 RT, 2 BE, 3 IDLE; new_* apply at the next activation.
    unsigned ioprio_class = 2, new_ioprio_class = 2;
    unsigned ioprio = 4, new_ioprio = 4;

    // Queued requests: sort_list (by position, as elv_rb_add) and the FIFO
    // with expiry times (bfq_fifo_expire).
    BfqSortList sort_list;
    BfqFifo fifo;
    Request* next_rq = nullptr;
    uint32_t queued[2] = {0, 0};  // [async, sync]
    uint32_t dispatched = 0;      // in the driver

    uint64_t max_budget = 0;         // sectors
    uint64_t budget_timeout_ns = 0;  // end of the current slot (also: when it last emptied)

    // BFQQF_* flags.
    bool busy = false;
    bool wait_request = false;          // idling: the device is plugged for this queue
    bool non_blocking_wait_rq = false;  // expired while waiting: may recover the service hole
    bool fifo_expire = false;           // FIFO checked once this slot
    bool has_short_ttime = false;
    bool io_bound = false;
    bool just_created = true;

    BfqTtime ttime;
    uint32_t seek_history = 1;  // one bit per request, 1 = seeky
    sector_t last_request_pos = 0;
    uint32_t requests_within_timer = 0;
    uint64_t service_from_backlogged = 0;

    // Injection (bfq_update_inject_limit).
    uint32_t inject_limit = 1;
    uint64_t last_serv_time_ns = 0;
    int64_t decrease_time_jif = kNever;  // jiffies (bfqq->decrease_time_jif)

    // Weight-raising coefficient (bfqq->wr_coeff): always 1, weight raising
    // is not modelled; kept so that the idling and injection conditions read
    // as the kernel's.
    uint32_t wr_coeff = 1;

    // Weight under which this queue is counted in queue_weights_tree (0: not counted).
    uint32_t weight_counter = 0;

    // bfqd->active_list membership (queues on an active tree): intrusive links.
    bool on_active_list = false;
    ListHook<BfqQueue> active_link;

    // Waker detection (bfq_check_waker(), bfq_waker.h): the queue whose
    // completions this queue's new I/O follows (waker_bfqq), the candidate
    // being confirmed, and the queues this one wakes (woken_list; woken_in
    // is the waker whose woken_list holds this queue, null when in none).
    BfqQueue* waker_bfqq = nullptr;
    BfqQueue* tentative_waker_bfqq = nullptr;
    uint32_t num_waker_detections = 0;
    uint64_t waker_detection_started_ns = 0;
    ListHook<BfqQueue> woken_link;
    IntrusiveList<BfqQueue, &BfqQueue::woken_link> woken_list;
    BfqQueue* woken_in = nullptr;

    uint64_t idle_start_ns = 0;  // start of the current idle period (wait_request)
    BfqStats stats;
};

// BFQQ_SEEKY(): more than 19 of the last 32 requests were seeky.
inline bool bfqq_seeky(const BfqQueue& q) { return __builtin_popcount(q.seek_history) > 19; }

}  // namespace mdsplit::bfq
