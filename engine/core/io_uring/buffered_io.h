// Buffered I/O (fio direct=0) through the page cache, and io_uring's
// buffered read issue path with the three seed-003 variants.
//
// The path of one buffered read (fs/io_uring.c io_read(), mm/filemap.c
// generic_file_buffered_read(), Linux 5.9):
//
//   submitter: attempt #1 with IOCB_NOWAIT (must not block)
//     all pages up to date              -> copy, complete inline (a hit)
//     a miss: page_cache_sync_ra() may start readahead I/O (from the
//     submitter), then -EAGAIN because the page is not up to date
//   on -EAGAIN:
//     rasync (FMODE_BUF_RASYNC): io_rw_should_retry() arms a page-wait
//       callback (IOCB_WAITQ) and tries again (attempt #2):
//         page locked (I/O in flight)   -> -EIOCBQUEUED; when the page
//           unlocks, io_async_buf_func() queues task_work and the submitter
//           retries (attempt #3), copies and completes
//         otherwise                     -> -EAGAIN: punt
//     no rasync, or the retry failed: punt to io-wq. A worker thread does
//       the blocking read: allocates the page, starts the I/O, sleeps on
//       the page lock, copies, completes.
//
// With readahead off (ra_kb = 0) a miss starts no I/O in attempt #1; it
// only allocates the page (no_cached_page) and gives up at readpage
// because of NOWAIT. The variants then differ:
//   pre-c8d317aa  the retry keeps NOWAIT, gives up again -> always punted;
//                 the worker issues the read.
//   c8d317aa      "io_uring: fix async buffered reads when readahead is
//                 disabled" clears NOWAIT for the retry: the submitter
//                 issues the read inline and waits on the locked page
//                 through the callback (lock_page_async).
//   forced-ra     324bcf54 "mm: use limited read-ahead to satisfy read"
//                 keeps NOWAIT and makes the miss a forced one-page
//                 readahead, which starts the I/O from attempt #1; rasync
//                 then waits on the locked page, a worker (no rasync)
//                 sleeps on it.
//
// Buffered writes (generic_perform_write) copy into pages and dirty them on
// the submitter; a partial page that is not up to date is read first;
// pages under write-back are waited for (stable pages: md RAID5 computes
// parity from them). balance_dirty_pages(): above 10% of the cache dirty,
// background write-back starts; above 20% a writer waits. fsync() writes
// back everything dirty and completes when that write-back (and any before
// it) has finished; sync() and invalidate() do the same synchronously.
//
// Threads: on the real clock, io-wq is a pool of real std::threads (created
// on demand, at most min(iodepth, 4 x CPUs)) that block on page locks
// (condition variables) and copy into the user buffer themselves. The
// block layer and the event loop stay single-threaded: a worker hands the
// pages it wants read, and its completion, back to the loop thread with
// EventLoop::post(). On the virtual clock (the Python bindings) nothing
// runs on another thread: the submitter and each worker are modelled CPUs,
// each step costs BufferedCosts' figure, and a worker's blocking is a
// callback on the page, so a run is deterministic.
//
// Files, each after the kernel file it follows (its first comment says
// which). Here, in core/io_uring: io_uring_rw.cpp (io_uring/rw.c: the issue
// path above, task_work, completion), io_wq.{h,cpp} + io_wq_threads.cpp /
// io_wq_virtual.cpp (io_uring/io-wq.c: one interface, the real-thread and
// the modelled-CPU pool), submitter_cpu.{h,cpp} (the submitter's CPU and
// its task_work, kernel/task_work.c: real or modelled, chosen once with the
// pool, so the execution mode is a parameter, not a branch), kiocb.h (the
// request, struct io_kiocb). Below, in core/mm, which never includes
// io_uring: Filemap (filemap.h, mm/filemap.c: the read and write attempts,
// page wait queues, page I/O and its endio), PageWriteback
// (page_writeback.h, mm/page-writeback.c: write-back, throttling,
// fsync/sync), the Kiocb they work on and the context a step runs in
// (kiocb.h), the shared records and costs (buffered_path.h). mm calls back
// only through the kiocb's page-wait callback (waitq_func:
// io_async_buf_func()) and WritebackClient (a throttled writer or an fsync
// that write-back lets go). This file and buffered_io.cpp: the owner, which
// wires them, and its statistics.
//
// What the real-clock emulation cannot move off the loop thread: the bio
// submission for a page a worker wants read (the block layer is the loop's),
// the delivery of completions, and the hand-offs themselves (mutex +
// condition variable to wake a worker, eventfd to wake the loop). On a
// machine with few CPUs those hand-offs cost more than the kernel's, so the
// worker paths come out slower than in the kernel; the seed's table needs the
// virtual clock, on the thread's machine as a model ([machines.seed003] in
// jobs/machines.toml: these costs, the CPUs, the NVMe drive with its dies).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/json_writer.h"
#include "base/object_pool.h"
#include "config/stack_config.h"
#include "core/block/block_device.h"
#include "core/block/block_layer.h"
#include "core/block/task_context.h"
#include "core/mm/buffered_path.h"
#include "core/mm/filemap.h"
#include "core/mm/kiocb.h"
#include "core/mm/page_cache.h"
#include "core/mm/page_writeback.h"

namespace mdsplit {

class MemberQueue;
class IoWq;
class SubmitterCpu;

class BufferedIo final : private WritebackClient {
public:
    // `virtual_time`: the execution mode (make_buffered_exec()), chosen by
    // the stack from its clock.
    BufferedIo(EventLoop& loop, BlockLayer& layer, BlockDevice& top,
               std::vector<MemberQueue*> members, const PageCacheConfig& config, bool virtual_time);
    ~BufferedIo();
    BufferedIo(const BufferedIo&) = delete;
    BufferedIo& operator=(const BufferedIo&) = delete;

    // One buffered I/O; it completes into task.completions (task.in_flight
    // counts it meanwhile). Any offset and length: the cache works in pages.
    // A read past the end is short (resid), a write past it fails -ENOSPC.
    void read(TaskContext& task, uint64_t offset, uint64_t length, void* buffer, uint64_t cookie);
    void write(TaskContext& task, uint64_t offset, uint64_t length, const void* buffer,
               uint64_t cookie);
    // Writes back all dirty pages; completes once they (and every earlier
    // write-back) are on the members. -EIO if a write-back failed since the
    // last fsync.
    void fsync(TaskContext& task, uint64_t cookie);
    // sync_file_range(2) on [offset, offset + length) (length 0: to the end)
    // with its flags (PageWriteback::sync_range()).
    void sync_file_range(TaskContext& task, uint64_t offset, uint64_t length, unsigned flags,
                         uint64_t cookie);
    // Loop thread, outside callbacks: write back everything and run the
    // loop until it is on the members (job end). Returns the pages whose
    // write-back failed that no fsync reported (take_silent_errors()).
    uint64_t sync();
    // PageWriteback::take_silent_errors().
    uint64_t take_silent_errors();
    // sync() then drop every clean page nobody uses, and forget readahead
    // state (fio's invalidate / posix_fadvise(DONTNEED) / BLKFLSBUF).
    void invalidate();
    /**
     * before_direct_io() - what a direct I/O of @length bytes at @offset on
     * the device under this cache does to it first (block/fops.c, 6.x):
     * a read waits for the range's dirty pages to be written back
     * (kiocb_write_and_wait()); a write or discard (@writes) also drops the
     * range's pages afterwards (kiocb_invalidate_pages()), so a later
     * buffered read sees what the direct I/O wrote. No second invalidation
     * after the write: blkdev_direct_write() calls
     * kiocb_invalidate_post_direct_write() only when blkdev_direct_IO()
     * returned bytes (a synchronous write), not on -EIOCBQUEUED, and the
     * engine's direct I/O is always queued. Loop thread, outside
     * callbacks (it runs the loop while write-back is under way).
     */
    void before_direct_io(uint64_t offset, uint64_t length, bool writes);

    // io-wq's bound: at most min(iodepth, 4 x CPUs) workers.
    void set_iodepth(uint32_t iodepth) { iodepth_ = iodepth ? iodepth : 1; }
    uint32_t max_workers() const;
    // FMODE_RANDOM (fadvise_hint=random): every miss is a forced readahead
    // of the requested size.
    BufferedCosts& costs() { return costs_; }
    bool virtual_time() const { return virtual_time_; }
    const PageCacheConfig& config() const { return config_; }
    PageCache& cache() { return *cache_; }

    // The submitter's CPU (SubmitterCpu): a modelled one is busy until this
    // time, and a driver should not issue before it; charge_submitter() adds
    // the driver's own work (fio's per-I/O cost). On the real clock: 0, and
    // nothing to charge (the work costs what it really does).
    uint64_t submitter_free_at() const;
    void charge_submitter(uint64_t ns);

    void set_record_paths(bool on) { record_paths_ = on; }
    std::vector<BufferedPath> take_paths();
    bool used() const { return used_; }
    size_t requests_in_flight() const { return live_requests_; }
    BufferedStats stats() const;
    // The "page_cache" object of the sidecar statistics.
    void write_json(JsonWriter& j) const;
    // The same object for a stack that did no buffered I/O.
    static void write_unused_json(JsonWriter& j, const PageCacheConfig& config);

private:
    struct Request;
    using Exec = ExecContext;
    using ReadResult = Filemap::ReadResult;
    using WriteResult = Filemap::WriteResult;

    Request* new_request(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
                         uint64_t cookie);

    // The page reads an attempt started: on the submitter they wait for the
    // end of the submission's plug (end_submission()), elsewhere they go
    // down at once (io_uring_rw.cpp).
    void start_page_reads(Exec& x);
    void end_submission(Exec& x);
    // Reads (io_uring_rw.cpp).
    void io_read(Request& r, Exec& x);
    void punt(Request& r, Exec& x);
    static void on_page_wake(PageWaiter* w);
    void run_task_work(Request& r);
    // Writes.
    void io_write(Request& r, Exec& x);
    void write_sync(Request& r);
    static void write_sync_cb(void* arg, uint64_t);
    // write-back lets a throttled writer or an fsync go (WritebackClient).
    void writeback_wait_done(Kiocb& k, int32_t error) override;

    // Completion.
    void complete(Request& r, Exec& x, int32_t error);
    void deliver(Request& r);
    static void deliver_cb(void* arg, uint64_t);

    // io-wq (io_wq.h): what a worker runs; how it waits for a page is the
    // Filemap's.
    friend class IoWq;
    friend class IoWqThreads;
    friend class IoWqVirtual;
    friend class SubmitterCpu;
    friend class SubmitterCpuReal;
    friend class SubmitterCpuModelled;
    Page* io_wq_submit_work(Request& r, Exec& x);

    EventLoop& loop_;
    PageCacheConfig config_;
    bool virtual_time_;  // the execution mode (make_buffered_exec())
    std::unique_ptr<PageCache> cache_;
    BufferedCosts costs_;
    uint32_t iodepth_ = 0;  // 0: not set (4 x CPUs)
    bool used_ = false;
    bool record_paths_ = false;
    std::vector<BufferedPath> paths_;
    BufferedStats stats_;  // worker-touched fields under the cache mutex
    size_t live_requests_ = 0;
    ObjectPool<Request> requests_;  // loop thread

    // The page cache's mechanisms (core/mm): the read and write attempts,
    // page waits and page I/O; write-back.
    std::unique_ptr<Filemap> filemap_;
    std::unique_ptr<PageWriteback> writeback_;

    // The execution mode, chosen once by the clock (make_buffered_exec(),
    // io_wq.cpp): the submitter's CPU with its task_work (submitter_cpu.h)
    // and io-wq's workers (io_wq.h), real threads or modelled CPUs.
    std::unique_ptr<SubmitterCpu> cpu_;
    std::unique_ptr<IoWq> wq_;
};

}  // namespace mdsplit
