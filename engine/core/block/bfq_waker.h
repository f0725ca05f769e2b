// Waker / woken queue detection, block/bfq-iosched.c bfq_check_waker() as
// in v5.18-rc1 (seed 004's base), and the links bfq_put_queue() undoes.
//
// A queue Q whose process sleeps until another queue W's I/O completes
// (a journal thread, a pipe, a process woken by another) issues its new
// I/O just after W's completions. While Q is in service and idles for
// it, W's requests would wait for Q's idle to end, and Q would wait for
// W: bfq detects the pattern and then injects W's requests during Q's
// idle regardless of the inject limit (bfq_select_queue(), waker branch),
// and Q's requests during W's idle (its woken_list, "blocked_bfqq").
//
// Detection, per new request of a sync queue that has none queued
// (bfq_add_request(): RB_EMPTY_ROOT(&bfqq->sort_list)): the last request
// completed in the device belongs to another queue W, less than 4 ms ago,
// this queue has a long think time (!has_short_ttime), nothing of its own
// in the drive, and W is not already its waker. The third such time W is
// seen in a row, within 128 * slice_idle of the first, W becomes the
// waker and the queue joins W's woken_list.
//
// Versions: 5.19 (Jan Kara, "bfq: Relax waker detection for shared
// queues", "bfq: Allow current waker to defend against a tentative one")
// dropped the `dispatched > 0` and `last_completed_rq_bfqq ==
// bfqq->waker_bfqq` exits and tests the process's requests in flight
// instead of the queue's sort list; 6.1 and 6.12 have that form. The
// counting (3 detections, 128 * slice_idle, 4 ms) is 5.17's ("bfq: Limit
// waker detection in time") and unchanged since.
//
// Not modelled: the waker transfer on queue merging
// (bfq_merge_bfqqs(): queue merging is not modelled).
#pragma once

#include <cstdint>

#include "core/block/bfq_data.h"
#include "core/block/bfq_queue.h"

namespace mdsplit::bfq {

// bfq_check_waker(): called for a new request of sync queue bfqq that
// has no request queued, at now_ns (device time).
void check_waker(BfqData& bfqd, BfqQueue* bfqq, uint64_t now_ns);

// The first queue of bfqq's woken_list (bfq_select_queue()'s
// blocked_bfqq), null when bfqq wakes none.
inline BfqQueue* first_woken(const BfqQueue* bfqq) { return bfqq->woken_list.front(); }

// bfq_put_queue()'s unlinking when bfqq goes away: it leaves its waker's
// woken_list, the queues it woke lose their waker, and it is no longer
// the last completed queue.
void forget_waker_links(BfqData& bfqd, BfqQueue* bfqq);

}  // namespace mdsplit::bfq
