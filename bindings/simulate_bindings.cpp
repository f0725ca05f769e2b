// mdsplit.run_fio_jobs(): fio jobs (parsed by harness/jobfile.py, turned
// into FioJobSpec dicts by harness/simulate.py) on one virtual clock
// (engine/core/fio_job_model.h). Stacks are built from their TOML files as
// the engine builds them (load_stack_file, StackOptions from the job).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sys/stat.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "config/config_loader.h"
#include "py_args.h"
#include "python_interrupt.h"
#include "sim/fio_job_model.h"
#include "stack/device_safety.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace py = pybind11;
using namespace mdsplit;

namespace {

struct SimulatedStacks {
    VirtualClock clock;
    std::vector<StackConfig> configs;
    std::vector<StackOptions> options;
    std::vector<std::unique_ptr<Stack>> stacks;
    std::vector<std::string> stats;    // sidecar JSON, taken when the last job ends
    uint64_t write_behind_errors = 0;  // real writes behind the model that failed
    std::vector<std::string> notices;  // Stack::member_failure_notice() lines
    // The run's failed members (member_failures.h): a stack opened after
    // another failed a member takes it as failed too.
    std::unique_ptr<MemberFailures> failures = std::make_unique<MemberFailures>();

    static Stack* open(void* ctx, size_t i) {
        auto* self = static_cast<SimulatedStacks*>(ctx);
        self->stacks[i] = std::make_unique<Stack>(self->configs[i], self->clock, self->options[i]);
        self->stacks[i]->take_member_failures(*self->failures);
        return self->stacks[i].get();
    }
    static void done(void* ctx, size_t i) {
        auto* self = static_cast<SimulatedStacks*>(ctx);
        self->stats[i] = self->stacks[i]->stats_json();
        self->stacks[i]->record_member_failures(*self->failures);
        std::string failed = self->stacks[i]->member_failure_notice();
        if (!failed.empty()) self->notices.push_back(std::move(failed));
        for (MemberQueue* m : self->stacks[i]->members())
            self->write_behind_errors += m->write_behind_errors();
        self->stacks[i]->flush_traces();  // throws on a trace write error
        self->stacks[i].reset();
    }
};

using py_args::Args;

// A direction's block sizes: [(bytes, weight), ...] (a bssplit list, or one
// entry); a block size of 0 would divide by zero in the job's setup.
std::vector<FioBlockSize> block_sizes(const Args& a, const char* key) {
    std::vector<FioBlockSize> out;
    py::object list = a.get(key);
    if (!py::isinstance<py::list>(list) && !py::isinstance<py::tuple>(list))
        py_args::fail(a.where(key), "expected a list, got " + py_args::type_name(list),
                      "[(bytes, weight), ...]");
    size_t i = 0;
    for (const py::handle& e : list) {
        std::string where = a.where(key) + "[" + std::to_string(i++) + "]";
        if (!(py::isinstance<py::list>(e) || py::isinstance<py::tuple>(e)) || py::len(e) != 2)
            py_args::fail(where, "expected a (bytes, weight) pair, got " + py_args::type_name(e),
                          "(bytes >= 1, weight 0..100)");
        py::sequence pair = py::reinterpret_borrow<py::sequence>(e);
        out.push_back(
            FioBlockSize{py_args::checked(pair[0], where + ": bytes", 1, py_args::kU64Max),
                         uint32_t(py_args::checked(pair[1], where + ": weight", 0, 100))});
    }
    return out;
}

// bs_max / align: one value per direction (read, write, trim).
std::array<uint64_t, kFioDirections> per_direction(const Args& a, const char* key) {
    py::object v = a.get(key);
    if (!(py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) ||
        py::len(v) != kFioDirections)
        py_args::fail(a.where(key), "expected 3 values, got " + py_args::type_name(v),
                      "[read, write, trim] of ints >= 0");
    py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
    std::array<uint64_t, kFioDirections> out{};
    for (size_t d = 0; d < kFioDirections; d++)
        out[d] = py_args::checked(seq[d], a.where(key) + "[" + std::to_string(d) + "]", 0,
                                  py_args::kU64Max);
    return out;
}

// "trim": "" (no trims), "trim" (rw=trim/randtrim), "trimwrite" (rw=trimwrite/randtrimwrite).
FioTrim trim_of(const Args& a) {
    std::string v = a.string("trim", "");
    if (v.empty()) return FioTrim::None;
    if (v == "trim") return FioTrim::Only;
    if (v == "trimwrite") return FioTrim::ThenWrite;
    py_args::fail(a.where("trim"), "\"" + v + "\"", "\"\", trim, trimwrite");
}

// What a job does (fio's rw, rwmixread, bs/bsrange/bssplit, blockalign,
// offset, size, loops, randseed).
void read_pattern(const Args& a, FioJobSpec& s) {
    s.random = a.boolean("random", false);
    s.read_pct = uint32_t(a.integer("read_pct", 100, 0, 100));
    s.trim = trim_of(a);
    const char* const kBsKeys[kFioDirections] = {"bs_read", "bs_write", "bs_trim"};
    for (size_t d = 0; d < kFioDirections; d++)
        if (a.has(kBsKeys[d])) s.bs[d] = block_sizes(a, kBsKeys[d]);
    if (a.has("bs_max")) s.bs_max = per_direction(a, "bs_max");
    if (a.has("align")) s.align = per_direction(a, "align");
    s.offset = a.integer("offset", 0);
    s.offset_pct = uint32_t(a.integer("offset_pct", 0, 0, 100));
    s.offset_increment = a.integer("offset_increment", 0);
    s.offset_increment_pct = uint32_t(a.integer("offset_increment_pct", 0, 0, 100));
    s.subjob = uint32_t(a.integer("subjob", 0, 0, py_args::kU32Max));
    s.size = a.integer("size", 0);
    s.io_size = a.integer("io_size", 0);
    s.size_pct = uint32_t(a.integer("size_pct", 0, 0, 100));
    s.io_size_pct = uint32_t(a.integer("io_size_pct", 0, 0, 100));
    s.loops = uint32_t(a.integer("loops", 1, 1, py_args::kU32Max));
    s.norandommap = a.boolean("norandommap", false);
    s.seed = a.integer("seed", 0);
}

// How it issues them (iodepth, iodepth_batch_submit, direct, fsync, rate,
// thinktime, verify, continue_on_error, fio's own CPU costs).
void read_issue(const Args& a, FioJobSpec& s) {
    using py_args::kU32Max;
    s.iodepth = uint32_t(a.integer("iodepth", 1, 1, py_args::kMaxIodepth));
    s.batch = uint32_t(a.integer("batch", 1, 1, py_args::kMaxIodepth));
    s.direct = a.boolean("direct", true);
    s.invalidate = a.boolean("invalidate", false);
    s.dsync = a.boolean("dsync", false);
    s.fadvise = py_args::fadvise_from(a.where("fadvise"), a.string("fadvise", "none"));
    s.fsync_blocks = uint32_t(a.integer("fsync_blocks", 0, 0, kU32Max));
    s.end_fsync = a.boolean("end_fsync", false);
    s.rate_iops = a.integer("rate_iops", 0, 0, kU32Max);
    s.think_ns = a.time_ns("think_ns");
    // thinktime_blocks=0 would silently never think.
    s.think_blocks = uint32_t(a.integer("think_blocks", 1, 1, kU32Max));
    s.verify = a.boolean("verify", false);
    s.continue_on_error = uint32_t(
        a.integer("continue_on_error", 0, 0, kFioErrorRead | kFioErrorWrite | kFioErrorVerify));
    if (a.has("fio_submit_ns")) s.fio_submit_ns = a.cost_ns("fio_submit_ns", 0);
    if (a.has("fio_complete_ns")) s.fio_complete_ns = a.cost_ns("fio_complete_ns", 0);
}

// When (startdelay, runtime, ramp_time, time_based).
void read_times(const Args& a, FioJobSpec& s) {
    s.start_delay_ns = a.time_ns("start_delay_ns");
    s.runtime_ns = a.time_ns("runtime_ns");
    s.ramp_ns = a.time_ns("ramp_ns");
    s.time_based = a.boolean("time_based", false);
    // fio runs a time_based job without a runtime until it is killed.
    if (s.time_based && !s.runtime_ns)
        py_args::fail(a.where("time_based"), "True needs a runtime_ns > 0",
                      "False, or True with runtime_ns");
}

// One job dict into its spec, each value checked as fio checks its option
// or as the model needs it; `nr_stacks` and `nr_jobs` bound "stack" and
// "phase" (a stonewall count: at most one more per job).
FioJobSpec job_spec(const Args& a, size_t index, size_t nr_stacks, size_t nr_jobs) {
    a.allow({"name",
             "stack",
             "phase",
             "pid",
             "group",
             "group_weight",
             "prio",
             "prioclass",
             "random",
             "read_pct",
             "trim",
             "bs_read",
             "bs_write",
             "bs_trim",
             "bs_max",
             "align",
             "offset",
             "offset_pct",
             "offset_increment",
             "offset_increment_pct",
             "subjob",
             "size",
             "io_size",
             "size_pct",
             "io_size_pct",
             "loops",
             "norandommap",
             "seed",
             "iodepth",
             "batch",
             "direct",
             "invalidate",
             "dsync",
             "fadvise",
             "fsync_blocks",
             "end_fsync",
             "rate_iops",
             "think_ns",
             "think_blocks",
             "verify",
             "continue_on_error",
             "fio_submit_ns",
             "fio_complete_ns",
             "start_delay_ns",
             "runtime_ns",
             "ramp_ns",
             "time_based"});
    FioJobSpec s;
    s.name = a.string("name", "job" + std::to_string(index));
    s.where = a.where();  // the model's messages name "run_fio_jobs: jobs[i]", as these do
    if (!nr_stacks) py_args::fail(a.where(), "a job without a stack", "one stack dict or more");
    s.stack = a.integer("stack", 0, 0, nr_stacks - 1);
    s.phase = a.integer("phase", 0, 0, nr_jobs - 1, "a stonewall count: one more at most per job");
    s.pid = uint32_t(a.integer("pid", 1000 + index, 0, py_args::kU32Max));
    s.sched = py_args::sched_identity(a);
    read_pattern(a, s);
    read_issue(a, s);
    // As the engine's setup: a buffered job's discard is not emulated.
    if (s.trim != FioTrim::None && !s.direct)
        py_args::fail(a.where("trim"), "\"" + a.string("trim", "") + "\" with direct=False",
                      "direct=True for a job that trims, or no trim");
    read_times(a, s);
    return s;
}

py::dict latency_dict(const FioLatency& l) {
    py::dict d;
    d["n"] = l.n;
    d["min"] = l.n ? l.min : 0;
    d["max"] = l.max;
    d["sum"] = l.sum;
    d["sum_sq"] = l.sum_sq;
    py::list hist;  // sparse: [[bucket, count], ...]
    for (size_t i = 0; i < l.hist.size(); i++)
        if (l.hist[i]) hist.append(py::make_tuple(i, l.hist[i]));
    d["hist"] = hist;
    return d;
}

py::dict direction_dict(const FioDirectionResult& r) {
    py::dict d;
    d["ios"] = r.ios;
    d["bytes"] = r.bytes;
    d["errors"] = r.errors;
    d["runtime_ns"] = r.runtime_ns;
    d["slat"] = latency_dict(r.slat);
    d["clat"] = latency_dict(r.clat);
    d["lat"] = latency_dict(r.lat);
    d["lat_ns"] = std::vector<uint64_t>(r.lat_ns.begin(), r.lat_ns.end());
    d["lat_us"] = std::vector<uint64_t>(r.lat_us.begin(), r.lat_us.end());
    d["lat_ms"] = std::vector<uint64_t>(r.lat_ms.begin(), r.lat_ms.end());
    return d;
}

// data = false (simulate --no-data): members on files go nowhere (null
// backends of the same size). The virtual clock never waits on what a real
// backend does (EventLoop::settle), so timing and statistics stay the same;
// only the data (and the sidecar's io_uring counters) are not there, so the
// verify reads of a job on such a stack are timed, not compared. True when
// a member was dropped.
bool drop_member_data(StackConfig& config) {
    bool dropped = false;
    for (MemberConfig& m : config.members) {
        if (m.backend != BackendKind::IoUring) continue;
        if (!m.size) {
            struct stat st;
            if (stat(m.path.c_str(), &st) != 0)
                throw ConfigError("mdsplit: members.path: " + m.path +
                                  " does not exist and has no size");
            m.size = uint64_t(st.st_size);
        }
        m.backend = BackendKind::Null;
        dropped = true;
    }
    return dropped;
}

// stacks: [{"config": PATH, "source": PATH as the job names it (messages; default
//           PATH), "label": "md0", "trace_dir": "", "writable": True,
//           "allow_mounted_write": False, "create_members": True}, ...]
py::dict run_fio_jobs_py(py::handle stacks_arg, py::handle jobs_arg, py::handle data_arg,
                         const py::kwargs& kwargs) {
    py_args::no_other_keywords(kwargs, "run_fio_jobs", "stacks, jobs, data");
    py::sequence stacks =
        py_args::list_or_tuple(stacks_arg, "run_fio_jobs: stacks", "a list of stack dicts");
    py::sequence jobs =
        py_args::list_or_tuple(jobs_arg, "run_fio_jobs: jobs", "a list of job dicts");
    bool data = py_args::boolean(data_arg, "run_fio_jobs: data");
    SimulatedStacks sim;
    std::vector<bool> without_data;  // per stack: a member keeps no data
    for (size_t i = 0; i < stacks.size(); i++) {
        Args a(stacks[i], "run_fio_jobs: stacks[" + std::to_string(i) + "]");
        a.allow({"config", "source", "label", "trace_dir", "writable", "allow_mounted_write",
                 "create_members"});
        if (!a.has("config")) py_args::fail(a.where("config"), "missing", "a str");
        std::string config = a.path("config", "", "a stack file's path (a str)");
        // The stack file as the job names it (mdsplit_config=), for messages.
        std::string source = a.string("source", config);
        StackOptions so;
        so.label = a.string("label", "md0");
        so.trace_dir = a.path("trace_dir", "", "a directory (a str), or \"\"");
        so.writable = a.boolean("writable", true);
        // The engine's device safety: simulate writes the members as fio with
        // the engine would, and the Stack checks and claims them as it opens
        // them. Without data no member is opened; only their overlap is checked.
        so.allow_mounted_write = a.boolean("allow_mounted_write", false);
        // fio's allow_file_create=0 on a job naming the stack: no member file made.
        so.create_members = a.boolean("create_members", true);
        sim.configs.push_back(load_stack_file(config));
        sim.configs.back().source = source;
        if (!data) {
            DeviceSafetyOptions safety;
            safety.writes = false;
            check_device_safety(sim.configs.back(), safety);
        }
        without_data.push_back(!data && drop_member_data(sim.configs.back()));
        so.open_direct = true;  // as the engine: members stay O_DIRECT
        // Writes to timed member files complete at their modelled time while
        // the host writes them behind (WriteBehindDelivery).
        so.write_behind = true;
        sim.options.push_back(so);
    }
    sim.stacks.resize(sim.configs.size());
    sim.stats.resize(sim.configs.size());
    // Every job is read and checked before any stack opens.
    std::vector<FioJobSpec> specs;
    for (size_t i = 0; i < jobs.size(); i++) {
        Args a(jobs[i], "run_fio_jobs: jobs[" + std::to_string(i) + "]");
        specs.push_back(job_spec(a, i, stacks.size(), jobs.size()));
        specs.back().verify_compare = !without_data[specs.back().stack];
        // As the engine's mdsplit_setup: a group on a
        // bfq stack only, a weight beside a group, one weight a group.
        const FioJobSpec& s = specs.back();
        py_args::check_group(a, s.sched,
                             sim.configs[s.stack].device.scheduler == SchedulerKind::Bfq);
        for (size_t k = 0; k < i; k++)
            if (specs[k].stack == s.stack)
                py_args::check_group_weight(a, s.sched, specs[k].sched,
                                            "jobs[" + std::to_string(k) + "] on that stack");
    }
    FioRunHooks hooks;
    hooks.open_stack = &SimulatedStacks::open;
    hooks.stack_done = &SimulatedStacks::done;
    hooks.ctx = &sim;
    std::vector<FioJobResult> results = interruptible([&] {
        py::gil_scoped_release release;  // other Python threads run meanwhile
        return run_fio_jobs(sim.configs.size(), sim.clock, specs, hooks, python_interrupt());
    });
    py::list out;
    for (const FioJobResult& r : results) {
        py::dict d;
        d["read"] = direction_dict(r.dir[kFioRead]);
        d["write"] = direction_dict(r.dir[kFioWrite]);
        d["trim"] = direction_dict(r.dir[kFioTrim]);
        d["start_ns"] = r.start_ns;
        d["end_ns"] = r.end_ns;
        d["runtime_ns"] = r.runtime_ns;
        d["syncs"] = r.syncs;
        d["verify_errors"] = r.verify_errors;
        d["verify_unchecked"] = r.verify_unchecked;
        d["total_err"] = r.total_err;
        d["first_error"] = r.first_error;
        d["error"] = r.error;
        d["silent_writeback_pages"] = r.silent_writeback_pages;
        out.append(d);
    }
    py::dict result;
    result["jobs"] = out;
    result["stats"] = sim.stats;
    result["end_ns"] = sim.clock.now_ns();
    result["write_behind_errors"] = sim.write_behind_errors;
    result["notices"] = sim.notices;
    return result;
}

}  // namespace

void register_simulate(py::module_& m) {
    m.def("run_fio_jobs", &run_fio_jobs_py, py::arg("stacks"), py::arg("jobs"),
          py::arg("data") = true,
          "Runs fio jobs (FioJobSpec dicts) on one virtual clock over the given stacks; returns "
          "{'jobs': [per-job results], 'stats': [sidecar JSON per stack], 'end_ns': ...}. Each "
          "value is checked as fio checks its option: iodepth and batch 1..65536, prio 0..7, "
          "prioclass 0..3 (or rt|be|idle|none), group_weight 1..1000, read_pct 0..100, block "
          "sizes >= 1, phase 0..len(jobs)-1, times (*_ns) at most 2**60 ns and fio_submit_ns / "
          "fio_complete_ns at most 10**9, time_based only with "
          "runtime_ns; a run whose clock passes 2**62 ns is refused once drained.");
    m.attr("FIO_LAT_BUCKET_BITS") = FioLatency::kBits;
}
