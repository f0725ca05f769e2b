// MemberQueue's merges (block/blk-merge.c): a bio joins a plugged request
// (blk_attempt_plug_merge) or a scheduler's (blk_mq_sched_try_merge), and
// requests join each other (attempt_merge; the elevator's insert merge),
// within the queue's size and segment limits.
#include "core/block/member_queue.h"

#include <algorithm>

namespace mdsplit {

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

}  // namespace mdsplit
