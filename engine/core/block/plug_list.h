// struct blk_plug: requests held back by a submitter until it unplugs, so
// that adjacent bios merge first (block/blk-core.c blk_start_plug,
// block/blk-mq.c blk_add_rq_to_plug, blk_mq_flush_plug_list).
#pragma once

#include <cstdint>

#include "core/block/request.h"

namespace mdsplit {

inline constexpr uint32_t kBlkMaxRequestCount = 32;        // BLK_MAX_REQUEST_COUNT
inline constexpr uint64_t kBlkPlugFlushSize = 128 * 1024;  // BLK_PLUG_FLUSH_SIZE

struct PlugList {
    bool active = false;
    Request* head = nullptr;  // oldest; the list is FIFO as in Linux >= 6.13
    Request* tail = nullptr;  // newest
    uint32_t rq_count = 0;
    bool multiple_queues = false;
    // plug->cur_ktime: blk_time_get_ns() reads the clock once and returns
    // that time to every caller under the plug until a flush (or the task
    // being scheduled) invalidates it (block/blk.h, blk_plug_invalidate_ts).
    // 0 = not read yet, as in the kernel.
    uint64_t cur_ktime = 0;

    // blk_time_get_ns() for a task holding this plug.
    uint64_t time_ns(uint64_t now) {
        if (!cur_ktime) cur_ktime = now;
        return cur_ktime;
    }

    // blk_plug_max_rq_count()
    uint32_t max_rq_count() const {
        return multiple_queues ? 2 * kBlkMaxRequestCount : kBlkMaxRequestCount;
    }
    void push(Request* rq) {
        rq->next = nullptr;
        if (tail)
            tail->next = rq;
        else
            head = rq;
        tail = rq;
        rq_count++;
    }
    Request* take_all() {
        Request* list = head;
        head = tail = nullptr;
        rq_count = 0;
        multiple_queues = false;
        return list;
    }
};

}  // namespace mdsplit
