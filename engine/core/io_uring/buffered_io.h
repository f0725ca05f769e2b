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
// which): io_uring_rw.cpp (io_uring/rw.c: the issue path above, task_work,
// completion), io_wq.{h,cpp} + io_wq_threads.cpp / io_wq_virtual.cpp
// (io_uring/io-wq.c: one interface, the real-thread and the modelled-CPU
// pool), submitter_cpu.{h,cpp} (the submitter's CPU and its task_work,
// kernel/task_work.c: real or modelled; chosen once with the pool, so the
// execution mode is a parameter, not a branch), filemap.cpp (mm/filemap.c: the read and write
// attempts, page wait queues, page I/O), page_writeback.cpp
// (mm/page-writeback.c: write-back, throttling, fsync/sync), kiocb.h (the
// request). This file and buffered_io.cpp: the owner and its statistics.
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

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/json_writer.h"
#include "base/object_pool.h"
#include "config/stack_config.h"
#include "core/block/block_device.h"
#include "core/block/block_layer.h"
#include "core/block/task_context.h"
#include "core/mm/page_cache.h"
#include "core/mm/readahead.h"

namespace mdsplit {

class MemberQueue;
class IoWq;
class SubmitterCpu;

// Modelled CPU costs of each step, used only on the virtual clock. Real
// runs pay what the steps really cost, and measure_buffered_costs()
// measures them for the virtual clock. The defaults (deterministic; the one
// statement of seed 003's host, [machines.seed003] in jobs/machines.toml
// points here and says where each comes from) are fitted to the seed-003 table (Hao Xu, 5.9-rc8,
// ext4 on NVMe, 4k randread, readahead off), where the submitting thread is the bottleneck at depth
// >= 32:
//   c8d317aa, no rasync (315k): fio 1.0 + lookup 0.1 + alloc 0.3 + punt 1.9       = 3.3 us
//   c8d317aa, rasync    (195k): fio 1.0 + 0.1 + 0.3 + arm 0.1 + 0.1 + readpage 3.0
//                               + task_work 0.2 + 0.1 + copy 0.3 + cqe 0.1        = 5.3 us
//   forced-ra, rasync   (187k): the same steps in another order + readahead 0.2  = 5.5 us
//   forced-ra, no rasync(156k): fio 1.0 + 0.1 + alloc 0.3 + ra 0.2 + readpage 3.0
//                               + punt 1.9                                        = 6.5 us
// (readpage = bio_submit 2.8 + 0.2 per page). At depth 1 the worker path
// adds punt + two wake-ups + copy, ~6 us on ~80 us, as the table's 7%.
struct BufferedCosts {
    uint64_t fio_submit_ns = 700;    // fio's own work per I/O issued (the workload driver)
    uint64_t fio_complete_ns = 300;  // ... per I/O reaped
    uint64_t lookup_ns = 100;        // find_get_page() and the attempt around it, per page
    uint64_t page_alloc_ns = 300;    // page_cache_alloc() + add_to_page_cache_lru()
    uint64_t bio_submit_ns = 2800;   // ->readpage(s)/read_pages(): one bio down to the driver
    uint64_t bio_page_ns = 200;      // ... per page in it
    // One readahead window: page_cache_sync_readahead() ->
    // force_page_cache_readahead() -> __do_page_cache_readahead() and the
    // blk_start_plug()/blk_finish_plug() of read_pages() (mm/readahead.c,
    // 5.9); a plain ->readpage() (generic_file_buffered_read) skips it.
    // Fitted: forced-ra / c8d317aa with rasync at QD128, 187k vs 195k
    // (1e6/187 - 1e6/195 = 0.22 us).
    uint64_t readahead_ns = 200;
    uint64_t copy_4k_ns = 300;     // copy_to_user()/copy_from_user() of 4 KiB
    uint64_t arm_ns = 100;         // io_rw_should_retry(): set up the page-wait callback
    uint64_t task_work_ns = 200;   // io_async_buf_func() -> task_work -> resubmit
    uint64_t punt_ns = 1900;       // io_queue_async_work(): prep + enqueue + wake a worker
    uint64_t wakeup_ns = 2000;     // a sleeping worker running again (not submitter CPU)
    uint64_t cqe_ns = 100;         // io_cqring_add_event()
    uint64_t dirty_page_ns = 100;  // set_page_dirty + balance_dirty_pages accounting
    uint32_t cpus = 16;            // io-wq workers <= min(iodepth, 4 x cpus)
};

// Where a step ran.
enum class BufferedWhere : uint8_t { None, Submitter, TaskWork, Worker };
const char* buffered_where_name(BufferedWhere where);

// What happened to one buffered I/O (recorded when enabled; tests).
struct BufferedPath {
    uint64_t cookie = 0;
    Op op = Op::Read;
    int32_t error = 0;
    uint64_t resid = 0;
    uint32_t inline_attempts = 0;  // read attempts by the submitter (incl. task_work retries)
    uint32_t task_work_runs = 0;   // page-wait callbacks that ran (task_work retries)
    uint32_t callbacks_armed = 0;  // -EIOCBQUEUED: page-wait callbacks armed
    uint32_t worker_attempts = 0;  // attempts by an io-wq worker
    bool punted = false;
    uint32_t worker = 0;     // the worker that took it (1-based), 0 = none
    uint32_t pages_hit = 0;  // pages up to date at the first look
    uint32_t pages_missed = 0;
    uint32_t submitter_reads = 0;  // page reads this I/O started from the submitter
    uint32_t worker_reads = 0;     // ... from its worker
    uint32_t worker_sleeps = 0;    // times its worker slept on a page
    uint32_t waits = 0;            // writes: waits on a locked / written-back page
    uint32_t completions = 0;      // must end at exactly 1
    BufferedWhere issued_by = BufferedWhere::None;     // who started the reads it waited for
    BufferedWhere completed_in = BufferedWhere::None;  // Submitter = inline
    uint64_t submit_ns = 0;
    uint64_t complete_ns = 0;
};

struct BufferedStats {
    uint64_t reads = 0, writes = 0, fsyncs = 0;
    uint64_t read_bytes = 0, write_bytes = 0;
    uint64_t hits = 0, misses = 0;  // pages, at the first look of each I/O
    uint64_t inline_attempts = 0, worker_attempts = 0;
    uint64_t callbacks_armed = 0, task_work_runs = 0, punts = 0;
    uint64_t inline_completions = 0, task_work_completions = 0, worker_completions = 0;
    uint64_t submitter_page_reads = 0, worker_page_reads = 0;
    uint64_t read_bios = 0, pages_read = 0, read_errors = 0;
    uint64_t ra_windows[4] = {0, 0, 0, 0};  // by RaKind
    uint64_t ra_pages[4] = {0, 0, 0, 0};
    std::map<uint64_t, uint64_t> ra_window_sizes;  // pages -> windows
    uint64_t workers_created = 0, worker_high_water = 0, busy_worker_high_water = 0;
    uint64_t worker_sleeps = 0;
    uint64_t submitter_blocks = 0;  // never expected (the submitter must not block)
    uint64_t pages_dirtied = 0, read_for_write = 0, write_waits = 0, throttled_writes = 0;
    uint64_t writeback_pages = 0, writeback_bios = 0, writeback_errors = 0;
    uint64_t syncs = 0, invalidations = 0, invalidated_pages = 0;
    uint64_t errors = 0, double_completions = 0;
};

class BufferedIo {
public:
    BufferedIo(EventLoop& loop, BlockLayer& layer, BlockDevice& top,
               std::vector<MemberQueue*> members, const PageCacheConfig& config);
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
    // Loop thread, outside callbacks: write back everything and run the
    // loop until it is on the members (job end).
    void sync();
    // sync() then drop every clean page nobody uses, and forget readahead
    // state (fio's invalidate / posix_fadvise(DONTNEED) / BLKFLSBUF).
    void invalidate();

    // io-wq's bound: at most min(iodepth, 4 x CPUs) workers.
    void set_iodepth(uint32_t iodepth) { iodepth_ = iodepth ? iodepth : 1; }
    uint32_t max_workers() const;
    // FMODE_RANDOM (fadvise_hint=random): every miss is a forced readahead
    // of the requested size.
    void set_fadvise_random(bool on) { fadvise_random_ = on; }
    BufferedCosts& costs() { return costs_; }
    bool virtual_time() const;
    const PageCacheConfig& config() const { return config_; }
    PageCache& cache() { return *cache_; }

    // Virtual clock: the submitter's modelled CPU is busy until this time.
    // A driver should not issue before it; charge_submitter() adds the
    // driver's own work (fio's per-I/O cost).
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
    enum KFlags : uint32_t { kNowait = 1u << 0, kWaitq = 1u << 1 };
    // generic_file_buffered_read()'s outcome (see read_attempt).
    enum class ReadResult { Done, Again, Queued, Block, Error };
    // generic_perform_write()'s: everything copied, waiting on a page
    // (its callback resumes the write), or a page that cannot be read.
    enum class WriteResult { Done, Queued, Error };
    struct Request;
    struct PendingIo {
        Page* page;
        uint64_t t;  // virtual: when it is submitted
    };
    // Where a step runs: the submitter, its task_work or an io-wq worker,
    // as the execution mode (SubmitterCpu, IoWq) made it.
    struct Exec {
        BufferedWhere where = BufferedWhere::Submitter;
        uint64_t t = 0;  // modelled: the time this context has reached
        uint32_t pid = 0;
        // A modelled CPU (virtual clock): each step advances t by its
        // BufferedCosts figure. Otherwise the steps cost what they really do.
        bool modelled = false;
        // false: an io-wq thread (IoWqThreads); the reads it starts and its
        // completion are posted to the loop thread.
        bool on_loop = true;
        std::vector<PendingIo> reads;
        void charge(uint64_t ns) { t += modelled ? ns : 0; }
    };
    class RaControl;
    struct IoBatch;
    // Who to wake once the cache lock is released: page-wait callbacks (run
    // on the loop thread) and wait queues with sleeping workers (notified
    // after unlocking, so a woken worker does not block on the lock at once).
    struct Wakeups {
        std::vector<PageWaiter*> waiters;
        std::vector<std::condition_variable*> sleepers;
    };
    struct FsyncWaiter {
        TaskContext* task;
        uint64_t cookie;
        uint64_t batch;
        Request* request;
    };

    Request* new_request(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
                         uint64_t cookie);
    FileRaState* ra_state(uint32_t pid);

    // Reads.
    ReadResult read_attempt(Request& r, Exec& x, Page*& block_page);
    void io_read(Request& r, Exec& x);
    void punt(Request& r, Exec& x);
    void arm_locked(Request& r, Page* page, uint32_t bit, void (*fn)(PageWaiter*));
    static void on_page_wake(PageWaiter* w);
    void run_task_work(Request& r);

    // Page I/O.
    void flush_reads(Exec& x);
    void submit_pages(std::vector<Page*>& pages, Op op, uint32_t pid, bool sync);
    static void submit_batch_cb(void* arg, uint64_t);
    static void read_endio(Bio* bio);
    static void write_endio(Bio* bio);
    void take_waiters_locked(Page* page, uint32_t bit, Wakeups& wake);
    void unlock_page_locked(Page* page, Wakeups& wake);
    void end_writeback_locked(Page* page, Wakeups& wake);
    void fire_waiters(Wakeups& wake, bool loop_thread);
    static void fire_waiter_cb(void* arg, uint64_t);
    void kick();

    // Completion.
    void complete(Request& r, Exec& x, int32_t error);
    void deliver(Request& r);
    static void deliver_cb(void* arg, uint64_t);

    // io-wq (io_wq.h): what a worker runs, and how it waits for a page.
    friend class IoWq;
    friend class IoWqThreads;
    friend class IoWqVirtual;
    friend class SubmitterCpu;
    friend class SubmitterCpuReal;
    friend class SubmitterCpuModelled;
    Page* io_wq_submit_work(Request& r, Exec& x);
    bool wait_on_page_locked(Page* page);
    void wait_on_page_locked_async(Request& r, Page* page, void (*fn)(PageWaiter*));
    void drop_waiter_page(PageWaiter& w);

    // Writes.
    WriteResult write_attempt(Request& r, Exec& x);
    void io_write(Request& r, Exec& x);
    uint64_t start_writeback(size_t max_pages, bool sync);
    static void writeback_cb(void* arg, uint64_t);
    bool balance_dirty_pages(Request& r);
    void check_throttled();
    void check_fsyncs();
    bool writeback_done_through(uint64_t batch) const;
    void run_until(bool (*done)(BufferedIo*));

    static constexpr size_t kBioMaxPages = 256;      // BIO_MAX_VECS
    static constexpr size_t kWritebackChunk = 1024;  // MAX_WRITEBACK_PAGES

    EventLoop& loop_;
    BlockLayer& layer_;
    BlockDevice& top_;
    std::vector<MemberQueue*> members_;
    PageCacheConfig config_;
    std::unique_ptr<PageCache> cache_;
    BufferedCosts costs_;
    uint32_t iodepth_ = 0;  // 0: not set (4 x CPUs)
    bool fadvise_random_ = false;
    bool used_ = false;
    bool record_paths_ = false;
    std::vector<BufferedPath> paths_;
    BufferedStats stats_;  // worker-touched fields under the cache mutex
    size_t live_requests_ = 0;
    ObjectPool<Request> requests_;  // loop thread
    uint64_t dirty_background_;
    uint64_t dirty_limit_;

    std::unordered_map<uint32_t, FileRaState>
        ra_states_;  // per fio job (pid), under the cache mutex
    // The context page I/O is submitted in, per fio job (pid): its blkcg
    // (mdsplit_group), so bfq charges a job's buffered reads, and the
    // write-back of the pages it dirtied, to its group. Node-based: the
    // requests' sched_data pointers stay valid.
    std::unordered_map<uint32_t, TaskContext> io_tasks_;
    TaskContext& io_task_for(uint32_t pid);

    // The execution mode, chosen once by the clock (make_buffered_exec(),
    // io_wq.cpp): the submitter's CPU with its task_work (submitter_cpu.h)
    // and io-wq's workers (io_wq.h), real threads or modelled CPUs.
    std::unique_ptr<SubmitterCpu> cpu_;
    std::unique_ptr<IoWq> wq_;
    bool stopping_ = false;  // under the cache mutex: sleeping workers give up

    // Write-back.
    uint64_t wb_seq_ = 0;
    uint64_t wb_cursor_ = 0;                       // mapping->writeback_index
    std::map<uint64_t, uint64_t> wb_outstanding_;  // batch -> pages still under write-back
    uint64_t wb_errors_ = 0, wb_errors_reported_ = 0;
    bool writeback_scheduled_ = false;
    uint64_t sync_target_ = 0;
    std::vector<FsyncWaiter> fsyncs_;
    std::deque<Request*> throttled_;
};

}  // namespace mdsplit
