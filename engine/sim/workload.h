// A closed-loop synthetic workload for virtual-time runs (the Python
// bindings): like one fio job, it keeps `iodepth` I/Os in flight,
// submitting in batches inside a plug, sequential or random.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/io_slots.h"
#include "sim/io_tally.h"
#include "sim/run_interrupt.h"
#include "stack/stack.h"

namespace mdsplit {

struct WorkloadSpec : ClosedLoopSpec {
    // run_workloads() only: when the task starts (loop time, ns), a time
    // limit counted from its start (0 = none; with total_bytes = 0 the task
    // then runs until the limit, wrapping around its region), and its
    // scheduling identity (group, group weight, ioprio class and level).
    uint64_t start_ns = 0;
    uint64_t runtime_ns = 0;
    // run_workloads() only: time between a completion and the submission
    // that reuses its slot (the submitter's turnaround: wake-up, syscall
    // return and entry; fio's thinktime). 0 = immediate.
    uint64_t think_ns = 0;
    SchedIdentity sched;
};

struct WorkloadResult : IoTally {
    uint64_t start_ns = 0;  // run_workloads(): loop time of the first submission
    uint64_t end_ns = 0;    // run_workloads(): loop time of the last completion
};

// Runs the workload to completion on `stack` (any clock), or until
// `interrupt` asks it to end (then throws RunInterrupted once drained).
WorkloadResult run_workload(Stack& stack, const WorkloadSpec& spec, InterruptPoll interrupt = {});

// Runs several closed-loop tasks at once in the stack's event loop, each
// with its own TaskContext (pid, scheduling identity), start time and limits
// (like several fio jobs sharing one device). Results are in spec order.
// Throws std::invalid_argument, once its I/O has drained, for a run that
// cannot end as asked: a task bounded by runtime_ns alone on a stack where
// no virtual time passes, or a clock past kTimeHorizonNs (virtual_time.h);
// RunInterrupted, once drained, when `interrupt` asked the run to end.
std::vector<WorkloadResult> run_workloads(Stack& stack, const std::vector<WorkloadSpec>& specs,
                                          InterruptPoll interrupt = {});

}  // namespace mdsplit
