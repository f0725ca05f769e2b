// A request on a member queue: merged bios covering one contiguous range
// (struct request). Its data is the bios' buffers in order.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <vector>

#include "core/block/bio.h"

namespace mdsplit {

class MemberQueue;

enum RequestFlags : uint16_t {
    kRqNoMerge = 1u << 0,  // REQ_NOMERGE (from a split front)
};

struct Request {
    Op op = Op::Read;
    uint16_t flags = 0;
    sector_t sector = 0;
    uint32_t nr_sectors = 0;
    BioList bios;
    uint32_t nr_bios = 0;
    MemberQueue* queue = nullptr;
    uint32_t pid = 0;
    uint64_t alloc_ns = 0;     // start_time_ns: iostat's await counts from here
    uint64_t issue_ns = 0;     // io_start_time_ns
    uint64_t issue_seq = 0;    // order of issue on its queue
    uint64_t real_due_ns = 0;  // virtual clock over real I/O: when it is due (EventLoop)
    bool real_tracked = false, real_arrived = false;
    uint8_t* write_behind_copy = nullptr;  // a write-behind copy's data (MemberQueue)
    int32_t error = 0;
    Request* next = nullptr;  // plug list / dispatch list
    void* sched_data = nullptr;
    class Backend* ring_owner = nullptr;  // the io_uring backend a CQE returns to
    uint64_t model_done_ns = 0;           // timing model: modelled completion time
    int64_t result = 0;                   // backend result held until model_done_ns
    std::vector<iovec> iov;               // built by the backend from the bios

    uint64_t bytes() const { return uint64_t(nr_sectors) << kSectorShift; }
    sector_t end_sector() const { return sector + nr_sectors; }
    bool mergeable() const { return !(flags & kRqNoMerge); }

    // Gathers the bios' buffers, joining adjacent ones, into iov.
    void build_iov() {
        iov.clear();
        for (Bio* b = bios.head; b; b = b->next) {
            // Addresses as integers: bios without data (null backend) have
            // a null buffer, and null + offset is undefined (clang UBSan).
            if (!iov.empty() &&
                reinterpret_cast<uintptr_t>(iov.back().iov_base) + iov.back().iov_len ==
                    reinterpret_cast<uintptr_t>(b->data))
                iov.back().iov_len += b->bytes();
            else
                iov.push_back(iovec{b->data, size_t(b->bytes())});
        }
    }
};

}  // namespace mdsplit
