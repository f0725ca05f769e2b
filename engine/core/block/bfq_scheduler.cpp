// BFQ's request-level logic, following block/bfq-iosched.c (function names
// in the comments are the kernel's). Versions: the body is Linux 5.x/6.x
// (busy_queues per class, think time sampled only for empty queues); the
// group counting is selectable (legacy: before 6.2, fixed: 6.2's
// "block, bfq: do not idle if only one group is activated").
#include "core/block/bfq_scheduler.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <limits>

#include "base/jiffies.h"
#include "base/json_writer.h"
#include "core/block/bfq_waker.h"
#include "core/block/bfq_wf2q.h"

namespace mdsplit {

using bfq::BfqGroup;
using bfq::BfqQueue;
using bfq::Expiration;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kFifoExpireNs[2] = {250 * kMs, 125 * kMs};  // bfq_fifo_expire: [async, sync]
constexpr uint64_t kBackMaxSectors = 16 * 1024 * 2;            // bfq_back_max (16 MiB) in sectors
constexpr uint64_t kBackPenalty = 2;                           // bfq_back_penalty
constexpr uint64_t kMinTtNs = 2 * kMs;                         // BFQ_MIN_TT
constexpr uint32_t kHwQueueThreshold = 3;                      // BFQ_HW_QUEUE_THRESHOLD
constexpr uint32_t kHwQueueSamples = 32;                       // BFQ_HW_QUEUE_SAMPLES
constexpr uint32_t kRequestsWithinTimer = 120;                 // bfq_requests_within_timer
constexpr unsigned kAsyncChargeFactor = 3;                     // bfq_async_charge_factor

// jiffies at a time in ns (CONFIG_HZ: base/jiffies.h).
uint64_t jiffies_at(uint64_t ns) { return jiffies::at(ns, jiffies::kConfigHz); }

// time_is_before_eq_jiffies(since_jif + msecs_to_jiffies(ms)) at now_ns:
// the kernel keeps the inject limit's sampling and reset windows in jiffies
// (bfq_add_request(), bfq_update_has_short_ttime()), so a 10 ms window
// is 3 jiffies at HZ 250 and opens at a tick.
bool jiffies_elapsed(int64_t since_jif, uint64_t ms, uint64_t now_ns) {
    return int64_t(jiffies_at(now_ns)) >=
           since_jif + int64_t(jiffies::from_msecs(ms, jiffies::kConfigHz));
}

bool is_sync(Op op, const Bio* first) {
    return op == Op::Read || (first && (first->flags & kBioSync));
}

// bfq_choose_req()'s cost of moving the head from last to s: a forward seek
// at its length, a short backward one (bfq_back_max) at bfq_back_penalty
// times its length; a longer backward seek wraps (no cost, wrap set).
struct SeekDistance {
    sector_t distance = 0;
    bool wrap = false;
};

SeekDistance seek_distance(sector_t s, sector_t last) {
    if (s >= last) return {s - last, false};
    if (s + kBackMaxSectors >= last) return {(last - s) * kBackPenalty, false};
    return {0, true};
}

const char* class_name(unsigned c) {
    switch (c) {
        case 1:
            return "rt";
        case 2:
            return "be";
        case 3:
            return "idle";
    }
    return "none";
}

}  // namespace

struct BfqScheduler::RqData {
    bfq::BfqRqNode node;  // links in the queue's sort_list and fifo
    BfqQueue* queue = nullptr;
    uint64_t fifo_time = 0;
    bool sync = true;
    bool queued = false;  // in the queue's sort_list and fifo
};

BfqScheduler::BfqScheduler(EventLoop& loop, const BfqConfig& config, const Options& options)
    : loop_(loop),
      config_(config),
      device_clock_(options.time_scale),
      rq_pool_(std::make_unique<ObjectPool<RqData>>()) {
    bfqd_.clock = &loop.clock();
    bfqd_.now_ctx = this;
    bfqd_.now_fn = [](const void* ctx) {
        return static_cast<const BfqScheduler*>(ctx)->device_now();
    };
    bfqd_.group_counting = config.group_counting;
    bfqd_.slice_idle_ns = config.slice_idle_ns;
    bfqd_.timeout_ns = config.timeout_sync_ns ? config.timeout_sync_ns : 125 * kMs;
    bfqd_.strict_guarantees = config.strict_guarantees;
    // bfq_strict_guarantees_store(): strict guarantees need idling of at least 8 ms.
    if (bfqd_.strict_guarantees && bfqd_.slice_idle_ns < 8 * kMs) bfqd_.slice_idle_ns = 8 * kMs;
    bfqd_.nonrot = options.nonrot;
    // max_budget 0 (the kernel's default): autotuned from the peak rate.
    bfq::init_peak_rate(bfqd_, config.max_budget_sectors);
    root_group_ = std::make_unique<BfqGroup>();
    bfq::init_group_entity(root_group_.get(), nullptr);
    root_group_->sched_data.class_idle_last_service_ns = device_now();  // bfq_init_root_group()
    bfqd_.root_group = root_group_.get();
}

BfqScheduler::~BfqScheduler() {
    if (loop_timer_id_) loop_.cancel(loop_timer_id_);
}

// ---------------------------------------------------------------------------
// Groups and queues

// bfq_find_set_group(): "a/b" is group b inside group a.
BfqGroup* BfqScheduler::get_group(const std::string& name, uint32_t weight, bool create) {
    if (name.empty() || name == "/") return root_group_.get();
    auto it = groups_.find(name);
    if (it != groups_.end()) {
        BfqGroup* g = it->second.get();
        // io.bfq.weight written again: applied at the next (re)activation.
        if (weight &&
            std::clamp(weight, bfq::kMinWeight, bfq::kMaxWeight) != g->entity.new_weight) {
            g->entity.new_weight = std::clamp(weight, bfq::kMinWeight, bfq::kMaxWeight);
            g->entity.prio_changed = true;
        }
        return g;
    }
    if (!create) return nullptr;
    size_t slash = name.rfind('/');
    BfqGroup* parent = slash == std::string::npos || slash == 0
                           ? root_group_.get()
                           : get_group(name.substr(0, slash), 0, true);
    auto g = std::make_unique<BfqGroup>();
    g->name = name;
    g->entity.new_weight =
        weight ? std::clamp(weight, bfq::kMinWeight, bfq::kMaxWeight) : bfq::kDefaultGroupWeight;
    bfq::init_group_entity(g.get(), parent);
    BfqGroup* raw = g.get();
    groups_.emplace(name, std::move(g));
    return raw;
}

// bfq_init_bfqq() + bfq_init_entity()
BfqQueue* BfqScheduler::new_queue(BfqGroup* group, uint32_t pid, bool sync, unsigned ioclass,
                                  unsigned ioprio) {
    auto q = std::make_unique<BfqQueue>();
    uint64_t now = device_now();
    q->pid = pid;
    q->sync = sync;
    q->new_ioprio_class = ioclass;
    q->new_ioprio = ioprio;
    q->entity.new_weight = bfq::ioprio_to_weight(ioprio);
    // Tentatively mark a sync queue as having a short think time.
    q->has_short_ttime = sync && ioclass != 3;
    q->just_created = sync;
    // "set end request to minus infinity from now"
    q->ttime.last_end_request = now + 1;
    q->io_bound = true;
    // Tentative initial value to trade off between throughput and latency.
    q->max_budget = 2 * bfq::max_budget(bfqd_) / 3;
    q->budget_timeout_ns = 0;  // bfq_smallest_from_now()
    q->seek_history = 1;       // the first request is almost certainly seeky
    // Injection: as in the kernel, the first request resets the limit
    // (bfq_reset_inject_limit: 0 for a short think time, 1 otherwise); it
    // becomes 1 once a baseline service time is sampled and adapts from there.
    q->inject_limit = 0;
    q->decrease_time_jif = bfq::kNever;
    bfq::init_queue_entity(q.get(), group);
    group->queues++;
    BfqQueue* raw = q.get();
    queues_.push_back(std::move(q));
    return raw;
}

// bfq_get_queue() / bfq_check_ioprio_change() / bfq_set_next_ioprio_data()
BfqQueue* BfqScheduler::get_queue(const SchedIdentity& id, uint32_t pid, bool sync, bool create) {
    unsigned ioclass = id.ioprio_class == IoprioClass::None ? 2u : unsigned(id.ioprio_class);
    unsigned ioprio = std::min<unsigned>(id.ioprio, bfq::kIoprioBeNr - 1);
    if (ioclass == 3) ioprio = 7;  // IOPRIO_CLASS_IDLE
    BfqGroup* group = get_group(id.group, id.group_weight, create);
    if (!group) return nullptr;
    if (!sync) {
        unsigned key = ioclass * bfq::kIoprioBeNr + ioprio;  // async_bfqq[class][prio]
        auto it = group->async_queues.find(key);
        if (it != group->async_queues.end()) return it->second;
        if (!create) return nullptr;
        BfqQueue* q = new_queue(group, 0, false, ioclass, ioprio);
        group->async_queues.emplace(key, q);
        return q;
    }
    SyncQueueSlot& slot = sync_queue_cache_[pid % kSyncQueueSlots];
    BfqQueue* q = nullptr;
    if (slot.queue && slot.pid == pid && slot.group == group) {
        q = slot.queue;
    } else {
        auto it = sync_queues_.find({pid, group});
        if (it != sync_queues_.end()) {
            q = it->second;
            slot = {pid, group, q};
        }
    }
    if (q) {
        if (q->new_ioprio != ioprio || q->new_ioprio_class != ioclass) {
            q->new_ioprio = ioprio;
            q->new_ioprio_class = ioclass;
            q->entity.new_weight = bfq::ioprio_to_weight(ioprio);
            q->entity.prio_changed = true;
        }
        return q;
    }
    if (!create) return nullptr;
    q = new_queue(group, pid, true, ioclass, ioprio);
    sync_queues_.emplace(std::make_pair(pid, static_cast<const BfqGroup*>(group)), q);
    slot = {pid, group, q};
    return q;
}

const BfqQueue* BfqScheduler::find_queue(uint32_t pid, const std::string& group, bool sync) const {
    for (const auto& q : queues_)
        if (q->sync == sync && (!sync || q->pid == pid) &&
            q->group->name == (group == "/" ? "" : group))
            return q.get();
    return nullptr;
}

const BfqGroup* BfqScheduler::find_group(const std::string& name) const {
    if (name.empty() || name == "/") return root_group_.get();
    auto it = groups_.find(name);
    return it == groups_.end() ? nullptr : it->second.get();
}

std::vector<const BfqQueue*> BfqScheduler::queues() const {
    std::vector<const BfqQueue*> out;
    for (const auto& q : queues_) out.push_back(q.get());
    return out;
}

// ---------------------------------------------------------------------------
// Budgets and request selection

// bfq_serv_to_charge(): async I/O is charged 3x, unless the scenario is
// asymmetric.
uint64_t BfqScheduler::serv_to_charge(const Request* rq, const BfqQueue* bfqq) const {
    if (bfqq->sync || bfqd_.asymmetric_scenario(bfqq)) return rq->nr_sectors;
    return uint64_t(rq->nr_sectors) * kAsyncChargeFactor;
}

// bfq_bfqq_budget_left()
int64_t BfqScheduler::budget_left(const BfqQueue* bfqq) const {
    return int64_t(bfqq->entity.budget) - int64_t(bfqq->entity.service);
}

// bfq_updated_next_req(): make sure a queue's budget covers its first
// request (budgets cannot change once a queue is in service).
void BfqScheduler::updated_next_req(BfqQueue* bfqq) {
    Request* next_rq = bfqq->next_rq;
    if (!next_rq || bfqq == bfqd_.in_service_queue) return;
    uint64_t new_budget =
        std::max({bfqq->max_budget, serv_to_charge(next_rq, bfqq), bfqq->entity.service});
    if (bfqq->entity.budget != new_budget) {
        bfqq->entity.budget = new_budget;
        bfq::requeue_bfqq(bfqd_, bfqq, false);
    }
}

// bfq_choose_req(): of two requests, the one closer to the head position
// (sync first; short backward seeks allowed at twice the cost).
Request* BfqScheduler::choose_req(Request* rq1, Request* rq2, sector_t last) const {
    if (!rq1 || rq1 == rq2) return rq2;
    if (!rq2) return rq1;
    bool sync1 = rq_data(rq1)->sync, sync2 = rq_data(rq2)->sync;
    if (sync1 && !sync2) return rq1;
    if (sync2 && !sync1) return rq2;
    sector_t s1 = rq1->sector, s2 = rq2->sector;
    auto [d1, wrap1] = seek_distance(s1, last);
    auto [d2, wrap2] = seek_distance(s2, last);
    if (!wrap1 && !wrap2) {
        if (d1 < d2) return rq1;
        if (d2 < d1) return rq2;
        return s1 >= s2 ? rq1 : rq2;
    }
    if (!wrap1) return rq1;
    if (!wrap2) return rq2;
    // Both behind the head: start with the one further behind.
    return s1 <= s2 ? rq1 : rq2;
}

// bfq_check_fifo(): once per service slot, an expired request goes first.
Request* BfqScheduler::check_fifo(BfqQueue* bfqq, Request* last) {
    if (bfqq->fifo_expire) return nullptr;
    bfqq->fifo_expire = true;
    if (bfqq->fifo.empty()) return nullptr;
    Request* rq = bfqq->fifo.front()->rq;
    if (rq == last || device_now() < rq_data(rq)->fifo_time) return nullptr;
    return rq;
}

// bfq_find_next_rq()
Request* BfqScheduler::find_next_rq(BfqQueue* bfqq, Request* last) {
    if (Request* next = check_fifo(bfqq, last)) return next;
    const bfq::BfqRqNode* it = &rq_data(last)->node;
    Request* next = nullptr;
    Request* prev = nullptr;
    if (bfq::BfqRqNode* p = bfq::BfqSortList::prev(it)) prev = p->rq;
    if (bfq::BfqRqNode* n = bfq::BfqSortList::next(it)) {
        next = n->rq;
    } else {
        const bfq::BfqRqNode* first = bfqq->sort_list.front();
        if (first != it) next = first->rq;
    }
    return choose_req(next, prev, last->sector);
}

// bfq_bfqq_update_budg_for_activation(): returns true if bfqq should be
// allowed to preempt the in-service queue to recover its service hole.
bool BfqScheduler::update_budg_for_activation(BfqQueue* bfqq, bool arrived_in_time) {
    bfq::BfqEntity& entity = bfqq->entity;
    if (bfqq->non_blocking_wait_rq && arrived_in_time && budget_left(bfqq) > 0) {
        // Go on with the remaining budget, as if the queue never expired.
        entity.budget = std::min<uint64_t>(uint64_t(budget_left(bfqq)), bfqq->max_budget);
        entity.service = 0;
        return true;
    }
    entity.service = 0;
    entity.budget = std::max(bfqq->max_budget, serv_to_charge(bfqq->next_rq, bfqq));
    bfqq->non_blocking_wait_rq = false;
    return false;
}

// bfq_bfqq_higher_class_or_weight()
bool BfqScheduler::higher_class_or_weight(const BfqQueue* bfqq, const BfqQueue* in_serv) const {
    if (bfqq->ioprio_class < in_serv->ioprio_class) return true;
    uint32_t w, in_w;
    if (in_serv->entity.parent == bfqq->entity.parent) {
        w = bfqq->entity.weight;
        in_w = in_serv->entity.weight;
    } else {
        w = bfqq->entity.parent ? bfqq->entity.parent->weight : bfqq->entity.weight;
        in_w = in_serv->entity.parent ? in_serv->entity.parent->weight : in_serv->entity.weight;
    }
    return w > in_w;
}

// bfq_bfqq_handle_idle_busy_switch() (no weight raising).
void BfqScheduler::handle_idle_busy_switch(BfqQueue* bfqq) {
    uint64_t now = device_now();
    bool arrived_in_time = now <= bfqq->ttime.last_end_request + bfqd_.slice_idle_ns * 3;
    bool wants_to_preempt = update_budg_for_activation(bfqq, arrived_in_time);
    bfqq->just_created = false;
    if (!bfqq->io_bound) {
        if (arrived_in_time) {
            if (++bfqq->requests_within_timer >= kRequestsWithinTimer) bfqq->io_bound = true;
        } else {
            bfqq->requests_within_timer = 0;
        }
    }
    bfqq->service_from_backlogged = 0;
    bfq::add_bfqq_busy(bfqd_, bfqq);
    // Expire the in-service queue if bfqq recovers a service hole, or has
    // a higher class or weight, or its arrival ends the reason to idle for
    // the in-service queue (!bfq_better_to_idle(), 5.12's "block, bfq:
    // stop plugging when the scenario changes": e.g. a lone busy queue
    // idled for), and bfqq is actually the next queue to serve.
    BfqQueue* in_serv = bfqd_.in_service_queue;
    if (in_serv && in_serv != bfqq &&
        (wants_to_preempt || higher_class_or_weight(bfqq, in_serv) || !better_to_idle(in_serv)) &&
        bfq::next_queue_may_preempt(bfqd_))
        bfqq_expire(in_serv, false, Expiration::Preempted);
}

// bfq_reset_inject_limit()
void BfqScheduler::reset_inject_limit(BfqQueue* bfqq) {
    bfqq->last_serv_time_ns = 0;  // invalidate the baseline total service time
    bfqd_.waited_rq = nullptr;
    bfqq->inject_limit = bfqq->has_short_ttime ? 0 : 1;
    bfqq->decrease_time_jif = int64_t(jiffies_at(device_now()));
}

// bfq_add_request()
void BfqScheduler::add_request(Request* rq) {
    RqData* d = rq_data(rq);
    BfqQueue* bfqq = d->queue;
    uint64_t now = device_now();
    bfqq->queued[d->sync]++;
    bfqd_.queued++;
    // v5.18-rc1: the queue's first queued request (5.19 tests the
    // process's requests in flight, RQ_BIC(rq)->requests <= 1).
    if (bfqq->sort_list.empty() && bfqq->sync) {
        bfq::check_waker(bfqd_, bfqq, now);
        // Periodically reset the inject limit, so that it eventually drops
        // if the workload changes.
        if (jiffies_elapsed(bfqq->decrease_time_jif, 1000, now)) reset_inject_limit(bfqq);
        // A "first request" of the in-service queue: measure its total
        // service time, as a baseline (nothing in the drive) or to evaluate
        // the injection that happened during the service hole.
        if (bfqq == bfqd_.in_service_queue &&
            (bfqd_.rq_in_driver == 0 ||
             (bfqq->last_serv_time_ns > 0 && bfqd_.rqs_injected && bfqd_.rq_in_driver > 0)) &&
            jiffies_elapsed(bfqq->decrease_time_jif, 10, now)) {
            bfqd_.last_empty_occupied_ns = now;
            bfqd_.wait_dispatch = true;
            if (bfqd_.rq_in_driver == 0) bfqd_.rqs_injected = false;
        }
    }
    bfqq->sort_list.insert_sorted(&d->node, bfq::BfqSectorOrder());
    d->queued = true;
    Request* prev = bfqq->next_rq;
    bfqq->next_rq = choose_req(bfqq->next_rq, rq, bfqd_.last_position);
    if (!bfqq->busy)
        handle_idle_busy_switch(bfqq);
    else if (prev != bfqq->next_rq)
        updated_next_req(bfqq);
}

// bfq_remove_request()
void BfqScheduler::remove_request(Request* rq) {
    RqData* d = rq_data(rq);
    BfqQueue* bfqq = d->queue;
    if (bfqq->next_rq == rq) {
        bfqq->next_rq = find_next_rq(bfqq, rq);
        updated_next_req(bfqq);
    }
    bfqq->fifo.erase(&d->node);
    bfqq->queued[d->sync]--;
    bfqd_.queued--;
    bfqq->sort_list.erase(&d->node);
    d->queued = false;
    if (bfqq->sort_list.empty()) {
        bfqq->next_rq = nullptr;
        if (bfqq->busy && bfqq != bfqd_.in_service_queue) {
            bfq::del_bfqq_busy(bfqd_, bfqq, false);
            // Emptied while not in service: start from scratch next time.
            bfqq->entity.budget = bfqq->entity.service = 0;
        }
    }
}

// bfq_update_io_thinktime(): sampled only when the queue is empty with
// nothing in flight (how long the process takes to issue new I/O).
void BfqScheduler::update_io_thinktime(BfqQueue* bfqq) {
    if (bfqq->dispatched || bfqq->busy) return;
    uint64_t now = device_now();
    bfq::BfqTtime& t = bfqq->ttime;
    // A new queue's last_end_request is its creation time + 1 ns
    // (bfq_init_bfqq); the kernel's clock has moved on by the first request,
    // ours may not have (one clock read per plug), so that is no time at all
    // rather than a wrapped-around u64 capped at 2 * slice_idle.
    uint64_t elapsed = now >= t.last_end_request ? now - t.last_end_request : 0;
    elapsed = std::min(elapsed, 2 * bfqd_.slice_idle_ns);
    t.ttime_samples = (7 * t.ttime_samples + 256) / 8;
    t.ttime_total = (7 * t.ttime_total + 256 * elapsed) / 8;
    t.ttime_mean = (t.ttime_total + 128) / t.ttime_samples;
}

// bfq_update_has_short_ttime(): a think time over half the idle slice is
// long (bfq_slice_idle >> 1, since 5.12: "block, bfq: use half slice_idle
// as a threshold to check short ttime"), once bfq_sample_valid() (> 80).
void BfqScheduler::update_has_short_ttime(BfqQueue* bfqq) {
    if (!bfqq->sync || bfqq->ioprio_class == 3 || bfqd_.slice_idle_ns == 0) return;
    bool has_short_ttime =
        !(bfqq->ttime.ttime_samples > 80 && bfqq->ttime.ttime_mean > (bfqd_.slice_idle_ns >> 1));
    bool state_changed = has_short_ttime != bfqq->has_short_ttime;
    bfqq->has_short_ttime = has_short_ttime;
    // Until a baseline service time exists, the inject limit follows the
    // think-time state (0 short, 1 long); reset it on a change, but not
    // within 100 ms of the last update unless the think time became long.
    if (state_changed && bfqq->last_serv_time_ns == 0 &&
        (jiffies_elapsed(bfqq->decrease_time_jif, 100, device_now()) || !has_short_ttime))
        reset_inject_limit(bfqq);
}

// bfq_update_io_seektime() with BFQ_RQ_SEEKY()
void BfqScheduler::update_io_seektime(BfqQueue* bfqq, const Request* rq) {
    bool seeky = bfqd_.rq_seeky(bfqq->last_request_pos, rq);
    bfqq->seek_history = (bfqq->seek_history << 1) | (seeky ? 1u : 0u);
}

// bfq_rq_enqueued(): a request of the in-service queue ends the idling
// (unless small and idling is only for throughput), or expires the queue
// on budget timeout.
void BfqScheduler::rq_enqueued(BfqQueue* bfqq, Request* rq) {
    bfqq->last_request_pos = rq->end_sector();
    if (bfqq == bfqd_.in_service_queue && bfqq->wait_request) {
        bool small_req = bfqq->queued[rq_data(rq)->sync] == 1 && rq->nr_sectors < 32;
        bool budget_timeout = budget_timed_out(bfqq);
        if (small_req && idling_boosts_thr_without_issues(bfqq) && !budget_timeout) return;
        clear_wait_request(bfqq, false);
        cancel_idle_timer();
        if (budget_timeout) bfqq_expire(bfqq, false, Expiration::BudgetTimeout);
    }
}

// ---------------------------------------------------------------------------
// Service slots and idling

// __bfq_set_in_service_queue() + bfq_set_budget_timeout()
void BfqScheduler::set_in_service_queue(BfqQueue* bfqq) {
    if (bfqq) {
        bfqq->fifo_expire = false;
        bfqd_.budgets_assigned = (bfqd_.budgets_assigned * 7 + 256) / 8;
        bfqd_.last_budget_start_ns = device_now();
        bfqq->budget_timeout_ns = device_now() + bfqd_.timeout_ns;  // timeout_coeff = 1 (no wr)
        bfqq->stats.slices++;
    }
    bfqd_.in_service_queue = bfqq;
}

// bfq_arm_slice_timer(): plug the device for the in-service queue.
void BfqScheduler::arm_slice_timer() {
    BfqQueue* bfqq = bfqd_.in_service_queue;
    uint64_t now = device_now();
    bfqq->wait_request = true;
    bfqq->idle_start_ns = now;
    bfqq->stats.idle_periods++;
    uint64_t sl = bfqd_.slice_idle_ns;
    // Only a minimum idle time for a seeky queue in a symmetric scenario.
    if (bfq::bfqq_seeky(*bfqq) && !bfqd_.asymmetric_scenario(bfqq)) sl = std::min(sl, kMinTtNs);
    bfqd_.last_idling_start_ns = now;
    start_idle_timer(loop_.now() + device_clock_.loop_ns(sl));
}

// bfq_clear_bfqq_wait_request(), closing the idle period's statistics.
void BfqScheduler::clear_wait_request(BfqQueue* bfqq, bool timed_out) {
    if (!bfqq->wait_request) return;
    bfqq->wait_request = false;
    bfqq->stats.idle_ns += device_now() - bfqq->idle_start_ns;
    if (timed_out) bfqq->stats.idle_timeouts++;
}

// hrtimer_start(&bfqd->idle_slice_timer): the slice timer is a deadline
// kept here, behind at most one loop timer. Idling starts and ends with
// nearly every request of a psync-like queue, so the loop timer is not
// cancelled and re-armed each time: one that fires before the current
// deadline is re-armed for it, one that fires with no deadline does nothing.
void BfqScheduler::start_idle_timer(uint64_t deadline) {
    idle_deadline_ = std::max<uint64_t>(deadline, 1);
    if (loop_timer_id_ && loop_timer_at_ <= idle_deadline_) return;
    if (loop_timer_id_) loop_.cancel(loop_timer_id_);
    loop_timer_at_ = idle_deadline_;
    loop_timer_id_ = loop_.schedule_at(loop_timer_at_, &BfqScheduler::on_idle_timer, this);
}

// hrtimer_try_to_cancel(&bfqd->idle_slice_timer).
void BfqScheduler::cancel_idle_timer() { idle_deadline_ = 0; }

void BfqScheduler::on_idle_timer(void* arg, uint64_t) {
    auto* self = static_cast<BfqScheduler*>(arg);
    self->loop_timer_id_ = 0;
    if (!self->idle_deadline_) return;  // cancelled
    if (self->loop_.now() < self->idle_deadline_) {
        self->start_idle_timer(self->idle_deadline_);  // re-armed since: wait on
        return;
    }
    self->idle_deadline_ = 0;
    self->idle_slice_timer_body();
}

// bfq_idle_slice_timer_body()
void BfqScheduler::idle_slice_timer_body() {
    BfqQueue* bfqq = bfqd_.in_service_queue;
    if (bfqq) {
        clear_wait_request(bfqq, true);
        bool expire = true;
        Expiration reason = Expiration::TooIdle;
        if (budget_timed_out(bfqq))
            reason = Expiration::BudgetTimeout;
        else if (bfqq->queued[0] == 0 && bfqq->queued[1] == 0)
            reason = Expiration::TooIdle;
        else
            expire = false;  // a small request arrived while idling: dispatch it
        if (expire) bfqq_expire(bfqq, true, reason);
    }
    // bfq_schedule_dispatch()
    if (bfqd_.queued) run_queue();
}

// idling_needed_for_service_guarantees() (v5.18-rc1 block/bfq-iosched.c,
// unchanged by the patch series): idle for bfqq if
//  - it is weight-raised while other queues are not, or the drive holds
//    at least 4 requests more than bfqq's own (never here: wr_coeff is 1),
//  - or the scenario is asymmetric (bfq_asymmetric_scenario()),
//  - or bfqq is the only busy queue: idling for it costs nothing and keeps
//    a queue that is about to get new I/O from losing its slot to a queue
//    that becomes busy meanwhile ("block, bfq: do not expire a queue when it
//    is the only busy one").
// bfqq_process_refs() is never 0 here (a queue lives as long as its task).
bool BfqScheduler::idling_needed_for_service_guarantees(const BfqQueue* bfqq) {
    const bfq::IdlingTerms t = idling_terms(bfqq);
    bfqd_.asymmetric_checks++;
    if (t.asymmetric) bfqd_.asymmetric_true++;
    return t.weight_raised || t.asymmetric || t.lone_busy_queue;
}

bfq::IdlingTerms BfqScheduler::idling_terms(const BfqQueue* bfqq) const {
    bfq::IdlingTerms t;
    uint32_t tot_busy_queues = bfqd_.tot_busy_queues();
    t.weight_raised = bfqq->wr_coeff > 1 && (bfqd_.wr_busy_queues < tot_busy_queues ||
                                             bfqd_.rq_in_driver >= bfqq->dispatched + 4);
    t.varied_queue_weights = bfqd_.varied_queue_weights(bfqq);
    t.multiple_classes_busy = bfqd_.multiple_classes_busy();
    t.groups = bfqd_.groups_asymmetric();
    t.asymmetric = t.varied_queue_weights || t.multiple_classes_busy || t.groups;
    t.lone_busy_queue = tot_busy_queues == 1;
    t.boosts_throughput = idling_boosts_thr_without_issues(bfqq);
    return t;
}

// idling_boosts_thr_without_issues() (v5.18-rc1): idling pays on a
// rotational drive without internal queueing, or for a sequential, I/O-bound
// queue with a short think time on a drive without queueing (hw_tag 0; -1,
// not yet detected, counts as queueing as `!bfqd->hw_tag` does); never while
// weight-raised queues are busy.
bool BfqScheduler::idling_boosts_thr_without_issues(const BfqQueue* bfqq) const {
    bool rot_without_queueing = !bfqd_.nonrot && bfqd_.hw_tag == 0;
    bool sequential_and_io_bound =
        !bfq::bfqq_seeky(*bfqq) && bfqq->io_bound && bfqq->has_short_ttime;
    bool idling_boosts_thr =
        rot_without_queueing || ((!bfqd_.nonrot || bfqd_.hw_tag == 0) && sequential_and_io_bound);
    return idling_boosts_thr && bfqd_.wr_busy_queues == 0;
}

// bfq_better_to_idle() (v5.18-rc1): strict_guarantees always idles; no
// idling with slice_idle 0, for async queues or in the idle class;
// otherwise idle if it boosts the throughput or the service guarantees
// need it.
bool BfqScheduler::better_to_idle(const BfqQueue* bfqq) {
    if (bfqd_.strict_guarantees) return true;
    if (bfqd_.slice_idle_ns == 0 || !bfqq->sync || bfqq->ioprio_class == 3) return false;
    bool boosts = idling_boosts_thr_without_issues(bfqq);
    bool needed = idling_needed_for_service_guarantees(bfqq);
    return boosts || needed;
}

// bfq_bfqq_must_idle() (v5.18-rc1; bfq_bfqq_may_idle() before 4.19): the
// queue is empty and idling is better.
bool BfqScheduler::must_idle(const BfqQueue* bfqq) {
    return bfqq->sort_list.empty() && better_to_idle(bfqq);
}

// bfq_bfqq_budget_timeout()
bool BfqScheduler::budget_timed_out(const BfqQueue* bfqq) const {
    return device_now() >= bfqq->budget_timeout_ns;
}

// bfq_may_expire_for_budg_timeout(): not while idling, unless the queue has
// consumed less than 2/3 of its budget (a slow queue).
bool BfqScheduler::may_expire_for_budg_timeout(const BfqQueue* bfqq) const {
    return (!bfqq->wait_request || budget_left(bfqq) >= int64_t(bfqq->entity.budget / 3)) &&
           budget_timed_out(bfqq);
}

// bfq_bfqq_is_slow()
bool BfqScheduler::bfqq_is_slow(const BfqQueue* bfqq, bool compensate, uint64_t& delta_ms) const {
    bool slow = bfq::bfqq_seeky(*bfqq);  // if the interval is too short, use seekiness
    if (!bfqq->sync) return false;
    uint64_t ref = compensate ? bfqd_.last_idling_start_ns : device_now();
    uint64_t delta_us =
        ref > bfqd_.last_budget_start_ns ? (ref - bfqd_.last_budget_start_ns) / 1000 : 0;
    if (delta_us < 1000) {
        delta_ms = bfqd_.nonrot ? kMinTtNs / kMs : bfqd_.slice_idle_ns / kMs;
        return slow;
    }
    delta_ms = delta_us / 1000;
    // Only long (> 20 ms) intervals give a reliable rate.
    if (delta_us > 20000) slow = bfqq->entity.service < bfqd_.max_budget / 2;
    return slow;
}

// __bfq_bfqq_recalc_budget(): the budget feedback.
void BfqScheduler::recalc_budget(BfqQueue* bfqq, Expiration reason) {
    uint64_t min_budget = bfq::min_budget(bfqd_);
    uint64_t budget = bfqq->max_budget;  // wr_coeff == 1
    if (bfqq->sync) {
        switch (reason) {
            case Expiration::TooIdle:
                // Outstanding requests: the process may still be waiting for
                // them, so grow; otherwise assume a smaller budget would do.
                if (bfqq->dispatched > 0)
                    budget = std::min(budget * 2, bfqd_.max_budget);
                else if (budget > 5 * min_budget)
                    budget -= 4 * min_budget;
                else
                    budget = min_budget;
                break;
            case Expiration::BudgetTimeout:
                budget = std::min(budget * 2, bfqd_.max_budget);
                break;
            case Expiration::BudgetExhausted:
                budget = std::min(budget * 4, bfqd_.max_budget);
                break;
            case Expiration::NoMoreRequests:
                // Keep the budget close to the service actually requested.
                budget = std::max(bfqq->entity.service, min_budget);
                break;
            default:
                return;
        }
    } else {
        budget = bfqd_.max_budget;  // async queues always get the maximum
    }
    bfqq->max_budget = budget;
    // An autotuned max_budget, once in use, caps every queue's.
    if (bfqd_.budgets_assigned >= bfq::kStatsMinBudgets && bfqd_.user_max_budget == 0)
        bfqq->max_budget = std::min(bfqq->max_budget, bfqd_.max_budget);
    if (bfqq->next_rq)
        bfqq->entity.budget = std::max(bfqq->max_budget, serv_to_charge(bfqq->next_rq, bfqq));
}

// __bfq_bfqq_expire() + __bfq_bfqd_reset_in_service()
void BfqScheduler::expire_queue(BfqQueue* bfqq, Expiration reason) {
    // An empty queue leaves the schedule, unless it is being preempted and
    // needs idling for its guarantees (then it stays, to be served before
    // the queues with higher finish times).
    if (bfqq->sort_list.empty() &&
        !(reason == Expiration::Preempted && idling_needed_for_service_guarantees(bfqq))) {
        if (bfqq->dispatched == 0) bfqq->budget_timeout_ns = device_now();
        bfq::del_bfqq_busy(bfqd_, bfqq, true);
    } else {
        bfq::requeue_bfqq(bfqd_, bfqq, true);
    }
    clear_wait_request(bfqq, false);
    cancel_idle_timer();
    bfqd_.in_service_queue = nullptr;
    bfq::reset_in_service_entities(bfqq);
}

// bfq_bfqq_expire()
void BfqScheduler::bfqq_expire(BfqQueue* bfqq, bool compensate, Expiration reason) {
    bfq::BfqEntity& entity = bfqq->entity;
    uint64_t delta_ms = 0;
    bool slow = bfqq_is_slow(bfqq, compensate, delta_ms);
    // Charge slow (seeky) and timed-out queues with the time they held the
    // device, unless they consumed at least 2/3 of their budget.
    if (slow ||
        (reason == Expiration::BudgetTimeout && budget_left(bfqq) >= int64_t(entity.budget / 3)))
        bfq::bfqq_charge_time(bfqd_, bfqq, delta_ms);
    if (reason == Expiration::TooIdle && entity.service <= 2 * entity.budget / 10)
        bfqq->io_bound = false;
    // No total service time to measure any longer.
    bfqd_.rqs_injected = bfqd_.wait_dispatch = false;
    bfqd_.waited_rq = nullptr;
    bfqq->stats.expirations[unsigned(reason)]++;
    recalc_budget(bfqq, reason);
    expire_queue(bfqq, reason);
    if (!bfqq->busy && reason != Expiration::BudgetTimeout &&
        reason != Expiration::BudgetExhausted) {
        // Keep the service: if the next request arrives in time, the queue
        // goes on with this same budget (hole recovery).
        bfqq->non_blocking_wait_rq = true;
    } else {
        entity.service = 0;
    }
    for (bfq::BfqEntity* e = entity.parent; e; e = e->parent) e->service = 0;
}

// ---------------------------------------------------------------------------
// Dispatch

// bfq_choose_bfqq_for_injection() (v5.18-rc1): the first queue of the
// active list whose next request fits its budget, while fewer than
// inject_limit requests are in the drive.
BfqQueue* BfqScheduler::choose_bfqq_for_injection() {
    BfqQueue* in_serv = bfqd_.in_service_queue;
    uint32_t limit = in_serv->inject_limit;
    // A queue that is not weight-raised (here: every queue), or has a long
    // think time, may be injected into without restrictions.
    bool in_serv_always_inject = in_serv->wr_coeff == 1 || !in_serv->has_short_ttime;
    // No baseline yet and the plugging has lasted slice_idle: allow one
    // request. The kernel writes this as
    //   time_is_before_eq_jiffies(last_idling_start_jiffies + bfq_slice_idle)
    // and bfq_slice_idle is in nanoseconds (NSEC_PER_SEC / 125), so the
    // deadline is 8,000,000 jiffies after the idling started: never reached
    // while one idle period lasts. Followed as written, in jiffies.
    if (limit == 0 && in_serv->last_serv_time_ns == 0 && in_serv->wait_request &&
        jiffies_at(device_now()) >= jiffies_at(bfqd_.last_idling_start_ns) + bfqd_.slice_idle_ns)
        limit = 1;
    if (bfqd_.rq_in_driver >= limit) return nullptr;
    for (BfqQueue* bfqq : bfqd_.active_list) {
        if (bfqq->sort_list.empty() || !(in_serv_always_inject || bfqq->wr_coeff > 1)) continue;
        if (int64_t(serv_to_charge(bfqq->next_rq, bfqq)) > budget_left(bfqq)) continue;
        // Only one large in-flight request on non-rotational devices.
        if (bfqd_.nonrot && bfqq->next_rq->nr_sectors >= bfq::kSectThrNonrot)
            limit = std::min<uint32_t>(1, limit);
        else
            limit = in_serv->inject_limit;
        if (bfqd_.rq_in_driver < limit) {
            bfqd_.rqs_injected = true;
            return bfqq;
        }
    }
    return nullptr;
}

// A queue bfq_select_queue() may serve out of turn: busy, with a next
// request that fits its budget.
bool BfqScheduler::may_serve_out_of_turn(const BfqQueue* q) const {
    return q && q->busy && q->next_rq && int64_t(serv_to_charge(q->next_rq, q)) <= budget_left(q);
}

// bic->bfqq[0]: the async queue the in-service queue's process uses (its
// group's, at its priority), if its next request is that process's.
BfqQueue* BfqScheduler::own_async_queue(const BfqQueue* bfqq) const {
    auto it = bfqq->group->async_queues.find(bfqq->ioprio_class * bfq::kIoprioBeNr + bfqq->ioprio);
    if (it == bfqq->group->async_queues.end()) return nullptr;
    BfqQueue* async_bfqq = it->second;
    if (!may_serve_out_of_turn(async_bfqq) || async_bfqq->next_rq->pid != bfqq->pid) return nullptr;
    return async_bfqq;
}

// bfq_select_queue()'s choice while the in-service queue bfqq idles or
// may idle after its requests in flight (v5.18-rc1, four exclusive ifs):
// the process's own async I/O; else its waker queue's; else the first
// queue it woke (woken_list, "blocked_bfqq"); these three regardless of
// the inject limit. Else, unless idling is for throughput or bfqq is a
// weight-raised queue with a short think time (and the only raised one),
// bfq_choose_bfqq_for_injection().
BfqQueue* BfqScheduler::queue_to_inject(BfqQueue* bfqq) {
    BfqQueue* chosen = own_async_queue(bfqq);
    if (!chosen && may_serve_out_of_turn(bfqq->waker_bfqq)) chosen = bfqq->waker_bfqq;
    if (!chosen && may_serve_out_of_turn(bfq::first_woken(bfqq))) chosen = bfq::first_woken(bfqq);
    if (chosen) {
        chosen->stats.injected_waker++;
        return chosen;
    }
    if (!idling_boosts_thr_without_issues(bfqq) &&
        (bfqq->wr_coeff == 1 || bfqd_.wr_busy_queues > 1 || !bfqq->has_short_ttime))
        return choose_bfqq_for_injection();
    return nullptr;
}

// bfq_select_queue()
BfqQueue* BfqScheduler::select_queue() {
    BfqQueue* bfqq = bfqd_.in_service_queue;
    Expiration reason = Expiration::BudgetTimeout;
    if (!bfqq) goto new_queue;
    // Do not expire for budget timeout a queue about to enjoy idling.
    if (may_expire_for_budg_timeout(bfqq) && !must_idle(bfqq)) goto expire;
check_queue:
    if (bfqq->next_rq) {
        if (int64_t(serv_to_charge(bfqq->next_rq, bfqq)) > budget_left(bfqq)) {
            reason = Expiration::BudgetExhausted;
            goto expire;
        }
        // The idle timer may still be pending (a small request arrived).
        if (bfqq->wait_request) {
            clear_wait_request(bfqq, false);
            cancel_idle_timer();
        }
        return bfqq;
    }
    // No requests: keep the queue if it is idling, or has requests in
    // flight and may idle after them; meanwhile, try injection.
    if (bfqq->wait_request || (bfqq->dispatched != 0 && better_to_idle(bfqq)))
        return queue_to_inject(bfqq);
    reason = Expiration::NoMoreRequests;
expire:
    bfqq_expire(bfqq, false, reason);
new_queue:
    bfqq = bfq::get_next_queue(bfqd_);
    set_in_service_queue(bfqq);
    if (bfqq) goto check_queue;
    return nullptr;
}

// bfq_dispatch_rq_from_bfqq() + bfq_dispatch_remove()
Request* BfqScheduler::dispatch_rq_from_bfqq(BfqQueue* bfqq) {
    Request* rq = bfqq->next_rq;
    bool in_service = bfqq == bfqd_.in_service_queue;
    bfq::bfqq_served(bfqd_, bfqq, serv_to_charge(rq, bfqq));
    if (in_service && bfqd_.wait_dispatch) {
        bfqd_.wait_dispatch = false;
        bfqd_.waited_rq = rq;
    }
    bfqq->dispatched++;
    bfq::update_peak_rate(bfqd_, rq);  // bfq_dispatch_remove()
    bfqq->stats.dispatches++;
    bfqq->stats.service_sectors += rq->nr_sectors;
    if (!in_service) bfqq->stats.injected++;
    if (!in_service && bfqd_.in_service_queue && bfqd_.in_service_queue->wait_request)
        bfqq->stats.injected_idle++;
    remove_request(rq);
    if (!in_service) return rq;
    // An idle-class queue yields as soon as other queues wait.
    if (bfqd_.tot_busy_queues() > 1 && bfqq->ioprio_class == 3)
        bfqq_expire(bfqq, false, Expiration::BudgetExhausted);
    return rq;
}

// __bfq_dispatch_request()
Request* BfqScheduler::dispatch() {
    if (bfqd_.tot_busy_queues() == 0) return nullptr;
    // strict_guarantees: one request at a time in the device.
    if (bfqd_.strict_guarantees && bfqd_.rq_in_driver > 0) return nullptr;
    BfqQueue* bfqq = select_queue();
    if (!bfqq) return nullptr;
    Request* rq = dispatch_rq_from_bfqq(bfqq);
    bfqd_.rq_in_driver++;
    return rq;
}

// ---------------------------------------------------------------------------
// Insertion, merging, completion

// bfq_insert_request() / __bfq_insert_request()
void BfqScheduler::insert(Request* rq, const TaskContext* task) {
    static const SchedIdentity kDefaultIdentity;
    RqData* d = rq_pool_->get();
    *d = RqData{};
    d->node.rq = rq;
    rq->sched_data = d;
    d->sync = is_sync(rq->op, rq->bios.head);
    const SchedIdentity& id = task ? task->sched : kDefaultIdentity;
    uint32_t pid = task ? task->pid : rq->pid;
    BfqQueue* bfqq = get_queue(id, pid, d->sync, true);
    d->queue = bfqq;
    update_io_thinktime(bfqq);
    update_has_short_ttime(bfqq);
    update_io_seektime(bfqq, rq);
    d->fifo_time = device_now() + kFifoExpireNs[d->sync];
    bfqq->fifo.push_back(&d->node);
    add_request(rq);
    rq_enqueued(bfqq, rq);
}

// bfq_bio_merge() -> blk_mq_sched_try_merge(): a back merge (elv_rqhash) or
// a front merge (bfq_request_merge), only into a request of the bio's own
// queue (bfq_allow_bio_merge).
Request* BfqScheduler::find_merge(const Bio* bio, const TaskContext* task, bool& front) {
    static const SchedIdentity kDefaultIdentity;
    const SchedIdentity& id = task ? task->sched : kDefaultIdentity;
    uint32_t pid = task ? task->pid : bio->pid;
    BfqQueue* bfqq = get_queue(id, pid, is_sync(bio->op, bio), false);
    if (!bfqq) return nullptr;
    for (const bfq::BfqRqNode* n : bfqq->sort_list) {
        Request* rq = n->rq;
        if (rq->end_sector() == bio->sector && rq->mergeable() && rq->op == bio->op) {
            front = false;
            return rq;
        }
    }
    // The requests starting where the bio ends, in sort order.
    sector_t key = bio->end_sector();
    for (const bfq::BfqRqNode* n : bfqq->sort_list) {
        Request* rq = n->rq;
        if (rq->sector > key) break;
        if (rq->sector == key && rq->mergeable() && rq->op == bio->op) {
            front = true;
            return rq;
        }
    }
    return nullptr;
}

// bfq_request_merged(): a front merge moved the request; reposition it and
// reconsider the queue's next request.
void BfqScheduler::merged(Request* rq, bool front) {
    RqData* d = rq_data(rq);
    if (!d || !d->queued || !front) return;
    BfqQueue* bfqq = d->queue;
    bfqq->sort_list.erase(&d->node);
    bfqq->sort_list.insert_sorted(&d->node, bfq::BfqSectorOrder());
    Request* prev = bfqq->next_rq;
    bfqq->next_rq = choose_req(bfqq->next_rq, rq, bfqd_.last_position);
    if (prev != bfqq->next_rq) updated_next_req(bfqq);
}

// bfq_update_hw_tag(): does the device queue requests internally?
void BfqScheduler::update_hw_tag() {
    BfqQueue* bfqq = bfqd_.in_service_queue;
    bfqd_.max_rq_in_driver = std::max(bfqd_.max_rq_in_driver, bfqd_.rq_in_driver);
    if (bfqd_.hw_tag == 1) return;
    // A sample is valid only with enough requests outstanding.
    if (bfqd_.rq_in_driver + bfqd_.queued <= kHwQueueThreshold) return;
    // An in-service queue that may idle may not keep the device busy.
    if (bfqq && bfqq->has_short_ttime &&
        bfqq->dispatched + bfqq->queued[0] + bfqq->queued[1] < kHwQueueThreshold &&
        bfqd_.rq_in_driver < kHwQueueThreshold)
        return;
    if (bfqd_.hw_tag_samples++ < kHwQueueSamples) return;
    bfqd_.hw_tag = bfqd_.max_rq_in_driver > kHwQueueThreshold;
    bfqd_.max_rq_in_driver = 0;
    bfqd_.hw_tag_samples = 0;
}

// bfq_update_inject_limit(): compare the total service time of the
// in-service queue's first request with its baseline: raise the limit while
// the inflation stays below 1.5x, lower it otherwise.
void BfqScheduler::update_inject_limit(BfqQueue* bfqq) {
    uint64_t tot_time_ns = device_now() - bfqd_.last_empty_occupied_ns;
    uint32_t old_limit = bfqq->inject_limit;
    if (bfqq->last_serv_time_ns > 0 && bfqd_.rqs_injected) {
        uint64_t threshold = (bfqq->last_serv_time_ns * 3) >> 1;
        if (tot_time_ns >= threshold && old_limit > 0) {
            bfqq->inject_limit--;
            bfqq->decrease_time_jif = int64_t(jiffies_at(device_now()));
        } else if (tot_time_ns < threshold && old_limit <= bfqd_.max_rq_in_driver) {
            bfqq->inject_limit++;
        }
    }
    // rq_in_driver == 1: nothing else in flight (this request still counts).
    if ((bfqq->last_serv_time_ns == 0 && bfqd_.rq_in_driver == 1) ||
        tot_time_ns < bfqq->last_serv_time_ns) {
        if (bfqq->last_serv_time_ns == 0) bfqq->inject_limit = std::max<uint32_t>(1, old_limit);
        bfqq->last_serv_time_ns = tot_time_ns;
    } else if (!bfqd_.rqs_injected && bfqd_.rq_in_driver == 1) {
        bfqq->last_serv_time_ns = tot_time_ns;
    }
    bfqd_.waited_rq = nullptr;
    bfqd_.rqs_injected = false;
}

// bfq_completed_request()
void BfqScheduler::completed_request(BfqQueue* bfqq) {
    update_hw_tag();
    bfqd_.rq_in_driver--;
    bfqq->dispatched--;
    uint64_t now = device_now();
    if (!bfqq->dispatched && !bfqq->busy) {
        bfqq->budget_timeout_ns = now;
        bfqd_.del_bfqq_in_groups_with_pending_reqs(bfqq);
        bfqd_.weights_tree_remove(bfqq);
    }
    bfqq->ttime.last_end_request = now;
    bfq::peak_rate_completion(bfqd_);
    bfqd_.last_completion_ns = now;
    bfqd_.last_completed_rq_bfqq = bfqq;  // (no queue merging: never a coop queue)
    if (bfqd_.in_service_queue == bfqq) {
        if (must_idle(bfqq)) {
            // Idle once the last request completes; never expire here, or
            // bfqq would lose the idling it is entitled to.
            if (bfqq->dispatched == 0) arm_slice_timer();
            return;
        }
        if (may_expire_for_budg_timeout(bfqq))
            bfqq_expire(bfqq, false, Expiration::BudgetTimeout);
        else if (bfqq->sort_list.empty() && (bfqq->dispatched == 0 || !better_to_idle(bfqq)))
            bfqq_expire(bfqq, false, Expiration::NoMoreRequests);
    }
    // bfq_schedule_dispatch(): nothing in the drive (not reached when idling).
    if (!bfqd_.rq_in_driver && bfqd_.queued) run_queue();
}

// bfq_exit_icq() -> bfq_exit_bfqq() (v5.18-rc1): the in-service queue of
// a task that exited is expired at once (__bfq_bfqq_expire, no charge, no
// idling for a request that will never come) and the queue run. Without
// it every finished psync writer's queue would idle slice_idle at the end
// of a run. The queue itself is kept: its statistics are reported.
void BfqScheduler::task_exited(const TaskContext& task) {
    BfqQueue* bfqq = get_queue(task.sched, task.pid, true, false);
    if (!bfqq) return;
    bfq::forget_waker_links(bfqd_, bfqq);  // bfq_put_queue(), once the queue goes
    if (bfqq != bfqd_.in_service_queue) return;
    expire_queue(bfqq, Expiration::BudgetTimeout);
    run_queue();
}

// bfq_finish_requeue_request()
void BfqScheduler::completed(Request* rq) {
    RqData* d = rq_data(rq);
    if (!d) return;
    BfqQueue* bfqq = d->queue;
    if (rq == bfqd_.waited_rq) update_inject_limit(bfqq);
    completed_request(bfqq);
    rq->sched_data = nullptr;
    rq_pool_->put(d);
}

// ---------------------------------------------------------------------------
// Statistics

void BfqScheduler::write_json(JsonWriter& j) const {
    bfq::BfqStats total;
    std::map<const BfqGroup*, bfq::BfqStats> per_group;
    for (const auto& q : queues_) {
        total.add(q->stats);
        per_group[q->group].add(q->stats);
    }
    j.begin_object().field("scheduler", "bfq");
    j.field("group_counting", bfqd_.legacy_counting() ? "legacy" : "fixed");
    j.field("slice_idle_ns", bfqd_.slice_idle_ns).field("timeout_sync_ns", bfqd_.timeout_ns);
    j.field("max_budget_sectors", bfqd_.max_budget).field("low_latency", config_.low_latency);
    // Peak-rate estimation (bfq_peak_rate.h): autotuned unless user-set.
    j.field("max_budget_auto", bfqd_.user_max_budget == 0);
    j.field("peak_rate", bfqd_.rate.peak_rate).field("peak_rate_updates", bfqd_.rate.updates);
    j.field("weight_raising", false).field("strict_guarantees", bfqd_.strict_guarantees);
    j.field("nonrot", bfqd_.nonrot).field("hw_tag", bfqd_.hw_tag);
    j.field("num_groups_with_pending_reqs", bfqd_.num_groups_with_pending_reqs);
    j.field("max_groups_with_pending_reqs", bfqd_.max_groups_with_pending_reqs);
    j.field("asymmetric_checks", bfqd_.asymmetric_checks);
    j.field("asymmetric_true", bfqd_.asymmetric_true);
    j.field("busy_queues", bfqd_.tot_busy_queues()).field("queued", bfqd_.queued);
    j.field("rq_in_driver", bfqd_.rq_in_driver);
    total.write_json_fields(j);
    j.key("queues").begin_array();
    for (const auto& q : queues_) {
        j.begin_object().field("pid", q->pid).field("sync", q->sync);
        j.field("group", q->group->name.empty() ? "/" : q->group->name);
        j.field("ioprio_class", class_name(q->ioprio_class)).field("ioprio", q->ioprio);
        j.field("weight", q->entity.weight).field("budget", q->entity.budget);
        j.field("max_budget", q->max_budget).field("inject_limit", q->inject_limit);
        j.field("think_time_ns", q->ttime.ttime_mean);
        j.field("has_short_ttime", q->has_short_ttime).field("seeky", bfq::bfqq_seeky(*q));
        q->stats.write_json_fields(j);
        j.end_object();
    }
    j.end_array().key("groups").begin_array();
    auto group_json = [&](const BfqGroup* g) {
        j.begin_object().field("name", g->name.empty() ? "/" : g->name).key("weight");
        if (g->is_root())
            j.null();
        else
            j.value(g->entity.orig_weight);
        j.field("queues", g->queues);
        auto it = per_group.find(g);
        (it == per_group.end() ? bfq::BfqStats{} : it->second).write_json_fields(j);
        j.end_object();
    };
    group_json(root_group_.get());
    for (const auto& [name, g] : groups_) group_json(g.get());
    j.end_array().end_object();
}

}  // namespace mdsplit
