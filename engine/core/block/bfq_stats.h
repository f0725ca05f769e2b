// Counters kept per bfq_queue, per bfq_group and per device (the emulation's
// counterpart of CONFIG_BFQ_CGROUP_DEBUG's bfqg_stats), and the reasons a
// queue stops being served (enum bfqq_expiration, block/bfq-iosched.h).
#pragma once

#include <cstdint>
#include "base/json_writer.h"

namespace mdsplit::bfq {

enum class Expiration : uint8_t {
    TooIdle = 0,      // BFQQE_TOO_IDLE: the idle timer fired
    BudgetTimeout,    // BFQQE_BUDGET_TIMEOUT: the slot lasted timeout_sync
    BudgetExhausted,  // BFQQE_BUDGET_EXHAUSTED
    NoMoreRequests,   // BFQQE_NO_MORE_REQUESTS: empty and no idling
    Preempted,        // BFQQE_PREEMPTED
};
inline constexpr unsigned kExpirationReasons = 5;
const char* expiration_name(Expiration reason);

struct BfqStats {
    uint64_t service_sectors = 0;  // sectors dispatched (the service received)
    uint64_t charged_sectors = 0;  // service charged in B-WF2Q+ (incl. time charging)
    uint64_t dispatches = 0;       // requests dispatched
    uint64_t injected = 0;         // of those, dispatched while another queue was in service
    uint64_t injected_idle = 0;    // of those, while the in-service queue idled (timer armed)
    uint64_t injected_waker = 0;   // chosen as waker, woken or own async queue (not the limit)
    uint64_t wakers_set = 0;       // times bfq_check_waker() confirmed a waker for this queue
    uint64_t slices = 0;           // times set in service
    uint64_t idle_periods = 0;     // idle-slice timer armed (the device plugged for this queue)
    uint64_t idle_ns = 0;          // total length of those periods
    uint64_t idle_timeouts = 0;    // periods that ended with the timer firing
    uint64_t expirations[kExpirationReasons] = {};

    void add(const BfqStats& o);
    // The fields above as JSON members (no braces).
    void write_json_fields(JsonWriter& j) const;
};

}  // namespace mdsplit::bfq
