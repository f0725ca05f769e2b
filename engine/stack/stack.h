// A whole device stack built from a StackConfig: the virtual device, its
// member queues and backends, one event loop, the tracer. The fio engine and
// the Python bindings both drive it through this interface.
#pragma once

#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "base/json_writer.h"
#include "config/stack_config.h"
#include "core/block/bio_builder.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/drivers/io_uring_ring.h"
#include "core/md/md_superblock.h"
#include "core/trace/size_histogram.h"
#include "core/trace/tracer.h"
#include "stack/host_lag.h"
#include "stack/member_claim.h"
#include "stack/member_failures.h"

namespace mdsplit {

class BufferedIo;
class IoUringBackend;
class Raid5Device;
class TimedBackend;

struct StackOptions {
    std::string label = "md0";  // the virtual device's name (fio's filename)
    std::string trace_dir;      // blktrace files; empty = no tracing
    bool open_direct = true;    // O_DIRECT on io_uring members whose direct = true
    // Read-write members. Every Stack first checks its block-device members
    // (check_device_safety, writes = writable) and, when writable, claims
    // every member it may write for its lifetime (MemberClaim) unless
    // allow_mounted_write.
    bool writable = true;
    bool allow_mounted_write = false;  // fio's allow_mounted_write=1 (every writer's)
    // A missing member file is created (sparse); false refuses it (fio's
    // --readonly, or allow_file_create=0 on a job naming the stack file).
    bool create_members = true;
    unsigned ring_entries = 256;
    // Only one thread (the first to do I/O) ever drives the stack: its
    // io_uring ring may use IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN.
    bool single_issuer = false;
    // A raid5's assembly from its members' superblocks is left to
    // assemble_md(), before the first I/O: fio sets every job up in its main
    // process before the first one runs (create_serialize), so a forked job
    // assembles its array at its init, once the jobs before its stonewall
    // have stopped theirs (assembled at setup, it took their active marks
    // for an unclean stop).
    bool defer_md_assembly = false;
    // On the virtual clock, a timed real member without faults completes a
    // write at its modelled time while the host writes it behind
    // (WriteBehindDelivery); harness simulate's runs.
    bool write_behind = false;
};

class Stack {
public:
    Stack(const StackConfig& config, Clock& clock, const StackOptions& options);
    ~Stack();
    Stack(const Stack&) = delete;
    Stack& operator=(const Stack&) = delete;

    uint64_t size_bytes() const { return top_->capacity() << kSectorShift; }
    uint32_t logical_block_size() const { return top_->logical_block_size(); }
    EventLoop& loop() { return loop_; }
    // How late the host ran against the model (host_lag.h).
    HostLag& host_lag() { return host_lag_; }
    // The task owes no answer to its completions (response_order.h): it
    // handed its next batch to the block layer, waits in the engine for
    // more completions than it has, or leaves.
    void answered(const TaskContext& task) { host_lag_.answered(task); }
    // One stderr line when the device was host-bound, "" otherwise.
    std::string host_lag_verdict() const {
        return host_lag_.verdict(top_->name(), config_.device.time_scale);
    }
    Tracer& tracer() { return tracer_; }
    BlockLayer& layer() { return *layer_; }
    BlockDevice& top() { return *top_; }
    std::vector<MemberQueue*> members() const;
    const StackConfig& config() const { return config_; }

    // md assembles a raid5 from its members' superblocks (md_superblock.h):
    // resynced after an unclean stop, a new member recovered, a faulty one
    // kept out. The constructor does it unless options.defer_md_assembly.
    // Once per stack (later calls return at once; threads may race to it);
    // throws std::runtime_error with one line, having undone what opening
    // the members changed. Nothing for other devices.
    void assemble_md();
    // md's clean stop (do_md_stop): a raid5's superblocks say clean, naming
    // the members that failed. The destructor does it; an owner that keeps
    // the stack past its last user calls it then. Once; nothing when I/O is
    // still in flight (a clean stop never leaves any) or for other devices.
    void stop_md();

    // One I/O from a submitter (an fio io_u). Runs inside the task's plug,
    // which begin_batch() opens and commit() closes (blk_start_plug /
    // blk_finish_plug), so one fio batch merges as one kernel plug does.
    // A finished I/O appears in task.completions.
    void begin_batch(TaskContext& task);
    void queue(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
               uint64_t cookie);
    void commit(TaskContext& task);
    // With a modelled submitting CPU ([cpu] submit_bio, virtual clock): the
    // task is still submitting what it queued, and its CPU is busy until at
    // least busy_until. Never busy without the model.
    bool submitting(const TaskContext& task) const { return task.cpu.busy(); }

    // Runs the loop until the task has at least `min` completions or
    // timeout_ns passes (real clock) / nothing is pending (virtual clock).
    void reap(TaskContext& task, size_t min, uint64_t timeout_ns);
    // Runs until nothing is pending.
    void drain();
    // The task (a job) exited, its I/O done: each member's scheduler
    // forgets it (IoScheduler::task_exited).
    void task_exited(const TaskContext& task);

    // An fd that becomes readable when a backend completes something (-1
    // when no member uses io_uring): SharedStack waits on it unlocked.
    int completion_fd() { return ring_ ? ring_->completion_eventfd() : -1; }
    // The submitter's I/O buffers (fio's io_u buffers): registered with the
    // io_uring ring, so members read into and write from them as fixed
    // buffers (IoUringRing::register_buffer). False when there is no ring or
    // the kernel refuses; I/O works either way.
    bool register_io_buffer(void* base, size_t len) {
        return ring_ && ring_->register_buffer(base, len);
    }

    // The blktrace files a stack of `config` writes into `dir` (mdsplit_trace)
    // when its device is named `label`: the device's first, then member i's.
    // Throws std::runtime_error for a label that is not a plain name apart
    // from the members' (m0, m1, ...).
    static std::vector<std::string> trace_paths(const StackConfig& config, const std::string& dir,
                                                const std::string& label);

    // Sidecar statistics as JSON text.
    std::string stats_json() const;
    // The run's memory of failed members (member_failures.h). record:
    // notes every member this stack's device has failed; false when the
    // table is full. take: before this stack's first I/O, takes the members
    // the run's other stacks recorded as failed from the start (after it,
    // nothing: the array already read them).
    bool record_member_failures(MemberFailures& run) const;
    void take_member_failures(const MemberFailures& run);

    // One line for stderr when a member failed during the run (md_error()):
    // md would record it in the superblocks of the others and never read the
    // stale member again; the member files carry no superblock, so the user
    // must say so in the config. Empty when no member failed while running.
    std::string member_failure_notice() const;
    void flush_traces() { tracer_.flush(); }
    uint64_t elapsed_ns() const { return loop_.now() - start_ns_; }

    // ---- Buffered I/O (fio direct=0; seed 003): engine/core/io_uring/buffered_io.h ----
    // A buffered I/O through the page cache above the virtual device (the
    // config's [page_cache]); like queue(), inside the task's plug, and it
    // completes into task.completions. Op::Read or Op::Write, any alignment.
    void queue_buffered(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
                        uint64_t cookie);
    // fsync(): completes (into task.completions) once every dirty page is
    // written back to the members.
    void fsync(TaskContext& task, uint64_t cookie);
    // sync_file_range(2) on the page cache (BufferedIo::sync_file_range()).
    void sync_file_range(TaskContext& task, uint64_t offset, uint64_t length, unsigned flags,
                         uint64_t cookie);
    // fsync(2)'s blkdev_issue_flush() on the real storage: every member's
    // completed writes made durable (MemberQueue::sync_data()). The model
    // keeps no volatile cache, so no time passes on the virtual clock.
    // Returns 0 or the first member's negative errno.
    int sync_members();
    // Writes back every dirty page and waits (job end: nothing written is
    // lost). Runs the loop; call from the owning thread, not from a callback.
    // Returns the pages whose write-back failed that no fsync reported.
    uint64_t sync_buffered();
    // sync_buffered(), then drops clean cached pages (fio's invalidate).
    void invalidate();
    // The page cache and io_uring buffered-read emulation, created on first use.
    BufferedIo& buffered();
    bool has_buffered() const { return buffered_ != nullptr; }
    // ---- end of buffered I/O ----

private:
    void check_devices(const StackOptions& options);
    // The constructor's work after the checks: members, the device, traces.
    void open_members_and_device(const StackOptions& options, std::vector<IoUringBackend*>& opened);
    std::unique_ptr<MemberDelivery> member_delivery(const MemberConfig& m, TimedBackend* timed,
                                                    const StackOptions& options);
    void check_trace_paths(const std::vector<std::string>& paths) const;
    void claim_members(const StackOptions& options);
    void mark_forced_md_members(const StackOptions& options);
    static void dio_endio(Bio* dio);
    // The modelled submitting CPU: runs the task's steps (TaskSubmitCpu) as
    // far as its CPU is free now, then waits on a timer for the rest.
    void run_submitter(TaskContext& task);
    static void submitter_timer(void* arg, uint64_t task);
    void kick_members();
    void complete_now(TaskContext& task, uint64_t cookie, int32_t error, uint64_t resid);

    StackConfig config_;
    // Before the members: released after their descriptors are closed.
    std::vector<MemberClaim> claims_;
    EventLoop loop_;
    ResponseOrder order_;
    HostLag host_lag_;
    Tracer tracer_;
    std::unique_ptr<IoUringRing> ring_;
    std::unique_ptr<BlockLayer> layer_;
    std::vector<std::unique_ptr<MemberQueue>> members_;
    std::unique_ptr<BlockDevice> top_;
    Raid5Device* raid5_ = nullptr;  // top_, when it is a raid5
    MdAssembly md_;  // a raid5's superblocks, as assembly found them (md_superblock.h)
    std::once_flag md_assembled_;
    bool md_writable_ = true;
    bool md_stopped_ = false;  // stop_md() ran
    // Member files this stack created or grew, until the array is assembled
    // (undone when the stack cannot be made).
    std::vector<IoUringBackend*> opened_;
    std::vector<std::unique_ptr<TraceSink>> trace_sinks_;
    std::unique_ptr<BioBuilder> builder_;
    std::vector<BioPiece> pieces_;
    SizeHistogram bio_sizes_;  // bios the bio builder made (seed 001)
    uint64_t start_ns_ = 0;
    uint64_t first_io_ns_ = 0;
    bool have_first_io_ = false;
    uint64_t io_errors_ = 0;

    // Buffered I/O. Declared last: destroyed first (its worker threads stop
    // before the loop and the block layer go).
    void page_cache_json(JsonWriter& j) const;
    std::unique_ptr<BufferedIo> buffered_;
};

}  // namespace mdsplit
