#include "core/mm/readahead.h"

#include <algorithm>

namespace mdsplit {

const char* ra_kind_name(RaKind kind) {
    switch (kind) {
        case RaKind::Sync:
            return "sync";
        case RaKind::Async:
            return "async";
        case RaKind::Random:
            return "random";
        case RaKind::Forced:
            return "forced";
    }
    return "?";
}

namespace {

uint64_t roundup_pow_of_two(uint64_t n) {
    uint64_t p = 1;
    while (p < n) p <<= 1;
    return p;
}

// count_history_pages()
uint64_t count_history_pages(ReadaheadControl& ctl, uint64_t index, uint64_t max) {
    uint64_t head = ctl.prev_miss(index - 1, max);
    return index - 1 - head;
}

// try_context_readahead(): a run of cached pages right before `index` is
// what a sequential stream leaves behind.
bool try_context_readahead(ReadaheadControl& ctl, FileRaState& ra, uint64_t index,
                           uint64_t req_size, uint64_t max) {
    uint64_t size = count_history_pages(ctl, index, max);
    // Not enough history pages: it could be a random read.
    if (size <= req_size) return false;
    // Starts from the beginning of the file: a strong indication of a
    // long-run stream (or a whole-file read).
    if (size >= index) size *= 2;
    ra.start = index;
    ra.size = std::min(size + req_size, max);
    ra.async_size = 1;
    return true;
}

// ondemand_readahead()
void ondemand_readahead(ReadaheadControl& ctl, FileRaState& ra, bool hit_readahead_marker,
                        uint64_t index, uint64_t req_size) {
    uint64_t max_pages = ra.ra_pages;
    // A request larger than the window may go up to the optimal I/O size.
    if (req_size > max_pages && ctl.io_pages > max_pages)
        max_pages = std::min(req_size, ctl.io_pages);

    bool initial = false;
    if (!index) {
        initial = true;  // start of file
    } else if (index == ra.start + ra.size - ra.async_size || index == ra.start + ra.size) {
        // The expected callback index: assume sequential access, ramp up
        // and push the window forward.
        ra.start += ra.size;
        ra.size = get_next_ra_size(ra, max_pages);
        ra.async_size = ra.size;
    } else if (hit_readahead_marker) {
        // A marked page without valid readahead state (interleaved reads):
        // the async_size is what the cache holds ahead; ramp it up.
        uint64_t start = ctl.next_miss(index + 1, max_pages);
        if (!start || start - index > max_pages) return;
        ra.start = start;
        ra.size = start - index;  // old async_size
        ra.size += req_size;
        ra.size = get_next_ra_size(ra, max_pages);
        ra.async_size = ra.size;
    } else if (req_size > max_pages) {
        initial = true;  // oversize read
    } else {
        // Sequential cache miss: (index - prev_index) == 1, or 0 for
        // unaligned reads.
        uint64_t prev_index = ra.prev_pos >> 12;
        if (ra.prev_pos != ~uint64_t(0) && index - prev_index <= 1) {
            initial = true;
        } else if (!try_context_readahead(ctl, ra, index, req_size, max_pages)) {
            // Standalone, small random read: read as is, and do not pollute
            // the readahead state.
            ctl.kind = RaKind::Random;
            do_page_cache_ra(ctl, index, req_size, 0);
            return;
        }
    }
    if (initial) {
        ra.start = index;
        ra.size = get_init_ra_size(req_size, max_pages);
        ra.async_size = ra.size > req_size ? ra.size - req_size : ra.size;
    }
    // readit: will this read hit the readahead marker made by itself? If
    // so, trigger the marker hit now and merge the next window into this one.
    if (index == ra.start && ra.size == ra.async_size) {
        uint64_t add_pages = get_next_ra_size(ra, max_pages);
        if (ra.size + add_pages <= max_pages) {
            ra.async_size = add_pages;
            ra.size += add_pages;
        } else {
            ra.size = max_pages;
            ra.async_size = max_pages >> 1;
        }
    }
    do_page_cache_ra(ctl, ra.start, ra.size, ra.async_size);
}

}  // namespace

// get_init_ra_size(): the first window, for a request of `size` pages:
// 4x small requests, 2x medium ones, max for large.
uint64_t get_init_ra_size(uint64_t size, uint64_t max) {
    uint64_t newsize = roundup_pow_of_two(size);
    if (newsize <= max / 32)
        newsize = newsize * 4;
    else if (newsize <= max / 4)
        newsize = newsize * 2;
    else
        newsize = max;
    return newsize;
}

// get_next_ra_size(): ramp-up, 4x while small, then 2x, up to max.
uint64_t get_next_ra_size(const FileRaState& ra, uint64_t max) {
    uint64_t cur = ra.size;
    if (cur < max / 16) return 4 * cur;
    if (cur <= max / 2) return 2 * cur;
    return max;
}

void do_page_cache_ra(ReadaheadControl& ctl, uint64_t index, uint64_t nr_to_read,
                      uint64_t lookahead) {
    uint64_t pages = ctl.file_pages();
    if (pages == 0) return;
    uint64_t end_index = pages - 1;  // the page holding the last byte
    if (index > end_index) return;
    // Do not read past the page containing the last byte of the file.
    if (nr_to_read > end_index - index) nr_to_read = end_index - index + 1;
    if (nr_to_read == 0) return;
    ctl.window(ctl.kind, index, nr_to_read, lookahead);
    // page_cache_ra_unbounded(): allocate what is missing; a present page
    // ends the current batch of contiguous pages.
    for (uint64_t i = 0; i < nr_to_read; i++) {
        if (ctl.present(index + i)) {
            ctl.read_pages();
            continue;
        }
        bool mark = lookahead && i == nr_to_read - lookahead;
        if (!ctl.add_page(index + i, mark)) {
            ctl.read_pages();
            continue;
        }
    }
    ctl.read_pages();
}

void force_page_cache_ra(ReadaheadControl& ctl, FileRaState& ra, uint64_t index,
                         uint64_t nr_to_read) {
    uint64_t max_pages = std::max(ctl.io_pages, ra.ra_pages);
    nr_to_read = std::min(nr_to_read, max_pages);
    ctl.kind = RaKind::Forced;
    while (nr_to_read) {
        uint64_t this_chunk = (2 * 1024 * 1024) >> 12;
        if (this_chunk > nr_to_read) this_chunk = nr_to_read;
        do_page_cache_ra(ctl, index, this_chunk, 0);
        index += this_chunk;
        nr_to_read -= this_chunk;
    }
}

void page_cache_sync_ra(ReadaheadControl& ctl, FileRaState& ra, uint64_t index, uint64_t req_count,
                        bool fmode_random, bool forced_ra_when_disabled) {
    bool do_forced_ra = fmode_random;
    if (!ra.ra_pages) {
        // Before 324bcf54: no readahead at all, the read path allocates and
        // reads the page itself. After: issue this request as a readahead of
        // one page, so that the I/O starts even from a NOWAIT attempt.
        if (!forced_ra_when_disabled) return;
        req_count = 1;
        do_forced_ra = true;
    }
    if (do_forced_ra) {  // be dumb
        force_page_cache_ra(ctl, ra, index, req_count);
        return;
    }
    ctl.kind = RaKind::Sync;
    ondemand_readahead(ctl, ra, false, index, req_count);
}

void page_cache_async_ra(ReadaheadControl& ctl, FileRaState& ra, uint64_t index, uint64_t req_count,
                         bool page_writeback) {
    if (!ra.ra_pages) return;    // no readahead
    if (page_writeback) return;  // the same bit is PG_reclaim
    ctl.kind = RaKind::Async;
    ondemand_readahead(ctl, ra, true, index, req_count);
}

}  // namespace mdsplit
