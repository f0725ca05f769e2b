// A free list of objects, so the hot path allocates nothing once warm.
#pragma once

#include <memory>
#include <vector>

namespace mdsplit {

template <typename T>
class ObjectPool {
public:
    T* get() {
        if (free_.empty()) {
            owned_.push_back(std::make_unique<T>());
            return owned_.back().get();
        }
        T* t = free_.back();
        free_.pop_back();
        return t;
    }
    void put(T* t) { free_.push_back(t); }
    size_t allocated() const { return owned_.size(); }
    size_t outstanding() const { return owned_.size() - free_.size(); }

private:
    std::vector<std::unique_ptr<T>> owned_;
    std::vector<T*> free_;
};

}  // namespace mdsplit
