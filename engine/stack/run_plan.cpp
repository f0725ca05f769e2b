// RunPlan (run_plan.h): a run's jobs, as plain descriptions, and the
// decisions across them. Job order is fio's; a stonewall job starts once
// every job before it has ended (backend.c run_threads).
#include "stack/run_plan.h"

#include <sys/stat.h>

#include <algorithm>

namespace mdsplit {

RunPlan::RunPlan(std::vector<PlanJob> jobs, Resolve resolve)
    : jobs_(std::move(jobs)), resolve_(std::move(resolve)) {}

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

// ---- Sidecars and traces ------------------------------------------------------

std::vector<std::filesystem::path> link_chain(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path p = fs::absolute(path, ec);
    if (ec) p = path;
    std::vector<fs::path> chain{p};
    for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); hops++) {
        fs::path link = fs::read_symlink(p, ec);
        if (ec) break;
        p = link.is_absolute() ? link : p.parent_path() / link;
        chain.push_back(p);
    }
    return chain;
}

namespace {

// A path that names an open descriptor of the process: /dev/stderr,
// /dev/fd/N, /proc/self/fd/N (through any link).
bool names_descriptor(const std::string& path) {
    for (const auto& hop : link_chain(path)) {
        std::string s = hop.string();
        for (const char* prefix : {"/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"})
            if (s.rfind(prefix, 0) == 0) return true;
        if (s.rfind("/proc/", 0) != 0) continue;
        size_t digits = s.find_first_not_of("0123456789", 6);  // /proc/PID/fd/
        if (digits != std::string::npos && digits > 6 && s.compare(digits, 4, "/fd/") == 0)
            return true;
    }
    return false;
}

}  // namespace

bool sidecar_is_stream(const std::string& path) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) return true;
    return names_descriptor(path);
}

std::string RunPlan::stats_path(size_t i) const {
    const PlanJob& job = jobs_[i];
    if (job.stats.empty()) return "";
    std::string path = job.stats;
    if (job.subjob && !sidecar_is_stream(path)) path += "." + std::to_string(job.subjob);
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
    if (path.empty() || sidecar_is_stream(path)) return "";
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
    if (in_memory && !job.thread) {
        auto [writer, reader] =
            separate_writer_and_reader(self, [](const PlanJob& t) { return !t.thread; });
        if (writer && reader)
            return "mdsplit: job " + reader->name + " reads what job " + writer->name +
                   " writes on the ram members of " + job.config +
                   ", but as forked processes each has its own empty memory; allowed: "
                   "thread=1 (one device in one process), or members on files";
    }
    // With create_serialize=0 each thread sets its device up as it starts:
    // the device of a job that has ended is gone by then, and its memory.
    if (in_memory && !job.create_serialize) {
        auto [writer, reader] =
            separate_writer_and_reader(self, [](const PlanJob& t) { return !t.create_serialize; });
        if (writer && reader)
            return "mdsplit: job " + reader->name + " reads what job " + writer->name +
                   " writes on the ram members of " + job.config +
                   ", but with create_serialize=0 each job sets its device up as it starts, "
                   "when an earlier job's may be gone with its memory; allowed: "
                   "create_serialize=1 (the default), or members on files";
    }
    return "";
}

}  // namespace mdsplit
