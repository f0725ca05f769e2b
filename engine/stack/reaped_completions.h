// Completions reaped from a device and not yet handed to the caller: fio's
// getevents() takes at most iodepth_batch_complete_max (default 1) per call,
// and the rest wait here for the next one, oldest first. No fio types.
#pragma once

#include <cstddef>
#include <vector>

#include "core/block/task_context.h"

namespace mdsplit {

class ReapedCompletions {
public:
    // Completions waiting to be taken.
    size_t waiting() const { return done_.size() - head_; }
    // Where a reap (SharedStack::reap) appends new ones; with `min` waiting
    // asked of it, the reap waits for min + taken-but-kept entries.
    std::vector<IoCompletion>& storage() { return done_; }
    size_t kept() const { return head_; }

    // Hands up to `max` of them, oldest first, to `take`; returns how many.
    template <class Take>
    size_t take(size_t max, Take take) {
        size_t n = waiting() < max ? waiting() : max;
        for (size_t i = head_; i < head_ + n; i++) take(done_[i]);
        head_ += n;
        if (head_ == done_.size()) {
            done_.clear();
            head_ = 0;
        } else if (head_ >= done_.size() - head_) {  // amortized: move fewer than were taken
            done_.erase(done_.begin(), done_.begin() + long(head_));
            head_ = 0;
        }
        return n;
    }

private:
    std::vector<IoCompletion> done_;
    size_t head_ = 0;  // done_[0, head_) are taken
};

}  // namespace mdsplit
