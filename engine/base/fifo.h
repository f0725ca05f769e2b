// A first-in first-out queue in one growing array: push at the back, pop at
// the front by moving a head index. std::deque allocates and frees a block
// every few dozen elements as a queue that never stays empty cycles through
// it; this one allocates only while it grows, and reuses its array once the
// queue drains (or moves the live part down when the dead part is the
// larger). For the event loop's deferred work, run once per I/O.
#pragma once

#include <cstddef>
#include <vector>

namespace mdsplit {

template <class T>
class Fifo {
public:
    bool empty() const { return head_ == items_.size(); }
    size_t size() const { return items_.size() - head_; }
    const T& front() const { return items_[head_]; }
    void push_back(const T& item) { items_.push_back(item); }

    // Removes the front element (the queue must not be empty).
    void pop_front() {
        if (++head_ == items_.size()) {
            items_.clear();
            head_ = 0;
        } else if (head_ > 64 && head_ * 2 > items_.size()) {
            items_.erase(items_.begin(), items_.begin() + std::ptrdiff_t(head_));
            head_ = 0;
        }
    }

private:
    std::vector<T> items_;
    size_t head_ = 0;
};

}  // namespace mdsplit
