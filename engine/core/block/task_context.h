// What the kernel keeps in `current` for the block layer: the recursion
// lists (current->bio_list) and the plug (current->plug). One per submitter
// (fio job).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/block/bio.h"
#include "core/block/plug_list.h"

namespace mdsplit {

// Watches a task's I/O for the lag accounting (stack/host_lag.h).
class TaskLagHook {
public:
    virtual ~TaskLagHook() = default;
    // The I/O `cookie` completed now, in the engine.
    virtual void completed(uint64_t cookie) = 0;
};

// An fio I/O that finished: its cookie, a negative errno, bytes not done.
struct IoCompletion {
    uint64_t cookie = 0;
    int32_t error = 0;
    uint64_t resid = 0;
};

// --- I/O-scheduling identity (used by the bfq scheduler) -------------------
// What bfq reads from the task: its ioprio (io_context, set by fio's
// prio/prioclass) and its blkcg (fio's mdsplit_group/mdsplit_group_weight).
// IOPRIO_CLASS_* values (include/uapi/linux/ioprio.h).
enum class IoprioClass : uint8_t { None = 0, RT = 1, BE = 2, Idle = 3 };

struct SchedIdentity {
    std::string group;                           // cgroup name; empty = the root group
    uint32_t group_weight = 100;                 // io.bfq.weight (BFQ_DEFAULT_GRP_WEIGHT), 1..1000
    IoprioClass ioprio_class = IoprioClass::BE;  // None behaves as BE (task_nice_ioclass)
    uint8_t ioprio = 4;  // 0..7, IOPRIO_NORM = 4; bfq weight = (8 - ioprio) * 10
};
// ---------------------------------------------------------------------------

// posix_fadvise(2) advice on the task's file (fio's fadvise_hint: by default
// RANDOM for a random job, SEQUENTIAL otherwise), applied by
// generic_fadvise() (core/mm/fadvise.h) to the file's readahead state.
enum class Fadvise : uint8_t { None, Normal, Random, Sequential };

// The submitting task's CPU on the virtual clock ([cpu] submit_bio and
// dispatch, BlockLayer::set_submit_cost / set_dispatch_cost): each
// ->submit_bio call of its __submit_bio_noacct loop takes that long, and each
// request its plug flushes hands to a driver, so the loop pauses between two
// calls until the CPU is free and the work queued behind it (the dio's next
// bios, blk_finish_plug) waits its turn. Unused when both costs are 0.
// On the real clock the host CPU pays on top (measured as lag, host_lag.h).
struct TaskSubmitCpu {
    // What the task does at the top level, in order (blk_start_plug,
    // submit_bio of one dio bio, blk_finish_plug).
    enum class Kind : uint8_t { StartPlug, SubmitBio, FinishPlug };
    struct Step {
        Kind kind;
        Bio* bio = nullptr;
        bool charged = false;  // SubmitBio: its call's CPU time is paid
    };
    uint64_t busy_until = 0;      // loop time: the CPU is busy until then
    bool modelled = false;        // its submissions pause (set while a step runs)
    bool paused = false;          // `loop` holds a __submit_bio_noacct loop to resume
    bool paused_stacked = false;  // ... __submit_bio_noacct (true) or _mq (false)
    BioList loop;                 // that loop's current->bio_list[0]
    bool timer_armed = false;     // a resume timer is pending
    std::deque<Step> steps;       // top-level work queued behind the loop
    bool busy() const { return paused || !steps.empty(); }
};

struct TaskContext {
    uint32_t pid = 0;
    SchedIdentity sched;  // scheduling identity (bfq: queue weight, group)
    std::vector<IoCompletion> completions;
    uint64_t in_flight = 0;
    BioList* bio_list = nullptr;  // current->bio_list: [0] and [1]
    PlugList plug;
    TaskSubmitCpu cpu;  // modelled submission time ([cpu], both clocks)
    // The task's device was opened O_SYNC or O_DSYNC (fio's sync=): its
    // buffered writes are written back before they complete
    // (generic_write_sync()).
    bool dsync = false;
    // The advice given on the task's file when it was opened (None: none).
    Fadvise fadvise = Fadvise::None;
    // The task's lag accounting (stack/host_lag.h), or none.
    TaskLagHook* lag = nullptr;

    // An I/O of the task finished: fio takes it from `completions`.
    void complete(const IoCompletion& c) {
        completions.push_back(c);
        if (lag) lag->completed(c.cookie);
    }
};

}  // namespace mdsplit
