#include "core/block/member_queue.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/drivers/timed_backend.h"

namespace mdsplit {

MemberQueue::MemberQueue(BlockLayer& layer, std::string name, uint32_t devt,
                         std::unique_ptr<Backend> backend, const MemberQueueLimits& limits)
    : BlockDevice(std::move(name), devt),
      layer_(layer),
      backend_(std::move(backend)),
      limits_(limits) {
    capacity_ = backend_->size_bytes() >> kSectorShift;
    max_sectors_ = limits.max_sectors;
    logical_block_size_ = limits.logical_block_size;
    backend_->set_completion(&MemberQueue::on_backend_complete, this);
    order_completions_ =
        layer_.loop().clock().is_virtual() && strcmp(backend_->kind(), "io_uring") == 0;
}

// block/blk-mq.c blk_mq_submit_bio()
void MemberQueue::submit_bio(Bio* bio) {
    // __bio_split_to_limits(): the front is issued now, the remainder goes
    // back through submit_bio_noacct().
    // A discard is split at max_discard_sectors (bio_split_discard()).
    uint32_t limit = bio->op == Op::Discard ? limits_.max_discard_sectors : limits_.max_sectors;
    if (bio->nr_sectors > limit) bio = layer_.split_and_resubmit(bio, limit);

    TaskContext* task = layer_.current();
    PlugList* plug = task && task->plug.active ? &task->plug : nullptr;
    bool mergeable = bio->op != Op::Discard;  // max_discard_segments = 1
    if (mergeable && plug && attempt_plug_merge(*plug, bio)) return;
    // blk_mq_sched_bio_merge(): with a scheduler, try its queued requests.
    if (mergeable && scheduler_ && attempt_sched_merge(bio)) return;

    Request* rq = alloc_request(bio);
    if (plug)
        add_rq_to_plug(*plug, rq);
    else
        dispatch(rq);
}

Request* MemberQueue::alloc_request(Bio* bio) {
    Request* rq = layer_.requests().get();
    rq->op = bio->op;
    rq->flags = (bio->flags & kBioNoMerge) ? kRqNoMerge : 0;
    rq->sector = bio->sector;
    rq->nr_sectors = bio->nr_sectors;
    rq->bios = BioList{};
    rq->bios.push_back(bio);
    rq->nr_bios = 1;
    rq->queue = this;
    rq->pid = bio->pid;
    // blk_mq_rq_time_init(): start_time_ns = blk_time_get_ns(), the plug's
    // cached time when the submitter holds one (requests queued later under
    // the same plug count from when its time was read).
    uint64_t now = layer_.loop().now();
    TaskContext* task = layer_.current();
    rq->alloc_ns = task && task->plug.active ? task->plug.time_ns(now) : now;
    rq->issue_ns = 0;
    rq->error = 0;
    rq->next = nullptr;
    // With a scheduler: the submitter, read (and replaced) by insert().
    rq->sched_data = scheduler_ ? layer_.current() : nullptr;
    rq->ring_owner = nullptr;
    rq->model_done_ns = 0;
    rq->result = 0;
    layer_.trace_rq(TraceAction::GetRq, this, rq);
    stats_.start(now);  // blk_account_io_start(): io_ticks from jiffies, the real time
    return rq;
}

// blk_add_rq_to_plug(). `last` is rq_list_peek(): the head of the kernel's
// list, which is the newest request while the plug was LIFO (< 6.13) and
// the oldest since it became FIFO. So on current kernels the plug flushes
// once its first request has grown to BLK_PLUG_FLUSH_SIZE, which is what
// caps md's merged member requests near 128 KiB (seed 000).
void MemberQueue::add_rq_to_plug(PlugList& plug, Request* rq) {
    Request* last = layer_.plug_order() == PlugOrder::Lifo ? plug.tail : plug.head;
    if (!plug.rq_count) {
        layer_.trace_rq(TraceAction::Plug, this, rq);
    } else if (plug.rq_count >= plug.max_rq_count() || last->bytes() >= kBlkPlugFlushSize) {
        layer_.flush_plug(plug);
        last = nullptr;
        layer_.trace_rq(TraceAction::Plug, this, rq);
    }
    if (!plug.multiple_queues && last && last->queue != this) plug.multiple_queues = true;
    plug.push(rq);
}

// blk_attempt_plug_merge(): one try. The newest request (the plug list's
// tail since Linux 6.16, "block: use plug request list tail for one-shot
// backmerge attempt"; the head of the older LIFO list, i.e. the same
// request) if it is this queue's; otherwise, with several queues in the
// plug, the first request of this queue from the head of the list.
bool MemberQueue::attempt_plug_merge(PlugList& plug, Bio* bio) {
    if (!plug.rq_count || (bio->flags & kBioNoMerge)) return false;
    Request* candidate = nullptr;
    if (plug.tail->queue == this) {
        candidate = plug.tail;
    } else if (plug.multiple_queues) {
        bool lifo = layer_.plug_order() == PlugOrder::Lifo;
        for (Request* rq = plug.head; rq; rq = rq->next) {
            if (rq->queue != this) continue;
            candidate = rq;
            if (!lifo) break;  // a LIFO list's head is our newest: keep going
        }
    }
    if (!candidate || !candidate->mergeable() || candidate->op != bio->op) return false;
    return try_back_merge(candidate, bio) || try_front_merge(candidate, bio);
}

// bio_attempt_back_merge() with ll_back_merge_fn()'s size and segment limits.
bool MemberQueue::try_back_merge(Request* rq, Bio* bio) {
    if (rq->end_sector() != bio->sector) return false;
    if (rq->nr_sectors + bio->nr_sectors > limits_.max_sectors) return false;
    if (rq->nr_bios + 1 > limits_.max_segments) return false;
    layer_.trace_bio(TraceAction::BackMerge, this, bio);
    rq->bios.push_back(bio);
    rq->nr_bios++;
    rq->nr_sectors += bio->nr_sectors;
    stats_.merges[DiskStats::dir(bio->op)]++;
    return true;
}

// bio_attempt_front_merge()
bool MemberQueue::try_front_merge(Request* rq, Bio* bio) {
    if (bio->end_sector() != rq->sector) return false;
    if (rq->nr_sectors + bio->nr_sectors > limits_.max_sectors) return false;
    if (rq->nr_bios + 1 > limits_.max_segments) return false;
    layer_.trace_bio(TraceAction::FrontMerge, this, bio);
    rq->bios.push_front(bio);
    rq->nr_bios++;
    rq->sector = bio->sector;
    rq->nr_sectors += bio->nr_sectors;
    stats_.merges[DiskStats::dir(bio->op)]++;
    return true;
}

void MemberQueue::dispatch(Request* rq) {
    if (scheduler_) {
        // blk_mq_sched_insert_requests(): insert now, run the hardware queue
        // once for the whole batch (the rest of the plug flush inserts first).
        rq->next = nullptr;
        if (!attempt_insert_merge(rq)) {
            layer_.trace_rq(TraceAction::Insert, this, rq);
            scheduler_->insert(rq, static_cast<const TaskContext*>(rq->sched_data));
        }
        run_queue_async();
        return;
    }
    if (in_flight_ < limits_.queue_depth && !waiting_head_) {
        issue(rq);
        return;
    }
    // No free tag: the request waits on the hctx dispatch list.
    layer_.trace_rq(TraceAction::Insert, this, rq);
    rq->next = nullptr;
    if (waiting_tail_)
        waiting_tail_->next = rq;
    else
        waiting_head_ = rq;
    waiting_tail_ = rq;
}

void MemberQueue::issue(Request* rq) {
    in_flight_++;
    rq->issue_ns = layer_.loop().now();
    rq->issue_seq = issue_seq_++;
    layer_.trace_rq(TraceAction::Issue, this, rq);
    seeks_.record_issue(rq->sector, rq->nr_sectors);
    request_sizes_.record(rq->nr_sectors);
    rq->build_iov();
    if (!order_completions_) {
        backend_->submit(rq);
        return;
    }
    if (timed_) {
        if (rq->op == Op::Write) {
            issue_write_behind(rq);
            return;
        }
        wait_for_write_behind(rq);
    }
    // A real request on the virtual clock: the loop settles before its due time.
    rq->model_done_ns = 0;
    rq->real_arrived = rq->real_tracked = false;
    backend_->submit(rq);
    if (rq->real_arrived) return;
    rq->real_due_ns = rq->model_done_ns ? rq->model_done_ns : rq->issue_ns;
    rq->real_tracked = true;
    layer_.loop().add_real_io(rq->real_due_ns);
}

// ---- Write-behind -------------------------------------------------------------
bool MemberQueue::set_write_behind(bool on) {
    timed_ = on && order_completions_ ? dynamic_cast<TimedBackend*>(backend_.get()) : nullptr;
    return timed_ != nullptr;
}

// The model's completion time, as TimedBackend::submit takes it, for rq; a
// copy of its data goes to the real backend, outside the model.
void MemberQueue::issue_write_behind(Request* rq) {
    wait_for_write_behind(rq);
    rq->model_done_ns = const_cast<TimingModel&>(timed_->model())
                            .schedule(layer_.loop().now(), rq->op, rq->sector, rq->nr_sectors);
    auto* copy = new Request;
    copy->op = rq->op;
    copy->sector = rq->sector;
    copy->nr_sectors = rq->nr_sectors;
    copy->queue = this;
    size_t len = size_t(rq->bytes());
    void* p = nullptr;
    if (posix_memalign(&p, 4096, len ? len : 1)) throw std::bad_alloc();
    copy->write_behind_copy = static_cast<uint8_t*>(p);
    size_t at = 0;
    for (const iovec& v : rq->iov) {
        if (v.iov_base) memcpy(copy->write_behind_copy + at, v.iov_base, v.iov_len);
        at += v.iov_len;
    }
    copy->iov.push_back(iovec{copy->write_behind_copy, len});
    behind_.push_back(copy);
    layer_.loop().note_untracked_io(+1);
    timed_->inner().submit(copy);  // completes through TimedBackend at once (no model time)
    layer_.loop().schedule_at(rq->model_done_ns, &MemberQueue::on_write_behind_model_time, rq);
}

void MemberQueue::on_write_behind_model_time(void* arg, uint64_t) {
    auto* rq = static_cast<Request*>(arg);
    on_backend_complete(rq->queue, rq, int64_t(rq->bytes()));
}

// A read, or a write overlapping a copy in flight, waits for the copies.
void MemberQueue::wait_for_write_behind(const Request* rq) {
    bool wait = false;
    for (const Request* c : behind_)
        if (rq->op != Op::Write || (c->sector < rq->end_sector() && rq->sector < c->end_sector()))
            wait = true;
    if (wait) layer_.loop().settle(true);
}

void MemberQueue::end_write_behind_copy(Request* copy, int64_t res) {
    if (res < 0 || uint64_t(res) != copy->bytes()) write_behind_errors_++;
    behind_.erase(std::find(behind_.begin(), behind_.end(), copy));
    layer_.loop().note_untracked_io(-1);
    free(copy->write_behind_copy);
    delete copy;
}
// ----------------------------------------------------------------------------

int MemberQueue::sync_data() {
    if (!behind_.empty()) layer_.loop().settle(true);
    return backend_->sync_data();
}

void MemberQueue::on_backend_complete(void* ctx, Request* rq, int64_t res) {
    auto* q = static_cast<MemberQueue*>(ctx);
    if (rq->write_behind_copy) {
        q->end_write_behind_copy(rq, res);
        return;
    }
    if (!q->order_completions_) {
        q->complete_request(rq, res);
        return;
    }
    rq->real_arrived = true;
    if (rq->real_tracked) {
        q->layer_.loop().remove_real_io(rq->real_due_ns);
        rq->real_tracked = false;
    }
    if (q->arrived_.empty())
        q->layer_.loop().defer_until_settled(&MemberQueue::complete_in_issue_order, q);
    q->arrived_.emplace_back(rq, res);
}

void MemberQueue::complete_in_issue_order(void* arg, uint64_t) {
    auto* q = static_cast<MemberQueue*>(arg);
    std::vector<std::pair<Request*, int64_t>> done;
    done.swap(q->arrived_);
    std::sort(done.begin(), done.end(),
              [](const auto& a, const auto& b) { return a.first->issue_seq < b.first->issue_seq; });
    for (auto& [rq, res] : done) q->complete_request(rq, res);
}

// blk_mq_end_request() -> blk_update_request(): bios complete in order; a
// short transfer leaves the rest of the bytes as residual.
void MemberQueue::complete_request(Request* rq, int64_t res) {
    uint64_t now = layer_.loop().now();
    in_flight_--;
    rq->error = res < 0 ? int32_t(res) : 0;
    layer_.trace_rq(TraceAction::Complete, this, rq);
    stats_.done(rq->op, rq->nr_sectors, rq->alloc_ns, now, res < 0);

    uint64_t done_bytes = res < 0 ? 0 : uint64_t(res);
    while (Bio* bio = rq->bios.pop_front()) {
        bio->flags &= uint16_t(~kBioTraced);  // completion already traced by the request
        if (res < 0) {
            bio->error = int32_t(res);
        } else {
            uint64_t got = done_bytes < bio->bytes() ? done_bytes : bio->bytes();
            bio->resid += bio->bytes() - got;
            done_bytes -= got;
        }
        bio_endio(bio);
    }
    if (scheduler_) {
        // finish_request; blk_mq_sched_restart() if a request waits for a tag.
        scheduler_->completed(rq);
        layer_.requests().put(rq);
        if (restart_) {
            restart_ = false;
            run_queue_async();
        }
        return;
    }
    layer_.requests().put(rq);

    while (waiting_head_ && in_flight_ < limits_.queue_depth) {
        Request* next = waiting_head_;
        waiting_head_ = next->next;
        if (!waiting_head_) waiting_tail_ = nullptr;
        next->next = nullptr;
        issue(next);
    }
}

// --- I/O scheduler ----------------------------------------------------------
void MemberQueue::set_scheduler(std::unique_ptr<IoScheduler> scheduler) {
    scheduler_ = std::move(scheduler);
    if (scheduler_) scheduler_->set_run_queue(&MemberQueue::run_queue_cb, this);
}

MemberQueue::~MemberQueue() {
    if (delay_timer_) layer_.loop().cancel(delay_timer_);
}

// blk_mq_run_hw_queue(hctx, async): runs once, on the next turn of the loop.
void MemberQueue::run_queue_async() {
    if (run_pending_) return;
    run_pending_ = true;
    layer_.loop().defer(&MemberQueue::deferred_run, this);
}

void MemberQueue::run_queue_cb(void* ctx) { static_cast<MemberQueue*>(ctx)->run_queue_async(); }

void MemberQueue::deferred_run(void* arg, uint64_t) {
    auto* q = static_cast<MemberQueue*>(arg);
    q->run_pending_ = false;
    q->run_queue();
}

void MemberQueue::delayed_run(void* arg, uint64_t) {
    auto* q = static_cast<MemberQueue*>(arg);
    q->delay_timer_ = 0;
    q->run_queue();
}

// blk_mq_sched_dispatch_requests() -> __blk_mq_do_dispatch_sched(): first
// the requests already taken from the scheduler (hctx->dispatch), then ask
// the scheduler while it has work. A request without a driver tag waits on
// hctx->dispatch and marks the queue for restart; a run in which the
// scheduler had work but gave nothing re-runs the queue after
// BLK_MQ_BUDGET_DELAY (blk_mq_delay_run_hw_queues, mod_delayed_work).
void MemberQueue::run_queue() {
    if (!scheduler_) return;
    while (waiting_head_ && in_flight_ < limits_.queue_depth) {
        Request* next = waiting_head_;
        waiting_head_ = next->next;
        if (!waiting_head_) waiting_tail_ = nullptr;
        next->next = nullptr;
        issue(next);
    }
    if (waiting_head_) {
        restart_ = true;
        return;
    }
    constexpr uint64_t kBudgetDelayNs = 3'000'000;  // BLK_MQ_BUDGET_DELAY
    unsigned count = 0;
    while (scheduler_->has_work()) {
        Request* rq = scheduler_->dispatch();
        if (!rq) {
            if (!count) {
                // +1 ns: a re-run that falls on the very instant of a
                // completion runs after the submitter the completion wakes
                // (which, on the virtual clock, reacts at that same instant);
                // otherwise round model times would make the poll hit the
                // zero-length gap far more often than real timing does.
                if (delay_timer_) layer_.loop().cancel(delay_timer_);
                delay_timer_ = layer_.loop().schedule_at(layer_.loop().now() + kBudgetDelayNs + 1,
                                                         &MemberQueue::delayed_run, this);
            }
            break;
        }
        count++;
        if (in_flight_ < limits_.queue_depth) {
            issue(rq);
            continue;
        }
        // blk_mq_get_driver_tag() failed: onto hctx->dispatch, restart later.
        rq->next = nullptr;
        if (waiting_tail_)
            waiting_tail_->next = rq;
        else
            waiting_head_ = rq;
        waiting_tail_ = rq;
        restart_ = true;
        break;
    }
}

// blk_mq_sched_try_merge(): a back or front merge into a request the
// scheduler still holds, within the request size and segment limits; then
// attempt_back_merge()/attempt_front_merge(): the grown request may now
// touch its queued neighbour in sort order, and the two become one.
bool MemberQueue::attempt_sched_merge(Bio* bio) {
    if (bio->flags & kBioNoMerge) return false;
    bool front = false;
    Request* rq = scheduler_->find_merge(bio, layer_.current(), front);
    if (!rq) return false;
    bool merged = front ? try_front_merge(rq, bio) : try_back_merge(rq, bio);
    if (!merged) return false;
    scheduler_->merged(rq, front);
    if (!front) {
        Request* latter = scheduler_->queued_starting_at(rq->end_sector(), rq->op);
        if (latter && merge_requests(rq, latter)) {
            scheduler_->requests_merged(rq, latter, true);
            layer_.requests().put(latter);
            return true;
        }
    } else {
        Request* former = scheduler_->queued_ending_at(rq->sector, rq->op);
        if (former && merge_requests(former, rq)) {
            scheduler_->requests_merged(former, rq, true);
            layer_.requests().put(rq);
            return true;
        }
    }
    return true;
}

// blk_mq_sched_try_insert_merge() -> elv_attempt_insert_merge(): a request
// entering the scheduler joins the back of a queued request that ends where
// it starts (elv_rqhash_find), and the grown request tries again with the
// one ending at its own start ("the merged request could be merged with
// others, try again"). True when `rq` was merged away (and freed).
bool MemberQueue::attempt_insert_merge(Request* rq) {
    bool queued = false;  // rq is the scheduler's (after the first merge)
    bool any = false;
    while (Request* prev = scheduler_->queued_ending_at(rq->sector, rq->op)) {
        if (prev == rq || !merge_requests(prev, rq)) break;
        scheduler_->requests_merged(prev, rq, queued);
        layer_.requests().put(rq);
        any = true;
        rq = prev;
        queued = true;
    }
    return any;
}

// attempt_merge() with ll_merge_requests_fn()'s limits: `next` joins the
// back of `rq`; blk_account_io_merge_request() counts one merge and takes
// `next` out of the in-flight count; rq keeps the earlier start time.
// The caller frees `next`.
bool MemberQueue::merge_requests(Request* rq, Request* next) {
    if (rq->end_sector() != next->sector || rq->op != next->op) return false;
    if (!rq->mergeable() || !next->mergeable()) return false;
    if (rq->nr_sectors + next->nr_sectors > limits_.max_sectors) return false;
    if (rq->nr_bios + next->nr_bios > limits_.max_segments) return false;
    layer_.trace_rq(TraceAction::BackMerge, this, next);
    rq->bios.append(next->bios);
    rq->nr_bios += next->nr_bios;
    rq->nr_sectors += next->nr_sectors;
    rq->alloc_ns = std::min(rq->alloc_ns, next->alloc_ns);
    next->nr_bios = 0;
    next->nr_sectors = 0;
    stats_.merges[DiskStats::dir(rq->op)]++;
    stats_.in_flight--;
    return true;
}

// The end of a plug flush's batch for this queue (blk_mq_dispatch_list):
// a scheduler that runs the hardware queue at once is run now.
void MemberQueue::end_unplug_batch() {
    if (scheduler_ && scheduler_->runs_queue_at_unplug()) run_queue();
}
// ----------------------------------------------------------------------------

}  // namespace mdsplit
