#include "core/block/bfq_stats.h"

namespace mdsplit::bfq {

const char* expiration_name(Expiration reason) {
    switch (reason) {
        case Expiration::TooIdle:
            return "too_idle";
        case Expiration::BudgetTimeout:
            return "budget_timeout";
        case Expiration::BudgetExhausted:
            return "budget_exhausted";
        case Expiration::NoMoreRequests:
            return "no_more_requests";
        case Expiration::Preempted:
            return "preempted";
    }
    return "?";
}

void BfqStats::add(const BfqStats& o) {
    service_sectors += o.service_sectors;
    charged_sectors += o.charged_sectors;
    dispatches += o.dispatches;
    injected += o.injected;
    injected_idle += o.injected_idle;
    injected_waker += o.injected_waker;
    wakers_set += o.wakers_set;
    slices += o.slices;
    idle_periods += o.idle_periods;
    idle_ns += o.idle_ns;
    idle_timeouts += o.idle_timeouts;
    for (unsigned i = 0; i < kExpirationReasons; i++) expirations[i] += o.expirations[i];
}

void BfqStats::write_json_fields(JsonWriter& j) const {
    j.field("service_sectors", service_sectors).field("charged_sectors", charged_sectors);
    j.field("dispatches", dispatches).field("injected", injected).field("slices", slices);
    j.field("injected_idle", injected_idle).field("injected_waker", injected_waker);
    j.field("wakers_set", wakers_set);
    j.field("idle_periods", idle_periods).field("idle_ns", idle_ns);
    j.field("idle_timeouts", idle_timeouts).key("expirations").begin_object();
    for (unsigned i = 0; i < kExpirationReasons; i++)
        j.field(expiration_name(Expiration(i)), expirations[i]);
    j.end_object();
}

}  // namespace mdsplit::bfq
