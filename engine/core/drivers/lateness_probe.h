// What a timing model tells whoever watches the host keep up with it: for
// each request it modelled, when the model had it done and when the event
// loop delivered it (stack/host_lag.h measures the lag from this).
#pragma once

#include <cstdint>

namespace mdsplit {

struct ModelDelivery {
    uint64_t issue_ns = 0;       // the request reached the model (its arrival)
    uint64_t model_done_ns = 0;  // the model's completion time
    uint64_t inner_done_ns = 0;  // the loop saw the real backend's completion
    uint64_t delivered_ns = 0;   // the loop completed the request upwards
};

class LatenessProbe {
public:
    virtual ~LatenessProbe() = default;
    // One modelled request of member `member` was delivered.
    virtual void delivered(uint32_t member, const ModelDelivery& d) = 0;
};

}  // namespace mdsplit
