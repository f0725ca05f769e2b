// IssueOrderDelivery (completion_orderer.h): a real member's completions on
// the virtual clock, ended in issue order at each settle.
#include "core/block/completion_orderer.h"

#include <algorithm>

namespace mdsplit {

void IssueOrderDelivery::submit(Request* rq) {
    rq->model_done_ns = 0;
    rq->real_arrived = rq->real_tracked = false;
    backend().submit(rq);
    if (rq->real_arrived) return;
    rq->real_due_ns = rq->model_done_ns ? rq->model_done_ns : rq->issue_ns;
    rq->real_tracked = true;
    loop_.add_real_io(rq->real_due_ns);
}

void IssueOrderDelivery::completed(Request* rq, int64_t res) {
    rq->real_arrived = true;
    if (rq->real_tracked) {
        loop_.remove_real_io(rq->real_due_ns);
        rq->real_tracked = false;
    }
    if (arrived_.empty()) loop_.defer_until_settled(&IssueOrderDelivery::end_in_issue_order, this);
    arrived_.emplace_back(rq, res);
}

void IssueOrderDelivery::end_in_issue_order(void* arg, uint64_t) {
    auto* self = static_cast<IssueOrderDelivery*>(arg);
    std::vector<std::pair<Request*, int64_t>> done;
    done.swap(self->arrived_);
    std::sort(done.begin(), done.end(),
              [](const auto& a, const auto& b) { return a.first->issue_seq < b.first->issue_seq; });
    for (auto& [rq, res] : done) self->end(rq, res);
}

}  // namespace mdsplit
