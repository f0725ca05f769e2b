// MemberQueue's blk-mq part (block/blk-mq.c): a bio is split to the
// queue's limits, merged into the submitter's plug or a scheduler's
// request, or becomes a request; requests are issued up to the queue depth
// and end in blk_update_request()'s order. The merges are blk_merge.cpp's,
// the scheduler's dispatch blk_mq_sched.cpp's.
#include "core/block/member_queue.h"

namespace mdsplit {

MemberQueue::MemberQueue(BlockLayer& layer, std::string name, uint32_t devt,
                         std::unique_ptr<Backend> backend, const MemberQueueLimits& limits,
                         std::unique_ptr<MemberDelivery> delivery)
    : BlockDevice(std::move(name), devt),
      layer_(layer),
      backend_(std::move(backend)),
      delivery_(delivery ? std::move(delivery) : std::make_unique<DirectDelivery>()),
      limits_(limits) {
    capacity_ = backend_->size_bytes() >> kSectorShift;
    max_sectors_ = limits.max_sectors;
    logical_block_size_ = limits.logical_block_size;
    delivery_->attach(*backend_, &MemberQueue::end_request, this);
}

MemberQueue::~MemberQueue() {
    if (delay_timer_) layer_.loop().cancel(delay_timer_);
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
    wait_for_tag(rq);
}

void MemberQueue::wait_for_tag(Request* rq) {
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
    delivery_->submit(rq);
}

void MemberQueue::end_request(void* ctx, Request* rq, int64_t res) {
    static_cast<MemberQueue*>(ctx)->complete_request(rq, res);
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
    issue_waiting();
}

// The requests waiting on the dispatch list (hctx->dispatch) take the free
// driver tags, in order.
void MemberQueue::issue_waiting() {
    while (waiting_head_ && in_flight_ < limits_.queue_depth) {
        Request* next = waiting_head_;
        waiting_head_ = next->next;
        if (!waiting_head_) waiting_tail_ = nullptr;
        next->next = nullptr;
        issue(next);
    }
}

}  // namespace mdsplit
