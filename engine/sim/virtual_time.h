// The bounds of the virtual clock the simulation driver (fio_job_model.h)
// keeps to, and that their bindings check arguments against.
//
// A deadline is "now + some time argument" (a start, a runtime, a think
// time, a modelled cost) and the event loop's "no timer" is UINT64_MAX: so
// every time argument is at most kMaxTimeArgNs, and a run stops issuing
// once its clock has passed kTimeHorizonNs. Then now + a few arguments stays
// far below 2^64, and Stack::reap's "now + 2^63" cannot wrap either.
#pragma once

#include <cstdint>
#include <string>

namespace mdsplit {

constexpr uint64_t kMaxTimeArgNs = uint64_t(1) << 60;   // about 36.5 years
constexpr uint64_t kTimeHorizonNs = uint64_t(1) << 62;  // about 146 years

// Why a run stopped at the horizon (the drivers throw it once drained).
inline std::string horizon_message(const std::string& who) {
    return who +
           ": the virtual clock passed 2**62 ns (about 146 years) before the run ended; "
           "allowed: runs that end before it (smaller think, start, ramp or run times, or "
           "less I/O)";
}

// A run bounded by time alone never ends when its I/O completes in zero
// virtual time (a stack without a timing model, no think time): the clock
// stays put while the I/O goes round. With I/O that takes time, a task
// issues at most its iodepth I/Os at one instant (a slot is reused only once
// its I/O has completed), so one that issues kZeroTimeIos more than that at
// one instant is taken as such a run.
class InstantCounter {
public:
    static constexpr uint64_t kZeroTimeIos = 65536;

    // Notes `ios` issued at `now`; true once the clock looks stuck.
    bool stuck(uint64_t now, uint64_t ios, uint64_t depth) {
        if (now != instant_) {
            instant_ = now;
            ios_ = 0;
        }
        ios_ += ios;
        return ios_ > depth + kZeroTimeIos;
    }

private:
    uint64_t instant_ = 0;
    uint64_t ios_ = 0;
};

// Why such a run was refused: `key` is what bounds it by time alone,
// `remedy` what would let it end.
inline std::string zero_time_message(const std::string& who, const std::string& key,
                                     const std::string& remedy) {
    return who + ": " + key +
           ": no virtual time passes on this stack (its I/O completes at once, nothing else "
           "takes time), so the run would never end; allowed: " +
           remedy;
}

}  // namespace mdsplit
