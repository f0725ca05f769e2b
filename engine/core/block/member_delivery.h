// How a member queue's issued requests reach its backend and how their
// completions come back to the queue (MemberQueue::complete_request). The
// mode is chosen once, where the stack is built (Stack::member_delivery),
// by the clock and the storage, as make_buffered_exec() chooses the
// buffered path's; the queue never asks which one it has:
//   DirectDelivery       (here) a completion ends its request at once: the
//                        real clock, or the virtual clock over memory or
//                        nowhere (their completions are the loop's events).
//   IssueOrderDelivery   (completion_orderer.{h,cpp}) the virtual clock over
//                        real storage: one instant's completions end in
//                        issue order, whatever order the host returned.
//   WriteBehindDelivery  (write_behind.{h,cpp}) that, and a timed real
//                        member's writes end at their modelled time while
//                        the host writes a copy of their data behind.
#pragma once

#include <cstdint>

#include "core/block/request.h"
#include "core/drivers/backend.h"

namespace mdsplit {

class MemberDelivery {
public:
    // Where a request ends (the queue's blk_mq_end_request()).
    using EndFn = void (*)(void* ctx, Request* rq, int64_t res);

    virtual ~MemberDelivery() = default;
    // Binds the queue's backend and end function (once, by MemberQueue).
    void attach(Backend& backend, EndFn end, void* end_ctx) {
        backend_ = &backend;
        end_ = end;
        end_ctx_ = end_ctx;
        backend.set_completion(&MemberDelivery::on_backend_complete, this);
    }
    // An issued request, its iov built, goes to the backend.
    virtual void submit(Request* rq) { backend_->submit(rq); }
    // Makes every write the queue completed durable (Backend::sync_data()).
    virtual int sync_data() { return backend_->sync_data(); }
    // Copies written behind the model that failed (WriteBehindDelivery).
    virtual uint64_t write_behind_errors() const { return 0; }

protected:
    // The backend finished rq with res (bytes or a negative errno).
    virtual void completed(Request* rq, int64_t res) { end(rq, res); }
    void end(Request* rq, int64_t res) { end_(end_ctx_, rq, res); }
    Backend& backend() { return *backend_; }

private:
    static void on_backend_complete(void* ctx, Request* rq, int64_t res) {
        static_cast<MemberDelivery*>(ctx)->completed(rq, res);
    }
    Backend* backend_ = nullptr;
    EndFn end_ = nullptr;
    void* end_ctx_ = nullptr;
};

// The real clock, or a backend whose completions are the loop's own events.
class DirectDelivery final : public MemberDelivery {};

}  // namespace mdsplit
