// Follows mm/page-writeback.c (5.9): write_cache_pages() (write-back of
// dirty pages from mapping->writeback_index, cyclically), the flusher that
// runs it (wakeup_flusher_threads()), end_page_writeback() accounting,
// balance_dirty_pages()' throttled writers, and what waits for write-back:
// fsync (file_write_and_wait_range()) and sync(). A write-back error is
// reported as lib/errseq.c does it: the mapping keeps one error sequence
// (with its SEEN flag), each open file (each job here) samples it when it
// opens (errseq_sample(): an error nobody has seen yet counts as new) and
// each fsync reports -EIO once per file for what changed since its sample
// (errseq_check_and_advance()).
//
// A throttled writer or an fsync is a kiocb (kiocb.h) that the issuer
// hands over and gets back through WritebackClient once write-back lets it
// go: PageWriteback never completes a request itself. Loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "base/event_loop.h"
#include "core/mm/buffered_path.h"
#include "core/mm/filemap.h"
#include "core/mm/kiocb.h"
#include "core/mm/page_cache.h"

namespace mdsplit {

// What write-back calls back: the issuer completes a kiocb it held.
class WritebackClient {
public:
    // A throttled writer (error 0) or an fsync (-EIO if a write-back failed
    // since the last fsync) may complete now. Runs from a deferred callback.
    virtual void writeback_wait_done(Kiocb& k, int32_t error) = 0;

protected:
    ~WritebackClient() = default;
};

class PageWriteback {
public:
    // dirty_background / dirty_limit: 10% / 20% of the cache (at least 8 /
    // 16 pages), as vm.dirty_background_ratio / vm.dirty_ratio.
    PageWriteback(EventLoop& loop, PageCache& cache, Filemap& filemap, BufferedStats& stats,
                  WritebackClient& client);
    PageWriteback(const PageWriteback&) = delete;
    PageWriteback& operator=(const PageWriteback&) = delete;

    /**
     * start_writeback() - write_cache_pages(): up to @max_pages dirty pages
     * from the writeback index on, cyclically, become PG_writeback and go
     * down as writes, each owner's in bios charged to its cgroup
     * @sync: REQ_SYNC (fsync, sync) rather than background write-back
     *
     * Return: the batch number an fsync waits for (the last one when
     * nothing was dirty).
     */
    uint64_t start_writeback(size_t max_pages, bool sync);
    // wakeup_flusher_threads(): background write-back runs soon, from a
    // deferred callback (we may be inside a submission), once.
    void wakeup_flusher();
    /**
     * balance_dirty_pages() - after a write of @k: above the background
     * threshold write-back starts; above the limit the writer waits.
     *
     * Return: true when @k is held; it comes back through
     * WritebackClient::writeback_wait_done() once the cache is under the
     * limit.
     */
    bool balance_dirty_pages(Kiocb& k);
    /**
     * fsync() - file_write_and_wait_range(): writes back every dirty page
     * and waits for that write-back and every earlier one.
     * @error: set when nothing is left to wait for: -EIO if a write-back
     *         failed since the last fsync, else 0
     *
     * Return: true when @k may complete now with @error; false when it is
     * held and comes back through WritebackClient::writeback_wait_done().
     */
    bool fsync(Kiocb& k, int32_t& error);
    /**
     * sync_range() - fs/sync.c sync_file_range() on pages @first..@last.
     * @flags: SYNC_FILE_RANGE_WRITE starts write-back of the dirty ones
     *         (__filemap_fdatawrite_range(), WB_SYNC_ALL when both waits are
     *         set too); WAIT_BEFORE / WAIT_AFTER wait for write-back
     *         (file_fdatawait_range()). A wait covers every batch started
     *         before it (all pages, a superset of the range's), and
     *         WAIT_BEFORE's wait overlaps the write it precedes.
     * @error: set when nothing is left to wait for: -EIO if a write-back
     *         failed since the last wait (only when one of the waits is set)
     *
     * Return: as fsync().
     */
    bool sync_range(Kiocb& k, uint64_t first, uint64_t last, unsigned flags, int32_t& error);
    // Loop thread, outside callbacks: write back everything and run the
    // loop until it is on the members (job end, sync(2)).
    void sync();
    /**
     * take_silent_errors() - pages whose write-back failed and that no
     * fsync has reported, each counted once by this call
     *
     * The kernel reports a write-back error only through a sync's errseq
     * (filemap_check_errors()); a writer that never syncs loses the data
     * without a word. Counting them does not consume them: a later fsync
     * still reports its error.
     */
    uint64_t take_silent_errors();
    /**
     * open_file() - the job @pid opens the file: its f_wb_err sample
     * (errseq_sample()), taken once. Called on each of its requests.
     */
    void open_file(uint32_t pid);
    /**
     * write_and_wait_range() - filemap_write_and_wait_range() for the pages
     * @first..@last: writes back the dirty ones and runs the loop until
     * none there is dirty, under write-back or locked by a read in flight.
     * Loop thread, outside callbacks.
     */
    void write_and_wait_range(uint64_t first, uint64_t last);

    // sync_file_range(2)'s flags (include/uapi/linux/fs.h).
    static constexpr unsigned kSyncFileRangeWaitBefore = 1;
    static constexpr unsigned kSyncFileRangeWrite = 2;
    static constexpr unsigned kSyncFileRangeWaitAfter = 4;

private:
    struct FsyncWaiter {
        Kiocb* k;
        uint64_t batch;
    };
    static void write_endio(Bio* bio);
    static void writeback_cb(void* arg, uint64_t);
    void check_throttled();
    void check_fsyncs();
    bool writeback_done_through(uint64_t batch) const;
    uint64_t write_cache_pages(size_t max_pages, bool sync, uint64_t first, uint64_t end);
    bool range_dirty() const;
    bool range_settled() const;
    int32_t take_error(uint32_t pid);
    uint64_t errseq_sample() const;
    void run_until(bool (*done)(PageWriteback*));

    static constexpr size_t kWritebackChunk = 1024;  // MAX_WRITEBACK_PAGES

    EventLoop& loop_;
    PageCache& cache_;
    Filemap& filemap_;
    BufferedStats& stats_;
    WritebackClient& client_;
    uint64_t dirty_background_;
    uint64_t dirty_limit_;
    uint64_t wb_seq_ = 0;
    uint64_t wb_cursor_ = 0;                       // mapping->writeback_index
    std::map<uint64_t, uint64_t> wb_outstanding_;  // batch -> pages still under write-back
    // errseq: wb_errors_ is mapping->wb_err's sequence (one step per failed
    // page), wb_err_seen_ its ERRSEQ_SEEN flag, wb_err_since_ each job's
    // file->f_wb_err.
    uint64_t wb_errors_ = 0;
    bool wb_err_seen_ = false;
    std::unordered_map<uint32_t, uint64_t> wb_err_since_;
    uint32_t last_open_pid_ = 0;       // open_file()'s fast path
    uint64_t wb_errors_reported_ = 0;  // wb_errors_ when an fsync last reported one
    uint64_t wb_errors_counted_ = 0;   // take_silent_errors() has counted these
    bool writeback_scheduled_ = false;
    uint64_t sync_target_ = 0;
    uint64_t range_first_ = 0, range_last_ = 0;  // write_and_wait_range()'s
    std::vector<FsyncWaiter> fsyncs_;
    std::deque<Kiocb*> throttled_;
};

}  // namespace mdsplit
