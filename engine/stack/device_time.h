// Device time: the one place slow motion (DeviceConfig::time_scale) is
// applied. A stack modelled in slow motion does everything k times slower
// than the device it models, so that a host that cannot keep up with a
// GB/s device still completes every request at its modelled time. Every
// duration the TOML gives in the device's own time -- a timing model's
// command and penalty costs, a fault's latency spike and its fail_at -- is
// turned into the event loop's time here; rates are divided by k. (BFQ runs
// on device time itself: BfqScheduler::Options::time_scale.)
#pragma once

#include <cstdint>
#include <optional>

#include "base/device_clock.h"
#include "config/stack_config.h"  // TimingModelConfig, FaultConfig

namespace mdsplit {

class DeviceTime {
public:
    explicit DeviceTime(double time_scale) : clock_(time_scale) {}

    double scale() const { return clock_.scale(); }
    /** to_loop_ns() - a device-time duration in the event loop's time. */
    uint64_t to_loop_ns(uint64_t device_ns) const { return clock_.loop_ns(device_ns); }
    /** to_loop_rate() - a device's bytes/s as the loop sees them. */
    uint64_t to_loop_rate(uint64_t device_bps) const { return clock_.loop_rate(device_bps); }

    /** model() - @m with every duration and rate in loop time. */
    TimingModelConfig model(TimingModelConfig m) const {
        m.command_ns = to_loop_ns(m.command_ns);
        m.write_command_ns = to_loop_ns(m.write_command_ns);
        m.random_penalty_ns = to_loop_ns(m.random_penalty_ns);
        if (m.write_random_penalty_ns != ~uint64_t(0))  // unset: the read penalty
            m.write_random_penalty_ns = to_loop_ns(m.write_random_penalty_ns);
        m.random_command_ns = to_loop_ns(m.random_command_ns);
        m.jitter_ns = to_loop_ns(m.jitter_ns);
        m.bandwidth_bps = to_loop_rate(m.bandwidth_bps);
        m.write_bandwidth_bps = to_loop_rate(m.write_bandwidth_bps);
        return m;
    }

    /** faults() - @f with its delays (latency spike, fail_at) in loop time. */
    FaultConfig faults(FaultConfig f) const {
        f.spike_extra_ns = to_loop_ns(f.spike_extra_ns);
        if (f.fail_at_ns) f.fail_at_ns = to_loop_ns(*f.fail_at_ns);
        return f;
    }

private:
    DeviceClock clock_;
};

}  // namespace mdsplit
