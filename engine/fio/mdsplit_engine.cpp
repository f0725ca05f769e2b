// The fio ABI glue, and nothing else: fio's io_u in, Stack calls out.
// Loaded with --ioengine=external:/path/libmdsplit.so. Structure follows
// fio's engines/io_uring.c: an options table with its ranges, setup() and
// init(), queue() adding to the batch (inside a block-layer plug), commit()
// unplugging and submitting, getevents()/event() reaping, and one ops
// struct. The run-wide decisions and every refusal are the run plan's
// (stack/run_plan.h), the clean stop's accounting stack/clean_stop.h's and
// the sidecar's file I/O stack/sidecar_file.h's: the glue describes fio's
// thread_data to them as plain structs.
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>  // before fio's headers (they use C11 atomics)

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

// The core and the C++ library come first: fio's headers define min/max
// macros that break them.
#include "base/resolved_path.h"
#include "config/config_loader.h"
#include "stack/clean_stop.h"
#include "stack/device_registry.h"
#include "stack/device_safety.h"
#include "stack/run_plan.h"
#include "stack/shared_stack.h"
#include "stack/sidecar_file.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"
#include "stack/time_scale_auto.h"

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
    unsigned group_weight;  // io.bfq.weight: 1..BFQ_MAX_WEIGHT (the table's range), default 100
};

// fio refuses a value outside minval..maxval with its own message; the run
// plan also refuses "-1", which fio 3.33 reads as a range "<empty>-1".
// Designated as fio's own tables are: the fields not named are zero.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
fio_option engine_options[] = {
    {
        .name = "mdsplit_config",
        .lname = "mdsplit device stack",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(EngineOptions, config),
        .help = "TOML file describing the device stack (virtual device, members, policies)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "mdsplit_stats",
        .lname = "mdsplit statistics file",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(EngineOptions, stats),
        .help = "Write per-device statistics (diskstats, iostat fields, seeks) as JSON to this "
                "file (subjobs of numjobs append .N)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "mdsplit_trace",
        .lname = "mdsplit blktrace directory",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(EngineOptions, trace),
        .help = "Write blktrace files <dir>/<device>.blktrace.0 for the virtual device and each "
                "member",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "mdsplit_group",
        .lname = "mdsplit scheduler group",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(EngineOptions, group),
        .help = "Scheduler (bfq) group of this job; the root group when unset",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "mdsplit_group_weight",
        .lname = "mdsplit scheduler group weight",
        .type = FIO_OPT_INT,
        .off1 = offsetof(EngineOptions, group_weight),
        .maxval = 1000,
        .minval = 1,
        .help = "Weight of this job's scheduler group (1..1000, default 100)",
        .def = "100",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = nullptr,
    },
};
#pragma GCC diagnostic pop

struct EngineData {
    std::shared_ptr<SharedStack> stack;
    TaskContext task;
    std::vector<io_u*> batch;          // queued since the last commit
    std::vector<io_u*> events;         // reaped, handed out by event()
    std::vector<IoCompletion> reaped;  // completed; from reaped_head on not yet handed to fio
    size_t reaped_head = 0;
    bool buffered = false;  // direct=0: through the page cache
    // The job is the stack's only user and the stack's clock is fio's own:
    // the loop's time at commit is this batch's plug time, in fio's clock.
    bool plug_time_is_fio_time = false;
    unsigned in_flight = 0;  // queued or submitted, not yet reaped
    unsigned depth = 0;
    std::string stats_path;
    std::string label;  // the device's filename (fio frees its files before cleanup)
};

EngineData* data_of(thread_data* td) { return static_cast<EngineData*>(td->io_ops_data); }

// One line on stderr, never stdout (it would corrupt --output-format=json),
// and once per process: a refusal that concerns several jobs (two sharing
// one device) is found by the setup of each of them. Fails the job.
int refuse(thread_data* td, const std::string& message) {
    static std::mutex mutex;
    static std::set<std::string> reported;
    std::string line = engine_line(message);
    {
        std::lock_guard<std::mutex> l(mutex);
        if (reported.insert(line).second) log_err("%s\n", line.c_str());
    }
    td->error = td->error ? td->error : EINVAL;
    return 1;
}

// The stacks' real clock is fio's own (gettime.c fio_gettime()): with
// clocksource=cpu, the default where the TSC is reliable, a read is the TSC
// scaled by fio's calibration, a fraction of a vDSO clock_gettime(), and the
// engine reads it at least twice per I/O. With another clocksource,
// CLOCK_MONOTONIC (gettimeofday could step back). Chosen at the first read,
// in setup(), once fio has settled its clocksource; fixed from then on.
class FioClock final : public Clock {
public:
    // fio's calibrated CPU clock when fio uses it; CLOCK_MONOTONIC otherwise.
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

private:
    RealClock monotonic_;
};

// Logs `lines` as fio logs its errors.
void log_lines(const std::vector<std::string>& lines) {
    for (const std::string& line : lines) log_err("%s\n", line.c_str());
}

// The process's devices (stack/device_registry.h), on fio's clock.
FioClock fio_clock;
DeviceRegistry registry(fio_clock);

// At fio's exit: the devices jobs fio never started still hold, whose last
// started job left while one of them could still start (a signal or
// exitall_on_error came after it, before their turn), are stopped clean.
void stop_devices_left_at_exit() { log_lines(registry.stop_left()); }

// The text a job file gave option @name (its last setting), or "": fio
// keeps every option it accepted, with its text, on td->opt_list.
std::string option_text(thread_data* td, const char* name) {
    const char* text = nullptr;
    flist_head* n;
    flist_for_each(n, &td->opt_list) {
        auto* p = flist_entry(n, print_option, list);
        if (p->name && strcmp(p->name, name) == 0) text = p->value;
    }
    return text ? text : "";
}

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
    j.config = o->config ? o->config : "";
    j.filename = td->o.filename ? td->o.filename : "";
    if (td->files && td->files_index && td->files[0] && td->files[0]->file_name)
        j.device = td->files[0]->file_name;
    j.files = td->files_index;
    j.nr_files = td->o.nr_files;
    // May write: writes, trims, or replays a log (read_iolog / blktrace)
    // whose directions fio knows only as it reads them.
    j.writes = td_write(td) || td_trim(td) || (td->o.read_iolog_file && *td->o.read_iolog_file);
    j.trims = td_trim(td);
    j.buffered = !td->o.odirect;
    j.verify_only = td->o.verify_only;
    j.allow_create = td->o.allow_create;
    j.allow_mounted_write = td->o.allow_mounted_write;
    j.stats = o->stats ? o->stats : "";
    j.trace = o->trace ? o->trace : "";
    j.mdsplit_group = o->group ? o->group : "";
    j.group_weight = o->group_weight;
    j.group_weight_text = option_text(td, "mdsplit_group_weight");
    j.ioscheduler = td->o.ioscheduler ? td->o.ioscheduler : "";
    j.unlink = td->o.unlink;
    j.unlink_each_loop = td->o.unlink_each_loop;
    j.pre_read = td->o.pre_read;
    j.trim_percentage = td->o.trim_percentage;
    j.load.op = td_write(td) && !td_read(td) ? Op::Write : Op::Read;
    j.load.block_bytes = td->o.bs[j.load.op == Op::Write ? DDIR_WRITE : DDIR_READ];
    j.load.random = td_random(td);
    j.load.iodepth = td->o.iodepth ? td->o.iodepth : 1;
    // Its think time per I/O: fio's thinktime spread over thinktime_blocks.
    j.load.think_ns = uint64_t(td->o.thinktime) * 1000 / std::max(1u, td->o.thinktime_blocks);
}

// One job of the run as the run plan takes it (stack/run_plan.h). With
// `options` false only fio's own fields are read of jobs other than `self`:
// a forked job's engine options are freed once fio has forked it
// (create_serialize=0 reads them after that).
PlanJob plan_job(thread_data* td, thread_data* self, bool options) {
    PlanJob j;
    j.name = td->o.name ? td->o.name : "?";
    j.thread = td->o.use_thread;
    j.stonewall = td->o.stonewall;
    j.number = uint32_t(td->thread_number);
    j.subjob = uint32_t(td->subjob_number);
    j.create_serialize = td->o.create_serialize;
    j.cgroup = td->o.cgroup ? td->o.cgroup : "";
    j.fio_files = fio_files_of(td);
    // Same engine = same ioengine_ops: fio dlopen()s one .so once and
    // takes its "ioengine" symbol (dlopen_ioengine). Not the path:
    // o.ioengine_so_path points into a parse buffer fio has freed by now
    // (TSan: heap-use-after-free with ioengine= in [global]).
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

// Job td for the clean stop (stack/clean_stop.h): its device, if it set up
// on one and has not ended, and fio's run state of it.
JobProgress job_progress(thread_data* td, thread_data* self) {
    JobProgress p;
    if (td->io_ops == self->io_ops && td->io_ops_data)
        p.stack = static_cast<EngineData*>(td->io_ops_data)->stack.get();
    int state = __atomic_load_n(&td->runstate, __ATOMIC_RELAXED);
    p.reaped = state == TD_REAPED;
    p.created = state != TD_NOT_CREATED;
    p.terminating = __atomic_load_n(&td->terminate, __ATOMIC_RELAXED);
    return p;
}

// Whether another job that starts is still to end on @stack: then @self is
// not its last user. Call under registry.mutex().
bool others_still_to_end(thread_data* self, const SharedStack* stack) {
    std::vector<JobProgress> jobs;
    size_t index = 0;
    thread_data* td;
    int i;
    for_each_td(td, i) {
        if (td == self) index = jobs.size();
        jobs.push_back(job_progress(td, self));
    }
    return stack_user_still_to_end(jobs, index, stack);
}

// A sync (fsync, fdatasync, sync_file_range) that completed with an error,
// as fio 3.35's io_completed() handles it: logged, then counted when
// continue_on_error makes it non-fatal, else the job's error. fio 3.33, the
// version this engine is built for, returns from io_completed() before
// looking at a sync's error (axboe/fio issue #1577: "the core doesn't notice
// fsync errors"), so a buffered job's failed write-back passed unseen.
void report_sync_error(thread_data* td, io_u* u) {
    const int err = int(u->error);
    io_u_log_error(td, u);
    if (td_non_fatal_error(td, td_error_type(u->ddir, err), err)) {
        update_error_count(td, err);
        return;
    }
    td_verror(td, err, "io_u_queued_complete");
}

// The advice fio gives a job's file when it opens it (td_io_open_file():
// fadvise_hint, by default RANDOM for a random job, SEQUENTIAL otherwise).
// fio's own posix_fadvise() goes to the descriptor the virtual device does
// not have and fails unseen; the page cache applies it instead.
Fadvise fadvise_of(thread_data* td) {
    switch (td->o.fadvise_hint) {
        case F_ADV_NONE:
            return Fadvise::None;
        case F_ADV_RANDOM:
            return Fadvise::Random;
        case F_ADV_SEQUENTIAL:
            return Fadvise::Sequential;
        default:
            return td_random(td) ? Fadvise::Random : Fadvise::Sequential;
    }
}

// The job as the process bfq sees: its ioprio (fio's prio/prioclass) and
// its cgroup (mdsplit_group or fio's cgroup, with mdsplit_group_weight);
// sync= and fadvise_hint.
void describe_task(thread_data* td, const PlanJob& job, TaskContext& task) {
    // The pid is the job thread's, taken at its first I/O: setup() may run
    // on fio's main thread for every job.
    task.pid = 0;
    task.sched.group = job.group;
    task.sched.group_weight = job.group_weight;
    if (fio_option_is_set(&td->o, ioprio_class) && td->o.ioprio_class <= 3)
        task.sched.ioprio_class = IoprioClass(td->o.ioprio_class);
    if (fio_option_is_set(&td->o, ioprio) && td->o.ioprio <= 7)
        task.sched.ioprio = uint8_t(td->o.ioprio);
    // fio's sync= opens the file O_SYNC or O_DSYNC: a buffered write is
    // written back before it completes; a direct one is REQ_FUA
    // (dio_bio_write_op()). Either makes the members durable when it
    // completes (mdsplit_getevents).
    task.dsync = td->o.sync_io != 0;
    task.fadvise = fadvise_of(td);
}

// Job `self` (td) on its device: the stack opened, or shared with the
// threads that name it, and the job attached to it.
std::unique_ptr<EngineData> attach_job(thread_data* td, const StackConfig& config,
                                       const RunPlan& plan, size_t self) {
    static const bool at_exit = std::atexit(stop_devices_left_at_exit) == 0;
    (void)at_exit;
    const PlanJob& job = plan.jobs()[self];
    auto d = std::make_unique<EngineData>();
    StackOptions so = plan.stack_options(self, read_only);
    d->depth = td->o.iodepth ? td->o.iodepth : 1;
    d->buffered = job.buffered;
    d->stats_path = plan.stats_path(self);
    d->label = so.label;
    std::vector<AutoScaleJob> auto_jobs;
    if (config.device.time_scale_auto) auto_jobs = plan.auto_scale_jobs(self);
    std::string calibration;
    d->stack = registry.open(plan.stack_key(self), config, so, plan.exclusive(self), auto_jobs,
                             calibration);
    // stderr itself: fio's log_err() writes to --output's file.
    if (!calibration.empty()) std::fprintf(stderr, "%s\n", calibration.c_str());
    d->plug_time_is_fio_time = plan.exclusive(self) && FioClock::uses_fio_clock();
    describe_task(td, job, d->task);
    // How late this job ran against the model (stack/host_lag.h): its
    // think time per I/O is fio's thinktime spread over thinktime_blocks.
    d->task.lag = d->stack->attach_lag_job(job.name, d->depth, job.load.think_ns);
    d->batch.reserve(d->depth);
    d->events.reserve(d->depth);
    if (d->buffered) d->stack->set_buffered_iodepth(d->depth);
    td->files[0]->real_file_size = d->stack->size_bytes();
    fio_file_set_size_known(td->files[0]);
    return d;
}

// fio calls setup() from setup_files(); with create_serialize=0 init() may
// have called it first, in the job's own thread or process. The run plan
// refuses what the job may not do, in the engine's order; device safety
// (device_safety.h) is checked before anything is made (the sidecar's
// directory, traces, members); the Stack checks again as it opens them.
int mdsplit_setup(thread_data* td) {
    if (data_of(td)) return 0;
    if (strcmp(fio_version_string, MDSPLIT_FIO_VERSION) != 0)
        return refuse(td, std::string("mdsplit: built against ") + MDSPLIT_FIO_VERSION +
                              " but loaded by " + fio_version_string +
                              "; rebuild with -DFIO_SOURCE_DIR=<that fio's configured source>");
    size_t self = 0;
    if (std::string why = run_plan(td, false, self).option_refusal(self); !why.empty())
        return refuse(td, why);
    try {
        RunPlan plan = run_plan(td, true, self);
        StackConfig config = load_stack_file(plan.jobs()[self].config);
        if (std::string why = plan.setup_refusal(self, config); !why.empty())
            return refuse(td, why);
        StackUse use = plan.stack_use(self);
        DeviceSafetyOptions safety;
        safety.writes = use.writes;
        safety.allow_mounted_write = use.writers_allow_mounted;
        check_device_safety(config, safety);
        if (std::string why = plan.files_refusal(self, config); !why.empty())
            return refuse(td, why);
        std::unique_ptr<EngineData> data = attach_job(td, config, plan, self);
        // Another job's cleanup reads it (others_still_to_end): with
        // create_serialize=0 this runs in the job's own thread.
        std::lock_guard<std::mutex> l(registry.mutex());
        td->io_ops_data = data.release();
    } catch (const std::exception& e) {
        return refuse(td, e.what());
    }
    return 0;
}

int mdsplit_init(thread_data* td) {
    // With create_serialize=0 fio sets files up in the job, after init().
    if (!data_of(td) && mdsplit_setup(td) != 0) return 1;
    if (!data_of(td)) {
        return refuse(td, "mdsplit: engine was not set up");
    }
    // md assembles the array now (resync, recovery), after the jobs before
    // this one's stonewall stopped theirs.
    try {
        data_of(td)->stack->stack().assemble_md();
    } catch (const std::exception& e) {
        return refuse(td, e.what());
    }
    // Members an earlier job's array failed stay failed for this job's
    // (member_failures.h): its own array may be a new one (forked jobs,
    // create_serialize=0) that would otherwise read their stale chunks.
    data_of(td)->stack->take_member_failures(MemberFailures::run_wide());
    return 0;
}

// After fio has allocated the job's io_u buffers (backend.c: init_io_u, then
// post_init), as fio's io_uring engine registers them with fixedbufs=1:
// direct I/O goes from them straight to the members, so the member ring
// takes them as one fixed buffer. Buffered jobs' member I/O comes from the
// engine's page cache instead.
int mdsplit_post_init(thread_data* td) {
    EngineData* d = data_of(td);
    // fio reports a failed iomem= allocation (shmget/mmap of huge pages) but
    // runs the job anyway, with no buffers: the page cache would copy into
    // an invalid address (the kernel's copy_to_user would return EFAULT).
    // (A job that only trims moves no data and has none.)
    bool moves_data = td_read(td) || td_write(td);
    if (d && moves_data && (!td->orig_buffer || td->orig_buffer == reinterpret_cast<char*>(-1))) {
        return refuse(td,
                      "mdsplit: the job has no I/O buffers (fio's iomem= allocation failed, "
                      "see its error above); allowed: an iomem= this machine can provide, such "
                      "as malloc (the default)");
    }
    if (d && !d->buffered && td->orig_buffer)
        d->stack->register_io_buffer(td->orig_buffer, td->orig_buffer_size);
    return 0;
}

// The job's end (stack/device_registry.h end_job); the last job out of a
// device stops it. A job fio never starts keeps its use of the stack: the
// stack outlives the last job that ran, which stops it instead.
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
    if (!failure.empty()) {
        refuse(td, failure);
        td->error = EIO;
    }
    std::lock_guard<std::mutex> l(registry.mutex());
    bool last = d->stack->detach() || !others_still_to_end(td, d->stack.get());
    td->io_ops_data = nullptr;  // no user from here on (others_still_to_end)
    if (last) {
        // md logs a member failure (raid5_error's pr_crit); the last job out says it.
        std::string failed = d->stack->stack().member_failure_notice();
        if (!failed.empty()) log_err("%s\n", failed.c_str());
        // The host was the bottleneck: fio's figures are this machine's (on stderr itself).
        std::string verdict = d->stack->host_lag_verdict();
        if (!verdict.empty()) std::fprintf(stderr, "%s\n", verdict.c_str());
        std::vector<std::string> errors = stop_device(*d->stack);
        log_lines(errors);
        if (!errors.empty()) td->error = EIO;
    }
    d->stack.reset();  // the last job out destroys the stack
    delete d;
}

// Hands one io_u to the stack (`submit` queues it): it joins the batch that
// commit() flushes, or completes at once with EIO when the stack refuses it.
// The pid is taken at the first I/O, in the job's own thread or process.
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
    Op op;
    switch (u->ddir) {
        case DDIR_READ:
            op = Op::Read;
            break;
        case DDIR_WRITE:
            op = Op::Write;
            break;
        case DDIR_TRIM:  // fio's os_trim(): BLKDISCARD on a block device
            op = Op::Discard;
            break;
        case DDIR_SYNC:
        case DDIR_DATASYNC:
            // Direct I/O leaves no page to write back (a write completed only
            // when its member requests did); the members' storage is made
            // durable (blkdev_issue_flush). A buffered job's fsync writes back
            // its pages first (mdsplit_getevents then syncs the members).
            if (!d->buffered) {
                u->error = unsigned(-d->stack->sync_members());
                return FIO_Q_COMPLETED;
            }
            return queue_on_stack(d, u,
                                  [&] { d->stack->fsync(d->task, reinterpret_cast<uint64_t>(u)); });
        case DDIR_SYNC_FILE_RANGE: {
            // fio's do_sync_file_range(): the range its writes since the last
            // sync covered (f->first_write .. f->last_write), the job's flags.
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
            // One clock read per batch, the plug's (blk_time_get_ns caches
            // it in the plug): the issue time is when the batch's plug began.
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
    // fio takes at most iodepth_batch_complete_max (default 1) per call:
    // the rest stay in `reaped`, consumed from reaped_head.
    std::vector<IoCompletion>& done = d->reaped;
    size_t head = d->reaped_head;
    try {
        d->stack->reap(d->task, head + min, done.size() - head < min ? timeout : 0, done);
    } catch (const std::exception& e) {
        log_err("mdsplit: %s\n", e.what());
        return -EIO;
    }
    size_t n = std::min<size_t>(done.size() - head, max);
    for (size_t i = head; i < head + n; i++) {
        auto* u = reinterpret_cast<io_u*>(done[i].cookie);
        u->error = unsigned(-done[i].error);
        u->resid = done[i].resid;
        // blkdev_fsync(): after the page cache's write-back, the flush; and
        // so for every write under sync= (generic_write_sync() for a
        // buffered one, REQ_FUA for a direct one).
        bool flushes = u->ddir == DDIR_SYNC || u->ddir == DDIR_DATASYNC ||
                       (u->ddir == DDIR_WRITE && d->task.dsync);
        if (flushes && !u->error) u->error = unsigned(-d->stack->sync_members());
        if (u->error && ddir_sync(u->ddir)) report_sync_error(td, u);
        d->events.push_back(u);
    }
    head += n;
    if (head == done.size()) {
        done.clear();
        head = 0;
    } else if (head >= done.size() - head) {  // amortized: move fewer than were taken
        done.erase(done.begin(), done.begin() + long(head));
        head = 0;
    }
    d->reaped_head = head;
    d->in_flight -= unsigned(n);
    return int(n);
}

io_u* mdsplit_event(thread_data* td, int event) { return data_of(td)->events[size_t(event)]; }

int mdsplit_invalidate(thread_data* td, fio_file* f);

// fio's td_io_open_file() drops the file's cache when it opens it
// (invalidate=1, the default: BLKFLSBUF on a block device), but not for an
// engine without a real file (FIO_DISKLESSIO): the page cache is ours, so
// the engine does it, and a buffered reader after a writer starts cold as
// on the kernel.
int mdsplit_open_file(thread_data* td, fio_file* f) {
    return td->o.invalidate_cache ? mdsplit_invalidate(td, f) : 0;
}
int mdsplit_close_file(thread_data*, fio_file*) { return 0; }
// filename= names the virtual device, never a file: without this hook fio
// would unlink(filename), deleting whatever file of that name sits in the
// working directory, a member image included (unlink=1 is refused at setup;
// this also covers an iolog replay's unlink action).
int mdsplit_unlink_file(thread_data*, fio_file*) { return 0; }
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

ioengine_ops make_ops() {
    ioengine_ops ops{};
    ops.name = "mdsplit";
    ops.version = FIO_IOOPS_VERSION;
    // FIO_NO_OFFLOAD: fio refuses io_submit_mode=offload (check_engine_ops):
    // its workers would reload the engine, each with a stack of its own.
    ops.flags = FIO_DISKLESSIO | FIO_NOEXTEND | FIO_NODISKUTIL | FIO_ASYNCIO_SETS_ISSUE_TIME |
                FIO_NO_OFFLOAD;
    ops.setup = mdsplit_setup;
    ops.init = mdsplit_init;
    ops.post_init = mdsplit_post_init;
    ops.cleanup = mdsplit_cleanup;
    ops.queue = mdsplit_queue;
    ops.commit = mdsplit_commit;
    ops.getevents = mdsplit_getevents;
    ops.event = mdsplit_event;
    ops.open_file = mdsplit_open_file;
    ops.close_file = mdsplit_close_file;
    ops.unlink_file = mdsplit_unlink_file;
    ops.invalidate = mdsplit_invalidate;
    ops.options = engine_options;
    ops.option_struct_size = sizeof(EngineOptions);
    return ops;
}

ioengine_ops mdsplit_ops = make_ops();  // fio writes into it: not const

}  // namespace

extern "C" {
// fio's external-engine entry point (ioengines.c dlopen_ioengine).
__attribute__((visibility("default"))) void get_ioengine(ioengine_ops** ops) {
    *ops = &mdsplit_ops;
}
}
