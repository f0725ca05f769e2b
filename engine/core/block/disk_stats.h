// Per-device counters with the meaning of /proc/diskstats
// (block/genhd.c diskstats_show), from which iostat derives r/s, rrqm/s,
// %rrqm, rareq-sz, r_await, aqu-sz and %util, and the d/s, drqm/s, ...
// discard columns from the third direction (STAT_DISCARD). Kept in
// nanoseconds.
#pragma once

#include <cstdint>

#include "base/units.h"

namespace mdsplit {

struct DiskStats {
    uint64_t ios[3] = {0, 0, 0};     // completed requests (bios on a bio-based device)
    uint64_t merges[3] = {0, 0, 0};  // bios merged into an existing request
    uint64_t sectors[3] = {0, 0, 0};
    uint64_t ticks_ns[3] = {0, 0, 0};  // sum of request lifetimes (start -> completion)
    uint64_t errors[3] = {0, 0, 0};
    uint64_t in_flight = 0;
    uint64_t io_ticks_ns = 0;       // time with at least one request in flight
    uint64_t time_in_queue_ns = 0;  // sum of lifetimes (weighted io ticks)
    uint64_t busy_since_ns = 0;

    // op_stat_group(): reads (and flushes) 0, writes 1, discards 2.
    static int dir(Op op) { return op == Op::Write ? 1 : op == Op::Discard ? 2 : 0; }

    // blk_account_io_start()
    void start(uint64_t now) {
        if (in_flight++ == 0) busy_since_ns = now;
    }
    // blk_account_io_done()
    void done(Op op, uint32_t nr_sectors, uint64_t start_ns, uint64_t now, bool failed) {
        int d = dir(op);
        ios[d]++;
        sectors[d] += nr_sectors;
        ticks_ns[d] += now - start_ns;
        time_in_queue_ns += now - start_ns;
        if (failed) errors[d]++;
        if (--in_flight == 0) io_ticks_ns += now - busy_since_ns;
    }
    // io_ticks including a busy period still running at `now`.
    uint64_t io_ticks_at(uint64_t now) const {
        return io_ticks_ns + (in_flight ? now - busy_since_ns : 0);
    }
};

}  // namespace mdsplit
