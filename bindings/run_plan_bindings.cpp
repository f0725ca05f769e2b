// mdsplit.plan_run(): the run plan (engine/stack/run_plan.h) of a job file's
// jobs, so harness simulate refuses a run with the engine's own lines, in
// the engine's order, and takes the engine's decisions (which jobs share a
// stack, how each stack opens, where sidecars and traces go) instead of
// keeping a copy of its rules. Beside it, the engine's other lines that
// simulate reports: engine_line(), write_sidecar(), lost_writeback_line().
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/resolved_path.h"
#include "py_args.h"
#include "stack/clean_stop.h"
#include "stack/run_plan.h"
#include "stack/sidecar_file.h"
#include "stack/storage_probe.h"

namespace py = pybind11;
using namespace mdsplit;

namespace {

// One job dict: PlanJob's fields by name (run_plan.h), absent ones its
// defaults; group_weight is group_weight_text's value when it is one.
PlanJob plan_job(py::handle value, size_t i) {
    py_args::Args a(value, "plan_run: jobs[" + std::to_string(i) + "]");
    a.allow({"name",
             "ours",
             "config",
             "filename",
             "device",
             "number",
             "subjob",
             "thread",
             "stonewall",
             "writes",
             "trims",
             "buffered",
             "verify_only",
             "allow_create",
             "allow_mounted_write",
             "create_serialize",
             "stats",
             "trace",
             "mdsplit_group",
             "cgroup",
             "group_weight_text",
             "ioscheduler",
             "files",
             "unlink",
             "unlink_each_loop"});
    PlanJob j;
    j.name = a.string("name", j.name);
    j.ours = a.boolean("ours", j.ours);
    j.config = a.string("config", "");
    j.filename = a.string("filename", "");
    j.device = a.string("device", j.filename);
    j.number = uint32_t(a.integer("number", i + 1, 0, UINT32_MAX));
    j.subjob = uint32_t(a.integer("subjob", 0, 0, UINT32_MAX));
    j.thread = a.boolean("thread", false);
    j.stonewall = a.boolean("stonewall", false);
    j.writes = a.boolean("writes", false);
    j.trims = a.boolean("trims", false);
    j.buffered = a.boolean("buffered", false);
    j.verify_only = a.boolean("verify_only", false);
    j.allow_create = a.boolean("allow_create", true);
    j.allow_mounted_write = a.boolean("allow_mounted_write", false);
    j.create_serialize = a.boolean("create_serialize", true);
    j.stats = a.string("stats", "");
    j.trace = a.string("trace", "");
    j.mdsplit_group = a.string("mdsplit_group", "");
    j.cgroup = a.string("cgroup", "");
    j.group_weight_text = a.string("group_weight_text", "");
    if (uint32_t weight = group_weight_of(j.group_weight_text)) j.group_weight = weight;
    j.ioscheduler = a.string("ioscheduler", "");
    j.files = uint32_t(a.integer("files", 1, 0, UINT32_MAX));
    j.unlink = a.boolean("unlink", false);
    j.unlink_each_loop = a.boolean("unlink_each_loop", false);
    return j;
}

// What the report `report` is for the sidecar check: "-" stdout, else a
// path (not yet there: its path); "" for none or a terminal.
std::string report_identity(const py::object& report) {
    if (report.is_none()) return "";
    std::string path = report.cast<std::string>();
    if (path == "-") return descriptor_identity(1);
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISCHR(st.st_mode)) return "";
    return file_identity(path);
}

// The first refusal of the run, job by job in fio's order as the engine's
// setups meet them (RunPlan::option_refusal, setup_refusal, files_refusal;
// device safety is the Stack's as it opens). "" when none.
std::string first_refusal(RunPlan& plan, const std::function<std::string(const std::string&)>& at) {
    for (size_t i = 0; i < plan.jobs().size(); i++) {
        if (!plan.jobs()[i].ours) continue;
        if (std::string why = plan.option_refusal(i); !why.empty()) return why;
        StackConfig config;
        try {
            config = load_stack_file(at(plan.jobs()[i].config));
        } catch (const std::exception&) {
            continue;  // the loader's own line, reported with the stack
        }
        if (std::string why = plan.setup_refusal(i, config); !why.empty()) return why;
        if (std::string why = plan.files_refusal(i, config); !why.empty()) return why;
    }
    return "";
}

// The stacks the run opens (one per RunPlan::stack_key(), in the order of
// their first job) as run_fio_jobs takes them, and each job's.
void add_stacks(const RunPlan& plan, const std::function<std::string(const std::string&)>& at,
                py::dict& out) {
    py::list stacks, jobs;
    std::map<std::string, size_t> index;
    std::vector<bool> bfq;  // per stack: its scheduler is bfq
    for (size_t i = 0; i < plan.jobs().size(); i++) {
        const PlanJob& job = plan.jobs()[i];
        auto [it, added] = index.try_emplace(plan.stack_key(i), index.size());
        if (added) {
            try {
                bfq.push_back(load_stack_file(at(job.config)).device.scheduler ==
                              SchedulerKind::Bfq);
            } catch (const std::exception&) {
                bfq.push_back(false);  // the loader's line, reported with the stack
            }
            StackOptions so = plan.stack_options(i);
            py::dict s;
            s["config"] = plan.resolved(job.config);
            s["source"] = job.config;
            s["label"] = so.label;
            s["trace_dir"] = so.trace_dir.empty() ? "" : at(so.trace_dir);
            s["writable"] = so.writable;
            s["allow_mounted_write"] = so.allow_mounted_write;
            s["create_members"] = so.create_members;
            stacks.append(s);
        }
        py::dict j;
        j["stack"] = it->second;
        std::string stats = plan.stats_path(i);
        j["stats"] = stats.empty() ? "" : at(stats);
        j["stats_shown"] = stats;
        // The group the job's I/O is scheduled in: bfq's only (fio's
        // cgroup= on another scheduler names a group nothing schedules).
        j["group"] = bfq[it->second] ? job.group : "";
        j["group_weight"] = job.group_weight;
        jobs.append(j);
    }
    out["stacks"] = stacks;
    out["jobs"] = jobs;
}

py::dict plan_run(const py::list& list, const std::string& base, const py::object& report,
                  const std::vector<std::string>& job_files) {
    std::vector<PlanJob> jobs;
    for (size_t i = 0; i < list.size(); i++) jobs.push_back(plan_job(list[i], i));
    std::function<std::string(const std::string&)> at = [base](const std::string& p) {
        return std::filesystem::path(p).is_absolute() ? p
                                                      : (std::filesystem::path(base) / p).string();
    };
    RunPlan plan(
        jobs, [at](const std::string& p) { return resolved_path(at(p)); }, base);
    py::dict out;
    // What the report, written after the run, would replace ("" nothing):
    // asked before the plan knows the report as fio's own file.
    bool report_file = !report.is_none() && report.cast<std::string>() != "-";
    out["report_clash"] = report_file ? plan.file_of_run(report.cast<std::string>()) : "";
    plan.set_fio_files(report_identity(report), job_files);
    out["refusal"] = first_refusal(plan, at);
    add_stacks(plan, at, out);
    return out;
}

}  // namespace

// Called from the module's PYBIND11_MODULE (mdsplit_module.cpp).
void register_run_plan(py::module_& m) {
    m.def("plan_run", &plan_run, py::arg("jobs"), py::arg("base"), py::arg("report") = py::none(),
          py::arg("job_files") = std::vector<std::string>{},
          "The engine's run plan of a run of jobs (dicts of engine/stack/run_plan.h's PlanJob "
          "fields, paths relative to `base`): {'refusal': the first refusal, \"\" none; "
          "'report_clash': what the report file `report` (\"-\" stdout) would replace; "
          "'stacks': [run_fio_jobs' stack dicts]; 'jobs': [{'stack', 'stats', 'stats_shown', "
          "'group' (its bfq group, \"\" none), 'group_weight'}]}.");
    m.def("sidecar_is_stream", &sidecar_is_stream, py::arg("path"),
          "Whether a sidecar path is a stream (each job appends its document) as the engine "
          "decides: a character device, a FIFO, or an open descriptor.");
    m.def("file_identity", &file_identity, py::arg("path"),
          "What a path names, whichever name it goes by, as the engine compares files.");
    m.def("engine_line", &engine_line, py::arg("message"),
          "The one line the engine reports for an error message (\"mdsplit: \" before it).");
    m.def("write_sidecar", &write_sidecar, py::arg("shown"), py::arg("path"), py::arg("text"),
          "Writes a sidecar as the engine does (a stream appended, a file replaced whole); "
          "\"\" when written, else the engine's line.");
    m.def("lost_writeback_line", &lost_writeback_line, py::arg("label"), py::arg("pages"),
          "The engine's line for a buffered job's write-back that failed unreported.");
    m.def("write_behind_line", &write_behind_line, py::arg("errors"),
          "The line for member writes that failed on the host behind a virtual run.");
}
