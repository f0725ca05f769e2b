// WriteBehindDelivery (write_behind.h): timed real writes end at their
// modelled time; the host writes their copies behind.
#include "core/block/write_behind.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace mdsplit {

void WriteBehindDelivery::submit(Request* rq) {
    if (rq->op == Op::Write) {
        issue_write_behind(rq);
        return;
    }
    wait_for_copies(rq);
    IssueOrderDelivery::submit(rq);
}

// The model's completion time, as TimedBackend::submit takes it, for rq; a
// copy of its data goes to the real backend, outside the model.
void WriteBehindDelivery::issue_write_behind(Request* rq) {
    wait_for_copies(rq);
    rq->model_done_ns = const_cast<TimingModel&>(timed_.model())
                            .schedule(loop_.now(), rq->op, rq->sector, rq->nr_sectors);
    auto* copy = new Request;
    copy->op = rq->op;
    copy->sector = rq->sector;
    copy->nr_sectors = rq->nr_sectors;
    copy->queue = rq->queue;
    size_t len = size_t(rq->bytes());
    void* p = nullptr;
    if (posix_memalign(&p, 4096, len ? len : 1)) throw std::bad_alloc();
    copy->write_behind_copy = static_cast<uint8_t*>(p);
    size_t at = 0;
    for (const iovec& v : rq->iov) {
        if (v.iov_base) memcpy(copy->write_behind_copy + at, v.iov_base, v.iov_len);
        at += v.iov_len;
    }
    copy->iov.push_back(iovec{copy->write_behind_copy, len});
    behind_.push_back(copy);
    loop_.note_untracked_io(+1);
    timed_.inner().submit(copy);  // completes through TimedBackend at once (no model time)
    loop_.schedule_at(rq->model_done_ns, &WriteBehindDelivery::on_model_time, this,
                      reinterpret_cast<uintptr_t>(rq));
}

void WriteBehindDelivery::on_model_time(void* arg, uint64_t tag) {
    auto* rq = reinterpret_cast<Request*>(uintptr_t(tag));
    static_cast<WriteBehindDelivery*>(arg)->IssueOrderDelivery::completed(rq, int64_t(rq->bytes()));
}

// A read, or a write overlapping a copy in flight, waits for the copies.
void WriteBehindDelivery::wait_for_copies(const Request* rq) {
    bool wait = false;
    for (const Request* c : behind_)
        if (rq->op != Op::Write || (c->sector < rq->end_sector() && rq->sector < c->end_sector()))
            wait = true;
    if (wait) loop_.settle(true);
}

void WriteBehindDelivery::completed(Request* rq, int64_t res) {
    if (rq->write_behind_copy) {
        end_copy(rq, res);
        return;
    }
    IssueOrderDelivery::completed(rq, res);
}

void WriteBehindDelivery::end_copy(Request* copy, int64_t res) {
    if (res < 0 || uint64_t(res) != copy->bytes()) errors_++;
    behind_.erase(std::find(behind_.begin(), behind_.end(), copy));
    loop_.note_untracked_io(-1);
    free(copy->write_behind_copy);
    delete copy;
}

int WriteBehindDelivery::sync_data() {
    if (!behind_.empty()) loop_.settle(true);
    return IssueOrderDelivery::sync_data();
}

}  // namespace mdsplit
