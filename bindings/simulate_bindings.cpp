// mdsplit.run_fio_jobs(): fio jobs (parsed by harness/jobfile.py, turned
// into FioJobSpec dicts by harness/simulate.py) on one virtual clock
// (engine/core/fio_job_model.h). Stacks are built from their TOML files as
// the engine builds them (load_stack_file, StackOptions from the job).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sys/stat.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config/config_loader.h"
#include "sim/fio_job_model.h"
#include "stack/device_safety.h"
#include "stack/stack.h"

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

    static Stack* open(void* ctx, size_t i) {
        auto* self = static_cast<SimulatedStacks*>(ctx);
        self->stacks[i] = std::make_unique<Stack>(self->configs[i], self->clock, self->options[i]);
        // Writes to timed member files complete at their modelled time while
        // the host writes them behind (MemberQueue::set_write_behind).
        for (MemberQueue* m : self->stacks[i]->members()) m->set_write_behind(true);
        return self->stacks[i].get();
    }
    static void done(void* ctx, size_t i) {
        auto* self = static_cast<SimulatedStacks*>(ctx);
        self->stats[i] = self->stacks[i]->stats_json();
        for (MemberQueue* m : self->stacks[i]->members())
            self->write_behind_errors += m->write_behind_errors();
        self->stacks[i].reset();  // flushes its trace files
    }
};

template <class T>
T get(const py::dict& d, const char* key, T def) {
    return d.contains(key) ? d[key].cast<T>() : def;
}

void check_keys(const py::dict& d, const std::set<std::string>& allowed, const std::string& what) {
    for (const auto& kv : d) {
        std::string key = py::str(kv.first);
        if (!allowed.count(key))
            throw py::value_error("run_fio_jobs: " + what + ": unknown key \"" + key + "\"");
    }
}

std::vector<FioBlockSize> block_sizes(const py::handle& h) {
    std::vector<FioBlockSize> out;
    for (const py::handle& e : h) {
        auto t = e.cast<std::pair<uint64_t, uint32_t>>();
        out.push_back(FioBlockSize{t.first, t.second});
    }
    return out;
}

// "trim": "" (no trims), "trim" (rw=trim/randtrim), "trimwrite" (rw=trimwrite/randtrimwrite).
FioTrim trim_of(const std::string& v) {
    if (v.empty()) return FioTrim::None;
    if (v == "trim") return FioTrim::Only;
    if (v == "trimwrite") return FioTrim::ThenWrite;
    throw py::value_error("run_fio_jobs: trim=\"" + v + "\"; allowed: \"\", trim, trimwrite");
}

FioJobSpec job_spec(const py::dict& d, size_t index) {
    static const std::set<std::string> kKeys = {"name",
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
                                                "size",
                                                "io_size",
                                                "loops",
                                                "norandommap",
                                                "seed",
                                                "iodepth",
                                                "batch",
                                                "direct",
                                                "invalidate",
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
                                                "time_based"};
    check_keys(d, kKeys, "job " + std::to_string(index));
    FioJobSpec s;
    s.name = get<std::string>(d, "name", "job" + std::to_string(index));
    s.stack = get<size_t>(d, "stack", 0);
    s.phase = get<size_t>(d, "phase", 0);
    s.pid = get<uint32_t>(d, "pid", uint32_t(1000 + index));
    s.sched.group = get<std::string>(d, "group", "");
    s.sched.group_weight = get<uint32_t>(d, "group_weight", 100);
    s.sched.ioprio = uint8_t(get<uint32_t>(d, "prio", 4));
    s.sched.ioprio_class = IoprioClass(get<uint32_t>(d, "prioclass", 2));
    s.random = get<bool>(d, "random", false);
    s.read_pct = get<uint32_t>(d, "read_pct", 100);
    s.trim = trim_of(get<std::string>(d, "trim", ""));
    if (d.contains("bs_read")) s.bs[kFioRead] = block_sizes(d["bs_read"]);
    if (d.contains("bs_write")) s.bs[kFioWrite] = block_sizes(d["bs_write"]);
    if (d.contains("bs_trim")) s.bs[kFioTrim] = block_sizes(d["bs_trim"]);
    if (d.contains("bs_max")) s.bs_max = d["bs_max"].cast<std::array<uint64_t, kFioDirections>>();
    if (d.contains("align")) s.align = d["align"].cast<std::array<uint64_t, kFioDirections>>();
    s.offset = get<uint64_t>(d, "offset", 0);
    s.size = get<uint64_t>(d, "size", 0);
    s.io_size = get<uint64_t>(d, "io_size", 0);
    s.loops = get<uint32_t>(d, "loops", 1);
    s.norandommap = get<bool>(d, "norandommap", false);
    s.seed = get<uint64_t>(d, "seed", 0);
    s.iodepth = get<uint32_t>(d, "iodepth", 1);
    s.batch = get<uint32_t>(d, "batch", 1);
    s.direct = get<bool>(d, "direct", true);
    s.invalidate = get<bool>(d, "invalidate", false);
    s.fsync_blocks = get<uint32_t>(d, "fsync_blocks", 0);
    s.end_fsync = get<bool>(d, "end_fsync", false);
    s.continue_on_error = get<uint32_t>(d, "continue_on_error", 0);
    s.rate_iops = get<uint64_t>(d, "rate_iops", 0);
    s.think_ns = get<uint64_t>(d, "think_ns", 0);
    s.think_blocks = get<uint32_t>(d, "think_blocks", 1);
    s.verify = get<bool>(d, "verify", false);
    s.fio_submit_ns = get<uint64_t>(d, "fio_submit_ns", s.fio_submit_ns);
    s.fio_complete_ns = get<uint64_t>(d, "fio_complete_ns", s.fio_complete_ns);
    s.start_delay_ns = get<uint64_t>(d, "start_delay_ns", 0);
    s.runtime_ns = get<uint64_t>(d, "runtime_ns", 0);
    s.ramp_ns = get<uint64_t>(d, "ramp_ns", 0);
    s.time_based = get<bool>(d, "time_based", false);
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
// only the data (and the sidecar's io_uring counters) are not there.
void drop_member_data(StackConfig& config) {
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
    }
}

// stacks: [{"config": PATH, "label": "md0", "trace_dir": "", "writable": True}, ...]
py::dict run_fio_jobs_py(const py::list& stacks, const py::list& jobs, bool data) {
    SimulatedStacks sim;
    size_t i = 0;
    for (const py::handle& h : stacks) {
        py::dict d = py::reinterpret_borrow<py::dict>(h);
        check_keys(d, {"config", "label", "trace_dir", "writable", "allow_mounted_write"},
                   "stack " + std::to_string(i));
        sim.configs.push_back(load_stack_file(d["config"].cast<std::string>()));
        StackOptions so;
        so.label = get<std::string>(d, "label", "md0");
        so.trace_dir = get<std::string>(d, "trace_dir", "");
        so.writable = get<bool>(d, "writable", true);
        // The engine's device safety: simulate writes the members as fio with
        // the engine would, and the Stack checks and claims them as it opens
        // them. Without data no member is opened; only their overlap is checked.
        so.allow_mounted_write = get<bool>(d, "allow_mounted_write", false);
        if (!data) {
            DeviceSafetyOptions safety;
            safety.writes = false;
            check_device_safety(sim.configs.back(), safety);
            drop_member_data(sim.configs.back());
        }
        so.open_direct = true;  // as the engine: members stay O_DIRECT
        sim.options.push_back(so);
        i++;
    }
    sim.stacks.resize(sim.configs.size());
    sim.stats.resize(sim.configs.size());
    std::vector<FioJobSpec> specs;
    i = 0;
    for (const py::handle& h : jobs)
        specs.push_back(job_spec(py::reinterpret_borrow<py::dict>(h), i++));
    FioRunHooks hooks;
    hooks.open_stack = &SimulatedStacks::open;
    hooks.stack_done = &SimulatedStacks::done;
    hooks.ctx = &sim;
    std::vector<FioJobResult> results = run_fio_jobs(sim.configs.size(), sim.clock, specs, hooks);
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
        d["total_err"] = r.total_err;
        d["first_error"] = r.first_error;
        d["error"] = r.error;
        out.append(d);
    }
    py::dict result;
    result["jobs"] = out;
    result["stats"] = sim.stats;
    result["end_ns"] = sim.clock.now_ns();
    result["write_behind_errors"] = sim.write_behind_errors;
    return result;
}

}  // namespace

void register_simulate(py::module_& m) {
    m.def("run_fio_jobs", &run_fio_jobs_py, py::arg("stacks"), py::arg("jobs"),
          py::arg("data") = true,
          "Runs fio jobs (FioJobSpec dicts) on one virtual clock over the given stacks; returns "
          "{'jobs': [per-job results], 'stats': [sidecar JSON per stack], 'end_ns': ...}.");
    m.attr("FIO_LAT_BUCKET_BITS") = FioLatency::kBits;
}
