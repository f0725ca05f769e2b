// The fio ABI glue (--ioengine=external:libmdsplit.so), shaped as fio's
// engines/io_uring.c: options table, setup/init/cleanup, the I/O path (queue()
// batches inside a plug, commit() submits, getevents()/event() reap), one ops
// struct. It describes fio's thread_data as plain structs to stack/run_plan.h
// (every run-wide decision and refusal, also harness simulate's),
// stack/device_registry.h and stack/clean_stop.h (devices, the clean stop).
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>  // before fio's headers (they use C11 atomics)

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

// The core first: fio's headers define min/max macros that break it.
#include "stack/clean_stop.h"
#include "stack/device_registry.h"
#include "stack/reaped_completions.h"
#include "stack/run_plan.h"
#include "stack/sidecar_file.h"
#include "stack/storage_probe.h"

extern "C" {
#include "fio.h"
#include "ioengines.h"
#include "optgroup.h"
#include "options.h"
#include "td_error.h"
extern enum fio_cs fio_clock_source;  // gettime.c (not in its header)
}
#undef min
#undef max

static_assert(FIO_IOOPS_VERSION == 31,
              "libmdsplit is written against fio's ioengine ABI version 31 (fio 3.33)");

namespace {

using namespace mdsplit;

struct EngineOptions {
    void* pad;  // fio stores td here
    char* config;
    char* stats;
    char* trace;
    char* group;
    unsigned group_weight;  // io.bfq.weight: 1..BFQ_MAX_WEIGHT, default 100
};

// Fields not named are zero, as in fio's tables. fio refuses values outside
// minval..maxval, the run plan "-1" too (fio 3.33: a range "<empty>-1").
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
fio_option engine_options[] = {
    {.name = "mdsplit_config",
     .lname = "mdsplit device stack",
     .type = FIO_OPT_STR_STORE,
     .off1 = offsetof(EngineOptions, config),
     .help = "TOML file describing the device stack (virtual device, members, policies)",
     .category = FIO_OPT_C_ENGINE,
     .group = FIO_OPT_G_INVALID},
    {.name = "mdsplit_stats",
     .lname = "mdsplit statistics file",
     .type = FIO_OPT_STR_STORE,
     .off1 = offsetof(EngineOptions, stats),
     .help = "Write per-device statistics (diskstats, iostat fields, seeks) as JSON to this "
             "file (subjobs of numjobs append .N)",
     .category = FIO_OPT_C_ENGINE,
     .group = FIO_OPT_G_INVALID},
    {.name = "mdsplit_trace",
     .lname = "mdsplit blktrace directory",
     .type = FIO_OPT_STR_STORE,
     .off1 = offsetof(EngineOptions, trace),
     .help = "Write blktrace files <dir>/<device>.blktrace.0 for the virtual device and each "
             "member",
     .category = FIO_OPT_C_ENGINE,
     .group = FIO_OPT_G_INVALID},
    {.name = "mdsplit_group",
     .lname = "mdsplit scheduler group",
     .type = FIO_OPT_STR_STORE,
     .off1 = offsetof(EngineOptions, group),
     .help = "Scheduler (bfq) group of this job; the root group when unset",
     .category = FIO_OPT_C_ENGINE,
     .group = FIO_OPT_G_INVALID},
    {.name = "mdsplit_group_weight",
     .lname = "mdsplit scheduler group weight",
     .type = FIO_OPT_INT,
     .off1 = offsetof(EngineOptions, group_weight),
     .maxval = 1000,
     .minval = 1,
     .help = "Weight of this job's scheduler group (1..1000, default 100)",
     .def = "100",
     .category = FIO_OPT_C_ENGINE,
     .group = FIO_OPT_G_INVALID},
    {.name = nullptr}};
#pragma GCC diagnostic pop

struct EngineData {
    std::shared_ptr<SharedStack> stack;
    TaskContext task;
    std::vector<io_u*> batch;            // queued since the last commit
    std::vector<io_u*> events;           // reaped, handed out by event()
    ReapedCompletions reaped;            // completed, not yet handed to fio
    bool buffered = false;               // direct=0: through the page cache
    bool plug_time_is_fio_time = false;  // the only user, on fio's clock
    unsigned in_flight = 0;              // queued or submitted, not yet reaped
    unsigned depth = 0;
    std::string stats_path;
    std::string label;  // the device's filename (fio frees its files before cleanup)
};

EngineData* data_of(thread_data* td) { return static_cast<EngineData*>(td->io_ops_data); }

// One line on stderr, never stdout (--output-format=json), once per process
// (each job's setup finds a clash of two jobs). Fails the job.
int refuse(thread_data* td, const std::string& message) {
    static std::mutex mutex;
    static std::set<std::string> reported;
    std::string line = engine_line(message);
    std::lock_guard<std::mutex> l(mutex);
    if (reported.insert(line).second) log_err("%s\n", line.c_str());
    td->error = td->error ? td->error : EINVAL;
    return 1;
}

void log_lines(const std::vector<std::string>& lines) {
    for (const std::string& line : lines) log_err("%s\n", line.c_str());
}

// The stacks' real clock is fio's (fio_gettime(): with clocksource=cpu the
// calibrated TSC, cheaper than clock_gettime()), else CLOCK_MONOTONIC;
// chosen at the first read, in setup(), once fio has settled its clocksource.
class FioClock final : public Clock {
    RealClock monotonic_;

public:
    static bool uses_fio_clock() {
        static const bool use_fio = fio_clock_source == CS_CPUCLOCK;
        return use_fio;
    }
    uint64_t now_ns() const override {
        if (!uses_fio_clock()) return monotonic_.now_ns();
        timespec ts;
        fio_gettime(&ts, nullptr);
        return uint64_t(ts.tv_sec) * 1'000'000'000ull + uint64_t(ts.tv_nsec);
    }
    bool is_virtual() const override { return false; }
};

FioClock fio_clock;
DeviceRegistry registry(fio_clock);  // the process's devices

// At fio's exit: devices held only by jobs fio never started are stopped clean.
void stop_devices_left_at_exit() { log_lines(registry.stop_left()); }

// The text of option @name's last setting (fio keeps them on opt_list), or "".
std::string option_text(thread_data* td, const char* name) {
    const char* text = nullptr;
    flist_head* n;
    flist_for_each(n, &td->opt_list) {
        auto* p = flist_entry(n, print_option, list);
        if (p->name && strcmp(p->name, name) == 0) text = p->value;
    }
    return text ? text : "";
}

std::string text_of(const char* s) { return s ? s : ""; }
// fio's own output files of job td: (option, path).
std::vector<std::pair<std::string, std::string>> fio_files_of(thread_data* td) {
    std::vector<std::pair<std::string, std::string>> files;
    const std::pair<const char*, io_log*> logs[] = {
        {"write_lat_log", td->lat_log},  {"write_lat_log", td->slat_log},
        {"write_lat_log", td->clat_log}, {"write_hist_log", td->clat_hist_log},
        {"write_bw_log", td->bw_log},    {"write_iops_log", td->iops_log}};
    for (const auto& [option, log] : logs)
        if (log && log->filename) files.emplace_back(option, log->filename);
    if (td->o.write_iolog_file && *td->o.write_iolog_file)
        files.emplace_back("write_iolog", td->o.write_iolog_file);
    return files;
}

// Job td's engine options and what it does, as the run plan takes them.
void describe_options(thread_data* td, PlanJob& j) {
    auto* o = static_cast<EngineOptions*>(td->eo);
    j.config = text_of(o->config);
    j.filename = text_of(td->o.filename);
    if (td->files && td->files_index && td->files[0]) j.device = text_of(td->files[0]->file_name);
    j.files = td->files_index;
    j.nr_files = td->o.nr_files;
    // May write: writes, trims, or replays a log whose directions fio reads as it goes.
    j.writes = td_write(td) || td_trim(td) || (td->o.read_iolog_file && *td->o.read_iolog_file);
    j.trims = td_trim(td);
    j.buffered = !td->o.odirect;
    j.verify_only = td->o.verify_only;
    j.allow_create = td->o.allow_create;
    j.allow_mounted_write = td->o.allow_mounted_write;
    j.stats = text_of(o->stats);
    j.trace = text_of(o->trace);
    j.mdsplit_group = text_of(o->group);
    j.group_weight = o->group_weight;
    j.group_weight_text = option_text(td, "mdsplit_group_weight");
    j.ioscheduler = text_of(td->o.ioscheduler);
    j.unlink = td->o.unlink;
    j.unlink_each_loop = td->o.unlink_each_loop;
    j.pre_read = td->o.pre_read;
    j.trim_percentage = td->o.trim_percentage;
    j.load.op = td_write(td) && !td_read(td) ? Op::Write : Op::Read;
    j.load.block_bytes = td->o.bs[j.load.op == Op::Write ? DDIR_WRITE : DDIR_READ];
    j.load.random = td_random(td);
    j.load.iodepth = td->o.iodepth ? td->o.iodepth : 1;
    j.load.think_ns = uint64_t(td->o.thinktime) * 1000 / std::max(1u, td->o.thinktime_blocks);
    j.load.start_ns = td->o.start_delay * 1000;  // startdelay, us
}

// A job as the run plan takes it; with `options` false, no other job's engine
// options (fio frees a forked job's once forked). Ours: same ioengine_ops (fio
// dlopen()s the .so once); o.ioengine_so_path is freed by now.
PlanJob plan_job(thread_data* td, thread_data* self, bool options) {
    PlanJob j;
    j.name = td->o.name ? td->o.name : "?";
    j.thread = td->o.use_thread;
    j.stonewall = td->o.stonewall;
    j.number = uint32_t(td->thread_number);
    j.subjob = uint32_t(td->subjob_number);
    j.create_serialize = td->o.create_serialize;
    j.cgroup = text_of(td->o.cgroup);
    j.fio_files = fio_files_of(td);
    j.ours = (options || td == self) && td->eo && td->io_ops == self->io_ops;
    if (j.ours) describe_options(td, j);
    return j;
}

// The run's jobs in fio's order, and `self`'s index among them.
RunPlan run_plan(thread_data* self, bool options, size_t& index) {
    std::vector<PlanJob> jobs;
    thread_data* td;
    int i;
    for_each_td(td, i) {
        if (td == self) index = jobs.size();
        jobs.push_back(plan_job(td, self, options));
    }
    RunPlan plan(std::move(jobs), run_resolved_path);
    plan.set_fio_files(descriptor_identity(f_out ? fileno(f_out) : -1), command_line_files());
    return plan;
}

// Another job that starts still to end on @stack, by fio's run states
// (stack/clean_stop.h): @self is not its last user. Under registry.mutex().
bool others_still_to_end(thread_data* self, const SharedStack* stack) {
    std::vector<JobProgress> jobs;
    size_t index = 0;
    thread_data* td;
    int i;
    for_each_td(td, i) {
        if (td == self) index = jobs.size();
        JobProgress& p = jobs.emplace_back();
        if (td->io_ops == self->io_ops && td->io_ops_data) p.stack = data_of(td)->stack.get();
        int state = __atomic_load_n(&td->runstate, __ATOMIC_RELAXED);
        p.reaped = state == TD_REAPED;
        p.created = state != TD_NOT_CREATED;
        p.terminating = __atomic_load_n(&td->terminate, __ATOMIC_RELAXED);
    }
    return stack_user_still_to_end(jobs, index, stack);
}

// A sync that completed with an error, as fio 3.35's io_completed() takes it
// (fio 3.33 does not look, axboe/fio issue #1577): logged, then counted when
// continue_on_error allows it, else the job's error.
void report_sync_error(thread_data* td, io_u* u) {
    const int err = int(u->error);
    io_u_log_error(td, u);
    if (td_non_fatal_error(td, td_error_type(u->ddir, err), err)) {
        update_error_count(td, err);
        return;
    }
    td_verror(td, err, "io_u_queued_complete");
}

// The task bfq and the page cache see: ioprio, group, sync= (written back or
// REQ_FUA before completing) and td_io_open_file()'s fadvise_hint, which fio
// gives a descriptor the device lacks. The pid is taken at the first I/O.
void describe_task(thread_data* td, const PlanJob& job, TaskContext& task) {
    task.sched.group = job.group;
    task.sched.group_weight = job.group_weight;
    if (fio_option_is_set(&td->o, ioprio_class) && td->o.ioprio_class <= 3)
        task.sched.ioprio_class = IoprioClass(td->o.ioprio_class);
    if (fio_option_is_set(&td->o, ioprio) && td->o.ioprio <= 7)
        task.sched.ioprio = uint8_t(td->o.ioprio);
    task.dsync = td->o.sync_io != 0;
    const bool random = td_random(td);
    task.fadvise = td->o.fadvise_hint == F_ADV_NONE         ? Fadvise::None
                   : td->o.fadvise_hint == F_ADV_RANDOM     ? Fadvise::Random
                   : td->o.fadvise_hint == F_ADV_SEQUENTIAL ? Fadvise::Sequential
                   : random                                 ? Fadvise::Random
                                                            : Fadvise::Sequential;
}

// Job `self` (td) attached to its device, opened or shared with its threads.
std::unique_ptr<EngineData> attach_job(thread_data* td, const StackConfig& config,
                                       const RunPlan& plan, size_t self) {
    [[maybe_unused]] static const bool at_exit = std::atexit(stop_devices_left_at_exit) == 0;
    const PlanJob& job = plan.jobs()[self];
    auto d = std::make_unique<EngineData>();
    StackOptions so = plan.stack_options(self, read_only);
    d->depth = td->o.iodepth ? td->o.iodepth : 1;
    d->buffered = job.buffered;
    d->stats_path = plan.stats_path(self);
    d->label = so.label;
    std::string calibration;
    d->stack = registry.open(plan, self, config, so, calibration);
    // stderr itself (fio's log_err() writes to --output's file).
    if (!calibration.empty()) std::fprintf(stderr, "%s\n", calibration.c_str());
    d->plug_time_is_fio_time = plan.exclusive(self) && FioClock::uses_fio_clock();
    describe_task(td, job, d->task);
    d->task.lag = d->stack->attach_lag_job(job.name, d->depth, job.load.think_ns);
    d->batch.reserve(d->depth);
    d->events.reserve(d->depth);
    if (d->buffered) d->stack->set_buffered_iodepth(d->depth);
    td->files[0]->real_file_size = d->stack->size_bytes();
    fio_file_set_size_known(td->files[0]);
    return d;
}

// From setup_files(), or first from init() (create_serialize=0, in the job's
// own thread or process). The run plan refuses what the job may not do.
int mdsplit_setup(thread_data* td) {
    if (data_of(td)) return 0;
    if (strcmp(fio_version_string, MDSPLIT_FIO_VERSION) != 0)
        return refuse(td, std::string("built against ") + MDSPLIT_FIO_VERSION + " but loaded by " +
                              fio_version_string +
                              "; rebuild with -DFIO_SOURCE_DIR=<that fio's configured source>");
    size_t self = 0;
    if (std::string why = run_plan(td, false, self).option_refusal(self); !why.empty())
        return refuse(td, why);
    try {
        RunPlan plan = run_plan(td, true, self);
        StackConfig config = load_stack_file(plan.jobs()[self].config);
        if (std::string why = plan.device_refusal(self, config); !why.empty())
            return refuse(td, why);
        std::unique_ptr<EngineData> data = attach_job(td, config, plan, self);
        // Another job's cleanup reads it (others_still_to_end).
        std::lock_guard<std::mutex> l(registry.mutex());
        td->io_ops_data = data.release();
    } catch (const std::exception& e) {
        return refuse(td, e.what());
    }
    return 0;
}

int mdsplit_init(thread_data* td) {
    if (!data_of(td) && mdsplit_setup(td) != 0) return 1;
    if (!data_of(td)) return refuse(td, "mdsplit: engine was not set up");
    // md assembles the array now, after the jobs before a stonewall stopped theirs.
    try {
        data_of(td)->stack->stack().assemble_md();
    } catch (const std::exception& e) {
        return refuse(td, e.what());
    }
    // Members an earlier job's array failed stay failed (member_failures.h).
    data_of(td)->stack->take_member_failures(MemberFailures::run_wide());
    return 0;
}

// Once fio has the io_u buffers: direct I/O's go straight to the members, one
// fixed buffer (as io_uring's fixedbufs=1). fio runs a job whose iomem= failed
// without any (the page cache would copy into them: EFAULT); a trim has none.
int mdsplit_post_init(thread_data* td) {
    EngineData* d = data_of(td);
    bool moves_data = td_read(td) || td_write(td);
    if (d && moves_data && (!td->orig_buffer || td->orig_buffer == reinterpret_cast<char*>(-1)))
        return refuse(td,
                      "mdsplit: the job has no I/O buffers (fio's iomem= allocation failed, "
                      "see its error above); allowed: an iomem= this machine can provide, such "
                      "as malloc (the default)");
    if (d && !d->buffered && td->orig_buffer)
        d->stack->register_io_buffer(td->orig_buffer, td->orig_buffer_size);
    return 0;
}

// The job's end (device_registry.h end_job); the last job out of a device
// that starts stops it (one fio never starts keeps its use: clean_stop.h).
void mdsplit_cleanup(thread_data* td) {
    EngineData* d = data_of(td);
    if (!d) return;
    std::vector<std::string> notices;
    std::string failure;
    try {
        end_job(*d->stack, d->task, d->buffered, d->label, d->stats_path, notices);
    } catch (const std::exception& e) {
        failure = e.what();  // a trace that cannot be written fails the job
    }
    log_lines(notices);
    if (!failure.empty() && refuse(td, failure)) td->error = EIO;
    std::lock_guard<std::mutex> l(registry.mutex());
    bool last = d->stack->detach() || !others_still_to_end(td, d->stack.get());
    td->io_ops_data = nullptr;  // no user from here on (others_still_to_end)
    if (last) {
        // md logs a member failure (raid5_error's pr_crit); the last job out says it.
        std::string failed = d->stack->stack().member_failure_notice();
        if (!failed.empty()) log_err("%s\n", failed.c_str());
        // The host was the bottleneck: fio's figures are this machine's (stderr itself).
        std::string verdict = d->stack->host_lag_verdict();
        if (!verdict.empty()) std::fprintf(stderr, "%s\n", verdict.c_str());
        std::vector<std::string> errors = stop_device(*d->stack);
        log_lines(errors);
        if (!errors.empty()) td->error = EIO;
    }
    d->stack.reset();  // the last job out destroys the stack
    delete d;
}

// One io_u to the stack (`submit`), batched or failed (EIO); the pid taken here.
template <class Submit>
fio_q_status queue_on_stack(EngineData* d, io_u* u, Submit submit) {
    if (!d->task.pid) d->task.pid = uint32_t(syscall(SYS_gettid));
    try {
        submit();
    } catch (const std::exception& e) {
        log_err("mdsplit: %s\n", e.what());
        u->error = EIO;
        return FIO_Q_COMPLETED;
    }
    d->batch.push_back(u);
    d->in_flight++;
    return FIO_Q_QUEUED;
}

fio_q_status mdsplit_queue(thread_data* td, io_u* u) {
    EngineData* d = data_of(td);
    fio_ro_check(td, u);
    if (d->in_flight >= d->depth) return FIO_Q_BUSY;
    // DDIR_TRIM: fio's os_trim(), BLKDISCARD on a block device.
    const Op op = u->ddir == DDIR_WRITE ? Op::Write : u->ddir == DDIR_TRIM ? Op::Discard : Op::Read;
    switch (u->ddir) {
        case DDIR_READ:
        case DDIR_WRITE:
        case DDIR_TRIM:
            break;
        case DDIR_SYNC:
        case DDIR_DATASYNC:
            // Direct I/O leaves no page to write back: the members are made
            // durable (blkdev_issue_flush). A buffered fsync writes back first.
            if (!d->buffered) {
                u->error = unsigned(-d->stack->sync_members());
                return FIO_Q_COMPLETED;
            }
            return queue_on_stack(d, u,
                                  [&] { d->stack->fsync(d->task, reinterpret_cast<uint64_t>(u)); });
        case DDIR_SYNC_FILE_RANGE: {
            // do_sync_file_range(): f->first_write .. f->last_write, the job's flags.
            fio_file* f = u->file;
            if (!d->buffered || f->first_write == -1ULL || f->last_write <= f->first_write) {
                u->error = 0;
                return FIO_Q_COMPLETED;
            }
            return queue_on_stack(d, u, [&] {
                d->stack->sync_file_range(d->task, f->first_write, f->last_write - f->first_write,
                                          td->o.sync_file_range, reinterpret_cast<uint64_t>(u));
            });
        }
        default:
            u->error = EINVAL;
            return FIO_Q_COMPLETED;
    }
    return queue_on_stack(d, u, [&] {
        if (d->buffered)
            d->stack->queue_buffered(d->task, op, u->offset, u->xfer_buflen, u->xfer_buf,
                                     reinterpret_cast<uint64_t>(u));
        else
            d->stack->queue(d->task, op, u->offset, u->xfer_buflen, u->xfer_buf,
                            reinterpret_cast<uint64_t>(u));
    });
}

int mdsplit_commit(thread_data* td) {
    EngineData* d = data_of(td);
    if (d->batch.empty()) return 0;
    try {
        d->stack->commit(d->task);
    } catch (const std::exception& e) {
        log_err("mdsplit: %s\n", e.what());
        return -EIO;
    }
    if (fio_fill_issue_time(td)) {
        timespec now;
        if (d->plug_time_is_fio_time) {
            // The plug's one clock read (blk_time_get_ns) is the issue time.
            uint64_t ns = d->stack->stack().loop().now();
            now.tv_sec = time_t(ns / 1'000'000'000);
            now.tv_nsec = long(ns % 1'000'000'000);
        } else {
            fio_gettime(&now, nullptr);
        }
        for (io_u* u : d->batch) {
            memcpy(&u->issue_time, &now, sizeof(now));
            io_u_queued(td, u);
        }
    }
    io_u_mark_submit(td, unsigned(d->batch.size()));
    d->batch.clear();
    return 0;
}

int mdsplit_getevents(thread_data* td, unsigned int min, unsigned int max, const timespec* t) {
    EngineData* d = data_of(td);
    d->events.clear();
    uint64_t timeout =
        t ? uint64_t(t->tv_sec) * 1'000'000'000ull + uint64_t(t->tv_nsec) : ~uint64_t(0) / 2;
    ReapedCompletions& done = d->reaped;
    try {
        d->stack->reap(d->task, done.kept() + min, done.waiting() < min ? timeout : 0,
                       done.storage());
    } catch (const std::exception& e) {
        log_err("mdsplit: %s\n", e.what());
        return -EIO;
    }
    size_t n = done.take(max, [&](const IoCompletion& c) {
        auto* u = reinterpret_cast<io_u*>(c.cookie);
        u->error = unsigned(-c.error);
        u->resid = c.resid;
        // blkdev_fsync(): the flush after write-back; so for every write under
        // sync= (generic_write_sync() buffered, REQ_FUA direct).
        bool flushes = u->ddir == DDIR_SYNC || u->ddir == DDIR_DATASYNC ||
                       (u->ddir == DDIR_WRITE && d->task.dsync);
        if (flushes && !u->error) u->error = unsigned(-d->stack->sync_members());
        if (u->error && ddir_sync(u->ddir)) report_sync_error(td, u);
        d->events.push_back(u);
    });
    d->in_flight -= unsigned(n);
    return int(n);
}

io_u* mdsplit_event(thread_data* td, int event) { return data_of(td)->events[size_t(event)]; }

// fio's invalidate=1: a buffered job's page cache is written back and dropped.
int mdsplit_invalidate(thread_data* td, fio_file*) {
    EngineData* d = data_of(td);
    if (!d || !d->buffered) return 0;
    try {
        d->stack->invalidate();
    } catch (const std::exception& e) {
        log_err("mdsplit: %s\n", e.what());
        return -EIO;
    }
    return 0;
}

// td_io_open_file() drops the file's cache (invalidate=1: BLKFLSBUF), but
// not for FIO_DISKLESSIO: the page cache is ours, so the engine drops it.
int mdsplit_open_file(thread_data* td, fio_file* f) {
    return td->o.invalidate_cache ? mdsplit_invalidate(td, f) : 0;
}
int mdsplit_close_file(thread_data*, fio_file*) { return 0; }
// filename= names the virtual device: without this hook fio would
// unlink(filename), a member image of that name included (an iolog replay's
// unlink action; unlink=1 is refused by the run plan).
int mdsplit_unlink_file(thread_data*, fio_file*) { return 0; }
// FIO_NO_OFFLOAD: fio refuses io_submit_mode=offload (check_engine_ops): its
// workers would reload the engine, each with a stack of its own.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
ioengine_ops mdsplit_ops = {
    // fio writes into it: not const
    .name = "mdsplit",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO | FIO_NOEXTEND | FIO_NODISKUTIL | FIO_ASYNCIO_SETS_ISSUE_TIME |
             FIO_NO_OFFLOAD,
    .setup = mdsplit_setup,
    .init = mdsplit_init,
    .post_init = mdsplit_post_init,
    .queue = mdsplit_queue,
    .commit = mdsplit_commit,
    .getevents = mdsplit_getevents,
    .event = mdsplit_event,
    .cleanup = mdsplit_cleanup,
    .open_file = mdsplit_open_file,
    .close_file = mdsplit_close_file,
    .invalidate = mdsplit_invalidate,
    .unlink_file = mdsplit_unlink_file,
    .option_struct_size = sizeof(EngineOptions),
    .options = engine_options,
};
#pragma GCC diagnostic pop

}  // namespace

extern "C" {
// fio's external-engine entry point (ioengines.c dlopen_ioengine).
__attribute__((visibility("default"))) void get_ioengine(ioengine_ops** ops) {
    *ops = &mdsplit_ops;
}
}
