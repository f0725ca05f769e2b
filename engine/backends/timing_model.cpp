#include "backends/timing_model.h"

#include <algorithm>

namespace mdsplit {

TimingModel::TimingModel(const TimingModelConfig& config)
    : config_(config), channel_free_ns_(std::max<uint32_t>(1, config.parallelism), 0) {}

uint64_t TimingModel::service_ns(Op op, uint64_t bytes, bool sequential) const {
    bool write = op == Op::Write;
    uint64_t command = write && config_.write_command_ns ? config_.write_command_ns : config_.command_ns;
    uint64_t bw = write && config_.write_bandwidth_bps ? config_.write_bandwidth_bps : config_.bandwidth_bps;
    uint64_t transfer = bw ? uint64_t((__uint128_t(bytes) * 1'000'000'000ull) / bw) : 0;
    return command + transfer + (sequential ? 0 : config_.random_penalty_ns);
}

uint64_t TimingModel::schedule(uint64_t now, Op op, sector_t sector, uint32_t nr_sectors) {
    bool sequential = sector == last_end_;
    last_end_ = sector + nr_sectors;
    auto channel = std::min_element(channel_free_ns_.begin(), channel_free_ns_.end());
    uint64_t start = std::max(now, *channel);
    uint64_t done = start + service_ns(op, uint64_t(nr_sectors) << kSectorShift, sequential);
    *channel = done;
    return done;
}

}  // namespace mdsplit
