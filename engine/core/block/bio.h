// A bio: one contiguous range of sectors on one device, with its data in one
// contiguous host buffer. Splits and clones chain to their parent like the
// kernel's bio_chain(): the parent completes when its own I/O and every
// chained child have completed (bio_remaining_done / bio_chain_endio).
#pragma once

#include <cstdint>

#include "base/units.h"

namespace mdsplit {

class BlockDevice;
class BioPool;
struct Bio;

using BioEndIo = void (*)(Bio* bio);

enum BioFlags : uint16_t {
    kBioNoMerge = 1u << 0,    // REQ_NOMERGE: split fronts never merge
    kBioTraced = 1u << 1,     // BIO_TRACE_COMPLETION: Q already traced
    kBioSync = 1u << 2,       // REQ_SYNC
    kBioAccounted = 1u << 3,  // bio-based device accounting started
};

struct Bio {
    Op op = Op::Read;
    uint16_t flags = 0;
    sector_t sector = 0;
    uint32_t nr_sectors = 0;
    BlockDevice* dev = nullptr;
    uint8_t* data = nullptr;  // nr_sectors * 512 bytes of host memory (may be null: null backend)

    Bio* parent = nullptr;  // bio_chain(): completes into this one
    int32_t remaining = 1;  // __bi_remaining
    int32_t error = 0;      // negative errno (bi_status)
    uint64_t resid = 0;     // bytes not transferred (short read)
    BioEndIo end_io = nullptr;
    void* private_data = nullptr;
    uint64_t tag = 0;

    uint32_t pid = 0;         // the submitter (fio job) for traces and the scheduler
    uint64_t start_ns = 0;    // accounting start on a bio-based device
    Bio* next = nullptr;      // bio_list / request chain link
    BioPool* pool = nullptr;  // where it returns when put

    uint64_t bytes() const { return uint64_t(nr_sectors) << kSectorShift; }
    sector_t end_sector() const { return sector + nr_sectors; }
};

// bio_chain(child, parent)
inline void bio_chain(Bio* child, Bio* parent) {
    child->parent = parent;
    parent->remaining++;
}

// A singly linked FIFO of bios (struct bio_list) with head insertion.
struct BioList {
    Bio* head = nullptr;
    Bio* tail = nullptr;
    bool empty() const { return head == nullptr; }
    void push_back(Bio* b) {
        b->next = nullptr;
        if (tail)
            tail->next = b;
        else
            head = b;
        tail = b;
    }
    void push_front(Bio* b) {
        b->next = head;
        head = b;
        if (!tail) tail = b;
    }
    Bio* pop_front() {
        Bio* b = head;
        if (b) {
            head = b->next;
            if (!head) tail = nullptr;
            b->next = nullptr;
        }
        return b;
    }
    // bio_list_merge(): appends other, leaving it empty.
    void append(BioList& other) {
        if (other.empty()) return;
        if (tail)
            tail->next = other.head;
        else
            head = other.head;
        tail = other.tail;
        other.head = other.tail = nullptr;
    }
};

}  // namespace mdsplit
