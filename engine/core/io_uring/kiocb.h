// One buffered I/O in flight: the kiocb (include/linux/fs.h struct kiocb)
// with the io_uring request around it (struct io_kiocb), shared by the
// files that follow the kernel's: io_uring_rw.cpp (io_uring/rw.c),
// io_wq*.cpp (io_uring/io-wq.c), filemap.cpp (mm/filemap.c) and
// page_writeback.cpp (mm/page-writeback.c). Internal to BufferedIo.
#pragma once

#include <cstdint>

#include "core/io_uring/buffered_io.h"
#include "core/mm/page_cache.h"
#include "core/mm/readahead.h"

namespace mdsplit {

inline constexpr uint64_t kNoIndex = ~uint64_t(0);

// One buffered I/O in flight (a kiocb). Owned by the loop thread, except
// that while an io-wq worker thread runs it only that thread touches it.
struct BufferedIo::Request {
    BufferedIo* self = nullptr;
    TaskContext* task = nullptr;
    FileRaState* ra = nullptr;
    uint64_t cookie = 0;
    Op op = Op::Read;
    uint64_t pos = 0;
    uint64_t len = 0;  // clamped at the end of the file
    uint8_t* buf = nullptr;
    uint64_t done = 0;  // bytes copied so far
    uint32_t kflags = 0;
    uint64_t last_counted = kNoIndex;  // the page last counted as hit/miss
    uint64_t failed_index = kNoIndex;  // a page whose read failed once already
    int32_t error = 0;
    bool completed = false;
    bool remote = false;  // given to a real worker thread: the loop expects its post
    PageWaiter waiter;
    BufferedPath path;
};

}  // namespace mdsplit
