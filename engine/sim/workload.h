// A closed-loop synthetic workload for the bindings' Simulation.run_workload
// and the timing-model tests (fio jobs go through run_fio_jobs,
// sim/fio_job_model.h): like one fio job, it keeps `iodepth` I/Os in flight,
// submitting in batches inside a plug, sequential or random.
#pragma once

#include <cstdint>

#include "sim/io_slots.h"
#include "sim/io_tally.h"
#include "sim/run_interrupt.h"
#include "stack/stack.h"

namespace mdsplit {

using WorkloadSpec = ClosedLoopSpec;
using WorkloadResult = IoTally;

// Runs the workload to completion on `stack` (any clock), or until
// `interrupt` asks it to end (then throws RunInterrupted once drained).
WorkloadResult run_workload(Stack& stack, const WorkloadSpec& spec, InterruptPoll interrupt = {});

}  // namespace mdsplit
