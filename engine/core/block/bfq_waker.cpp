// bfq_check_waker() (v5.18-rc1 block/bfq-iosched.c): see bfq_waker.h.
#include "core/block/bfq_waker.h"

namespace mdsplit::bfq {

namespace {

constexpr uint64_t kWakerWindowNs = 4'000'000;  // 4 * NSEC_PER_MSEC
constexpr uint64_t kDetectionSpan = 128;        // * bfq_slice_idle
constexpr uint32_t kDetectionsToConfirm = 3;

// hlist_del_init(&bfqq->woken_list_node)
void leave_woken_list(BfqQueue* bfqq) {
    if (!bfqq->woken_in) return;
    bfqq->woken_in->woken_list.erase(bfqq);
    bfqq->woken_in = nullptr;
}

// The tentative waker seen again, or a new one (the first detection, a
// different queue, or the old detection started too long ago).
void count_detection(BfqData& bfqd, BfqQueue* bfqq, BfqQueue* waker, uint64_t now_ns) {
    if (waker != bfqq->tentative_waker_bfqq ||
        now_ns > bfqq->waker_detection_started_ns + kDetectionSpan * bfqd.slice_idle_ns) {
        bfqq->tentative_waker_bfqq = waker;
        bfqq->num_waker_detections = 1;
        bfqq->waker_detection_started_ns = now_ns;
    } else {
        bfqq->num_waker_detections++;
    }
}

// The tentative waker confirmed: bfqq moves to its woken_list.
void set_waker(BfqQueue* bfqq, BfqQueue* waker) {
    bfqq->waker_bfqq = waker;
    bfqq->tentative_waker_bfqq = nullptr;
    leave_woken_list(bfqq);
    waker->woken_list.push_front(bfqq);  // hlist_add_head
    bfqq->woken_in = waker;
    bfqq->stats.wakers_set++;
}

}  // namespace

void check_waker(BfqData& bfqd, BfqQueue* bfqq, uint64_t now_ns) {
    BfqQueue* last = bfqd.last_completed_rq_bfqq;
    if (!last || last == bfqq || bfqq->has_short_ttime || bfqq->dispatched > 0 ||
        now_ns - bfqd.last_completion_ns >= kWakerWindowNs || last == bfqq->waker_bfqq)
        return;
    count_detection(bfqd, bfqq, last, now_ns);
    if (bfqq->num_waker_detections == kDetectionsToConfirm) set_waker(bfqq, last);
}

void forget_waker_links(BfqData& bfqd, BfqQueue* bfqq) {
    leave_woken_list(bfqq);
    while (BfqQueue* woken = bfqq->woken_list.front()) {
        woken->waker_bfqq = nullptr;
        leave_woken_list(woken);
    }
    if (bfqd.last_completed_rq_bfqq == bfqq) bfqd.last_completed_rq_bfqq = nullptr;
}

}  // namespace mdsplit::bfq
