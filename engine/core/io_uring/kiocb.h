// One buffered I/O in flight: io_uring's request (struct io_kiocb) around
// the kiocb mm works on (core/mm/kiocb.h), shared by the files that follow
// io_uring's: io_uring_rw.cpp (io_uring/rw.c), io_wq*.cpp (io_uring/io-wq.c)
// and submitter_cpu.cpp. Internal to BufferedIo.
#pragma once

#include <cstdint>

#include "core/io_uring/buffered_io.h"
#include "core/mm/kiocb.h"

namespace mdsplit {

// Owned by the loop thread, except that while an io-wq worker thread runs
// it only that thread touches it.
struct BufferedIo::Request : Kiocb {
    BufferedIo* self = nullptr;
    TaskContext* task = nullptr;
    uint64_t cookie = 0;
    Op op = Op::Read;
    bool completed = false;
    bool remote = false;  // given to a real worker thread: the loop expects its post

    // The request whose kiocb a page-wait callback was armed for.
    static Request& of(PageWaiter* w) {
        return static_cast<Request&>(*static_cast<Kiocb*>(w->ctx));
    }
    static Request& of(Kiocb& k) { return static_cast<Request&>(k); }
};

}  // namespace mdsplit
