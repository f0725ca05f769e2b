#include "stack/stack.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include <sys/stat.h>

#include "base/json_writer.h"
#include "config/config_error.h"
#include "core/block/bfq_scheduler.h"
#include "core/block/completion_orderer.h"
#include "core/block/mq_deadline.h"
#include "core/block/passthrough_device.h"
#include "core/block/write_behind.h"
#include "core/drivers/fault_injector.h"
#include "core/drivers/io_uring_backend.h"
#include "core/drivers/null_backend.h"
#include "core/drivers/ram_backend.h"
#include "core/drivers/timed_backend.h"
#include "core/io_uring/buffered_io.h"
#include "core/md/md_superblock.h"
#include "core/md/raid5_device.h"
#include "core/trace/blktrace_writer.h"
#include "stack/device_safety.h"
#include "stack/device_time.h"

namespace mdsplit {

namespace {
constexpr uint32_t kMdMajor = 9;  // md
constexpr uint32_t kSdMajor = 8;  // sd: members are sda, sdb, ... (minor 16 * i)

std::string member_name(size_t i) { return "m" + std::to_string(i); }

// True when the two paths name one existing file (device and inode).
bool same_file(const std::string& a, const std::string& b) {
    struct stat sa, sb;
    return !a.empty() && !b.empty() && stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
}  // namespace

// A trace file is truncated when the stack opens: it must not be one of the
// stack's own inputs (a member file, the stack file), whatever name it goes by.
void Stack::check_trace_paths(const std::vector<std::string>& paths) const {
    for (const std::string& path : paths) {
        std::string input;
        if (same_file(path, config_.source)) input = "the stack file " + config_.source;
        for (size_t i = 0; input.empty() && i < config_.members.size(); i++)
            if (config_.members[i].backend == BackendKind::IoUring &&
                same_file(path, config_.members[i].path))
                input = "members[" + std::to_string(i) + "] (" + config_.members[i].path + ")";
        if (!input.empty())
            throw std::runtime_error("mdsplit: mdsplit_trace: " + path + " is " + input +
                                     ": the trace would overwrite it; allowed: a directory "
                                     "where no member or stack file has a trace file's name");
        // A file system's image behind a loop device, a swap file (a link
        // or a hard link to it under a trace file's name).
        if (std::string use = find_file_use(path); !use.empty())
            throw std::runtime_error("mdsplit: mdsplit_trace: " + path + " is " + use +
                                     ": the trace would overwrite it; allowed: a directory "
                                     "where no file in use has a trace file's name");
    }
}

// Whoever builds the stack (fio's engine, `harness simulate`, the Python
// Simulation): its block-device members are checked before they are opened
// (device_safety.h).
void Stack::check_devices(const StackOptions& options) {
    DeviceSafetyOptions safety;
    safety.writes = options.writable;
    safety.allow_mounted_write = options.allow_mounted_write;
    check_device_safety(config_, safety);
}

// ... and the members a stack may write are claimed until it is gone, so no
// one else starts using them meanwhile (member_claim.h).
void Stack::claim_members(const StackOptions& options) {
    if (!options.writable || options.allow_mounted_write) return;
    for (size_t i = 0; i < config_.members.size(); i++) {
        if (config_.members[i].backend != BackendKind::IoUring) continue;
        try {
            claims_.emplace_back(config_.members[i].path);
        } catch (const MemberClaimError& e) {
            throw device_in_use_error(config_, i, e.what());
        }
    }
}

// A RAID5 member file another stack writes with force = true
// (check_no_md_member): its array is marked dirty, so the array's next run
// resyncs its parity from the data instead of trusting it.
void Stack::mark_forced_md_members(const StackOptions& options) {
    if (!options.writable || config_.device.kind == DeviceKind::Raid5) return;
    for (const MemberConfig& m : config_.members)
        if (m.backend == BackendKind::IoUring && m.force)
            if (std::string e = mark_written_outside_array(m.path); !e.empty())
                throw std::runtime_error(e);
}

Stack::Stack(const StackConfig& config, Clock& clock, const StackOptions& options)
    : config_(config),
      loop_(clock),
      order_(loop_),
      host_lag_(loop_, config.members.size()),
      tracer_(loop_) {
    host_lag_.set_response_order(&order_);
    check_devices(options);
    if (!config.models_time()) host_lag_.set_unmodelled();
    start_ns_ = loop_.now();
    layer_ = std::make_unique<BlockLayer>(
        loop_, tracer_,
        config.device.split_order == SplitOrder::Fixed ? SplitInsert::Head : SplitInsert::Tail);
    layer_->set_plug_order(config.device.plug_order);
    // [cpu] submit_bio and dispatch: the modelled submitting CPU, in device
    // time like the members' models, on both clocks. On the real clock the
    // host's own CPU time comes on top, measured as lag (host_lag.h): in slow
    // motion it shrinks against the modelled time, and fio's figures become
    // the model's, [cpu] included.
    {
        DeviceTime device_time(config.device.time_scale);
        layer_->set_submit_cost(device_time.to_loop_ns(config.cpu.submit_bio_ns));
        layer_->set_dispatch_cost(device_time.to_loop_ns(config.cpu.dispatch_ns));
    }

    // The member files this stack opened: if it cannot be made after all,
    // what opening them changed (a file created, a file grown) is undone.
    md_writable_ = options.writable;
    try {
        open_members_and_device(options, opened_);
    } catch (...) {
        for (IoUringBackend* file : opened_) file->undo_open();
        throw;
    }
    if (!options.defer_md_assembly) assemble_md();
}

void Stack::assemble_md() {
    std::call_once(md_assembled_, [this] {
        if (!raid5_) return;
        try {
            md_ = assemble_md_array(
                config_, raid5_->member_bytes(), md_writable_,
                [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
        } catch (...) {
            for (IoUringBackend* file : opened_) file->undo_open();
            throw;
        }
        opened_.clear();
        for (size_t i = 0; i < config_.members.size(); i++)
            if (md_.faulty[i]) raid5_->assemble_failed(uint32_t(i));
        if (md_.kept)
            raid5_->set_member_failed_hook([this](uint32_t member) {
                if (std::string e = mark_member_faulty(config_, md_, member); !e.empty())
                    std::fprintf(stderr, "%s\n", e.c_str());
            });
    });
}

// How the member's requests reach its backend and come back
// (member_delivery.h), by the clock and the storage: on the virtual clock a
// real member's completions end in issue order, and a timed one without
// faults (its TimedBackend outermost) may write behind its model.
std::unique_ptr<MemberDelivery> Stack::member_delivery(const MemberConfig& m, TimedBackend* timed,
                                                       const StackOptions& options) {
    if (!loop_.clock().is_virtual() || m.backend != BackendKind::IoUring)
        return std::make_unique<DirectDelivery>();
    if (options.write_behind && timed && !m.faults)
        return std::make_unique<WriteBehindDelivery>(loop_, *timed);
    return std::make_unique<IssueOrderDelivery>(loop_);
}

void Stack::open_members_and_device(const StackOptions& options,
                                    std::vector<IoUringBackend*>& opened) {
    const StackConfig& config = config_;
    for (size_t i = 0; i < config.members.size(); i++) {
        const MemberConfig& m = config.members[i];
        std::unique_ptr<Backend> backend;
        switch (m.backend) {
            case BackendKind::IoUring:
                if (!ring_) {
                    ring_ =
                        std::make_unique<IoUringRing>(options.ring_entries, options.single_issuer);
                    loop_.add_source(ring_.get());
                }
                try {
                    backend = std::make_unique<IoUringBackend>(
                        *ring_, m.path, m.size, options.open_direct && m.direct, options.writable,
                        options.create_members);
                    opened.push_back(static_cast<IoUringBackend*>(backend.get()));
                } catch (const MemberOpenError& e) {
                    throw make_config_error(config.source,
                                            "members[" + std::to_string(i) + "]." + e.key, e.what(),
                                            e.allowed);
                }
                break;
            case BackendKind::Ram:
                backend = std::make_unique<RamBackend>(loop_, m.size);
                break;
            case BackendKind::Null:
                backend = std::make_unique<NullBackend>(loop_, m.size);
                break;
        }
        const DeviceTime device_time(config.device.time_scale);
        TimedBackend* timed = nullptr;
        if (m.model) {
            backend = std::make_unique<TimedBackend>(loop_, std::move(backend),
                                                     device_time.model(*m.model));
            timed = static_cast<TimedBackend*>(backend.get());
            // Lateness is the host's, on the real clock only: the virtual
            // clock waits for the model, and when this machine's io_uring
            // reaped a virtual-clock member's request is not a figure.
            if (!loop_.clock().is_virtual()) timed->set_lateness_probe(&host_lag_, uint32_t(i));
        }
        // [members.faults]: outermost, so a failed request costs no model
        // time. Its delays are the device's, so slow motion stretches them too.
        if (m.faults)
            backend = std::make_unique<FaultInjector>(loop_, std::move(backend),
                                                      device_time.faults(*m.faults), start_ns_);
        MemberQueueLimits limits;
        limits.max_sectors = uint32_t(m.max_sectors_bytes >> kSectorShift);
        limits.queue_depth = m.queue_depth;
        limits.logical_block_size = m.logical_block_size;
        limits.time_scale = config.device.time_scale;
        members_.push_back(std::make_unique<MemberQueue>(
            *layer_, member_name(i), make_devt(kSdMajor, uint32_t(16 * i)), std::move(backend),
            limits, member_delivery(m, timed, options)));
        // device.scheduler = "bfq": one BFQ instance per member queue.
        if (config.device.scheduler == SchedulerKind::Bfq) {
            BfqScheduler::Options bfq_options;
            // blk_queue_nonrot(): a device whose non-sequential access costs
            // milliseconds (the hdd preset) is a rotational disk.
            bfq_options.nonrot = !(m.model && m.model->random_penalty_ns >= 1'000'000);
            // Slow motion stretches the scheduler's own timers with the devices.
            bfq_options.time_scale = config.device.time_scale;
            members_.back()->set_scheduler(
                std::make_unique<BfqScheduler>(loop_, config.bfq, bfq_options));
        } else if (config.device.scheduler == SchedulerKind::MqDeadline) {
            MqDeadlineScheduler::Options dd_options;
            dd_options.time_scale = config.device.time_scale;
            members_.back()->set_scheduler(
                std::make_unique<MqDeadlineScheduler>(loop_, dd_options));
        }
    }
    // Once the members exist (a missing file has just been created).
    claim_members(options);
    mark_forced_md_members(options);

    switch (config.device.kind) {
        case DeviceKind::Passthrough:
            top_ = std::make_unique<PassthroughDevice>(*layer_, options.label,
                                                       make_devt(kMdMajor, 0), *members_.at(0));
            break;
        case DeviceKind::Raid5: {
            // Every member is opened; a failed one is never submitted to.
            std::vector<bool> failed;
            for (const MemberConfig& m : config.members) failed.push_back(m.failed);
            auto md = std::make_unique<Raid5Device>(*layer_, options.label, make_devt(kMdMajor, 0),
                                                    members(), failed, config.device);
            // Assembled from its members' superblocks by assemble_md().
            raid5_ = md.get();
            top_ = std::move(md);
            break;
        }
    }

    if (!options.trace_dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(options.trace_dir, ec);
        if (ec)
            throw std::runtime_error("mdsplit: mdsplit_trace: cannot create " + options.trace_dir +
                                     ": " + ec.message());
        const std::vector<std::string> paths = trace_paths(config, options.trace_dir, top_->name());
        check_trace_paths(paths);
        auto add = [&](const BlockDevice& dev, const std::string& path) {
            BlktraceOptions trace_options;
            trace_options.bio_based = dev.stacked();
            auto w = std::make_unique<BlktraceWriter>(path, trace_options);
            tracer_.add_device_sink(dev.devt(), w.get());
            trace_sinks_.push_back(std::move(w));
        };
        add(*top_, paths[0]);
        for (size_t i = 0; i < members_.size(); i++) add(*members_[i], paths[i + 1]);
    }
    builder_ = std::make_unique<BioBuilder>(
        config.bio, uint64_t(top_->max_sectors()) << kSectorShift, top_->logical_block_size());
}

// Flushes the trace files the stack owns; sinks a caller attached (e.g. a
// TraceRecorder) may already be gone. A write error was reported by
// flush_traces() (the engine's job end, the simulate runner); a destructor
// must not throw it again (that was std::terminate, fio aborting).
Stack::~Stack() {
    stop_md();
    for (auto& sink : trace_sinks_) {
        try {
            sink->flush();
        } catch (const std::exception&) {
        }
    }
}

void Stack::stop_md() {
    if (md_stopped_ || !md_.kept || !top_ || loop_.has_pending()) return;
    md_stopped_ = true;
    if (std::string e = stop_md_array(config_, md_, top_->failed_members()); !e.empty())
        std::fprintf(stderr, "%s\n", e.c_str());
}

std::vector<std::string> Stack::trace_paths(const StackConfig& config, const std::string& dir,
                                            const std::string& label) {
    // The device's file is named after its label (fio's filename=): one that
    // is a path, or a member's name, would write outside `dir` or into a
    // member's trace.
    bool member_name_taken = false;
    for (size_t i = 0; i < config.members.size(); i++) member_name_taken |= label == member_name(i);
    if (label.empty() || label.find_first_of(std::string("/\0", 2)) != std::string::npos ||
        label == "." || label == ".." || member_name_taken) {
        std::string members = config.members.size() == 1
                                  ? std::string("m0")
                                  : "m0.." + member_name(config.members.size() - 1);
        std::string shown;  // a NUL would end the message there
        for (char c : label) shown += c ? std::string(1, c) : std::string("\\0");
        throw std::runtime_error(
            "mdsplit: mdsplit_trace: filename=" + shown + " names the device's trace file " +
            shown + ".blktrace.0, which would " +
            (member_name_taken ? "be a member's trace" : "not be a file of " + dir) +
            "; allowed: a filename without '/' other than " + members +
            " (the members' traces), or no mdsplit_trace");
    }
    std::vector<std::string> paths{dir + "/" + label + ".blktrace.0"};
    for (size_t i = 0; i < config.members.size(); i++)
        paths.push_back(dir + "/" + member_name(i) + ".blktrace.0");
    return paths;
}

std::vector<MemberQueue*> Stack::members() const {
    std::vector<MemberQueue*> out;
    for (auto& m : members_) out.push_back(m.get());
    return out;
}

// blk_start_plug(). The plug caches the time (blk_time_get_ns(),
// plug->cur_ktime): everything queued and flushed under it is stamped with
// one clock read, taken here.
void Stack::begin_batch(TaskContext& task) {
    layer_->set_current(&task);
    if (task.cpu.busy()) {  // after what the modelled CPU is still doing
        task.cpu.steps.push_back({TaskSubmitCpu::Kind::StartPlug});
        return;
    }
    if (!task.plug.active) {
        layer_->start_plug(task);
        loop_.refresh();
    }
}

void Stack::complete_now(TaskContext& task, uint64_t cookie, int32_t error, uint64_t resid) {
    task.complete(IoCompletion{cookie, error, resid});
}

// The direct-I/O path of block/fops.c __blkdev_direct_IO(): one dio holds a
// reference per bio it builds, and completes the I/O when the last drops.
void Stack::queue(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
                  uint64_t cookie) {
    layer_->set_current(&task);
    host_lag_.queued(task, cookie);
    if (!have_first_io_) {
        first_io_ns_ = loop_.now();
        have_first_io_ = true;
    }
    uint64_t lbs = top_->logical_block_size();
    if (offset % lbs || length % lbs || length == 0) {
        complete_now(task, cookie, -EINVAL, length);  // blkdev_dio_invalid()
        return;
    }
    uint64_t size = size_bytes();
    uint64_t resid = 0;
    if (offset >= size || length > size - offset) {
        if (op == Op::Write || op == Op::Discard) {
            complete_now(task, cookie, -ENOSPC, length);
            return;
        }
        // A read past the end is short, as blkdev_read_iter() truncates it.
        uint64_t fit = offset >= size ? 0 : size - offset;
        resid = length - fit;
        length = fit;
        if (!length) {
            complete_now(task, cookie, 0, resid);
            return;
        }
    }
    // A buffered job of this stack may hold the range in the page cache.
    if (buffered_) buffered_->before_direct_io(offset, length, op != Op::Read);
    if (op == Op::Discard) {
        // blkdev_issue_discard(): no pages, bios of at most bio_discard_limit().
        pieces_.clear();
        constexpr uint64_t kMaxDiscardBio =
            uint64_t(UINT32_MAX >> kSectorShift) << kSectorShift & ~(kPageSize - 1);
        for (uint64_t at = 0; at < length; at += kMaxDiscardBio)
            pieces_.push_back(BioPiece{at, std::min(kMaxDiscardBio, length - at), 0});
        buffer = nullptr;
    } else {
        builder_->build(buffer, length, pieces_);
    }
    const bool modelled_cpu = layer_->cpu_modelled();
    Bio* dio = layer_->bios().alloc();
    dio->op = op;
    dio->tag = cookie;
    dio->resid = resid;
    dio->private_data = &task;
    dio->end_io = &Stack::dio_endio;
    task.in_flight++;
    for (const BioPiece& p : pieces_) {
        Bio* bio = layer_->bios().alloc();
        bio->op = op;
        bio->flags = op == Op::Discard ? 0 : kBioSync;  // op_is_sync(): a discard is not
        bio->sector = (offset + p.offset) >> kSectorShift;
        bio->nr_sectors = uint32_t(p.length >> kSectorShift);
        if (op != Op::Discard) bio_sizes_.record(bio->nr_sectors);
        bio->data = buffer ? static_cast<uint8_t*>(buffer) + p.offset : nullptr;
        bio->dev = top_.get();
        bio->pid = task.pid;
        bio_chain(bio, dio);
        if (modelled_cpu)
            task.cpu.steps.push_back({TaskSubmitCpu::Kind::SubmitBio, bio});
        else
            layer_->submit_bio_noacct(bio);
    }
    bio_endio(dio);  // drop the submitter's reference
    if (modelled_cpu) run_submitter(task);
}

void Stack::dio_endio(Bio* dio) {
    auto* task = static_cast<TaskContext*>(dio->private_data);
    task->in_flight--;
    task->complete(IoCompletion{dio->tag, dio->error, dio->resid});
    dio->pool->put(dio);
}

void Stack::commit(TaskContext& task) {
    layer_->set_current(&task);
    answered(task);  // it answers: its plug's flush below, in this same call
    if (layer_->cpu_modelled()) {
        task.cpu.steps.push_back({TaskSubmitCpu::Kind::FinishPlug});
        run_submitter(task);
        return;
    }
    layer_->finish_plug(task);  // at the plug's cached time
    kick_members();
}

void Stack::kick_members() {
    for (auto& m : members_) m->backend().kick();
}

// The submitter's steps in order, each once its CPU is free: a dio bio's
// submit_bio() first pays one ->submit_bio call, its __submit_bio_noacct
// loop then pauses before every further call (BlockLayer::pause_after_call)
// and resumes here; blk_start_plug costs nothing, and a flush (blk_finish_plug's
// or one a call makes) costs [cpu] dispatch per request (BlockLayer::flush_plug).
void Stack::run_submitter(TaskContext& task) {
    TaskSubmitCpu& cpu = task.cpu;
    TaskContext* saved = layer_->current();
    layer_->set_current(&task);
    for (;;) {
        uint64_t now = loop_.now();
        if (cpu.busy_until > now) {
            if (!cpu.timer_armed) {
                cpu.timer_armed = true;
                loop_.schedule_at(cpu.busy_until, &Stack::submitter_timer, this,
                                  reinterpret_cast<uint64_t>(&task));
            }
            break;
        }
        if (cpu.paused) {
            cpu.modelled = true;
            layer_->resume_submission(task);
            cpu.modelled = false;
            kick_members();
            continue;
        }
        if (cpu.steps.empty()) break;
        TaskSubmitCpu::Step step = cpu.steps.front();
        if (step.kind == TaskSubmitCpu::Kind::SubmitBio && !step.charged) {
            cpu.steps.front().charged = true;
            cpu.busy_until = now + layer_->submit_cost();
            continue;
        }
        cpu.steps.pop_front();
        switch (step.kind) {
            case TaskSubmitCpu::Kind::StartPlug:
                if (!task.plug.active) layer_->start_plug(task);
                break;
            case TaskSubmitCpu::Kind::SubmitBio:
                cpu.modelled = true;
                layer_->submit_bio_noacct(step.bio);
                cpu.modelled = false;
                break;
            case TaskSubmitCpu::Kind::FinishPlug:
                cpu.modelled = true;  // its flush's dispatching is the task's
                layer_->finish_plug(task);
                cpu.modelled = false;
                break;
        }
        kick_members();
    }
    layer_->set_current(saved);
}

void Stack::submitter_timer(void* arg, uint64_t task) {
    auto* self = static_cast<Stack*>(arg);
    auto* t = reinterpret_cast<TaskContext*>(task);
    t->cpu.timer_armed = false;
    // The modelled CPU resumes late when the host could not run it on time.
    self->host_lag_.submitting_late(
        *t, self->loop_.now() - std::min(self->loop_.now(), t->cpu.busy_until));
    self->run_submitter(*t);
}

void Stack::reap(TaskContext& task, size_t min, uint64_t timeout_ns) {
    layer_->set_current(&task);
    uint64_t deadline = loop_.now() + timeout_ns;
    for (;;) {
        loop_.run_ready();
        if (task.completions.size() >= min) return;
        answered(task);  // it answers nothing before more completions
        if (loop_.now() >= deadline) return;
        if (!loop_.wait_for_next(deadline - loop_.now())) return;
    }
}

void Stack::task_exited(const TaskContext& task) {
    answered(task);
    for (auto& m : members_)
        if (IoScheduler* s = m->scheduler()) s->task_exited(task);
}

void Stack::drain() {
    for (;;) {
        loop_.run_ready();
        if (!loop_.has_pending()) return;
        if (!loop_.wait_for_next()) {
            loop_.run_ready();
            if (!loop_.has_pending()) return;
        }
    }
}

namespace {
// One device's iostat -x fields for one direction: read, write or discard.
void json_direction(JsonWriter& j, const DiskStats& s, int i, const char* prefix, double secs) {
    auto per_s = [&](double v) { return secs > 0 ? v / secs : 0.0; };
    double ios = double(s.ios[i]);
    double merges = double(s.merges[i]);
    j.key(prefix).begin_object();
    j.field("ios", s.ios[i]).field("merges", s.merges[i]).field("sectors", s.sectors[i]);
    j.field("ticks_ns", s.ticks_ns[i]).field("errors", s.errors[i]).end_object();
    std::string c(1, prefix[0]);
    j.field(c + "_s", per_s(ios));
    j.field(c + "kB_s", per_s(double(s.sectors[i]) / 2));
    j.field(c + "rqm_s", per_s(merges));
    j.field("pct_" + c + "rqm", ios + merges > 0 ? 100.0 * merges / (ios + merges) : 0.0);
    j.field(c + "_await_ms", ios > 0 ? double(s.ticks_ns[i]) / ios / 1e6 : 0.0);
    j.field(c + "areq_sz_kb", ios > 0 ? double(s.sectors[i]) / 2 / ios : 0.0);
}

void json_seeks(JsonWriter& j, const SeekHistogram& h) {
    j.key("seek").begin_object().field("count", h.count()).field("zero_count", h.zero_count());
    j.field("zero_ratio", h.count() ? double(h.zero_count()) / double(h.count()) : 0.0);
    j.key("buckets_kb").begin_array();
    for (int i = 0; i < SeekHistogram::kBuckets; i++) j.value(h.buckets()[size_t(i)]);
    j.end_array().key("buckets_kb_thread").begin_array();
    for (int i = 0; i < SeekHistogram::kBuckets; i++) j.value(h.thread_buckets()[size_t(i)]);
    j.end_array().end_object();
}

void json_device(JsonWriter& j, const BlockDevice& d, const char* role, uint64_t now,
                 uint64_t elapsed_ns, const MemberQueue* member, const SizeHistogram* bio_sizes,
                 const HostLag& lag, size_t member_index) {
    const DiskStats& s = d.stats();
    double secs = elapsed_ns ? double(elapsed_ns) / 1e9 : 0;
    j.begin_object().field("name", d.name()).field("role", role);
    j.field("devt", std::to_string(d.devt() >> 20) + ":" + std::to_string(d.devt() & 0xfffff));
    if (member) {
        j.field("backend", const_cast<MemberQueue*>(member)->backend().kind());
        j.field("max_sectors", member->limits().max_sectors);
        j.field("queue_depth", member->limits().queue_depth);
        json_seeks(j, member->seeks());
        j.key("request_sizes");
        member->request_sizes().write_json(j);
    }
    if (bio_sizes) {
        j.key("bio_sizes");
        bio_sizes->write_json(j);
    }
    json_direction(j, s, 0, "read", secs);
    json_direction(j, s, 1, "write", secs);
    json_direction(j, s, 2, "discard", secs);
    uint64_t io_ticks = s.io_ticks_at(now);
    j.field("in_flight", s.in_flight).field("io_ticks_ns", io_ticks);
    j.field("time_in_queue_ns", s.time_in_queue_ns);
    j.field("aqu_sz", elapsed_ns ? double(s.time_in_queue_ns) / double(elapsed_ns) : 0.0);
    j.field("pct_util", elapsed_ns ? 100.0 * double(io_ticks) / double(elapsed_ns) : 0.0);
    // The member's scheduler statistics, e.g. "bfq": {...} (per queue and group).
    if (member && member->scheduler()) {
        j.key(member->scheduler()->name());
        member->scheduler()->write_json(j);
    }
    // md's stripe cache and write path (drivers/md/raid5.c) of a RAID5 device.
    if (auto* md = dynamic_cast<const Raid5Device*>(&d)) {
        j.key("raid5");
        md->write_json(j);
    }
    // How late the host ran against the model (host_lag.h, docs/sidecar-lag.md).
    j.key("lag");
    if (member)
        lag.write_member_json(j, member_index);
    else
        lag.write_device_json(j);
    j.end_object();
}
}  // namespace

bool Stack::record_member_failures(MemberFailures& run) const {
    uint64_t failed = top_->failed_members();
    bool kept = true;
    MemberFailures::Identity id;
    for (size_t i = 0; i < config_.members.size(); i++)
        if ((failed >> i & 1) && config_.members[i].backend == BackendKind::IoUring &&
            MemberFailures::identity_of(config_.members[i].path, id))
            kept = run.record(id) && kept;
    return kept;
}

void Stack::take_member_failures(const MemberFailures& run) {
    if (have_first_io_) return;
    MemberFailures::Identity id;
    for (size_t i = 0; i < config_.members.size(); i++)
        if (config_.members[i].backend == BackendKind::IoUring &&
            MemberFailures::identity_of(config_.members[i].path, id) && run.failed(id)) {
            top_->assemble_failed(uint32_t(i));
            // An earlier job's array failed it: stale for this one's writes too.
            if (std::string e = mark_member_faulty(config_, md_, uint32_t(i)); !e.empty())
                std::fprintf(stderr, "%s\n", e.c_str());
        }
}

std::string Stack::member_failure_notice() const {
    uint64_t failed = top_->members_failed_while_running();
    if (!failed) return {};
    std::ostringstream line;
    line << "mdsplit: " << top_->name() << ": ";
    const char* sep = "";
    for (size_t i = 0; i < config_.members.size(); i++) {
        if (!(failed >> i & 1)) continue;
        line << sep << "members[" << i << "]";
        if (!config_.members[i].path.empty()) line << " (" << config_.members[i].path << ")";
        sep = ", ";
    }
    std::string where = config_.source.empty() ? "the stack config" : config_.source;
    line << " failed during this run (an I/O error; md_error) and the array went on without it";
    if (md_.kept && md_.read_only)
        line << "; this run only read, so its data still matches the array's, and the next "
                "runs take it back";
    else if (md_.kept)  // md_superblock.h: assembled as faulty next
        line << ": its data is stale from then on, and the array's md superblocks (xattr "
             << kMdSuperblockXattr
             << ") keep it out of the next runs; allowed: a new member file in its place, which "
                "the next run that may write rebuilds (md's recovery)";
    else
        line << ": its data is stale from then on, and no superblock here remembers it; allowed: "
                "failed = true on that member in "
             << where << " for the next runs, or new member files";
    return line.str();
}

std::string Stack::stats_json() const {
    JsonWriter j;
    // Rates are over the time I/O ran: from the first I/O, not from set-up.
    uint64_t now = loop_.now();
    uint64_t elapsed = now - (have_first_io_ ? first_io_ns_ : start_ns_);
    j.begin_object().field("version", 1).field("elapsed_ns", elapsed);
    // Which clock ran the device: "real" (fio with the engine) or "virtual"
    // (harness simulate, the bindings), so a reader, and simulate before it
    // replaces one, knows which run wrote the file.
    j.field("clock", loop_.clock().is_virtual() ? "virtual" : "real");
    j.field("time_scale", config_.device.time_scale).key("devices").begin_array();
    json_device(j, *top_, "virtual", now, elapsed, nullptr, &bio_sizes_, host_lag_, 0);
    for (size_t i = 0; i < members_.size(); i++)
        json_device(j, *members_[i], "member", now, elapsed, members_[i].get(), nullptr, host_lag_,
                    i);
    j.end_array();
    j.key("host_lag");
    host_lag_.write_json(j, config_.device.time_scale);
    if (ring_) {
        j.key("io_uring").begin_object().field("setup_flags", ring_->setup_flags());
        j.field("registered_buffer_bytes", ring_->registered_buffer_bytes());
        j.field("fixed_buffer_ios", ring_->fixed_buffer_ios()).end_object();
    }
    page_cache_json(j);
    if (config_.device.kind == DeviceKind::Raid5) {
        // How the array was assembled from its superblocks (md_superblock.h).
        j.key("md_assembly").begin_object().field("superblocks", md_.kept);
        j.field("action", md_.action).field("resync_rows", md_.resync_rows);
        j.field("recovered_rows", md_.recovered_rows).key("kicked").begin_array();
        for (size_t i = 0; i < md_.kicked.size(); i++)
            if (md_.kicked[i]) j.value(uint64_t(i));
        j.end_array().field("events", md_.events).end_object();
    }
    j.end_object();
    return j.str();
}

// ---- Buffered I/O (seed 003): the page cache and io_uring's buffered reads ----

BufferedIo& Stack::buffered() {
    if (!buffered_) {
        buffered_ = std::make_unique<BufferedIo>(loop_, *layer_, *top_, members(),
                                                 config_.page_cache, loop_.clock().is_virtual());
        buffered_->costs() = config_.cpu.buffered;  // [cpu.buffered]
        // Worker threads post to the loop; with an io_uring ring, let them
        // signal the ring's completion eventfd, so one fd wakes the loop (and
        // SharedStack's poller) for completions and posts alike.
        if (ring_ && !loop_.clock().is_virtual()) {
            try {
                loop_.set_wake_fd(ring_->completion_eventfd(), true);
            } catch (const std::exception&) {
                // no registered eventfd: the loop falls back to its own
            }
        }
    }
    return *buffered_;
}

void Stack::queue_buffered(TaskContext& task, Op op, uint64_t offset, uint64_t length, void* buffer,
                           uint64_t cookie) {
    layer_->set_current(&task);
    loop_.refresh();
    if (!have_first_io_) {
        first_io_ns_ = loop_.now();
        have_first_io_ = true;
    }
    host_lag_.queued(task, cookie);
    BufferedIo& b = buffered();
    switch (op) {
        case Op::Read:
            b.read(task, offset, length, buffer, cookie);
            break;
        case Op::Write:
            b.write(task, offset, length, buffer, cookie);
            break;
        case Op::Flush:
            b.fsync(task, cookie);
            break;
        case Op::Discard:  // refused at setup (the glue); never reaches the page cache
            complete_now(task, cookie, -EOPNOTSUPP, length);
            break;
    }
}

void Stack::fsync(TaskContext& task, uint64_t cookie) {
    layer_->set_current(&task);
    host_lag_.queued(task, cookie);
    buffered().fsync(task, cookie);
}

void Stack::sync_file_range(TaskContext& task, uint64_t offset, uint64_t length, unsigned flags,
                            uint64_t cookie) {
    layer_->set_current(&task);
    host_lag_.queued(task, cookie);
    buffered().sync_file_range(task, offset, length, flags, cookie);
}

int Stack::sync_members() {
    int error = 0;
    for (auto& m : members_) {
        int r = m->sync_data();
        if (r && !error) error = r;
    }
    return error;
}

uint64_t Stack::sync_buffered() { return buffered_ ? buffered_->sync() : 0; }

void Stack::invalidate() {
    if (buffered_) buffered_->invalidate();
}

void Stack::page_cache_json(JsonWriter& j) const {
    j.key("page_cache");
    if (buffered_)
        buffered_->write_json(j);
    else
        BufferedIo::write_unused_json(j, config_.page_cache);
}

}  // namespace mdsplit
