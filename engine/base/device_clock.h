// Device time: slow motion's one conversion. A stack modelled in slow
// motion (DeviceConfig::time_scale = k) does everything k times slower than
// the device it models, so that a host that cannot keep up with a GB/s
// device still completes every request at its modelled time. The event
// loop runs on loop time; the modelled device, its timing model and the
// kernel's clock (jiffies, bfq's ktime, blk-mq's delayed work) run on
// device time = loop time / k. Every conversion between the two goes
// through this class, so that the rounding is one rule everywhere.
#pragma once

#include <cstdint>

namespace mdsplit {

class DeviceClock {
public:
    /** DeviceClock() - a clock @time_scale times slower than the loop; <= 0 means 1. */
    explicit DeviceClock(double time_scale) : k_(time_scale > 0 ? time_scale : 1.0) {}

    double scale() const { return k_; }

    /** loop_ns() - a device-time duration or instant in the event loop's time. */
    uint64_t loop_ns(uint64_t device_ns) const {
        return k_ == 1.0 ? device_ns : uint64_t(double(device_ns) * k_);
    }
    /** device_ns() - a loop-time instant or duration in device time. */
    uint64_t device_ns(uint64_t loop_ns) const {
        return k_ == 1.0 ? loop_ns : uint64_t(double(loop_ns) / k_);
    }
    /** loop_rate() - a device's bytes/s as the loop sees them. */
    uint64_t loop_rate(uint64_t device_bps) const {
        return k_ == 1.0 ? device_bps : uint64_t(double(device_bps) / k_);
    }

private:
    double k_;
};

}  // namespace mdsplit
