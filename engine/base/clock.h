// Time source of the core: the fio engine runs on the real monotonic clock,
// the Python bindings on a virtual clock that only the event loop advances,
// so a whole experiment runs deterministically in milliseconds.
#pragma once

#include <cstdint>
#include <ctime>

namespace mdsplit {

class Clock {
public:
    virtual ~Clock() = default;
    virtual uint64_t now_ns() const = 0;
    virtual bool is_virtual() const = 0;
};

class RealClock final : public Clock {
public:
    uint64_t now_ns() const override {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
    }
    bool is_virtual() const override { return false; }
};

class VirtualClock final : public Clock {
public:
    uint64_t now_ns() const override { return now_; }
    bool is_virtual() const override { return true; }
    void advance_to(uint64_t t) {
        if (t > now_) now_ = t;
    }

private:
    uint64_t now_ = 0;
};

}  // namespace mdsplit
