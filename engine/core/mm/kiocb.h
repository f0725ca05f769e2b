// mm's view of one buffered I/O: the kiocb (include/linux/fs.h struct
// kiocb: position, length, the user buffer, IOCB_NOWAIT / IOCB_WAITQ and
// the wait_page_queue of an async buffered read), and the context a step
// of it runs in (ExecContext). The issuer (io_uring's request,
// core/io_uring/kiocb.h) derives from Kiocb and fills in what mm calls
// back: waitq_func, the page-wait callback (io_async_buf_func()).
#pragma once

#include <cstdint>
#include <vector>

#include "core/mm/buffered_path.h"
#include "core/mm/page_cache.h"
#include "core/mm/readahead.h"

namespace mdsplit {

inline constexpr uint64_t kNoIndex = ~uint64_t(0);

// ki_flags the buffered path reads (include/linux/fs.h).
enum KiocbFlags : uint32_t {
    kIocbNowait = 1u << 0,  // IOCB_NOWAIT: must not block
    kIocbWaitq = 1u << 1,   // IOCB_WAITQ: wait for a locked page by callback
};

struct Kiocb {
    FileRaState* ra = nullptr;  // file->f_ra: the reader's readahead state
    uint32_t pid = 0;           // the submitting job (memcg owner of the pages it dirties)
    uint64_t pos = 0;
    uint64_t len = 0;  // clamped at the end of the file
    uint8_t* buf = nullptr;
    uint64_t done = 0;  // bytes copied so far
    uint32_t kflags = 0;
    uint64_t last_counted = kNoIndex;  // the page last counted as hit/miss
    uint64_t failed_index = kNoIndex;  // a page whose read failed once already
    int32_t error = 0;
    // ki_waitq: armed on a locked page (or one under write-back); runs
    // waitq_func on the loop thread when that page's bit clears, with
    // waiter.ctx = this Kiocb.
    PageWaiter waiter;
    void (*waitq_func)(PageWaiter* waiter) = nullptr;
    BufferedPath path;
};

// A read an attempt started: the page (locked, referenced by its I/O) and
// when it goes down (a modelled CPU's time).
struct PendingIo {
    Page* page;
    uint64_t t;
};

// Where a step runs: the submitter, its task_work or an io-wq worker, as
// the execution mode (io_uring's SubmitterCpu and IoWq) made it.
struct ExecContext {
    BufferedWhere where = BufferedWhere::Submitter;
    uint64_t t = 0;  // modelled: the time this context has reached
    uint32_t pid = 0;
    // A modelled CPU (virtual clock): each step advances t by its
    // BufferedCosts figure. Otherwise the steps cost what they really do.
    bool modelled = false;
    // false: an io-wq thread; the reads it starts and its completion are
    // posted to the loop thread.
    bool on_loop = true;
    std::vector<PendingIo> reads;  // started by the attempt, submitted by Filemap::flush_reads()
    void charge(uint64_t ns) { t += modelled ? ns : 0; }
};

}  // namespace mdsplit
