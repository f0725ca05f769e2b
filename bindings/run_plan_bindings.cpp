// mdsplit.run_plan_refusal(): the run plan's refusals (engine/stack/run_plan.h)
// for a job file's jobs, so harness simulate refuses a run with the
// engine's own line and keeps no copy of its rules.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/resolved_path.h"
#include "py_args.h"
#include "stack/run_plan.h"
#include "stack/storage_probe.h"

namespace py = pybind11;
using namespace mdsplit;

namespace {

// One job dict: PlanJob's fields by name (run_plan.h), absent ones its defaults.
PlanJob plan_job(py::handle value, size_t i) {
    py_args::Args a(value, "run_plan_refusal: jobs[" + std::to_string(i) + "]");
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
             "buffered",
             "verify_only",
             "allow_create",
             "allow_mounted_write",
             "create_serialize",
             "stats",
             "trace",
             "group",
             "cgroup",
             "group_weight"});
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
    j.buffered = a.boolean("buffered", false);
    j.verify_only = a.boolean("verify_only", false);
    j.allow_create = a.boolean("allow_create", true);
    j.allow_mounted_write = a.boolean("allow_mounted_write", false);
    j.create_serialize = a.boolean("create_serialize", true);
    j.stats = a.string("stats", "");
    j.trace = a.string("trace", "");
    j.group = a.string("group", "");
    j.cgroup = a.string("cgroup", "");
    j.group_weight = uint32_t(a.integer("group_weight", 100, 1, 1000));
    return j;
}

// The first refusal of the run, job by job in fio's order as the engine's
// setups meet them: the run's threads and cgroups, create_serialize=0, then
// how each job shares its stack and its members with the others, and the
// trace directory of a shared device. Paths as the jobs write
// them, relative to `base` (the job file's directory). "" when none.
std::string run_plan_refusal(const py::list& list, const std::string& base) {
    std::vector<PlanJob> jobs;
    for (size_t i = 0; i < list.size(); i++) jobs.push_back(plan_job(list[i], i));
    auto at = [base](const std::string& p) {
        return std::filesystem::path(p).is_absolute() ? p
                                                      : (std::filesystem::path(base) / p).string();
    };
    RunPlan plan(
        jobs, [at](const std::string& p) { return resolved_path(at(p)); }, base);
    for (size_t i = 0; i < jobs.size(); i++) {
        if (!jobs[i].ours) continue;
        if (std::string why = plan.create_serialize_refusal(i); !why.empty()) return why;
        StackConfig config;
        try {
            config = load_stack_file(at(jobs[i].config));
        } catch (const std::exception&) {
            continue;  // the loader's own line, reported with the stack
        }
        if (std::string why = plan.thread_cgroup_refusal(); !why.empty()) return why;
        if (std::string why = plan.sharing_refusal(i, config); !why.empty()) return why;
        if (std::string why = plan.member_rival_refusal(i, config); !why.empty()) return why;
        if (std::string why = plan.trace_agreement_refusal(i); !why.empty()) return why;
    }
    return "";
}

}  // namespace

// Called from the module's PYBIND11_MODULE (mdsplit_module.cpp).
void register_run_plan(py::module_& m) {
    m.def("run_plan_refusal", &run_plan_refusal, py::arg("jobs"), py::arg("base"),
          "The engine's refusal of a run of jobs (dicts of engine/stack/run_plan.h's PlanJob "
          "fields), \"\" when it may run.");
}
