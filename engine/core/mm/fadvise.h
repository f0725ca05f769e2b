// posix_fadvise(2) as mm/fadvise.c's generic_fadvise() does it for the
// advice that changes readahead (Linux 5.9; 6.12 also clears FMODE_NOREUSE,
// which nothing here models): NORMAL restores the device's window and clears
// FMODE_RANDOM, RANDOM sets it (every miss then reads just what was asked,
// force_page_cache_ra()), SEQUENTIAL doubles the window and clears it.
// fio gives the advice when it opens a job's file (td_io_open_file():
// fadvise_hint, by default RANDOM for random jobs and SEQUENTIAL for the
// others); the engine passes it on as TaskContext::fadvise.
#pragma once

#include <cstdint>

#include "core/block/task_context.h"
#include "core/mm/readahead.h"

namespace mdsplit {

/**
 * generic_fadvise() - apply @advice to a file's readahead state
 * @ra:            the file's state (file->f_ra and its FMODE_RANDOM)
 * @bdi_ra_pages:  the device's readahead window (bdi->ra_pages), in pages
 * @advice:        None leaves @ra as it is
 */
inline void generic_fadvise(FileRaState& ra, uint64_t bdi_ra_pages, Fadvise advice) {
    switch (advice) {
        case Fadvise::None:
            break;
        case Fadvise::Normal:
            ra.ra_pages = bdi_ra_pages;
            ra.fmode_random = false;
            break;
        case Fadvise::Random:
            ra.fmode_random = true;
            break;
        case Fadvise::Sequential:
            ra.ra_pages = bdi_ra_pages * 2;
            ra.fmode_random = false;
            break;
    }
}

}  // namespace mdsplit
