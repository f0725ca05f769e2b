#include "stack/response_order.h"

namespace mdsplit {

ResponseOrder::~ResponseOrder() {
    for (const Owed& o : owed_) loop_.release_hold(o.hold);
}

// The first completion not yet answered sets the horizon: a later one can
// only extend it, and the job answers both at once.
void ResponseOrder::owe(const void* job, uint64_t think_ns) {
    uint64_t now = loop_.now();
    for (const Owed& o : owed_)
        if (o.job == job && o.expires > now) return;
    answered(job);  // an expired hold: this completion starts a new one
    uint64_t expires = now + options_.max_hold_ns;
    owed_.push_back(Owed{job, loop_.add_hold(loop_.event_time() + think_ns, expires), expires});
}

void ResponseOrder::answered(const void* job) {
    for (size_t i = 0; i < owed_.size(); i++) {
        if (owed_[i].job == job) {
            loop_.release_hold(owed_[i].hold);
            owed_[i] = owed_.back();
            owed_.pop_back();
            return;
        }
    }
}

}  // namespace mdsplit
