#include "core/drivers/timing_model.h"

#include <algorithm>
#include <cmath>

namespace mdsplit {

TimingModel::TimingModel(const TimingModelConfig& config)
    : config_(config),
      channel_free_ns_(std::max<uint32_t>(1, config.parallelism), 0),
      // splitmix64 seeded per jitter_seed (0: the default sequence).
      jitter_state_(0x9E3779B97F4A7C15ull + config.jitter_seed * 0xD1B54A32D192ED03ull) {}

uint64_t TimingModel::service_ns(Op op, uint64_t bytes, bool sequential) const {
    return command_ns(op, sequential) + media_ns(op, bytes, sequential);
}

uint64_t TimingModel::command_ns(Op op, bool sequential) const {
    return command_ns(op) + (sequential ? 0 : config_.random_command_ns);
}

uint64_t TimingModel::command_ns(Op op) const {
    return op == Op::Write && config_.write_command_ns ? config_.write_command_ns
                                                       : config_.command_ns;
}

uint64_t TimingModel::media_ns(Op op, uint64_t bytes, bool sequential) const {
    if (op == Op::Discard) return 0;  // a command without data: its command cost only
    uint64_t bw = op == Op::Write && config_.write_bandwidth_bps ? config_.write_bandwidth_bps
                                                                 : config_.bandwidth_bps;
    uint64_t transfer = bw ? uint64_t((__uint128_t(bytes) * 1'000'000'000ull) / bw) : 0;
    uint64_t penalty = op == Op::Write && config_.write_random_penalty_ns != ~uint64_t(0)
                           ? config_.write_random_penalty_ns
                           : config_.random_penalty_ns;
    return transfer + (sequential ? 0 : penalty);
}

// An exponential sample with mean jitter_ns (inverse CDF of a splitmix64
// uniform in (0, 1]).
uint64_t TimingModel::jitter_sample_ns() {
    if (!config_.jitter_ns) return 0;
    uint64_t z = (jitter_state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double u = (double(z >> 11) + 1.0) * 0x1.0p-53;
    return uint64_t(-std::log(u) * double(config_.jitter_ns));
}

// The channel a request's command phase runs on: the die holding its first
// byte with die_stripe, else the one free first.
uint64_t& TimingModel::channel_for(sector_t sector) {
    if (!config_.die_stripe_bytes)
        return *std::min_element(channel_free_ns_.begin(), channel_free_ns_.end());
    uint64_t unit = (uint64_t(sector) << kSectorShift) / config_.die_stripe_bytes;
    return channel_free_ns_[unit % channel_free_ns_.size()];
}

// A read starting within the prefetch window past the previous request's end
// finds its data already read ahead, as if it followed on directly (the
// caller asks only behind a streaming read).
bool TimingModel::in_prefetch_window(Op op, sector_t sector) const {
    if (op != Op::Read || last_end_ == ~sector_t(0) || sector <= last_end_) return false;
    uint64_t window = config_.prefetch_window_bytes == TimingModelConfig::kPrefetchWindowRequest
                          ? last_bytes_
                          : config_.prefetch_window_bytes;
    return (uint64_t(sector - last_end_) << kSectorShift) <= window;
}

uint64_t TimingModel::schedule(uint64_t now, Op op, sector_t sector, uint32_t nr_sectors) {
    bool streaming = last_bytes_ >= config_.prefetch_threshold_bytes;
    bool sequential = sector == last_end_ || (streaming && in_prefetch_window(op, sector));
    uint64_t bytes = uint64_t(nr_sectors) << kSectorShift;
    last_end_ = sector + nr_sectors;
    last_bytes_ = bytes;
    uint64_t& channel = channel_for(sector);
    uint64_t command_done =
        std::max(now, channel) + command_ns(op, sequential) + jitter_sample_ns();
    uint64_t media = media_ns(op, bytes, sequential || !streaming);
    if (config_.die_stripe_bytes) {  // each die has its own data path: no order across dies
        channel = command_done + media;
        return channel;
    }
    uint64_t media_start = std::max(command_done, media_free_ns_);
    uint64_t done = media_start + media;
    media_free_ns_ = done;
    channel = done;
    return done;
}

}  // namespace mdsplit
