// What every closed-loop workload of the virtual-time runs shares, as fio's
// io_u pool is shared by its engines: the region its blocks are drawn from
// (WorkloadRegion) and `iodepth` slots, each with its own buffer, that keep
// that many I/Os in flight (IoSlots), for the closed-loop driver
// (workload.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/units.h"

namespace mdsplit {

// What a closed-loop workload is, as a fio job names it: the I/O, where,
// how much, how deep.
struct ClosedLoopSpec {
    Op op = Op::Read;
    bool random = false;  // rw=randread / randwrite: blocks drawn from `seed`
    uint64_t block_size = 4096;
    uint64_t offset = 0;       // start of the region
    uint64_t size = 0;         // region size (0 = device size - offset)
    uint64_t total_bytes = 0;  // stop after this many bytes (0 = one pass of the region)
    uint32_t iodepth = 1;
    uint32_t batch = 1;  // I/Os queued per commit (fio's iodepth_batch)
    uint64_t seed = 1;
    uint32_t pid = 1;
    // What messages about the spec's arguments name it by, as its caller
    // took them ("run_workload").
    std::string where = "workload";
};

// The blocks a workload reads or writes: `blocks` of `block_size` bytes
// from `offset`.
struct WorkloadRegion {
    uint64_t offset = 0;
    uint64_t block_size = 0;
    uint64_t blocks = 0;

    uint64_t block_offset(uint64_t block) const { return offset + block * block_size; }
    uint64_t bytes() const { return blocks * block_size; }
};

/**
 * workload_region - the region a workload spec names on a device
 * @device_bytes: the device's size
 * @offset: start of the region (a multiple of @alignment)
 * @size: its size (0 = to the end of the device; never past it)
 * @block_size: each I/O's size
 * @alignment: what block_size and offset must be multiples of (the logical
 *             block size for direct I/O, 1 for buffered I/O)
 * @where: what the messages name the arguments by
 *
 * Throws std::invalid_argument, one line "<where>: <arg>: <value> <what is
 * wrong>; allowed: <what is>", when the block size is 0 or unaligned, the
 * offset unaligned or past the end, the size past the end (it was clipped
 * to the device unsaid), or no whole block fits. A misaligned offset was
 * taken, and every direct I/O of the run then failed (EINVAL).
 */
inline WorkloadRegion workload_region(uint64_t device_bytes, uint64_t offset, uint64_t size,
                                      uint64_t block_size, uint64_t alignment,
                                      const std::string& where = "workload") {
    auto refuse = [&](const char* arg, const std::string& problem, const std::string& allowed) {
        throw std::invalid_argument(where + ": " + arg + ": " + problem + "; allowed: " + allowed);
    };
    const std::string lbs = std::to_string(alignment) + " (the logical block size)";
    const std::string dev = " (" + std::to_string(device_bytes) + " bytes)";
    if (block_size == 0 || block_size % alignment)
        refuse("bs",
               std::to_string(block_size) + (block_size
                                                 ? " is not a multiple of the logical block size"
                                                 : " is not a block size"),
               alignment > 1 ? "a multiple of " + lbs + ", > 0" : "an int > 0");
    if (offset >= device_bytes)
        refuse("offset", std::to_string(offset) + " is past the end of the device" + dev,
               "0.." + std::to_string(device_bytes - 1) +
                   (alignment > 1 ? ", a multiple of " + lbs : ""));
    if (offset % alignment)
        refuse("offset", std::to_string(offset) + " is not a multiple of the logical block size",
               "a multiple of " + lbs + " below " + std::to_string(device_bytes));
    if (size > device_bytes - offset)
        refuse("size",
               std::to_string(size) + " bytes from offset " + std::to_string(offset) +
                   " pass the end of the device" + dev,
               "0 (to the end of the device) or at most " + std::to_string(device_bytes - offset));
    uint64_t region = size ? size : device_bytes - offset;
    WorkloadRegion r{offset, block_size, region / block_size};
    if (!r.blocks)
        refuse("bs",
               std::to_string(block_size) + " is larger than the region (" +
                   std::to_string(region) + " bytes from offset " + std::to_string(offset) + ")",
               "at most the region's size (size, offset)");
    return r;
}

/**
 * slots_needed - how many of @iodepth slots a run can have in flight at once
 * @total_bytes: what the run issues in all (0 = no bound: a time limit)
 *
 * Each slot's buffer is allocated up front: a depth of 1024 for one 16 MiB
 * I/O allocated 16 GiB. No more I/Os than the run issues can be in flight.
 */
inline uint32_t slots_needed(uint32_t iodepth, uint64_t total_bytes, uint64_t block_size) {
    uint32_t depth = iodepth ? iodepth : 1;
    if (!total_bytes || !block_size) return depth;
    uint64_t ios = total_bytes / block_size + (total_bytes % block_size != 0);
    return uint32_t(std::max<uint64_t>(1, std::min<uint64_t>(depth, ios)));
}

// `depth` I/O slots of `block_size` bytes each (page-aligned buffers, each
// filled with its own byte so that a misplaced buffer shows in the data).
// take() hands out the most recently freed slot, as a stack.
class IoSlots {
public:
    IoSlots(uint32_t depth, uint64_t block_size) : issued_at_(depth, 0) {
        for (uint32_t i = 0; i < depth; i++) {
            void* p = nullptr;
            if (posix_memalign(&p, 4096, block_size)) throw std::bad_alloc();
            memset(p, int(0xa5 ^ i), block_size);
            buffers_.emplace_back(static_cast<uint8_t*>(p));
        }
        for (uint32_t i = depth; i > 0; i--) free_.push_back(i - 1);
    }

    uint32_t depth() const { return uint32_t(buffers_.size()); }
    bool any_free() const { return !free_.empty(); }
    uint8_t* buffer(uint32_t slot) { return buffers_[slot].get(); }
    uint64_t issued_at(uint32_t slot) const { return issued_at_[slot]; }

    // Takes the slot on top of the free stack for an I/O issued at `now`.
    uint32_t take(uint64_t now) {
        uint32_t slot = free_.back();
        free_.pop_back();
        issued_at_[slot] = now;
        return slot;
    }
    // Returns a completed I/O's slot; its latency as of `now`.
    uint64_t give_back(uint32_t slot, uint64_t now) {
        free_.push_back(slot);
        return now - issued_at_[slot];
    }
    // Moves the free slot nearest the top whose `ready(slot)` holds to the
    // top (so take() hands it out next); false when none does.
    template <class Ready>
    bool raise_first(Ready ready) {
        for (size_t k = free_.size(); k > 0; k--)
            if (ready(free_[k - 1])) {
                std::swap(free_[k - 1], free_.back());
                return true;
            }
        return false;
    }

private:
    struct Free {
        void operator()(uint8_t* p) const { free(p); }
    };
    std::vector<std::unique_ptr<uint8_t, Free>> buffers_;
    std::vector<uint32_t> free_;  // a stack: the last freed is taken first
    std::vector<uint64_t> issued_at_;
};

}  // namespace mdsplit
