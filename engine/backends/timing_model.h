// A device's service time for one request:
//   service = command + bytes / bandwidth + (non-sequential ? random_penalty : 0)
// served by `parallelism` independent channels: a request starts when it
// arrives or when the earliest channel frees, whichever is later. So a
// sequential stream of B-byte requests at queue depth >= parallelism runs at
//   parallelism * B / (command + B / bandwidth)   bytes/s, capped by nothing else,
// and a random one pays random_penalty per request on top.
#pragma once

#include <cstdint>
#include <vector>

#include "config/stack_config.h"
#include "core/units.h"

namespace mdsplit {

class TimingModel {
public:
    explicit TimingModel(const TimingModelConfig& config);

    // Reserves a channel for a request arriving at `now`; returns its
    // modelled completion time.
    uint64_t schedule(uint64_t now, Op op, sector_t sector, uint32_t nr_sectors);
    // Service time of one request (no queueing).
    uint64_t service_ns(Op op, uint64_t bytes, bool sequential) const;
    const TimingModelConfig& config() const { return config_; }

private:
    TimingModelConfig config_;
    std::vector<uint64_t> channel_free_ns_;
    sector_t last_end_ = ~sector_t(0);
};

}  // namespace mdsplit
