// The vocabulary the buffered path's two layers share: mm (filemap.h,
// page_writeback.h) and io_uring above it (core/io_uring/buffered_io.h),
// which includes this and never the other way. What each step costs on a
// modelled CPU (BufferedCosts), where a step ran (BufferedWhere), what
// happened to one buffered I/O (BufferedPath) and the path's counters
// (BufferedStats): each layer adds to the fields of its own steps.
#pragma once

#include <cstdint>
#include <map>

#include "base/units.h"

namespace mdsplit {

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
    // Not fitted (only forced-ra opens a window, so a fit on its figures
    // would be a per-variant constant): bounded by the thread's perf
    // profile (1) of forced-ra, whose list stops at 0.65 % of the
    // submitter's 5.3 us with none of the path's ~6 functions in it
    // (page_cache_sync_readahead .. blk_finish_plug): each < 35 ns, the
    // window <= 0.2 us. The centre of [0, 0.2] us; `harness sweep
    // buffered` sweeps the range.
    uint64_t readahead_ns = 100;
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
inline const char* buffered_where_name(BufferedWhere where) {
    switch (where) {
        case BufferedWhere::None:
            return "none";
        case BufferedWhere::Submitter:
            return "submitter";
        case BufferedWhere::TaskWork:
            return "task_work";
        case BufferedWhere::Worker:
            return "worker";
    }
    return "?";
}

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
    uint64_t reads = 0, writes = 0, fsyncs = 0, sync_ranges = 0;
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

}  // namespace mdsplit
