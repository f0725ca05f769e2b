// A block device in the stack: either bio-based and stacked (md-like: it
// remaps and resubmits bios) or request-based (a member queue over a
// backend). Each has its name, dev_t, capacity, limits and diskstats.
#pragma once

#include <cstdint>
#include <string>

#include "core/block/bio.h"
#include "core/block/disk_stats.h"

namespace mdsplit {

class Tracer;

class BlockDevice {
public:
    BlockDevice(std::string name, uint32_t devt) : name_(std::move(name)), devt_(devt) {}
    virtual ~BlockDevice() = default;
    BlockDevice(const BlockDevice&) = delete;
    BlockDevice& operator=(const BlockDevice&) = delete;

    // ->submit_bio() for a stacked device, blk_mq_submit_bio() for a member.
    virtual void submit_bio(Bio* bio) = 0;
    // BD_HAS_SUBMIT_BIO: bio-based devices run the two-list loop.
    virtual bool stacked() const = 0;
    // trace_block_bio_complete(), called by bio_endio() for a bio whose Q was
    // traced and whose completion was not traced by a request.
    virtual void trace_bio_complete(const Bio* /*bio*/) {}
    // Members this device stopped using during the run because their I/O
    // failed (md_error()), bit i for member i; members failed from the start
    // are not in it. Their contents are stale from then on.
    virtual uint64_t members_failed_while_running() const { return 0; }
    // Every member this device takes as failed, from the start or since, bit i.
    virtual uint64_t failed_members() const { return 0; }
    // Takes member i as failed before any I/O, as md assembles an array whose
    // superblocks record it Faulty. A device without redundancy ignores it.
    virtual void assemble_failed(uint32_t /*member*/) {}

    const std::string& name() const { return name_; }
    uint32_t devt() const { return devt_; }
    sector_t capacity() const { return capacity_; }
    uint32_t max_sectors() const { return max_sectors_; }
    uint32_t logical_block_size() const { return logical_block_size_; }
    DiskStats& stats() { return stats_; }
    const DiskStats& stats() const { return stats_; }

protected:
    std::string name_;
    uint32_t devt_;
    sector_t capacity_ = 0;
    uint32_t max_sectors_ = 2048;
    uint32_t logical_block_size_ = 512;
    DiskStats stats_;
};

// blktrace's dev_t encoding (MKDEV in kernel/trace/blktrace.c).
inline constexpr uint32_t make_devt(uint32_t major, uint32_t minor) { return major << 20 | minor; }

}  // namespace mdsplit
