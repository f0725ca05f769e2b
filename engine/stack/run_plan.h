// The run-wide decisions of a run of fio jobs over stack files, made from
// plain descriptions of the jobs (no fio types): which jobs share a stack,
// which stacks are written and by whom, where sidecars and traces go, and
// every refusal of a job, its own options' and its clashes with the others,
// each with its one line. The fio glue (engine/fio/mdsplit_engine.cpp)
// describes fio's thread_data as PlanJobs; harness simulate describes its
// job file's jobs the same way through the bindings (mdsplit.plan_run), so
// both refuse a run alike and open the same stacks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/stack_config.h"
#include "stack/sidecar_file.h"
#include "stack/stack.h"
#include "stack/time_scale_auto.h"

namespace mdsplit {

// One job of the run, in fio's job order (numjobs' subjobs included).
struct PlanJob {
    std::string name = "?";  // fio's [section]
    // Runs this engine. Other jobs count only for the run's order
    // (stonewalls), its threads and its forked processes.
    bool ours = true;
    std::string config;      // mdsplit_config as written ("" none)
    std::string filename;    // filename= as written
    std::string device;      // the file fio opens (its files[0]), the device's label
    uint32_t number = 0;     // fio's thread_number: a forked job's stack is its own
    uint32_t subjob = 0;     // subjob_number within numjobs
    bool thread = false;     // thread=1: shares the process, and its stacks
    bool stonewall = false;  // starts once every job before it has ended
    bool writes = false;     // may write: writes, trims, or replays a log
    bool buffered = false;   // direct=0
    bool verify_only = false;
    bool allow_create = true;          // allow_file_create
    bool allow_mounted_write = false;  // allow_mounted_write=1
    bool create_serialize = true;
    std::string stats;  // mdsplit_stats as written ("" none)
    std::string trace;  // mdsplit_trace as written ("" none)
    // The bfq group its I/O is charged to: mdsplit_group, else cgroup=
    // (RunPlan sets it when left empty).
    std::string group;
    std::string mdsplit_group;  // mdsplit_group as written ("" none)
    std::string cgroup;         // fio's cgroup=
    uint32_t group_weight = 100;
    std::string group_weight_text;  // mdsplit_group_weight as written ("" unset)
    std::string ioscheduler;        // fio's ioscheduler= ("" unset)
    uint32_t files = 1;             // the files fio made of filename= (files_index)
    uint32_t nr_files = 1;          // fio's nrfiles=
    bool trims = false;             // rw=trim, randtrim or trimwrite
    bool unlink = false;            // unlink=1
    bool unlink_each_loop = false;  // unlink_each_loop=1
    bool pre_read = false;          // pre_read=1
    uint32_t trim_percentage = 0;   // trim_percentage=
    // What it does on its device, for time_scale = "auto" (name and group
    // are the job's own; RunPlan sets them).
    AutoScaleJob load;
    // fio's own output files of this job: (option, path), such as
    // ("write_bw_log", "x_bw.1.log") or ("write_iolog", "w.log").
    std::vector<std::pair<std::string, std::string>> fio_files;
};

// What the whole run does with one stack file (or one device of it).
struct StackUse {
    std::vector<std::string> jobs;  // the jobs that name it, in job order
    bool writes = false;            // any of them may write
    // Every one that may write sets allow_mounted_write=1: the override
    // belongs to the writers, whichever job runs setup.
    bool writers_allow_mounted = true;
    // Two of them that fio may run at the same time (no stonewall between
    // them), one at least a forked process with a copy of the device of its
    // own: empty when fio's ordering keeps them apart or all are threads.
    std::string overlap_first, overlap_second;
    bool buffered = false;  // one of them does buffered I/O (direct=0)
    bool create = true;     // none of them sets allow_file_create=0
};

class RunPlan {
public:
    // `resolve`: a path as open(2) reaches it (resolved_path(); the engine
    // caches it for the run). `base`: the directory the jobs' relative
    // paths start from ("" the working directory, as fio's); messages
    // show paths as the jobs write them.
    using Resolve = std::function<std::string(const std::string&)>;
    RunPlan(std::vector<PlanJob> jobs, Resolve resolve, std::string base = "");

    const std::vector<PlanJob>& jobs() const { return jobs_; }
    std::string resolved(const std::string& path) const { return resolve_(path); }

    // The jobs naming job `self`'s stack file (resolved); with `device`,
    // only those naming that device of it (their filename=).
    StackUse stack_use(size_t self, const std::string* device = nullptr) const;
    // The key of the stack a job opens: threads naming one stack file and
    // one device share it; a forked job's is its own.
    std::string stack_key(size_t i) const;
    // Two threads naming the same stack file and filename: one stack.
    bool shares_stack(size_t a, size_t b) const;
    // fio may run jobs a and b (a before b) at the same time.
    bool may_overlap(size_t a, size_t b) const;
    // Job `self`'s stack has it as its one user (a forked job's, or a
    // thread's that no other job names): no locking.
    bool exclusive(size_t self) const;
    // The jobs that will share job `self`'s device: itself and the threads
    // that share its stack (shares_stack()), as time_scale = "auto" takes them.
    std::vector<AutoScaleJob> auto_scale_jobs(size_t self) const;
    // The options of the stack job `self` opens (label its device; under
    // fio's --readonly when `read_only`): opened read-write when any job
    // of the run may write it, members O_DIRECT, trace_dir(), a raid5
    // assembled when the job starts; single_issuer when exclusive() and
    // not buffered.
    StackOptions stack_options(size_t self, bool read_only = false) const;

    // The sidecar a job writes (mdsplit_stats, .N for subjob N unless a
    // stream), and the trace directory (mdsplit_trace, .N for a forked
    // subjob); "" for none.
    std::string stats_path(size_t i) const;
    std::string trace_dir(size_t i) const;

    // Job `self`'s refusals, in the engine's order, each "" when it may
    // run. option_refusal(): its own options, before its stack file is
    // loaded (mdsplit_config, mdsplit_group_weight's text, options the
    // engine cannot honour, create_serialize=0, one filename). Reads no
    // other job's engine options: fio may have freed a forked job's.
    std::string option_refusal(size_t self) const;
    // setup_refusal(): its options against its loaded stack file `config`
    // (mdsplit_group, ioscheduler, cgroup=) and the run's other jobs
    // (thread_cgroup_refusal(), sharing_refusal(), member_rival_refusal()).
    // Device safety (device_safety.h) comes next, then files_refusal():
    // fio_file_refusal(), output_refusal(), and the sidecar's target
    // (sidecar_target_refusal(); fio's report as set_fio_files() gave it).
    std::string setup_refusal(size_t self, const StackConfig& config);
    // All of job `self`'s refusals over `config` after option_refusal():
    // setup_refusal(), device safety over the whole run's use of the stack
    // (check_device_safety(), before anything is made), files_refusal().
    std::string device_refusal(size_t self, const StackConfig& config);
    std::string files_refusal(size_t self, const StackConfig& config);
    std::string thread_cgroup_refusal() const;
    std::string sharing_refusal(size_t self, const StackConfig& config) const;
    // Output clashes: two devices writing one trace directory, jobs of one
    // device naming different ones, two devices writing one sidecar file.
    std::string trace_refusal(size_t self) const;
    std::string trace_agreement_refusal(size_t self) const;
    std::string stats_rival_refusal(size_t self) const;
    // create_serialize=0 beside a forked job (fio frees its options).
    std::string create_serialize_refusal(size_t self) const;
    // Two devices over one member, one a raid5, in use at once.
    std::string member_rival_refusal(size_t self, const StackConfig& config);
    // What job `self`'s traces (in trace_dir(self), for its device over
    // `config`) and sidecar would overwrite: an input of the run (a stack
    // file, a member), a member in use, a file a loop device or swap uses,
    // another job's trace file; another device's traces or sidecar; and
    // jobs of one device naming different trace directories. In the
    // engine's order; "" when none.
    std::string output_refusal(size_t self, const StackConfig& config);
    // fio's own files outside the jobs: its report (descriptor_identity()
    // of its output, "" a terminal) and its job files.
    void set_fio_files(std::string report_identity, std::vector<std::string> job_files);
    // A member of `config` that is one of fio's own files: the loader's line
    // for the first ("" none). Member data would replace it, and fio
    // writes its report and logs over a member.
    std::string fio_file_refusal(const StackConfig& config) const;
    // What writing `path` would destroy among the run's inputs and outputs:
    // a stack file or member, another job's trace file, or a file a loop
    // device or swap area uses; "" when none.
    std::string file_of_run(const std::string& path);

private:
    std::string output_rival(size_t self, const std::string& path,
                             std::string (RunPlan::*path_of)(size_t) const) const;
    std::pair<const PlanJob*, const PlanJob*> separate_writer_and_reader(
        size_t self, bool (*separate)(const PlanJob&)) const;
    std::string ram_reader_refusal(size_t self, bool (*separate)(const PlanJob&),
                                   const char* why) const;
    const PlanJob* group_weight_rival(size_t self) const;
    const PlanJob* trace_disagreement(size_t self) const;
    std::string group_refusal(size_t self) const;
    std::string config_path(size_t i) const;
    std::string at(const std::string& path) const;
    const std::optional<StackConfig>& stack_of(size_t i);
    std::map<std::string, std::string> run_inputs();
    std::string input_at(const std::string& path);
    std::string trace_file_at(const std::string& path);
    std::string trace_outputs_refusal(size_t self, const StackConfig& config);
    std::string stats_outputs_refusal(size_t self);

    std::vector<PlanJob> jobs_;
    Resolve resolve_;
    std::string base_;
    // The stack files of the run's jobs, each loaded at most once (a
    // thousand jobs naming two stack files load two), by resolved path;
    // nullopt for one that does not load (its job reports it).
    std::map<std::string, std::optional<StackConfig>> stacks_;
    std::optional<std::map<std::string, std::string>> inputs_;
    std::string fio_report_identity_;
    std::vector<std::string> fio_job_files_;
    std::string fio_file_at(const std::string& path) const;
};

// resolved_path() of `path`, worked out once for the process: each job's
// plan compares its paths with every other job's, and resolved anew a run of
// N jobs paid N * N walks of the file system. fio does not change its
// working directory while it runs, and nothing the engine creates is a
// symbolic link, so a path resolves alike all run long.
std::string run_resolved_path(const std::string& path);

// The process's command line's arguments that are regular files (fio's job
// files), from /proc/self/cmdline.
std::vector<std::string> command_line_files();

// mdsplit_group_weight's value when `text` is one (a whole number 1..1000,
// decimal or 0x-hexadecimal as fio's str_to_decimal reads it), else 0.
uint32_t group_weight_of(const std::string& text);

// The one line the engine reports for an error: `message`, after
// "mdsplit: " unless it starts with it.
std::string engine_line(const std::string& message);

}  // namespace mdsplit
