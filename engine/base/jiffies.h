// The kernel's tick (include/linux/jiffies.h): timers and delayed work are
// kept in jiffies, 1/HZ s each, so a delay asked for in milliseconds is
// rounded up to whole jiffies (msecs_to_jiffies) and fires at a tick.
// Times here are the emulator's clock in ns; jiffy 0 starts at time 0.
#pragma once

#include <cstdint>

namespace mdsplit::jiffies {

// CONFIG_HZ of the modelled kernel: Debian's amd64 kernels are built with
// CONFIG_HZ_250 (/usr/src/linux-config-6.1/config.amd64_none_amd64.xz).
// Kconfig allows 100, 250, 300 and 1000.
constexpr uint32_t kConfigHz = 250;

constexpr uint64_t kNsPerSec = 1'000'000'000;

// The jiffies count at time `ns`.
constexpr uint64_t at(uint64_t ns, uint32_t hz) {
    return ns / kNsPerSec * hz + ns % kNsPerSec * hz / kNsPerSec;
}

// The time at which jiffy `j` starts (the tick that makes jiffies == j).
constexpr uint64_t start_ns(uint64_t j, uint32_t hz) { return (j * kNsPerSec + hz - 1) / hz; }

// msecs_to_jiffies(): rounded up, so any non-zero delay is >= 1 jiffy.
constexpr uint64_t from_msecs(uint64_t ms, uint32_t hz) { return (ms * hz + 999) / 1000; }

// When a timer armed at `now_ns` with `delay` jiffies fires: it expires at
// jiffies + delay (__queue_delayed_work: timer->expires = jiffies + delay),
// i.e. at that tick, between delay - 1 and delay jiffies after `now_ns`.
constexpr uint64_t timer_fires_ns(uint64_t now_ns, uint64_t delay, uint32_t hz) {
    return start_ns(at(now_ns, hz) + delay, hz);
}

}  // namespace mdsplit::jiffies
