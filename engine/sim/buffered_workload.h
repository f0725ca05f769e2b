// A closed-loop buffered workload (fio direct=0 with ioengine=io_uring, as
// in the seed-003 sweep) for the bindings and tests: keeps `iodepth`
// buffered I/Os in flight through Stack::queue_buffered(). On the virtual
// clock it also models fio's own CPU time on the submitting thread
// (BufferedCosts::fio_submit_ns / fio_complete_ns), which shares that CPU
// with the inline attempts and task_work of buffered_io.h: the submitter is
// what saturates in the thread's table.
#pragma once

#include <cstdint>

#include "sim/io_slots.h"
#include "sim/io_tally.h"
#include "sim/run_interrupt.h"
#include "stack/stack.h"

namespace mdsplit {

struct BufferedWorkloadSpec : ClosedLoopSpec {
    bool end_fsync = false;  // fio's end_fsync=1: one fsync at the end, timed
};

struct BufferedWorkloadResult : IoTally {
    uint64_t unexpected_completions = 0;  // a cookie that was not in flight (completed twice)
};

// Runs the workload to completion (any clock). Throws std::runtime_error
// if I/O is left in flight with nothing pending (a lost request), and
// RunInterrupted, once drained, when `interrupt` asked the run to end (the
// end_fsync is then not sent).
BufferedWorkloadResult run_buffered_workload(Stack& stack, const BufferedWorkloadSpec& spec,
                                             InterruptPoll interrupt = {});

}  // namespace mdsplit
