// Readahead as mm/readahead.c does it (Linux 5.9/5.10, the seed-003 era),
// on the page cache of page_cache.h:
//   - struct file_ra_state (one per open file: per fio job here);
//   - page_cache_sync_ra(): on a cache miss; ondemand_readahead() detects a
//     sequential stream (read at the expected index, or right after
//     prev_pos, or a run of cached history pages: try_context_readahead()),
//     sizes the first window with get_init_ra_size() and ramps it up with
//     get_next_ra_size(); a lone random read reads just what was asked;
//   - page_cache_async_ra(): on reaching a PG_readahead page, the marker
//     that page_cache_ra_unbounded() sets `async_size` pages before the end
//     of a window, so the next window starts before the reader needs it;
//   - ra_pages == 0 disables readahead, except that with commit 324bcf54
//     ("mm: use limited read-ahead to satisfy read", the `forced-ra`
//     variant) a miss still issues a forced readahead of exactly one page:
//     force_page_cache_ra(), which is also what FMODE_RANDOM
//     (POSIX_FADV_RANDOM) uses with the requested size.
//
// The functions decide windows and allocate pages through a
// ReadaheadControl (struct readahead_control plus the address_space), which
// the buffered-I/O path implements on the page cache and tests implement
// with a fake. All indices and sizes are in pages.
#pragma once

#include <cstdint>

namespace mdsplit {

struct FileRaState {
    uint64_t start = 0;                // where the current window starts
    uint64_t size = 0;                 // its size
    uint64_t async_size = 0;           // start async readahead this many pages before its end
    uint64_t ra_pages = 0;             // maximum window (bdi ra_pages: ra_kb / 4); 0 = disabled
    uint64_t prev_pos = ~uint64_t(0);  // byte position after the last read (-1: none)
    // file->f_mode & FMODE_RANDOM (POSIX_FADV_RANDOM): this state is the
    // job's whole struct file here, so the mode lives with it.
    bool fmode_random = false;
};

// Why a window was read (statistics and tests).
enum class RaKind : uint8_t {
    Sync,    // ondemand_readahead() from a cache miss
    Async,   // ondemand_readahead() from a PG_readahead page
    Random,  // ondemand: a lone random read, read as is
    Forced,  // force_page_cache_ra(): readahead off (forced-ra) or FMODE_RANDOM
};
const char* ra_kind_name(RaKind kind);

class ReadaheadControl {
public:
    virtual ~ReadaheadControl() = default;
    // Is page `index` in the cache?
    virtual bool present(uint64_t index) = 0;
    // Pages in the file (i_size rounded up); readahead never reads past it.
    virtual uint64_t file_pages() = 0;
    // Allocates page `index` and adds it to the cache locked (one batch of
    // read_pages()); `mark` sets PG_readahead. False when it cannot.
    virtual bool add_page(uint64_t index, bool mark) = 0;
    // read_pages(): starts the I/O of the pages added since the last call.
    virtual void read_pages() = 0;
    // page_cache_next_miss()/page_cache_prev_miss() (page_cache.h).
    virtual uint64_t next_miss(uint64_t index, uint64_t max) = 0;
    virtual uint64_t prev_miss(uint64_t index, uint64_t max) = 0;
    // A window decided by do_page_cache_ra(): statistics.
    virtual void window(RaKind /*kind*/, uint64_t /*start*/, uint64_t /*nr*/, uint64_t /*async*/) {}

    uint64_t io_pages = 32;      // bdi->io_pages: the device's max_sectors in pages
    RaKind kind = RaKind::Sync;  // set by the functions below for window()
};

uint64_t get_init_ra_size(uint64_t size, uint64_t max);
uint64_t get_next_ra_size(const FileRaState& ra, uint64_t max);

// page_cache_sync_ra(). `fmode_random`: the file was fadvised RANDOM;
// `forced_ra_when_disabled`: commit 324bcf54 is applied (variant forced-ra).
void page_cache_sync_ra(ReadaheadControl& ctl, FileRaState& ra, uint64_t index, uint64_t req_count,
                        bool fmode_random, bool forced_ra_when_disabled);
// page_cache_async_ra() for page `index`, which carried PG_readahead (the
// caller clears it, as ClearPageReadahead() does). `page_writeback`: skip.
void page_cache_async_ra(ReadaheadControl& ctl, FileRaState& ra, uint64_t index, uint64_t req_count,
                         bool page_writeback);
// force_page_cache_ra(): reads nr_to_read pages (capped at
// max(io_pages, ra_pages)) from index in 2 MiB chunks.
void force_page_cache_ra(ReadaheadControl& ctl, FileRaState& ra, uint64_t index,
                         uint64_t nr_to_read);
// do_page_cache_ra() + page_cache_ra_unbounded(): reads up to nr_to_read
// pages from index, skipping present ones; PG_readahead goes on the page
// `lookahead` pages before the end.
void do_page_cache_ra(ReadaheadControl& ctl, uint64_t index, uint64_t nr_to_read,
                      uint64_t lookahead);

}  // namespace mdsplit
