// A device's service time for one request, in two phases:
//   1. command: `command` ns on one of `parallelism` channels (NCQ tags,
//      flash dies): these overlap with each other;
//   2. media: `random_penalty` (when the request does not start where the
//      previous one ended) plus bytes / bandwidth, on the device-wide data
//      path, which serves one request at a time.
//   done = max(channel_start + command, media_free) + penalty + bytes / bandwidth
// A non-sequential request also spends `random_command` in its command phase
// (a flash read, overlapped across dies); `random_penalty` (serialized) is
// paid only when the previous request was at least `prefetch_threshold`
// bytes: a stream whose prefetch is wasted, not small random I/O.
// `prefetch_window` (reads only) is how far that prefetch reaches: after a
// read of at least `prefetch_threshold`, a read starting at most this many
// bytes past its end (a forward skip, e.g. over a RAID5 parity chunk) is
// served from the prefetched data, as a sequential read: no random_command,
// no random_penalty. "request" makes the reach the previous request's size.
// So at queue depth 1 a request takes command + penalty + bytes/bandwidth;
// at depth >= parallelism a stream of B-byte requests runs at
//   min(parallelism / (command + penalty + B/bw), 1 / (penalty + B/bw)) requests/s,
// i.e. large sequential I/O is bandwidth bound and seeks cost device time.
// Writes may have their own `write_command`, `write_bandwidth` and
// `write_random_penalty`.
// `jitter` adds an exponentially distributed extra to each command phase
// (mean `jitter`, from the fixed sequence `jitter_seed` names): latency
// varies as on a real drive, and the same run repeats exactly.
// `die_stripe` (a size) places the data on the channels as on flash dies:
// byte b lives on die (b / die_stripe) % parallelism, and a request's
// command phase waits for the die holding its first byte even when another
// die is idle; its media phase then runs on that die too (each die has its
// own data path, so requests on different dies finish out of order). Random small reads then
// collide on dies as on a real NVMe drive: the latency grows gradually with the queue depth (at
// depth n about (n - 1) / (2 x parallelism) of a command more), instead of staying flat up to depth
// = parallelism and then climbing.
#pragma once

#include <cstdint>
#include <vector>

#include "base/units.h"
#include "config/stack_config.h"

namespace mdsplit {

class TimingModel {
public:
    explicit TimingModel(const TimingModelConfig& config);

    // Reserves a channel for a request arriving at `now`; returns its
    // modelled completion time.
    uint64_t schedule(uint64_t now, Op op, sector_t sector, uint32_t nr_sectors);
    // Service time of one request (no queueing), and its two phases.
    uint64_t service_ns(Op op, uint64_t bytes, bool sequential) const;
    uint64_t command_ns(Op op) const;
    uint64_t command_ns(Op op, bool sequential) const;
    uint64_t media_ns(Op op, uint64_t bytes, bool sequential) const;
    const TimingModelConfig& config() const { return config_; }

private:
    TimingModelConfig config_;
    std::vector<uint64_t> channel_free_ns_;
    uint64_t media_free_ns_ = 0;
    sector_t last_end_ = ~sector_t(0);
    uint64_t last_bytes_ = ~uint64_t(0);
    uint64_t jitter_state_;  // splitmix64 state
    uint64_t jitter_sample_ns();
    bool in_prefetch_window(Op op, sector_t sector) const;
    uint64_t& channel_for(sector_t sector);
};

}  // namespace mdsplit
