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
#include "config/stack_config.h"  // BufferedCosts

namespace mdsplit {

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
