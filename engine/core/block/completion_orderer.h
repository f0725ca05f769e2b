// The virtual clock over a real (io_uring) member: the ring returns the
// requests of one instant in the host's order, so they are ended together,
// in issue order, once that instant's completions are in
// (EventLoop::settle): a run does not depend on the host. Chosen at stack
// construction (member_delivery.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/event_loop.h"
#include "core/block/member_delivery.h"

namespace mdsplit {

class IssueOrderDelivery : public MemberDelivery {
public:
    explicit IssueOrderDelivery(EventLoop& loop) : loop_(loop) {}
    // The loop settles before the request's due time (its modelled
    // completion, or its issue).
    void submit(Request* rq) override;

protected:
    // Held until the instant's completions are in (end_in_issue_order).
    void completed(Request* rq, int64_t res) override;
    EventLoop& loop_;

private:
    static void end_in_issue_order(void* arg, uint64_t tag);
    std::vector<std::pair<Request*, int64_t>> arrived_;
};

}  // namespace mdsplit
