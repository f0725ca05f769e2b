// Ending a long virtual-time run early (Ctrl-C in a Python session).
//
// The driver of a run (run_fio_jobs, fio_job_model.h) asks an InterruptPoll
// on every pass of its loop. Once it has said yes, it stops issuing, lets
// what is in flight complete (its buffers are in use until then, and the
// stack stays usable), and throws RunInterrupted. The bindings poll Python's
// signal handlers, so the caller sees the KeyboardInterrupt they raised.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <utility>

namespace mdsplit {

struct RunInterrupted : std::runtime_error {
    RunInterrupted() : std::runtime_error("mdsplit: run interrupted") {}
};

class InterruptPoll {
public:
    // Passes of a driver's loop between two calls of `asked` (a pass is a
    // few microseconds: a poll every few milliseconds).
    static constexpr uint32_t kPassesPerPoll = 1024;

    InterruptPoll() = default;
    explicit InterruptPoll(std::function<bool()> asked) : asked_(std::move(asked)) {}

    // True once the run has been asked to end, and from then on.
    bool requested() {
        if (requested_ || !asked_ || ++passes_ < kPassesPerPoll) return requested_;
        passes_ = 0;
        requested_ = asked_();
        return requested_;
    }

    // Throws RunInterrupted if the run was asked to end: the driver calls it
    // once its I/O has drained.
    void throw_if_requested() const {
        if (requested_) throw RunInterrupted();
    }

private:
    std::function<bool()> asked_;
    uint32_t passes_ = 0;
    bool requested_ = false;
};

}  // namespace mdsplit
