// RunPlan (run_plan.h): a run's jobs, as plain descriptions, and the
// decisions across them. Job order is fio's; a stonewall job starts once
// every job before it has ended (backend.c run_threads).
#include "stack/run_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "base/resolved_path.h"
#include "config/config_error.h"
#include "stack/device_safety.h"
#include "stack/member_claim.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {

RunPlan::RunPlan(std::vector<PlanJob> jobs, Resolve resolve, std::string base)
    : jobs_(std::move(jobs)), resolve_(std::move(resolve)), base_(std::move(base)) {}

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

// ---- Stack files: inputs, members, traces -------------------------------------

std::string file_identity(const std::string& path) {
    struct stat st;
    if (path.empty()) return "path:";
    if (stat(path.c_str(), &st) != 0) return "path:" + resolved_path(path);
    if (S_ISBLK(st.st_mode)) return "dev:" + std::to_string(st.st_rdev);
    return "file:" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

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
