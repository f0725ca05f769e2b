// Tests' way to the one virtual-time driver (run_fio_jobs,
// sim/fio_job_model.h) on a stack the test already holds: a closed-loop fio
// job (as a closed-loop test workload needs one) and a
// run of jobs on that stack and its virtual clock.
#pragma once

#include <vector>

#include "sim/fio_job_model.h"

namespace mdsplit {

// `op` in blocks of `bs`, `iodepth` in flight, over [0, size) (0 = the
// whole device), `total` bytes in all (io_size); random offsets drawn with
// repeats (norandommap), as a closed loop draws them.
inline FioJobSpec closed_loop_job(Op op, bool random, uint64_t bs, uint32_t iodepth, uint64_t total,
                                  uint64_t size = 0, uint64_t seed = 0, bool direct = true) {
    FioJobSpec s;
    s.name = "closed-loop";
    s.random = random;
    s.read_pct = op == Op::Read ? 100 : 0;
    for (auto& d : s.bs) d = {FioBlockSize{bs, 100}};
    s.iodepth = iodepth;
    s.size = size;
    s.io_size = total;
    s.norandommap = true;
    s.seed = seed;
    s.direct = direct;
    s.pid = 7;
    return s;
}

// Runs `jobs` on `stack` (every job's stack index 0), on `clock`, which
// the stack's loop uses.
inline std::vector<FioJobResult> run_jobs_on(Stack& stack, VirtualClock& clock,
                                             const std::vector<FioJobSpec>& jobs,
                                             InterruptPoll interrupt = {}) {
    FioRunHooks hooks;
    hooks.open_stack = [](void* ctx, size_t) { return static_cast<Stack*>(ctx); };
    hooks.ctx = &stack;
    return run_fio_jobs(1, clock, jobs, hooks, std::move(interrupt));
}

// IOPS of one direction of a job's result over its runtime.
inline double iops_of(const FioJobResult& r, FioDirection d) {
    return r.runtime_ns ? r.dir[d].ios * 1e9 / double(r.runtime_ns) : 0.0;
}

}  // namespace mdsplit
