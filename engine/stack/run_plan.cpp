// RunPlan (run_plan.h): a run's jobs, as plain descriptions, and the
// decisions across them. Job order is fio's; a stonewall job starts once
// every job before it has ended (backend.c run_threads).
#include "stack/run_plan.h"

#include <strings.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <algorithm>
#include <set>

#include "base/resolved_path.h"
#include "config/config_error.h"
#include "stack/device_safety.h"
#include "stack/member_claim.h"
#include "stack/sidecar_file.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {

RunPlan::RunPlan(std::vector<PlanJob> jobs, Resolve resolve, std::string base)
    : jobs_(std::move(jobs)), resolve_(std::move(resolve)), base_(std::move(base)) {
    // A job's I/O is charged to its cgroup, as the kernel charges a bio to
    // its task's (bio_associate_blkg(), then bfq_bic_update_cgroup()).
    for (PlanJob& job : jobs_) {
        if (job.group.empty())
            job.group = job.mdsplit_group.empty() ? job.cgroup : job.mdsplit_group;
        job.load.name = job.name;
        job.load.sched.group = job.group;
        job.load.sched.group_weight = job.group_weight;
    }
}

uint32_t group_weight_of(const std::string& text) {
    const char* s = text.c_str();
    char* end = nullptr;
    errno = 0;
    long v = strtol(s, &end, strncasecmp(s, "0x", 2) == 0 ? 16 : 10);
    bool whole = end != s && !*end && !errno;
    return whole && v >= 1 && v <= 1000 ? uint32_t(v) : 0;
}

std::string engine_line(const std::string& message) {
    return message.rfind("mdsplit:", 0) == 0 ? message : "mdsplit: " + message;
}

// ---- A job's own options ---------------------------------------------------------

std::string RunPlan::option_refusal(size_t self) const {
    const PlanJob& job = jobs_[self];
    if (job.config.empty())
        return "mdsplit: mdsplit_config is required: the TOML file describing the device stack "
               "(see docs/stack-toml.md)";
    // fio's range check reports a negative value but lets the job run with
    // the default ("-1" it reads as a range "<empty>-1"): the text decides.
    if (!job.group_weight_text.empty() && !group_weight_of(job.group_weight_text))
        return "mdsplit: mdsplit_group_weight=" + job.group_weight_text +
               " is not a group weight; allowed: an integer 1..1000";
    // A discard goes to the members directly; the page cache's side of it
    // (truncate_bdev_range() dropping the cached pages) is not emulated.
    if (job.trims && job.buffered)
        return "mdsplit: rw=trim/randtrim/trimwrite with direct=0: a buffered job's discard is "
               "not emulated; allowed: direct=1 for jobs that trim";
    // filename= names the virtual device: fio's unlink would delete a file
    // of that name (the engine's unlink_file deletes nothing).
    if (job.unlink || job.unlink_each_loop)
        return std::string("mdsplit: ") + (job.unlink ? "unlink" : "unlink_each_loop") +
               "=1: filename= names the virtual device, not a file, so there is nothing to "
               "unlink; allowed: unlink=0 and unlink_each_loop=0 (the defaults)";
    // fio 3.33 turns trim_percentage's verified blocks into DDIR_TRIM
    // io_us on a job that does not trim, which its own fio_ro_check()
    // asserts against: the job aborts (and a forked one's parent then frees
    // engine options it had already freed).
    if (job.trim_percentage && !job.trims)
        return "mdsplit: trim_percentage=" + std::to_string(job.trim_percentage) +
               " on a job that does not trim: fio sends its verify trims anyway and aborts in "
               "its own check (fio_ro_check); allowed: trim_percentage=0, or a job that trims "
               "(rw=trimwrite, trim, randtrim)";
    // fio's pre_read_file() reads the file through f->fd (lseek, read),
    // which a virtual device does not have.
    if (job.pre_read)
        return "mdsplit: pre_read=1: fio pre-reads through the file's own descriptor, and "
               "filename= names a virtual device that has none; allowed: pre_read=0 (the "
               "default)";
    if (std::string why = create_serialize_refusal(self); !why.empty()) return why;
    if (job.nr_files != 1 || job.files != 1)
        return "mdsplit: filename must name exactly one virtual device (e.g. md0); got " +
               std::to_string(job.files) + " files";
    return "";
}

// The job's mdsplit_group against fio's cgroup=, and its weight's group.
std::string RunPlan::group_refusal(size_t self) const {
    const PlanJob& job = jobs_[self];
    // One job, one cgroup: mdsplit_group names it, or fio's cgroup= does.
    if (!job.mdsplit_group.empty() && !job.cgroup.empty() && job.mdsplit_group != job.cgroup)
        return "mdsplit: mdsplit_group=" + job.mdsplit_group + " and cgroup=" + job.cgroup +
               ": a job's I/O is charged to one group, its cgroup's; allowed: one of the two, "
               "or the same name in both";
    // A weight is a group's (io.bfq.weight of its cgroup): it needs one.
    if (!job.group_weight_text.empty() && job.group.empty())
        return "mdsplit: mdsplit_group_weight=" + job.group_weight_text +
               " without mdsplit_group: the weight is a group's, and the root group has none; "
               "allowed: mdsplit_group=NAME (or fio's cgroup=NAME) beside it (with "
               "device.scheduler = \"bfq\")";
    return "";
}

std::string RunPlan::setup_refusal(size_t self, const StackConfig& config) {
    const PlanJob& job = jobs_[self];
    const char* scheduler = scheduler_name(config.device.scheduler);
    if (!job.mdsplit_group.empty() && config.device.scheduler != SchedulerKind::Bfq)
        return "mdsplit: mdsplit_group=" + job.mdsplit_group +
               " needs device.scheduler = \"bfq\" in " + job.config;
    if (std::string why = thread_cgroup_refusal(); !why.empty()) return why;
    // fio's ioscheduler= would switch a real device's scheduler; the
    // virtual device's is the stack file's device.scheduler.
    if (!job.ioscheduler.empty() && job.ioscheduler != scheduler)
        return "mdsplit: ioscheduler=" + job.ioscheduler +
               ": the virtual device's scheduler is device.scheduler in " + job.config + " (\"" +
               scheduler + "\"); allowed: ioscheduler=" + scheduler +
               " or unset, or device.scheduler = \"none\" | \"mq-deadline\" | \"bfq\" in the "
               "stack file";
    if (std::string why = group_refusal(self); !why.empty()) return why;
    if (std::string why = sharing_refusal(self, config); !why.empty()) return why;
    return member_rival_refusal(self, config);
}

std::string RunPlan::device_refusal(size_t self, const StackConfig& config) {
    if (std::string why = setup_refusal(self, config); !why.empty()) return why;
    StackUse use = stack_use(self);
    DeviceSafetyOptions safety;
    safety.writes = use.writes;
    safety.allow_mounted_write = use.writers_allow_mounted;
    try {
        check_device_safety(config, safety);
    } catch (const std::exception& e) {
        return engine_line(e.what());
    }
    return files_refusal(self, config);
}

std::string RunPlan::files_refusal(size_t self, const StackConfig& config) {
    if (std::string why = fio_file_refusal(config); !why.empty()) return why;
    if (std::string why = output_refusal(self, config); !why.empty()) return why;
    const std::string path = stats_path(self);
    return path.empty() ? "" : sidecar_target_refusal(path, at(path), fio_report_identity_);
}

std::string RunPlan::at(const std::string& path) const {
    if (base_.empty() || path.empty() || path[0] == '/') return path;
    return base_ + "/" + path;
}

std::string RunPlan::config_path(size_t i) const {
    return jobs_[i].config.empty() ? "" : resolve_(jobs_[i].config);
}

StackUse RunPlan::stack_use(size_t self, const std::string* device) const {
    StackUse use;
    const std::string config = config_path(self);
    // The jobs found since the last stonewall (fio may run them at once),
    // and the first forked one among them.
    size_t window = 0;
    std::string window_forked;
    for (size_t i = 0; i < jobs_.size(); i++) {
        const PlanJob& job = jobs_[i];
        if (job.stonewall) {
            window = 0;
            window_forked.clear();
        }
        if (!job.ours || job.config.empty() || config_path(i) != config) continue;
        if (device && job.filename != *device) continue;
        bool forked = !job.thread;
        if (window && (forked || !window_forked.empty()) && use.overlap_first.empty()) {
            use.overlap_first = forked ? use.jobs.back() : window_forked;
            use.overlap_second = job.name;
        }
        if (forked && window_forked.empty()) window_forked = job.name;
        window++;
        use.jobs.push_back(job.name);
        use.writes = use.writes || job.writes;
        use.buffered = use.buffered || job.buffered;
        use.create = use.create && job.allow_create;
        if (job.writes && !job.allow_mounted_write) use.writers_allow_mounted = false;
    }
    return use;
}

std::string RunPlan::stack_key(size_t i) const {
    const PlanJob& job = jobs_[i];
    return config_path(i) + "\n" + job.device +
           (job.thread ? "" : "\n" + std::to_string(job.number));
}

bool RunPlan::shares_stack(size_t a, size_t b) const {
    const PlanJob &x = jobs_[a], &y = jobs_[b];
    return x.thread && y.thread && !x.config.empty() && !y.config.empty() &&
           config_path(a) == config_path(b) && x.filename == y.filename;
}

bool RunPlan::may_overlap(size_t a, size_t b) const {
    bool after_a = false;
    for (size_t i = 0; i < jobs_.size(); i++) {
        if (after_a && jobs_[i].stonewall) return false;
        if (i == b) return true;
        if (i == a) after_a = true;
    }
    return true;
}

bool RunPlan::exclusive(size_t self) const {
    return !jobs_[self].thread || stack_use(self).jobs.size() <= 1;
}

std::vector<AutoScaleJob> RunPlan::auto_scale_jobs(size_t self) const {
    std::vector<AutoScaleJob> jobs{jobs_[self].load};
    for (size_t i = 0; i < jobs_.size(); i++)
        if (i != self && jobs_[i].ours && shares_stack(self, i)) jobs.push_back(jobs_[i].load);
    return jobs;
}

StackOptions RunPlan::stack_options(size_t self, bool read_only) const {
    StackUse use = stack_use(self);
    StackOptions so;
    so.label = jobs_[self].device;
    // direct=0 jobs go through the engine's own page cache, so the members
    // stay O_DIRECT either way (the host's cache would sit under ours).
    so.open_direct = true;
    so.writable = use.writes;
    so.allow_mounted_write = use.writers_allow_mounted;
    // fio's --readonly and allow_file_create=0: no member file is created.
    so.create_members = use.create && !read_only;
    so.trace_dir = trace_dir(self);
    // A raid5 is assembled at init(), in the process that runs the job
    // (Stack::assemble_md): setup runs in fio's main process for every
    // job before the first one starts.
    so.defer_md_assembly = true;
    so.ring_entries = 256;
    // One user, the job's thread: its ring may be single-issuer (not with
    // buffered I/O, whose worker threads hand work back to the loop).
    so.single_issuer = exclusive(self) && !jobs_[self].buffered;
    return so;
}

std::string run_resolved_path(const std::string& path) {
    static std::mutex mutex;
    static std::map<std::string, std::string> resolved;
    std::lock_guard<std::mutex> l(mutex);
    auto it = resolved.find(path);
    if (it == resolved.end()) it = resolved.emplace(path, resolved_path(path)).first;
    return it->second;
}

std::vector<std::string> command_line_files() {
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

// ---- Sidecars and traces ------------------------------------------------------

std::string RunPlan::stats_path(size_t i) const {
    const PlanJob& job = jobs_[i];
    if (job.stats.empty()) return "";
    std::string path = job.stats;
    if (job.subjob && !sidecar_is_stream(at(path))) path += "." + std::to_string(job.subjob);
    return path;
}

// Forked subjobs each own a copy of the device; threads of numjobs share
// one stack and its traces.
std::string RunPlan::trace_dir(size_t i) const {
    const PlanJob& job = jobs_[i];
    if (job.trace.empty()) return "";
    std::string dir = job.trace;
    if (!job.thread && job.subjob) {
        // DIR/ is DIR: its subjob's directory is DIR.N, not DIR/.N inside it.
        while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
        dir += "." + std::to_string(job.subjob);
    }
    return dir;
}

// Another job of the run that would write the output `path` (as `path_of`
// names each job's) from a device of its own: every job except those that
// share self's stack. "" when there is none.
std::string RunPlan::output_rival(size_t self, const std::string& path,
                                  std::string (RunPlan::*path_of)(size_t) const) const {
    std::string target = resolve_(path);
    for (size_t i = 0; i < jobs_.size(); i++) {
        if (i == self || !jobs_[i].ours || shares_stack(self, i)) continue;
        std::string other = (this->*path_of)(i);
        if (!other.empty() && resolve_(other) == target) return jobs_[i].name;
    }
    return "";
}

// A job that shares self's stack but names another trace directory (or
// none where self names one), or nullptr.
const PlanJob* RunPlan::trace_disagreement(size_t self) const {
    const std::string dir = trace_dir(self);
    for (size_t i = 0; i < jobs_.size(); i++) {
        if (i == self || !jobs_[i].ours || !shares_stack(self, i)) continue;
        std::string other = trace_dir(i);
        if (other.empty() != dir.empty() || (!dir.empty() && resolve_(other) != resolve_(dir)))
            return &jobs_[i];
    }
    return nullptr;
}

std::string RunPlan::trace_refusal(size_t self) const {
    const std::string dir = trace_dir(self);
    if (dir.empty()) return "";
    // Every stack names its members m0, m1, ... and truncates its trace
    // files: two devices tracing into one directory overwrite each other.
    std::string rival = output_rival(self, dir, &RunPlan::trace_dir);
    if (rival.empty()) return "";
    return "mdsplit: mdsplit_trace=" + dir + ": job " + rival +
           " writes its traces there too, from a device of its own, so one job's "
           "blktrace files would overwrite the other's; allowed: a directory per job, "
           "or thread=1 with the same mdsplit_config and filename (one shared device, "
           "one set of traces)";
}

// One shared device writes one set of traces, opened by whichever job opens
// the device first: the others' mdsplit_trace would be dropped.
std::string RunPlan::trace_agreement_refusal(size_t self) const {
    const PlanJob* other = trace_disagreement(self);
    if (!other) return "";
    auto shown = [](const std::string& dir) { return dir.empty() ? std::string("none") : dir; };
    return "mdsplit: mdsplit_trace: jobs " + jobs_[self].name + " (" + shown(trace_dir(self)) +
           ") and " + other->name + " (" + shown(trace_dir(size_t(other - jobs_.data()))) +
           ") share one device (thread=1, the same mdsplit_config and filename), which "
           "writes one set of traces; allowed: the same mdsplit_trace (or none) on every "
           "job that shares the device";
}

// Jobs writing one stream each add a document; one file would be replaced.
std::string RunPlan::stats_rival_refusal(size_t self) const {
    const std::string path = stats_path(self);
    if (path.empty() || sidecar_is_stream(at(path))) return "";
    std::string rival = output_rival(self, path, &RunPlan::stats_path);
    if (rival.empty()) return "";
    return "mdsplit: mdsplit_stats=" + path + ": job " + rival +
           " writes it too, from a device of its own, so one sidecar would overwrite "
           "the other; allowed: a file per job, or thread=1 with the same "
           "mdsplit_config and filename (one shared device, one sidecar)";
}

// ---- Sharing ------------------------------------------------------------------

// fio 3.33's cgroup_shutdown() frees the process's one cgroup mount at the
// end of every job: in a run of two or more threads, cgroup= on any of them
// makes the second job to end abort fio (smalloc's double-free assertion).
std::string RunPlan::thread_cgroup_refusal() const {
    const PlanJob* with = nullptr;
    size_t threads = 0;
    for (const PlanJob& job : jobs_) {
        if (!job.thread) continue;
        threads++;
        if (!with && !job.cgroup.empty()) with = &job;
    }
    if (threads < 2 || !with) return "";
    return "mdsplit: cgroup=" + with->cgroup + " (job " + with->name +
           ") in a run of threads (thread=1): fio 3.33 frees its cgroup mount at the end "
           "of every job (cgroup_shutdown) and aborts when the second ends; allowed: "
           "mdsplit_group=" +
           with->cgroup +
           " instead (the same bfq group, without a fio cgroup), or forked jobs (thread=0)";
}

// fio's main process frees a forked job's engine options as soon as it has
// forked it (backend.c run_threads: free(eo)). With create_serialize=0 a job
// sets up in its own thread or process, after that, so the checks across
// jobs would read freed memory. Threads' options live on.
std::string RunPlan::create_serialize_refusal(size_t self) const {
    if (jobs_[self].create_serialize) return "";
    for (size_t i = 0; i < jobs_.size(); i++)
        if (i != self && !jobs_[i].thread)
            return "mdsplit: create_serialize=0 while job " + jobs_[i].name +
                   " runs as a forked process: this job would set up after fio has freed "
                   "that job's options, so the two could not be checked against each other; "
                   "allowed: create_serialize=1 (the default), thread=1 for every job, or a "
                   "run of one job";
    return "";
}

// A job in self's group on self's device (its stack shared) that gives the
// group another weight, or nullptr.
const PlanJob* RunPlan::group_weight_rival(size_t self) const {
    const PlanJob& mine = jobs_[self];
    if (mine.group.empty()) return nullptr;
    std::string key = stack_key(self);
    for (size_t i = 0; i < jobs_.size(); i++) {
        const PlanJob& job = jobs_[i];
        if (i == self || !job.ours || job.config.empty() || job.group != mine.group ||
            stack_key(i) != key)
            continue;
        if (job.group_weight != mine.group_weight) return &job;
    }
    return nullptr;
}

// Among the jobs naming self's stack file whose device may be a copy of its
// own (`separate`): one that may write and another that reads what is there
// without writing it first (it only reads, or verify_only), or nulls.
std::pair<const PlanJob*, const PlanJob*> RunPlan::separate_writer_and_reader(
    size_t self, bool (*separate)(const PlanJob&)) const {
    const PlanJob *writer = nullptr, *reader = nullptr;
    const std::string config = config_path(self);
    for (size_t i = 0; i < jobs_.size(); i++) {
        const PlanJob& job = jobs_[i];
        if (!job.ours || !separate(job) || job.config.empty() || config_path(i) != config) continue;
        if (job.verify_only || !job.writes) {
            if (!reader) reader = &job;
        } else if (!writer) {
            writer = &job;
        }
    }
    return {writer, reader};
}

// A reader and a writer of one stack on ram members, both @separate (each
// with its own device, so its own memory): the refusal with @why, or "".
std::string RunPlan::ram_reader_refusal(size_t self, bool (*separate)(const PlanJob&),
                                        const char* why) const {
    auto [writer, reader] = separate_writer_and_reader(self, separate);
    if (!writer || !reader) return "";
    return "mdsplit: job " + reader->name + " reads what job " + writer->name +
           " writes on the ram members of " + jobs_[self].config + ", but " + why;
}

std::string RunPlan::sharing_refusal(size_t self, const StackConfig& config) const {
    const PlanJob& job = jobs_[self];
    if (const PlanJob* other = group_weight_rival(self))
        return "mdsplit: mdsplit_group_weight: jobs " + job.name + " (" +
               std::to_string(job.group_weight) + ") and " + other->name + " (" +
               std::to_string(other->group_weight) + ") put group " + job.group +
               " of one device at two weights, and a group has "
               "one; allowed: the same mdsplit_group_weight on every job of a group";
    StackUse use = stack_use(self);
    bool needs_one_owner =
        config.device.kind == DeviceKind::Raid5 || config.device.scheduler == SchedulerKind::Bfq;
    // Forked jobs each own a copy of the device: right only when fio runs
    // them one after another (a stonewall between each two).
    if (needs_one_owner && !job.thread && !use.overlap_first.empty())
        return "mdsplit: jobs " + use.overlap_first + " and " + use.overlap_second +
               " share the device of " + job.config + " (" +
               (config.device.kind == DeviceKind::Raid5 ? "raid5" : "bfq") +
               ") and may run at the same time, but it needs one owner: add thread=1 so they "
               "share it in one process, or stonewall so they run one after another";
    // A device has one page cache (the bdev inode's mapping), which direct
    // I/O keeps coherent (block/fops.c). Forked jobs each have their own:
    // with buffered I/O and a writer, one would read what the other's cache
    // holds back or no longer matches. Per device (stack file and filename).
    StackUse dev = stack_use(self, &job.filename);
    if (dev.buffered && dev.writes && !job.thread && !dev.overlap_first.empty())
        return "mdsplit: jobs " + dev.overlap_first + " and " + dev.overlap_second +
               " share the device of " + job.config +
               " with buffered I/O (direct=0) and writes, and may run at the same time, but "
               "forked processes each keep their own page cache, so one would read stale "
               "data: add thread=1 so they share one page cache in one process, or stonewall "
               "so they run one after another";
    // Forked jobs each own a copy of the device; on files the copies share
    // the data, in ram each process has its own empty memory: a job that
    // reads what another wrote would read zeroes.
    bool in_memory =
        std::any_of(config.members.begin(), config.members.end(),
                    [](const MemberConfig& m) { return m.backend == BackendKind::Ram; });
    if (in_memory && !job.thread)
        if (std::string r = ram_reader_refusal(
                self, [](const PlanJob& t) { return !t.thread; },
                "as forked processes each has its own empty memory; allowed: "
                "thread=1 (one device in one process), or members on files");
            !r.empty())
            return r;
    // With create_serialize=0 each thread sets its device up as it starts:
    // the device of a job that has ended is gone by then, and its memory.
    if (in_memory && !job.create_serialize)
        return ram_reader_refusal(
            self, [](const PlanJob& t) { return !t.create_serialize; },
            "with create_serialize=0 each job sets its device up as it starts, "
            "when an earlier job's may be gone with its memory; allowed: "
            "create_serialize=1 (the default), or members on files");
    return "";
}

// ---- Stack files: inputs, members, traces -------------------------------------

const std::optional<StackConfig>& RunPlan::stack_of(size_t i) {
    static const std::optional<StackConfig> none;
    if (jobs_[i].config.empty()) return none;
    auto [it, added] = stacks_.try_emplace(config_path(i));
    if (added) {
        try {
            it->second = load_stack_file(at(jobs_[i].config));
        } catch (const std::exception&) {
        }
    }
    return it->second;
}

// The run's inputs, which no output of the engine (a sidecar, a trace) may
// replace: every job's stack file and the file members of its stack, by
// file_identity(), as "the stack file s.toml" or "members[1] of s.toml" (the
// first job that names it).
std::map<std::string, std::string> RunPlan::run_inputs() {
    std::map<std::string, std::string> inputs;
    std::set<std::string> seen;  // config_path() of the stack files taken
    for (size_t i = 0; i < jobs_.size(); i++) {
        const PlanJob& job = jobs_[i];
        if (!job.ours || job.config.empty() || !seen.insert(config_path(i)).second) continue;
        inputs.emplace(file_identity(at(job.config)), "the stack file " + job.config);
        const std::optional<StackConfig>& config = stack_of(i);
        for (size_t k = 0; config && k < config->members.size(); k++)
            if (config->members[k].backend == BackendKind::IoUring)
                inputs.emplace(file_identity(config->members[k].path),
                               "members[" + std::to_string(k) + "] of " + job.config);
    }
    return inputs;
}

// What writing `path` would destroy among the run's inputs, "" when nothing.
std::string RunPlan::input_at(const std::string& path) {
    if (!inputs_) inputs_ = run_inputs();
    auto it = inputs_->find(file_identity(at(path)));
    return it == inputs_->end() ? "" : it->second;
}

// The trace file of some job of the run that `path` names, as
// "the trace file md0.blktrace.0 of job j", or "".
std::string RunPlan::trace_file_at(const std::string& path) {
    std::string id = file_identity(at(path));
    for (size_t i = 0; i < jobs_.size(); i++) {
        std::string dir = trace_dir(i);
        if (!jobs_[i].ours || dir.empty() || jobs_[i].filename.empty()) continue;
        const std::optional<StackConfig>& config = stack_of(i);
        std::vector<std::string> traces;
        try {
            if (config) traces = Stack::trace_paths(*config, dir, jobs_[i].filename);
        } catch (const std::exception&) {
            continue;  // that job reports its own filename
        }
        for (const std::string& trace : traces)
            if (file_identity(at(trace)) == id)
                return "the trace file " + trace + " of job " + jobs_[i].name;
    }
    return "";
}

// Another job of the run that reaches one of self's members through a
// device of its own while both devices exist (threads: one process holds
// every stack) or may run at the same time, when either device is a raid5
// and either job may write: two stripe caches and parities over the same
// member corrupt the array.
std::string RunPlan::member_rival_refusal(size_t self, const StackConfig& config) {
    std::set<std::string> ours;
    for (const MemberConfig& m : config.members)
        if (m.backend == BackendKind::IoUring) ours.insert(file_identity(m.path));
    const std::string key = stack_key(self);
    const PlanJob& mine = jobs_[self];
    // By config_path(): the path of its first member that is one of ours
    // ("" for none), so each stack file is looked at once.
    std::map<std::string, std::string> shared_member;
    for (size_t i = 0; i < jobs_.size(); i++) {
        const PlanJob& job = jobs_[i];
        if (i == self || !job.ours || job.config.empty() || stack_key(i) == key) continue;
        if (!mine.writes && !job.writes) continue;
        bool coexist = (mine.thread && job.thread) ||
                       (job.number < mine.number ? may_overlap(i, self) : may_overlap(self, i));
        if (!coexist) continue;
        auto [shared, added] = shared_member.try_emplace(config_path(i));
        if (added) {
            const std::optional<StackConfig>& other = stack_of(i);
            if (!other || (config.device.kind != DeviceKind::Raid5 &&
                           other->device.kind != DeviceKind::Raid5))
                continue;
            for (const MemberConfig& m : other->members)
                if (m.backend == BackendKind::IoUring && ours.count(file_identity(m.path))) {
                    shared->second = m.path;
                    break;
                }
        }
        if (!shared->second.empty())
            return "mdsplit: job " + mine.name + " and job " + job.name + " (" + shared->second +
                   ") reach one member through two devices (another mdsplit_config or filename) "
                   "that may be in use at once, one of them a raid5 with its own stripe cache "
                   "and parity: writing would corrupt the array; allowed: the same "
                   "mdsplit_config and filename for both with thread=1 (one shared device), or "
                   "forked jobs with a stonewall between them";
    }
    return "";
}

// The trace files are truncated as the device opens: never over an input.
std::string RunPlan::trace_outputs_refusal(size_t self, const StackConfig& config) {
    const std::string dir = trace_dir(self);
    if (dir.empty()) return "";
    if (std::string rival = trace_refusal(self); !rival.empty()) return rival;
    for (const std::string& path : Stack::trace_paths(config, dir, jobs_[self].device)) {
        if (std::string input = input_at(path); !input.empty())
            return "mdsplit: mdsplit_trace=" + dir + ": its file " + path + " is " + input +
                   ": the trace would overwrite it; allowed: a directory where no member or "
                   "stack file of the run has a trace file's name";
        if (std::string holder = file_claim_holder(at(path)); !holder.empty())
            return "mdsplit: mdsplit_trace=" + dir + ": its file " + path + " is a member " +
                   holder +
                   ": the trace would overwrite it; allowed: a directory where no member in "
                   "use has a trace file's name";
    }
    return "";
}

std::string RunPlan::stats_outputs_refusal(size_t self) {
    const std::string path = stats_path(self);
    if (path.empty()) return "";
    if (std::string input = input_at(path); !input.empty())
        return "mdsplit: mdsplit_stats=" + path + " is " + input +
               ": the sidecar would overwrite it; allowed: a file that is neither a member nor "
               "a stack file of the run";
    if (std::string holder = file_claim_holder(at(path)); !holder.empty())
        return "mdsplit: mdsplit_stats=" + path + " is a member " + holder +
               ": the sidecar would overwrite it; allowed: a file that is no member in use";
    if (std::string use = find_file_use(at(path)); !use.empty())
        return "mdsplit: mdsplit_stats=" + path + " is " + use +
               ": the sidecar would replace it; allowed: a file that no loop device or swap "
               "area uses";
    if (std::string trace = sidecar_is_stream(at(path)) ? "" : trace_file_at(path); !trace.empty())
        return "mdsplit: mdsplit_stats=" + path + " is " + trace +
               ": the sidecar would replace it; allowed: a file that is not a trace file of "
               "the run";
    return stats_rival_refusal(self);
}

std::string RunPlan::file_of_run(const std::string& path) {
    if (std::string input = input_at(path); !input.empty()) return input;
    if (std::string trace = trace_file_at(path); !trace.empty()) return trace;
    return find_file_use(at(path));
}

std::string RunPlan::output_refusal(size_t self, const StackConfig& config) {
    if (std::string why = trace_outputs_refusal(self, config); !why.empty()) return why;
    if (std::string why = trace_agreement_refusal(self); !why.empty()) return why;
    return stats_outputs_refusal(self);
}

// ---- fio's own files ---------------------------------------------------------

void RunPlan::set_fio_files(std::string report_identity, std::vector<std::string> job_files) {
    fio_report_identity_ = std::move(report_identity);
    fio_job_files_ = std::move(job_files);
}

// The file of fio's own that `path` is (by file_identity()), as "fio's job
// file run.fio", "fio's report (...)", "the write_bw_log file x_bw.1.log of
// job j", or "".
std::string RunPlan::fio_file_at(const std::string& path) const {
    std::string id = file_identity(at(path));
    // First: "--output FILE" puts the report's name among the arguments.
    if (!fio_report_identity_.empty() && id == fio_report_identity_)
        return "fio's report (--output, or the file of its stdout)";
    for (const std::string& file : fio_job_files_)
        if (file_identity(at(file)) == id) return "fio's job file " + file;
    for (const PlanJob& job : jobs_)
        for (const auto& [option, file] : job.fio_files)
            if (file_identity(at(file)) == id)
                return "the " + option + " file " + file + " of job " + job.name;
    return "";
}

std::string RunPlan::fio_file_refusal(const StackConfig& config) const {
    for (size_t i = 0; i < config.members.size(); i++) {
        const MemberConfig& m = config.members[i];
        if (m.backend != BackendKind::IoUring) continue;
        if (std::string file = fio_file_at(m.path); !file.empty())
            return make_config_error(
                       config.source, "members[" + std::to_string(i) + "].path",
                       in_quotes(m.path) + " is " + file + ": member data would overwrite it",
                       "a member file that is none of fio's own (job files, "
                       "--output, write_iolog and write_*_log files)")
                .what();
    }
    return "";
}

}  // namespace mdsplit
