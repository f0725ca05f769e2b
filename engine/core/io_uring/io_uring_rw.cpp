// Follows io_uring/rw.c (fs/io_uring.c in 5.9, the seed's kernel): the
// buffered read/write issue path of one request. io_read(): the attempt with
// IOCB_NOWAIT from the submitter; on -EAGAIN with FMODE_BUF_RASYNC,
// io_rw_should_retry() arms the page-wait callback (IOCB_WAITQ) and tries
// again; io_async_buf_func() queues task_work that retries on the
// submitter; still -EAGAIN: io_queue_async_work() punts to io-wq. Then the
// completion (io_cqring_add_event()).
#include <algorithm>
#include <cerrno>
#include <limits>
#include <mutex>

#include "core/io_uring/io_wq.h"
#include "core/io_uring/kiocb.h"
#include "core/io_uring/submitter_cpu.h"

namespace mdsplit {

BufferedIo::Request* BufferedIo::new_request(TaskContext& task, Op op, uint64_t offset,
                                             uint64_t length, void* buffer, uint64_t cookie) {
    Request* r = requests_.get();
    *r = Request{};
    r->self = this;
    r->task = &task;
    r->cookie = cookie;
    r->op = op;
    r->pos = offset;
    r->len = length;
    r->buf = static_cast<uint8_t*>(buffer);
    r->pid = task.pid;
    r->waitq_func = &BufferedIo::on_page_wake;  // io_async_buf_func()
    r->path.cookie = cookie;
    r->path.op = op;
    if (record_paths_) r->path.submit_ns = loop_.now();
    if (op == Op::Read) {
        uint64_t size = cache_->file_bytes();
        uint64_t fit = offset >= size ? 0 : std::min(length, size - offset);
        r->path.resid = length - fit;  // a read past the end is short
        r->len = fit;
        std::lock_guard<std::mutex> lock(cache_->mutex());
        r->ra = filemap_->ra_state(task.pid, task.fadvise);
    }
    writeback_->open_file(task.pid);                    // its f_wb_err sample, once
    TaskContext& io = filemap_->io_task_for(task.pid);  // the reader's / writer's cgroup
    io.sched = task.sched;
    task.in_flight++;
    live_requests_++;
    used_ = true;
    return r;
}

uint64_t BufferedIo::submitter_free_at() const { return cpu_->free_at(); }

void BufferedIo::charge_submitter(uint64_t ns) { cpu_->charge(ns); }

void BufferedIo::read(TaskContext& task, uint64_t offset, uint64_t length, void* buffer,
                      uint64_t cookie) {
    Request* r = new_request(task, Op::Read, offset, length, buffer, cookie);
    stats_.reads++;
    stats_.read_bytes += r->len;
    Exec x = cpu_->enter(BufferedWhere::Submitter, task.pid);
    if (r->len == 0) {
        complete(*r, x, 0);
    } else {
        r->kflags = kIocbNowait;  // io_prep_rw(force_nonblock)
        io_read(*r, x);
    }
    end_submission(x);
    cpu_->leave(x);
}

// In 5.9 io_submit_sqes() runs the whole submission under one blk_plug
// (io_submit_state_start() calls blk_start_plug() unconditionally, until
// 5.11's "io_uring: only plug when appropriate"; nvme has ->commit_rqs, so blk_mq_submit_bio()
// keeps the request in the plug): a page read that an attempt on the
// submitter starts (forced-ra's readahead, c8d317aa's readpage in the armed
// retry) reaches the device when the submission ends, after the punt or the
// armed retry; read_pages()' own plug is nested and flushes nothing. The
// task_work retry (io_async_task_func()) and io-wq workers run under no
// plug: their reads go down at once. One SQE per submission, as fio's
// default iodepth_batch_submit=1 gives.
void BufferedIo::start_page_reads(Exec& x) {
    if (x.where == BufferedWhere::Submitter) return;  // end_submission()
    filemap_->flush_reads(x);
}

// io_submit_state_end(): blk_finish_plug() on the reads the submission
// started, at the time the submitter's CPU reached.
void BufferedIo::end_submission(Exec& x) {
    for (PendingIo& io : x.reads) io.t = std::max(io.t, x.t);
    filemap_->flush_reads(x);
}

// io_read(): an attempt; on -EAGAIN with FMODE_BUF_RASYNC, arm the page-wait
// callback and try again; still -EAGAIN: punt to io-wq. Runs at submission
// and again from task_work when an armed callback fires.
void BufferedIo::io_read(Request& r, Exec& x) {
    Page* blocked = nullptr;
    ReadResult res = filemap_->read_attempt(r, x, blocked);
    start_page_reads(x);
    if (res == ReadResult::Again && config_.rasync) {
        // io_rw_should_retry()
        x.charge(costs_.arm_ns);
        r.kflags |= kIocbWaitq;
        // c8d317aa: "kiocb->ki_flags &= ~IOCB_NOWAIT;" (324bcf54 took it out again)
        if (config_.variant == BufferedVariant::C8d317aa) r.kflags &= ~kIocbNowait;
        res = filemap_->read_attempt(r, x, blocked);
        start_page_reads(x);
    }
    switch (res) {
        case ReadResult::Done:
            complete(r, x, 0);
            break;
        case ReadResult::Error:
            complete(r, x, r.error);
            break;
        case ReadResult::Queued:
            break;  // the callback resumes it
        case ReadResult::Again:
            r.kflags = 0;  // the worker's read may block
            punt(r, x);
            break;
        case ReadResult::Block:
            break;  // not returned outside a worker (see read_attempt)
    }
    bool wb;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        wb = cache_->take_writeback_wanted();
    }
    if (wb) writeback_->wakeup_flusher();  // reclaim found only dirty pages
}

// io_async_buf_func(): the page the request waits on was unlocked (or left
// writeback); queue task_work for the submitter. Reads and writes alike.
void BufferedIo::on_page_wake(PageWaiter* w) {
    Request& r = Request::of(w);
    r.self->filemap_->drop_waiter_page(*w);
    r.self->cpu_->queue_task_work(r);
}

// task_work_run() for one retry, on the submitter (SubmitterCpu decides when).
void BufferedIo::run_task_work(Request& r) {
    Exec x = cpu_->enter(BufferedWhere::TaskWork, r.task->pid);
    x.charge(costs_.task_work_ns);
    stats_.task_work_runs++;
    r.path.task_work_runs++;
    if (r.op == Op::Read)
        io_read(r, x);
    else
        io_write(r, x);
    cpu_->leave(x);
}

// io_queue_async_work()
void BufferedIo::punt(Request& r, Exec& x) {
    x.charge(costs_.punt_ns);
    r.path.punted = true;
    stats_.punts++;
    wq_->enqueue(r, x.t);
}

// io_wq_submit_work(): a worker's turn at r, a blocking read (no NOWAIT, no
// WAITQ). Returns the page (referenced) the worker must sleep on until it
// unlocks, then call again; nullptr once r has completed (r may be gone).
// Which pool runs it, and how it sleeps, is the IoWq's (io_wq.h).
Page* BufferedIo::io_wq_submit_work(Request& r, Exec& x) {
    Page* page = nullptr;
    ReadResult res = filemap_->read_attempt(r, x, page);
    filemap_->flush_reads(x);
    if (res == ReadResult::Block) {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        stats_.worker_sleeps++;
        r.path.worker_sleeps++;
        return page;
    }
    complete(r, x, res == ReadResult::Error ? r.error : 0);
    return nullptr;
}

void BufferedIo::complete(Request& r, Exec& x, int32_t error) {
    x.charge(costs_.cqe_ns);
    if (r.completed) {  // never expected: counted, not delivered twice
        std::lock_guard<std::mutex> lock(cache_->mutex());
        stats_.double_completions++;
        return;
    }
    r.completed = true;
    r.error = error;
    r.path.completed_in = x.where;
    if (!x.on_loop) {
        loop_.post(&BufferedIo::deliver_cb, &r);
        return;
    }
    uint64_t at = x.t + cpu_->cqe_wakeup(x);  // the task sleeping in io_cqring_wait()
    if (at > loop_.now()) {                   // a modelled CPU finishes later (virtual clock)
        loop_.schedule_at(at, &BufferedIo::deliver_cb, &r);
        return;
    }
    deliver(r);
}

void BufferedIo::deliver_cb(void* arg, uint64_t) {
    auto* r = static_cast<Request*>(arg);
    r->self->deliver(*r);
}

// io_cqring_add_event() as the task sees it: the completion appears in
// task.completions (loop thread).
void BufferedIo::deliver(Request& r) {
    BufferedPath& p = r.path;
    p.completions++;
    p.error = r.error;
    if (r.error) p.resid += r.len - r.done;
    if (record_paths_) p.complete_ns = loop_.now();
    p.issued_by = p.worker_reads      ? BufferedWhere::Worker
                  : p.submitter_reads ? BufferedWhere::Submitter
                                      : BufferedWhere::None;
    switch (p.completed_in) {
        case BufferedWhere::Submitter:
            stats_.inline_completions++;
            break;
        case BufferedWhere::TaskWork:
            stats_.task_work_completions++;
            break;
        case BufferedWhere::Worker:
            stats_.worker_completions++;
            break;
        case BufferedWhere::None:
            break;
    }
    if (r.error) stats_.errors++;
    if (r.remote) loop_.expect_remote(-1);
    r.task->complete(IoCompletion{r.cookie, r.error, p.resid});
    r.task->in_flight--;
    if (record_paths_) paths_.push_back(p);
    live_requests_--;
    requests_.put(&r);
}

void BufferedIo::write(TaskContext& task, uint64_t offset, uint64_t length, const void* buffer,
                       uint64_t cookie) {
    uint64_t size = cache_->file_bytes();
    Request* r = new_request(task, Op::Write, offset, length, const_cast<void*>(buffer), cookie);
    Exec x = cpu_->enter(BufferedWhere::Submitter, task.pid);
    if (offset > size || length > size - offset) {
        r->len = 0;
        r->path.resid = length;
        complete(*r, x, -ENOSPC);
        cpu_->leave(x);
        return;
    }
    stats_.writes++;
    stats_.write_bytes += length;
    if (length == 0)
        complete(*r, x, 0);
    else
        io_write(*r, x);
    end_submission(x);
    cpu_->leave(x);
}

void BufferedIo::io_write(Request& r, Exec& x) {
    WriteResult res = filemap_->write_attempt(r, x);
    start_page_reads(x);
    if (res == WriteResult::Queued) return;  // resumes from the page's callback
    if (res == WriteResult::Error) {
        complete(r, x, r.error);
        return;
    }
    if (r.task->dsync) {
        // Its pages leave the dirty count at once, so the dirty throttle
        // below is not asked. A modelled CPU reaches this step at x.t.
        if (x.t > loop_.now())
            loop_.schedule_at(x.t, &BufferedIo::write_sync_cb, &r);
        else
            write_sync(r);
        return;
    }
    if (writeback_->balance_dirty_pages(r)) return;  // throttled: writeback_wait_done()
    complete(r, x, 0);
}

// generic_write_sync() -> vfs_fsync_range() -> blkdev_fsync() for an
// O_SYNC/O_DSYNC writer: the written range is written back and waited for
// (the models keep no volatile cache to flush; the engine's glue makes the
// real storage durable), then the write completes.
void BufferedIo::write_sync(Request& r) {
    int32_t error = 0;
    if (!writeback_->sync_range(r, r.pos >> kPageShift, (r.pos + r.len - 1) >> kPageShift,
                                PageWriteback::kSyncFileRangeWaitBefore |
                                    PageWriteback::kSyncFileRangeWrite |
                                    PageWriteback::kSyncFileRangeWaitAfter,
                                error))
        return;  // writeback_wait_done()
    writeback_wait_done(r, error);
}

void BufferedIo::write_sync_cb(void* arg, uint64_t) {
    auto* r = static_cast<Request*>(arg);
    r->self->write_sync(*r);
}

void BufferedIo::fsync(TaskContext& task, uint64_t cookie) {
    Request* r = new_request(task, Op::Flush, 0, 0, nullptr, cookie);
    stats_.fsyncs++;
    int32_t error = 0;
    if (!writeback_->fsync(*r, error)) return;  // waits: writeback_wait_done()
    Exec x = cpu_->enter(BufferedWhere::Submitter, task.pid);
    complete(*r, x, error);
    cpu_->leave(x);
}

void BufferedIo::sync_file_range(TaskContext& task, uint64_t offset, uint64_t length,
                                 unsigned flags, uint64_t cookie) {
    Request* r = new_request(task, Op::Flush, 0, 0, nullptr, cookie);
    stats_.sync_ranges++;
    uint64_t first = offset >> kPageShift;
    uint64_t last = length == 0 || offset + length < offset
                        ? std::numeric_limits<uint64_t>::max() - 1
                        : (offset + length - 1) >> kPageShift;
    int32_t error = 0;
    if (!writeback_->sync_range(*r, first, last, flags, error)) return;  // writeback_wait_done()
    Exec x = cpu_->enter(BufferedWhere::Submitter, task.pid);
    complete(*r, x, error);
    cpu_->leave(x);
}

// A throttled writer or an fsync that write-back let go completes in its
// task, now.
void BufferedIo::writeback_wait_done(Kiocb& k, int32_t error) {
    Request& r = Request::of(k);
    Exec x = cpu_->wake(r.task->pid);
    complete(r, x, error);
}

}  // namespace mdsplit
