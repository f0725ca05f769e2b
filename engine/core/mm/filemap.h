// Follows mm/filemap.c (5.9): the page cache's read and write attempts of
// one kiocb (generic_file_buffered_read(), generic_perform_write()), the
// page wait queues (wait_on_page_locked[_async](), wake_up_page_bit(),
// unlock_page(), end_page_writeback()'s wake-up) and the page I/O the
// attempts start (->readpage / read_pages() of mm/readahead.c, and the
// bios write-back sends, mm/page-writeback.c).
//
// The caller (io_uring's issue path and io-wq, core/io_uring/) gives each
// attempt the kiocb (kiocb.h) and the context it runs in, and is called
// back only through the kiocb's waitq_func; Filemap never completes a
// request. Threads: the attempts and the page waits may run on an io-wq
// thread (ExecContext::on_loop false); page I/O submission, its completion
// and every callback run on the loop thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/event_loop.h"
#include "config/stack_config.h"
#include "core/block/block_device.h"
#include "core/block/block_layer.h"
#include "core/block/task_context.h"
#include "core/mm/buffered_path.h"
#include "core/mm/kiocb.h"
#include "core/mm/page_cache.h"
#include "core/mm/readahead.h"

namespace mdsplit {

class MemberQueue;
class PageWriteback;

class Filemap {
public:
    // generic_file_buffered_read()'s outcome (see read_attempt()).
    enum class ReadResult { Done, Again, Queued, Block, Error };
    // generic_perform_write()'s: everything copied, waiting on a page (its
    // waitq_func resumes the write), or a page that cannot be read.
    enum class WriteResult { Done, Queued, Error };
    // Who to wake once the cache lock is released: page-wait callbacks (run
    // on the loop thread) and wait queues with sleeping threads (notified
    // after unlocking, so a woken thread does not block on the lock at once).
    struct Wakeups {
        std::vector<PageWaiter*> waiters;
        std::vector<std::condition_variable*> sleepers;
    };

    // The cache of `top`'s data; `costs` are charged to modelled contexts,
    // `stats` (shared with the caller, under cache.mutex()) counted.
    Filemap(EventLoop& loop, BlockLayer& layer, BlockDevice& top, std::vector<MemberQueue*> members,
            const PageCacheConfig& config, PageCache& cache, const BufferedCosts& costs,
            BufferedStats& stats);
    Filemap(const Filemap&) = delete;
    Filemap& operator=(const Filemap&) = delete;
    // Where reclaim that finds only dirty pages wakes the flusher.
    void set_writeback(PageWriteback* wb) { wb_ = wb; }

    /**
     * read_attempt() - generic_file_buffered_read() for what is left of @k
     * @k:   the read; its kflags (IOCB_NOWAIT / IOCB_WAITQ) decide how a
     *       page that is not up to date is handled
     * @x:   the context it runs in (charged, and the reads it starts are
     *       left in x.reads for flush_reads())
     * @block_page: set on Block
     *
     * Return: Done (everything copied), Error (a page read failed twice:
     * k.error), Again (-EAGAIN: would block under NOWAIT), Queued
     * (-EIOCBQUEUED: k.waitq_func is armed on a locked page), Block (an
     * io-wq worker only: sleep until @block_page, referenced, unlocks, then
     * call again).
     */
    ReadResult read_attempt(Kiocb& k, ExecContext& x, Page*& block_page);
    /**
     * write_attempt() - generic_perform_write() for what is left of @k
     *
     * write_begin finds or creates each page, reads it first if it is
     * partly written and not up to date, and waits (by k.waitq_func: Queued)
     * while it is locked or under write-back (stable pages); then copy,
     * mark up to date and dirty, write_end. Runs on the loop thread.
     */
    WriteResult write_attempt(Kiocb& k, ExecContext& x);
    // Starts the reads an attempt left in x.reads: on the loop thread now
    // (or at their modelled time), from an io-wq thread by post().
    void flush_reads(ExecContext& x);

    // wait_on_page_locked_async() for a worker on a modelled CPU: `fn`
    // runs once `page` (a reference the caller gives up) unlocks.
    void wait_on_page_locked_async(Kiocb& k, Page* page, void (*fn)(PageWaiter*));
    // A page-wait callback ran: drops the reference its arming took.
    void drop_waiter_page(PageWaiter& w);
    // wait_on_page_locked_killable() on an io-wq thread: sleeps until
    // `page` (a reference the caller gives up) unlocks. False: shutting
    // down (the "fatal signal").
    bool wait_on_page_locked(Page* page);
    // Sleeping threads give up (before the pool is joined).
    void stop();

    // Page I/O down the stack, charged to `pid`'s cgroup: adjacent pages
    // (in the file and in memory) share a bio, as read_pages()/mpage
    // writepages would put them in one; the rest merge in the plug.
    // `end_io` gets each bio with bio->tag = `owner`.
    void submit_pages(std::vector<Page*>& pages, Op op, uint32_t pid, bool sync,
                      void (*end_io)(Bio*), void* owner);
    // ---- caller holds the cache mutex ----
    // unlock_page(): clears PG_locked; its waiters and sleepers go to `wake`.
    void unlock_page_locked(Page* page, Wakeups& wake);
    // end_page_writeback(): clears PG_writeback; its waiters go to `wake`.
    void end_writeback_locked(Page* page, Wakeups& wake);
    // file->f_ra of job `pid`: on first use file_ra_state_init(), then
    // `advice` (the job's fadvise_hint, generic_fadvise()).
    FileRaState* ra_state(uint32_t pid, Fadvise advice);
    // ---- after unlocking ----
    // wake_page_function(): the callbacks run on the loop thread, after the
    // waker (as io_async_buf_func's task_work does).
    void fire_waiters(Wakeups& wake, bool loop_thread);

    // The context page I/O is submitted in, per fio job (pid): its blkcg.
    TaskContext& io_task_for(uint32_t pid);
    // invalidate_mapping_pages() after a sync: drops every clean page
    // nobody uses, and forgets readahead state.
    void invalidate();

private:
    struct IoBatch;
    class RaControl;

    void arm_locked(Kiocb& k, Page* page, uint32_t bit, void (*fn)(PageWaiter*));
    void take_waiters_locked(Page* page, uint32_t bit, Wakeups& wake);
    static void submit_batch_cb(void* arg, uint64_t);
    static void read_endio(Bio* bio);
    static void fire_waiter_cb(void* arg, uint64_t);
    void kick();

    static constexpr size_t kBioMaxVecs = 256;  // BIO_MAX_VECS
    // A read bio's pages: BIO_MAX_VECS folios of config_.folio_kb.
    size_t bio_max_pages() const {
        return kBioMaxVecs * (config_.folio_kb / (kCachePageSize / 1024));
    }

    EventLoop& loop_;
    BlockLayer& layer_;
    BlockDevice& top_;
    std::vector<MemberQueue*> members_;
    const PageCacheConfig& config_;
    PageCache& cache_;
    const BufferedCosts& costs_;
    BufferedStats& stats_;
    PageWriteback* wb_ = nullptr;
    bool stopping_ = false;  // under the cache mutex: sleeping threads give up
    // per fio job (pid), under the cache mutex
    std::unordered_map<uint32_t, FileRaState> ra_states_;
    // The context page I/O is submitted in, per fio job (pid): its blkcg
    // (mdsplit_group), so bfq charges a job's buffered reads, and the
    // write-back of the pages it dirtied, to its group. Node-based: the
    // requests' sched_data pointers stay valid.
    std::unordered_map<uint32_t, TaskContext> io_tasks_;
};

}  // namespace mdsplit
