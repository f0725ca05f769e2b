// The fio ABI glue, and nothing else: fio's io_u in, Stack calls out.
// Loaded with --ioengine=external:/path/libmdsplit.so. Structure follows
// fio's engines/io_uring.c: queue() adds to the batch (inside a block-layer
// plug), commit() unplugs and submits, getevents()/event() reap.
#include <fcntl.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>  // before fio's headers (they use C11 atomics)

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
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
#include "stack/device_safety.h"
#include "stack/member_claim.h"
#include "stack/run_plan.h"
#include "stack/shared_stack.h"
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

// The text a job file gave option @name (its last setting), or null: fio keeps
// every option it accepted, with its text, on td->opt_list.
const char* option_text(thread_data* td, const char* name) {
    const char* text = nullptr;
    flist_head* n;
    flist_for_each(n, &td->opt_list) {
        auto* p = flist_entry(n, print_option, list);
        if (p->name && strcmp(p->name, name) == 0) text = p->value;
    }
    return text;
}

// Whether @text is a whole number within [@min, @max], written as fio's
// str_to_decimal reads one (decimal, or hexadecimal after "0x"). fio's own
// range check reports a negative value but lets the job run with the
// default, so the text is checked here.
bool integer_in(const char* text, long min, long max) {
    char* end = nullptr;
    errno = 0;
    long v = strtol(text, &end, strncasecmp(text, "0x", 2) == 0 ? 16 : 10);
    return end != text && !*end && !errno && v >= min && v <= max;
}

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

fio_option engine_option(const char* name, const char* lname, fio_opt_type type, unsigned off,
                         const char* help, const char* def = nullptr, int minval = 0,
                         unsigned long long maxval = 0) {
    fio_option o{};
    o.name = name;
    o.lname = lname;
    o.type = type;
    o.off1 = off;
    o.help = help;
    o.def = def;
    o.minval = minval;
    o.maxval = maxval;
    o.category = FIO_OPT_C_ENGINE;
    o.group = FIO_OPT_G_INVALID;
    return o;
}

fio_option engine_options[] = {
    engine_option("mdsplit_config", "mdsplit device stack", FIO_OPT_STR_STORE,
                  offsetof(EngineOptions, config),
                  "TOML file describing the device stack (virtual device, members, policies)"),
    engine_option("mdsplit_stats", "mdsplit statistics file", FIO_OPT_STR_STORE,
                  offsetof(EngineOptions, stats),
                  "Write per-device statistics (diskstats, iostat fields, seeks) as JSON to this "
                  "file (subjobs of numjobs append .N)"),
    engine_option("mdsplit_trace", "mdsplit blktrace directory", FIO_OPT_STR_STORE,
                  offsetof(EngineOptions, trace),
                  "Write blktrace files <dir>/<device>.blktrace.0 for the virtual device and each "
                  "member"),
    engine_option("mdsplit_group", "mdsplit scheduler group", FIO_OPT_STR_STORE,
                  offsetof(EngineOptions, group),
                  "Scheduler (bfq) group of this job; the root group when unset"),
    // fio refuses a value outside minval..maxval with its own message; setup
    // also refuses "-1", which fio 3.33 reads as a range "<empty>-1".
    engine_option("mdsplit_group_weight", "mdsplit scheduler group weight", FIO_OPT_INT,
                  offsetof(EngineOptions, group_weight),
                  "Weight of this job's scheduler group (1..1000, default 100)", "100", 1, 1000),
    fio_option{},
};

// One line on stderr, never stdout (it would corrupt --output-format=json),
// and once per process: a refusal that concerns several jobs (two sharing
// one device) is found by the setup of each of them.
void report_error(thread_data* td, const std::string& message) {
    static std::mutex mutex;
    static std::set<std::string> reported;
    std::string line = message.rfind("mdsplit:", 0) == 0 ? message : "mdsplit: " + message;
    {
        std::lock_guard<std::mutex> l(mutex);
        if (reported.insert(line).second) log_err("%s\n", line.c_str());
    }
    td->error = td->error ? td->error : EINVAL;
}

EngineData* data_of(thread_data* td) { return static_cast<EngineData*>(td->io_ops_data); }

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

// One device, one owner: jobs of one process (thread=1) that name the same
// stack file and device label share one stack. The registry holds them
// while a job uses them.
FioClock registry_clock;
std::mutex registry_mutex;
std::map<std::string, std::weak_ptr<SharedStack>> registry;

// resolved_path() of a path some job of the run names (its stack file, its
// sidecar, its trace directory), worked out once for the run. Each job's
// setup compares its own against every other job's: resolved anew, a run of
// N jobs paid N * N walks of the file system (a thousand jobs took minutes).
// fio does not change its working directory while it runs, and nothing the
// engine creates is a symbolic link, so a path resolves alike all run long.
std::string run_path(const std::string& path) {
    static std::mutex mutex;
    static std::map<std::string, std::string> resolved;
    std::lock_guard<std::mutex> l(mutex);
    auto it = resolved.find(path);
    if (it == resolved.end()) it = resolved.emplace(path, resolved_path(path)).first;
    return it->second;
}

// A job's name for messages (fio's [section]), "?" when it has none.
std::string job_name(thread_data* td) { return td->o.name ? td->o.name : "?"; }

// A job that may write to its stack: writes, trims, or replays a log
// (read_iolog / blktrace) whose directions fio knows only as it reads them.
bool may_write(thread_data* td) {
    return td_write(td) || td_trim(td) || (td->o.read_iolog_file && *td->o.read_iolog_file);
}

// fio will never start job @td: run_threads() reaped it when setup_files()
// failed (TD_REAPED before it ran), or it was marked terminate before its
// turn (a signal, exitall_on_error: "never got a chance to start"). Such a
// job never reaches the engine's cleanup.
bool never_starts(thread_data* td) {
    int state = __atomic_load_n(&td->runstate, __ATOMIC_RELAXED);
    return state == TD_REAPED ||
           (state == TD_NOT_CREATED && __atomic_load_n(&td->terminate, __ATOMIC_RELAXED));
}

// Another job set up on @stack (its user) that fio may still start or that
// is still running: while there is one, @self is not the stack's last user.
// Only jobs that start count (never_starts()): the last one that did
// stops the array and writes the sidecars. Call under registry_mutex.
bool stack_user_still_to_end(thread_data* self, const SharedStack* stack) {
    thread_data* td;
    int i;
    for_each_td(td, i) {
        if (td == self || td->io_ops != self->io_ops || !td->io_ops_data) continue;
        if (static_cast<EngineData*>(td->io_ops_data)->stack.get() == stack && !never_starts(td))
            return true;
    }
    return false;
}

// The bfq group a job's I/O is charged to: mdsplit_group, else the cgroup
// fio runs the job in (cgroup=), as the kernel charges a bio to its task's
// cgroup (bio_associate_blkg(), then bfq_bic_update_cgroup()). "" for the
// root group.
std::string group_of(thread_data* td) {
    auto* o = static_cast<EngineOptions*>(td->eo);
    if (o->group && *o->group) return o->group;
    return td->o.cgroup ? td->o.cgroup : "";
}

// The file fio writes its report to (--output, or the regular file its
// stdout is), by file_identity(); "" when it is a terminal, pipe or device.
std::string fio_report_identity() {
    struct stat st;
    if (!f_out || fstat(fileno(f_out), &st) != 0 || !S_ISREG(st.st_mode)) return "";
    return "file:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// fio's command line's arguments that are files: its job files (fio keeps
// their names in init.c's static ini_file), read from /proc/self/cmdline.
std::vector<std::string> fio_job_files() {
    std::ifstream in("/proc/self/cmdline", std::ios::binary);
    std::vector<std::string> files;
    bool first = true;
    for (std::string arg; std::getline(in, arg, '\0'); first = false) {
        struct stat st;
        if (!first && !arg.empty() && arg[0] != '-' && stat(arg.c_str(), &st) == 0 &&
            S_ISREG(st.st_mode))
            files.push_back(arg);
    }
    return files;
}

// One job of the run as the run plan takes it (stack/run_plan.h). With
// `options` false only fio's own fields are read: a forked job's engine
// options are freed once fio has forked it (create_serialize=0 reads them
// after that).
PlanJob plan_job(thread_data* td, thread_data* self, bool options) {
    PlanJob j;
    j.name = job_name(td);
    j.thread = td->o.use_thread;
    j.stonewall = td->o.stonewall;
    j.number = uint32_t(td->thread_number);
    j.subjob = uint32_t(td->subjob_number);
    j.create_serialize = td->o.create_serialize;
    j.cgroup = td->o.cgroup ? td->o.cgroup : "";
    const std::pair<const char*, io_log*> logs[] = {
        {"write_lat_log", td->lat_log},  {"write_lat_log", td->slat_log},
        {"write_lat_log", td->clat_log}, {"write_hist_log", td->clat_hist_log},
        {"write_bw_log", td->bw_log},    {"write_iops_log", td->iops_log}};
    for (const auto& [option, log] : logs)
        if (log && log->filename) j.fio_files.emplace_back(option, log->filename);
    if (td->o.write_iolog_file && *td->o.write_iolog_file)
        j.fio_files.emplace_back("write_iolog", td->o.write_iolog_file);
    // Same engine = same ioengine_ops: fio dlopen()s one .so once and
    // takes its "ioengine" symbol (dlopen_ioengine). Not the path:
    // o.ioengine_so_path points into a parse buffer fio has freed by now
    // (TSan: heap-use-after-free with ioengine= in [global]).
    j.ours = options && td->eo && td->io_ops == self->io_ops;
    if (!j.ours) return j;
    auto* o = static_cast<EngineOptions*>(td->eo);
    j.config = o->config ? o->config : "";
    j.filename = td->o.filename ? td->o.filename : "";
    if (td->files && td->files_index && td->files[0] && td->files[0]->file_name)
        j.device = td->files[0]->file_name;
    j.writes = may_write(td);
    j.buffered = !td->o.odirect;
    j.verify_only = td->o.verify_only;
    j.allow_create = td->o.allow_create;
    j.allow_mounted_write = td->o.allow_mounted_write;
    j.stats = o->stats ? o->stats : "";
    j.trace = o->trace ? o->trace : "";
    j.group = group_of(td);
    j.group_weight = o->group_weight;
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
    RunPlan plan(std::move(jobs), run_path);
    plan.set_fio_files(fio_report_identity(), fio_job_files());
    return plan;
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

bool write_sidecars(SharedStack& stack);

// At fio's exit: a stack still held by jobs fio never started, whose last
// started job left while one of them could still start (a signal or
// exitall_on_error came after it, before their turn), is stopped here:
// sidecars written, array stopped clean. A forked job's process leaves by
// _exit() and runs none of this; the main process's copies of forked jobs'
// stacks were never assembled (nothing to stop, no sidecar).
void stop_stacks_left_at_exit() {
    std::lock_guard<std::mutex> l(registry_mutex);
    for (auto& [key, slot] : registry) {
        std::shared_ptr<SharedStack> stack = slot.lock();
        if (!stack) continue;
        write_sidecars(*stack);
        stack->stop_md();
    }
}

// What job td will do on its device, for time_scale = "auto".
AutoScaleJob auto_scale_job(thread_data* td) {
    AutoScaleJob job;
    job.name = job_name(td);
    job.op = td_write(td) && !td_read(td) ? Op::Write : Op::Read;
    job.block_bytes = td->o.bs[job.op == Op::Write ? DDIR_WRITE : DDIR_READ];
    job.random = td_random(td);
    job.iodepth = td->o.iodepth ? td->o.iodepth : 1;
    job.think_ns = uint64_t(td->o.thinktime) * 1000 / std::max(1u, td->o.thinktime_blocks);
    job.start_ns = td->o.start_delay * 1000;  // startdelay, us
    job.sched.group = group_of(td);
    job.sched.group_weight = static_cast<EngineOptions*>(td->eo)->group_weight;
    return job;
}

// The jobs that will share the device of job `self` (td): itself and the
// threads the plan says share its stack (RunPlan::shares_stack).
std::vector<AutoScaleJob> auto_scale_jobs(thread_data* self_td, const RunPlan& plan, size_t self) {
    std::vector<AutoScaleJob> jobs{auto_scale_job(self_td)};
    thread_data* td;
    int i;
    for_each_td(td, i) {
        size_t index = size_t(i);
        if (index != self && plan.jobs()[index].ours && plan.shares_stack(self, index))
            jobs.push_back(auto_scale_job(td));
    }
    return jobs;
}

// exclusive: no other job can open this key (see mdsplit_setup).
// auto_jobs: the jobs of the device, for time_scale = "auto" (else unused).
std::shared_ptr<SharedStack> open_shared_stack(const std::string& key, const StackConfig& config,
                                               const StackOptions& so, bool exclusive,
                                               const std::vector<AutoScaleJob>& auto_jobs) {
    std::lock_guard<std::mutex> l(registry_mutex);
    static const bool at_exit = std::atexit(stop_stacks_left_at_exit) == 0;
    (void)at_exit;
    auto& slot = registry[key];
    std::shared_ptr<SharedStack> stack = slot.lock();
    if (!stack) {
        // time_scale = "auto": measured now, once per device (time_scale_auto.h).
        StackConfig scaled = config;
        std::optional<TimeScaleCalibration> calibration;
        if (config.device.time_scale_auto) {
            calibration = calibrate_time_scale(config, auto_jobs, registry_clock);
            scaled.device.time_scale = calibration->time_scale;
            // stderr itself: fio's log_err() writes to --output's file.
            std::fprintf(stderr, "%s\n", calibration->line(so.label).c_str());
        }
        stack = std::make_shared<SharedStack>(std::make_unique<Stack>(scaled, registry_clock, so),
                                              exclusive);
        if (calibration) stack->stack().host_lag().set_calibration(*calibration);
        slot = stack;
    }
    stack->attach();
    return stack;
}

// fio options whose use the engine cannot honour, refused by name.
std::string unsupported_option(thread_data* td) {
    // A discard goes to the members directly; the page cache's side of it
    // (truncate_bdev_range() dropping the cached pages) is not emulated.
    if (td_trim(td) && !td->o.odirect)
        return "mdsplit: rw=trim/randtrim/trimwrite with direct=0: a buffered job's discard is "
               "not emulated; allowed: direct=1 for jobs that trim";
    // filename= names the virtual device: fio's unlink would delete a file
    // of that name (mdsplit_unlink_file deletes nothing).
    if (td->o.unlink || td->o.unlink_each_loop)
        return std::string("mdsplit: ") + (td->o.unlink ? "unlink" : "unlink_each_loop") +
               "=1: filename= names the virtual device, not a file, so there is nothing to "
               "unlink; allowed: unlink=0 and unlink_each_loop=0 (the defaults)";
    // fio 3.33 turns trim_percentage's verified blocks into DDIR_TRIM
    // io_us on a job that does not trim, which its own fio_ro_check()
    // asserts against: the job aborts (and a forked one's parent then frees
    // engine options it had already freed).
    if (td->o.trim_percentage && !td_trim(td))
        return "mdsplit: trim_percentage=" + std::to_string(td->o.trim_percentage) +
               " on a job that does not trim: fio sends its verify trims anyway and aborts in "
               "its own check (fio_ro_check); allowed: trim_percentage=0, or a job that trims "
               "(rw=trimwrite, trim, randtrim)";
    // fio's pre_read_file() reads the file through f->fd (lseek, read),
    // which a virtual device does not have.
    if (td->o.pre_read)
        return "mdsplit: pre_read=1: fio pre-reads through the file's own descriptor, and "
               "filename= names a virtual device that has none; allowed: pre_read=0 (the "
               "default)";
    return "";
}

// A temporary name beside path that no other writer uses: forked jobs of
// one run each own a copy of the stack and may write the same sidecar at
// the same moment (a shared "path.tmp" was renamed away under one of them).
std::string private_temporary(const std::string& path) {
    static std::atomic<unsigned> serial{0};
    return path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(serial++);
}

/**
 * create_temporary_beside() - a new file beside @target that no one else
 * uses (private_temporary()), open for writing; -1 with errno when none
 * could be made
 * @tmp: its name
 *
 * O_EXCL and O_NOFOLLOW: a file or link already at the name, in a directory
 * others write (/tmp), is never followed or truncated.
 */
int create_temporary_beside(const std::string& target, std::string& tmp) {
    for (int attempt = 0; attempt < 100; attempt++) {
        tmp = private_temporary(target);
        int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

// An mdsplit_stats file must be writable before the job runs, not found
// unwritable after it. A block device, a directory or a socket is refused:
// the sidecar would overwrite the device, or could not be written at all. A
// stream must be writable; a file is probed by creating one beside its
// target (its directory is made).
void check_sidecar_writable(const std::string& path) {
    namespace fs = std::filesystem;
    struct stat st;
    if (stat(path.c_str(), &st) == 0) {
        const char* kind = S_ISBLK(st.st_mode)    ? "a block device"
                           : S_ISDIR(st.st_mode)  ? "a directory"
                           : S_ISSOCK(st.st_mode) ? "a socket"
                                                  : nullptr;
        if (kind)
            throw std::runtime_error("mdsplit: mdsplit_stats=" + path + " is " + kind +
                                     "; allowed: a regular file (replaced whole), or a character "
                                     "device or FIFO such as /dev/null or /dev/stderr");
        // fio's own report (stdout or --output) in a file or a pipe: the
        // sidecar would replace it or break its JSON. (A terminal may show both.)
        struct stat out;
        if (f_out && fstat(fileno(f_out), &out) == 0 && !S_ISCHR(out.st_mode) &&
            out.st_dev == st.st_dev && out.st_ino == st.st_ino)
            throw std::runtime_error("mdsplit: mdsplit_stats=" + path +
                                     " is where fio writes its own report (stdout or --output): "
                                     "the sidecar would mix into it; allowed: another file or "
                                     "stream, such as /dev/stderr");
    }
    if (sidecar_is_stream(path)) {
        if (access(path.c_str(), W_OK) != 0)
            throw std::runtime_error("mdsplit: mdsplit_stats=" + path + ": cannot write it (" +
                                     strerror(errno) + "); allowed: a writable file or stream");
        return;
    }
    fs::path target = link_chain(path).back();
    std::error_code ec;
    if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
    std::string probe;
    int fd = create_temporary_beside(target.string(), probe);
    if (fd >= 0) {
        close(fd);
        fs::remove(probe, ec);
    }
    if (fd < 0)
        throw std::runtime_error("mdsplit: mdsplit_stats=" + path + ": cannot create it (" +
                                 strerror(errno) + "); allowed: a path in a writable directory");
}

int mdsplit_setup(thread_data* td) {
    // fio calls setup() from setup_files(); with create_serialize=0 init()
    // may have called it first, in the job's own thread or process.
    if (data_of(td)) return 0;
    if (strcmp(fio_version_string, MDSPLIT_FIO_VERSION) != 0) {
        report_error(td, std::string("mdsplit: built against ") + MDSPLIT_FIO_VERSION +
                             " but loaded by " + fio_version_string +
                             "; rebuild with -DFIO_SOURCE_DIR=<that fio's configured source>");
        return 1;
    }
    auto* o = static_cast<EngineOptions*>(td->eo);
    if (!o->config || !*o->config) {
        report_error(td,
                     "mdsplit: mdsplit_config is required: the TOML file describing the device "
                     "stack (see docs/stack-toml.md)");
        return 1;
    }
    if (const char* w = option_text(td, "mdsplit_group_weight"); w && !integer_in(w, 1, 1000)) {
        report_error(td, std::string("mdsplit: mdsplit_group_weight=") + w +
                             " is not a group weight; allowed: an integer 1..1000");
        return 1;
    }
    if (std::string why = unsupported_option(td); !why.empty()) {
        report_error(td, why);
        return 1;
    }
    size_t self = 0;
    if (std::string why = run_plan(td, false, self).create_serialize_refusal(self); !why.empty()) {
        report_error(td, why);
        return 1;
    }
    if (td->o.nr_files != 1 || td->files_index != 1) {
        report_error(td,
                     "mdsplit: filename must name exactly one virtual device (e.g. md0); "
                     "got " +
                         std::to_string(td->files_index) + " files");
        return 1;
    }
    try {
        StackConfig config = load_stack_file(o->config);
        if (o->group && *o->group && config.device.scheduler != SchedulerKind::Bfq)
            throw std::runtime_error("mdsplit: mdsplit_group=" + std::string(o->group) +
                                     " needs device.scheduler = \"bfq\" in " + o->config);
        RunPlan plan = run_plan(td, true, self);
        if (std::string why = plan.thread_cgroup_refusal(); !why.empty())
            throw std::runtime_error(why);
        // fio's ioscheduler= would switch a real device's scheduler; the
        // virtual device's is the stack file's device.scheduler.
        if (const char* want = td->o.ioscheduler;
            want && *want && strcmp(want, scheduler_name(config.device.scheduler)) != 0)
            throw std::runtime_error(
                std::string("mdsplit: ioscheduler=") + want +
                ": the virtual device's scheduler is device.scheduler in " + o->config + " (\"" +
                scheduler_name(config.device.scheduler) +
                "\"); allowed: ioscheduler=" + scheduler_name(config.device.scheduler) +
                " or unset, or device.scheduler = \"none\" | \"mq-deadline\" | \"bfq\" in the "
                "stack file");
        // One job, one cgroup: mdsplit_group names it, or fio's cgroup= does.
        if (o->group && *o->group && td->o.cgroup && *td->o.cgroup &&
            strcmp(o->group, td->o.cgroup) != 0)
            throw std::runtime_error(
                "mdsplit: mdsplit_group=" + std::string(o->group) + " and cgroup=" + td->o.cgroup +
                ": a job's I/O is charged to one group, its cgroup's; allowed: one of the two, "
                "or the same name in both");
        // A weight is a group's (io.bfq.weight of its cgroup): it needs one.
        if (const char* w = option_text(td, "mdsplit_group_weight"); w && group_of(td).empty())
            throw std::runtime_error(
                std::string("mdsplit: mdsplit_group_weight=") + w +
                " without mdsplit_group: the weight is a group's, and the root group has "
                "none; allowed: mdsplit_group=NAME (or fio's cgroup=NAME) beside it (with "
                "device.scheduler = \"bfq\")");
        if (std::string why = plan.sharing_refusal(self, config); !why.empty())
            throw std::runtime_error(why);
        StackUse use = plan.stack_use(self);
        if (std::string why = plan.member_rival_refusal(self, config); !why.empty())
            throw std::runtime_error(why);
        // Before anything is made (the sidecar's directory, traces, members):
        // a member in use or carrying data is refused when any job of the run
        // may write (device_safety.h). The Stack checks again as it opens
        // them, and claims what it may write (so.allow_mounted_write).
        DeviceSafetyOptions safety;
        safety.writes = use.writes;
        safety.allow_mounted_write = use.writers_allow_mounted;
        check_device_safety(config, safety);
        if (std::string why = plan.fio_file_refusal(config); !why.empty())
            throw std::runtime_error(why);
        auto data = std::make_unique<EngineData>();
        StackOptions so;
        fio_file* f = td->files[0];
        so.label = f->file_name;
        // direct=0 jobs go through the engine's own page cache, so the members
        // stay O_DIRECT either way (the host's cache would sit under ours).
        so.open_direct = true;
        // Opened read-write when any job of the run may write to the stack,
        // whichever job opens it first; read-only otherwise.
        so.writable = use.writes;
        so.allow_mounted_write = use.writers_allow_mounted;
        // fio's --readonly and allow_file_create=0: no member file is created.
        so.create_members = use.create && !read_only;
        so.trace_dir = plan.trace_dir(self);
        // A raid5 is assembled at init(), in the process that runs the job
        // (Stack::assemble_md): setup runs in fio's main process for every
        // job before the first one starts.
        so.defer_md_assembly = true;
        // Nothing the device writes (traces, its sidecar) may replace what
        // the run reads or another device writes.
        if (std::string why = plan.output_refusal(self, config); !why.empty())
            throw std::runtime_error(why);
        so.ring_entries = 256;
        data->depth = td->o.iodepth ? td->o.iodepth : 1;
        data->buffered = !td->o.odirect;
        data->stats_path = plan.stats_path(self);
        data->label = f->file_name;
        if (!data->stats_path.empty()) check_sidecar_writable(data->stats_path);
        // Threads of one process share a stack; forked jobs each have their own.
        std::string key = plan.stack_key(self);
        // A forked job's key is its own; a thread's is shared only with jobs
        // naming the same stack file. Such a stack has one user, the job's
        // thread: no locking, and its ring may be single-issuer (not with
        // buffered I/O, whose worker threads hand work back to the loop).
        bool exclusive = !td->o.use_thread || use.jobs.size() <= 1;
        so.single_issuer = exclusive && !data->buffered;
        std::vector<AutoScaleJob> auto_jobs;
        if (config.device.time_scale_auto) auto_jobs = auto_scale_jobs(td, plan, self);
        data->stack = open_shared_stack(key, config, so, exclusive, auto_jobs);
        data->plug_time_is_fio_time = exclusive && FioClock::uses_fio_clock();
        // The pid is the job thread's, taken at its first I/O: setup() may run
        // on fio's main thread for every job.
        data->task.pid = 0;
        // The job is the process bfq sees: its ioprio (fio's prio/prioclass)
        // and its cgroup (group_of(): mdsplit_group or fio's cgroup, with
        // mdsplit_group_weight).
        data->task.sched.group = group_of(td);
        data->task.sched.group_weight = o->group_weight;
        if (fio_option_is_set(&td->o, ioprio_class) && td->o.ioprio_class <= 3)
            data->task.sched.ioprio_class = IoprioClass(td->o.ioprio_class);
        if (fio_option_is_set(&td->o, ioprio) && td->o.ioprio <= 7)
            data->task.sched.ioprio = uint8_t(td->o.ioprio);
        // fio's sync= opens the file O_SYNC or O_DSYNC: a buffered write is
        // written back before it completes; a direct one is REQ_FUA
        // (dio_bio_write_op()). Either makes the members durable when it
        // completes (mdsplit_getevents).
        data->task.dsync = td->o.sync_io != 0;
        data->task.fadvise = fadvise_of(td);
        // How late this job ran against the model (stack/host_lag.h): its
        // think time per I/O is fio's thinktime spread over thinktime_blocks.
        data->task.lag = data->stack->attach_lag_job(
            job_name(td), data->depth,
            uint64_t(td->o.thinktime) * 1000 / std::max(1u, td->o.thinktime_blocks));
        data->batch.reserve(data->depth);
        data->events.reserve(data->depth);
        if (data->buffered) data->stack->set_buffered_iodepth(data->depth);
        f->real_file_size = data->stack->size_bytes();
        fio_file_set_size_known(f);
        {
            // Another job's cleanup reads it (stack_user_still_to_end): with
            // create_serialize=0 this runs in the job's own thread.
            std::lock_guard<std::mutex> l(registry_mutex);
            td->io_ops_data = data.release();
        }
    } catch (const std::exception& e) {
        report_error(td, e.what());
        return 1;
    }
    return 0;
}

// `text` appended to the stream at `path` (sidecar_is_stream()). A FIFO is
// opened without waiting: with no reader the write fails instead of fio
// hanging at the job's end.
bool write_stream(const std::string& path, const std::string& text) {
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += size_t(n);
    }
    close(fd);
    return done == text.size();
}

// `text` as the whole file at `path`: written to a temporary file beside
// its target (symbolic links followed: a link is never replaced) and
// renamed over it, so a reader never sees half a file.
bool replace_file(const std::string& path, const std::string& text) {
    std::filesystem::path target = link_chain(path).back();
    std::error_code ec;
    if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
    std::string tmp;
    int fd = create_temporary_beside(target.string(), tmp);
    if (fd < 0) return false;
    size_t done = 0;
    while (done < text.size()) {
        ssize_t n = write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += size_t(n);
    }
    bool ok = close(fd) == 0 && done == text.size();
    if (ok) std::filesystem::rename(tmp, target, ec);
    if (!ok || ec) {
        int saved = errno;
        std::filesystem::remove(tmp, ec);
        errno = saved;
        return false;
    }
    return true;
}

// The device's statistics into each mdsplit_stats file of its jobs, once the
// last of them has ended. False when one could not be written.
bool write_sidecars(SharedStack& stack) {
    std::vector<std::string> paths = stack.take_sidecars();
    if (paths.empty()) return true;
    bool ok = true;
    try {
        std::string json = stack.stats_json() + "\n";
        for (const std::string& path : paths) {
            if (sidecar_is_stream(path) ? write_stream(path, json) : replace_file(path, json))
                continue;
            log_err(
                "mdsplit: mdsplit_stats=%s: cannot write it (%s); allowed: a path in a "
                "writable directory, or a writable stream\n",
                path.c_str(), strerror(errno));
            ok = false;
        }
    } catch (const std::exception& e) {
        log_err("mdsplit: %s\n", e.what());
        ok = false;
    }
    return ok;
}

int mdsplit_init(thread_data* td) {
    // With create_serialize=0 fio sets files up in the job, after init().
    if (!data_of(td) && mdsplit_setup(td) != 0) return 1;
    if (!data_of(td)) {
        report_error(td, "mdsplit: engine was not set up");
        return 1;
    }
    // md assembles the array now (resync, recovery), after the jobs before
    // this one's stonewall stopped theirs.
    try {
        data_of(td)->stack->stack().assemble_md();
    } catch (const std::exception& e) {
        report_error(td, e.what());
        return 1;
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
        report_error(td,
                     "mdsplit: the job has no I/O buffers (fio's iomem= allocation failed, "
                     "see its error above); allowed: an iomem= this machine can provide, such "
                     "as malloc (the default)");
        return 1;
    }
    if (d && !d->buffered && td->orig_buffer)
        d->stack->register_io_buffer(td->orig_buffer, td->orig_buffer_size);
    return 0;
}

void mdsplit_cleanup(thread_data* td) {
    EngineData* d = data_of(td);
    if (!d) return;
    try {
        // Nothing written is lost at job end, unless its write-back fails:
        // the kernel then says nothing unless a sync asks; we say it here.
        if (uint64_t lost = d->buffered ? d->stack->sync_buffered() : 0)
            log_err(
                "mdsplit: %s: the write-back of %llu pages failed after their writes completed, "
                "and no sync reported it: that data is not on the members (as in the kernel, "
                "fio sees such errors only through fsync=, fdatasync=, end_fsync=1 or sync=)\n",
                d->label.c_str(), static_cast<unsigned long long>(lost));
        d->stack->drain(d->task);
        d->stack->task_exited(d->task);  // the job's thread ends (bfq_exit_icq)
        if (!d->stack->record_member_failures(MemberFailures::run_wide()))
            log_err(
                "mdsplit: %s: more members failed in this run than the engine keeps (%zu): "
                "a later job's array may read a failed member's stale data\n",
                d->label.c_str(), MemberFailures::kCapacity);
        // The statistics are written even when a trace cannot be.
        if (!d->stats_path.empty()) d->stack->add_sidecar(d->stats_path);
        d->stack->flush_traces();
    } catch (const std::exception& e) {
        report_error(td, e.what());  // a trace that cannot be written fails the job
        td->error = EIO;
    }
    {
        std::lock_guard<std::mutex> l(registry_mutex);
        // A job fio never starts keeps its use of the stack: the stack
        // outlives the last job that ran, which stops it instead.
        bool last = d->stack->detach() || !stack_user_still_to_end(td, d->stack.get());
        td->io_ops_data = nullptr;  // no user from here on (stack_user_still_to_end)
        if (last) {
            // md logs a member failure (raid5_error's pr_crit); the last job out says it here.
            std::string failed = d->stack->stack().member_failure_notice();
            if (!failed.empty()) log_err("%s\n", failed.c_str());
            // The host was the bottleneck: fio's figures are this machine's.
            std::string verdict = d->stack->host_lag_verdict();
            if (!verdict.empty()) std::fprintf(stderr, "%s\n", verdict.c_str());
            if (!write_sidecars(*d->stack)) td->error = EIO;
            d->stack->stop_md();
        }
        d->stack.reset();  // the last job out destroys the stack
    }
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
