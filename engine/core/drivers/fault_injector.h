// Wraps any backend (under or over a timing model) and injects faults into a
// member's requests, as configured by the member's [members.faults] table
// (config/stack_config.h FaultConfig):
//
//   fail_nth          the Nth request submitted to the member fails (1-based,
//                     reads and writes counted together)
//   fail_sectors      a request touching a member sector in [start, end) fails
//   fail_probability  each request fails with this probability, drawn from a
//                     splitmix64 stream seeded with `seed` (one draw per
//                     request, whether or not another fault already hit it)
//   latency_spike     every `every`th request completes `extra` later
//   fail_at           from this time on (since the stack was opened) every
//                     request fails: the member is dead
//
// A failed request never reaches the wrapped backend; it completes with
// -EIO on the next turn of the event loop, so every request still completes
// exactly once and never inside submit().
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>

#include "base/event_loop.h"
#include "config/stack_config.h"
#include "core/drivers/backend.h"

namespace mdsplit {

class FaultInjector final : public Backend {
public:
    // What was injected, by cause (a request hit by several counts once, under
    // the first cause in this order: dead, nth, sectors, random).
    struct Counters {
        uint64_t requests = 0;  // submitted to this member
        uint64_t failed_dead = 0;
        uint64_t failed_nth = 0;
        uint64_t failed_sectors = 0;
        uint64_t failed_random = 0;
        uint64_t spikes = 0;
        uint64_t failed() const {
            return failed_dead + failed_nth + failed_sectors + failed_random;
        }
    };

    // start_ns: the time fail_at counts from (the stack's opening).
    FaultInjector(EventLoop& loop, std::unique_ptr<Backend> inner, const FaultConfig& faults,
                  uint64_t start_ns);
    ~FaultInjector() override;

    void submit(Request* rq) override;
    void kick() override { inner_->kick(); }
    uint64_t size_bytes() const override { return inner_->size_bytes(); }
    const char* kind() const override { return inner_->kind(); }

    Backend& inner() { return *inner_; }
    const FaultConfig& config() const { return faults_; }
    const Counters& counters() const { return counters_; }
    // fail_at has passed: every request fails.
    bool dead() const;

    // The splitmix64 stream the probability draws come from (tests and the
    // Python side reproduce it): next(state) advances and returns a value;
    // a request fails when (value >> 11) * 2^-53 < fail_probability.
    static uint64_t splitmix64(uint64_t& state);
    static double unit_interval(uint64_t value) { return double(value >> 11) * 0x1.0p-53; }

private:
    static void on_inner_complete(void* ctx, Request* rq, int64_t res);
    static void on_fail(void* arg, uint64_t tag);
    static void on_spike_done(void* arg, uint64_t tag);
    bool in_failed_sectors(const Request* rq) const;

    EventLoop& loop_;
    std::unique_ptr<Backend> inner_;
    FaultConfig faults_;
    uint64_t fail_at_abs_ns_ = 0;  // 0: never
    uint64_t rng_state_ = 0;
    Counters counters_;
    std::unordered_set<const Request*> spiked_;  // at the inner backend, to be delayed
};

}  // namespace mdsplit
