// Python module `mdsplit`: the same core as the fio engine, run on a virtual
// clock so that a whole experiment is deterministic and takes milliseconds.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config/config_loader.h"
#include "core/trace/blktrace_writer.h"
#include "sim/workload.h"
#include "stack/stack.h"
#include "workload_args.h"

namespace py = pybind11;
using namespace mdsplit;

namespace {

Op parse_op(const std::string& op) {
    if (op == "read") return Op::Read;
    if (op == "write") return Op::Write;
    if (op == "discard") return Op::Discard;
    throw py::value_error("op: \"" + op + "\"; allowed: \"read\" | \"write\" | \"discard\"");
}

py::object json_loads(const std::string& text) {
    return py::module_::import("json").attr("loads")(text);
}

py::dict event_to_dict(const TraceEvent& e) {
    py::dict d;
    d["sequence"] = e.sequence;
    d["time_ns"] = e.time_ns;
    d["device"] = e.device;
    d["action"] = std::string(1, char(e.action));
    d["op"] = e.op == Op::Write ? "W" : e.op == Op::Discard ? "D" : "R";  // blkparse rwbs
    d["sector"] = e.sector;
    d["nr_sectors"] = e.bytes >> kSectorShift;
    d["bytes"] = e.bytes;
    d["pid"] = e.pid;
    d["error"] = e.error;
    d["new_sector"] = e.new_sector;
    d["from_device"] = e.from_device;
    d["from_sector"] = e.from_sector;
    d["depth"] = e.depth;
    return d;
}

// A stack on a virtual clock, with every trace event recorded.
class Simulation {
public:
    Simulation(const std::string& toml, const std::string& base_dir, bool is_file,
               const std::string& label, const std::string& trace_dir) {
        config_ = is_file ? load_stack_file(toml) : load_stack_text(toml, base_dir, "<text>");
        StackOptions so;
        so.label = label;
        so.trace_dir = trace_dir;
        stack_ = std::make_unique<Stack>(config_, clock_, so);
        stack_->tracer().add_global_sink(&recorder_);
        names_[stack_->top().devt()] = stack_->top().name();
        for (MemberQueue* m : stack_->members()) names_[m->devt()] = m->name();
    }

    uint64_t size() const { return stack_->size_bytes(); }
    uint64_t now_ns() const { return clock_.now_ns(); }

    // Submits one I/O now (inside one plug) and returns its cookie; run()
    // or wait() completes it.
    uint64_t submit(const std::string& op, uint64_t offset, uint64_t length) {
        auto buf = aligned(length);
        uint64_t cookie = next_cookie_++;
        uint8_t* p = buf.get();
        buffers_[cookie] = std::move(buf);
        stack_->begin_batch(task_);
        stack_->queue(task_, parse_op(op), offset, length, p, cookie);
        stack_->commit(task_);
        return cookie;
    }

    // Several I/Os in one plug (one fio batch): [(op, offset, length), ...].
    py::list submit_batch(const std::vector<std::tuple<std::string, uint64_t, uint64_t>>& ios) {
        py::list cookies;
        stack_->begin_batch(task_);
        for (auto& [op, offset, length] : ios) {
            auto buf = aligned(length);
            uint64_t cookie = next_cookie_++;
            uint8_t* p = buf.get();
            buffers_[cookie] = std::move(buf);
            stack_->queue(task_, parse_op(op), offset, length, p, cookie);
            cookies.append(cookie);
        }
        stack_->commit(task_);
        return cookies;
    }

    // Runs until nothing is pending; returns the completions since last time.
    py::list run() {
        stack_->drain();
        py::list out;
        for (const IoCompletion& c : task_.completions) {
            py::dict d;
            d["cookie"] = c.cookie;
            d["error"] = c.error;
            d["resid"] = c.resid;
            out.append(d);
            buffers_.erase(c.cookie);
        }
        task_.completions.clear();
        return out;
    }

    void write(uint64_t offset, py::bytes data) {
        std::string s = data;
        auto buf = aligned(s.size());
        memcpy(buf.get(), s.data(), s.size());
        sync_io(Op::Write, offset, s.size(), buf.get());
    }

    py::bytes read(uint64_t offset, uint64_t length) {
        auto buf = aligned(length);
        sync_io(Op::Read, offset, length, buf.get());
        return py::bytes(reinterpret_cast<const char*>(buf.get()), length);
    }

    py::dict run_workload(const std::string& rw, uint64_t bs, uint64_t iodepth, uint64_t size,
                          uint64_t total, uint64_t offset, uint64_t batch, uint64_t seed) {
        WorkloadSpec spec;
        set_closed_loop(spec, rw, /*discard=*/true, bs, iodepth, size, total, offset, batch, seed);
        WorkloadResult r = mdsplit::run_workload(*stack_, spec);
        return io_tally_dict(r);
    }

    // --- Several concurrent tasks (groups / weights / priorities) ---------
    // [{"rw": "randwrite", "bs": 4096, "iodepth": 1, "group": "g1",
    //   "group_weight": 100, "prio": 4, "prioclass": "be", "start_ns": 0,
    //   "runtime_ns": 0, "size": 0, "offset": 0, "total": 0, ...}, ...]
    // -> one result dict per task, in order.
    py::list run_workloads(const py::list& tasks) {
        static const std::set<std::string> kKeys = {
            "rw",    "bs",           "iodepth", "size",      "offset",     "total",
            "batch", "seed",         "pid",     "start_ns",  "runtime_ns", "think_ns",
            "group", "group_weight", "prio",    "prioclass", "name"};
        std::vector<WorkloadSpec> specs;
        std::vector<std::string> names;
        size_t i = 0;
        for (const py::handle& h : tasks) {
            py::dict d = py::reinterpret_borrow<py::dict>(h);
            for (const auto& kv : d) {
                std::string key = py::str(kv.first);
                if (!kKeys.count(key))
                    throw py::value_error("run_workloads: task " + std::to_string(i) +
                                          ": unknown key \"" + key + "\"");
            }
            auto get_u64 = [&](const char* key, uint64_t def) {
                return d.contains(key) ? d[key].cast<uint64_t>() : def;
            };
            if (!d.contains("rw"))
                throw py::value_error("run_workloads: task " + std::to_string(i) +
                                      ": \"rw\" is required");
            std::string rw = d["rw"].cast<std::string>();
            WorkloadSpec spec;
            set_rw(spec, rw, /*discard=*/true);
            spec.block_size = get_u64("bs", 4096);
            spec.iodepth = uint32_t(get_u64("iodepth", 1));
            spec.size = get_u64("size", 0);
            spec.offset = get_u64("offset", 0);
            spec.total_bytes = get_u64("total", 0);
            spec.batch = uint32_t(get_u64("batch", 1));
            spec.seed = get_u64("seed", 1 + i);
            spec.pid = uint32_t(get_u64("pid", 1000 + i));
            spec.start_ns = get_u64("start_ns", 0);
            spec.runtime_ns = get_u64("runtime_ns", 0);
            spec.think_ns = get_u64("think_ns", 0);
            if (d.contains("group")) spec.sched.group = d["group"].cast<std::string>();
            spec.sched.group_weight = uint32_t(get_u64("group_weight", 100));
            if (spec.sched.group_weight < 1 || spec.sched.group_weight > 1000)
                throw py::value_error("run_workloads: group_weight must be 1..1000");
            uint64_t prio = get_u64("prio", 4);
            if (prio > 7) throw py::value_error("run_workloads: prio must be 0..7");
            spec.sched.ioprio = uint8_t(prio);
            if (d.contains("prioclass")) {
                py::object c = d["prioclass"];
                std::string cls = py::isinstance<py::str>(c) ? c.cast<std::string>()
                                                             : std::to_string(c.cast<int>());
                if (cls == "0" || cls == "none")
                    spec.sched.ioprio_class = IoprioClass::None;
                else if (cls == "1" || cls == "rt")
                    spec.sched.ioprio_class = IoprioClass::RT;
                else if (cls == "2" || cls == "be")
                    spec.sched.ioprio_class = IoprioClass::BE;
                else if (cls == "3" || cls == "idle")
                    spec.sched.ioprio_class = IoprioClass::Idle;
                else
                    throw py::value_error("run_workloads: prioclass \"" + cls +
                                          "\"; allowed: rt|be|idle|none or 0..3");
            }
            names.push_back(d.contains("name") ? d["name"].cast<std::string>()
                                               : "task" + std::to_string(i));
            specs.push_back(spec);
            i++;
        }
        std::vector<WorkloadResult> results = mdsplit::run_workloads(*stack_, specs);
        py::list out;
        for (size_t k = 0; k < results.size(); k++) {
            py::dict d = io_tally_dict(results[k]);
            d["name"] = names[k];
            d["pid"] = specs[k].pid;
            d["group"] = specs[k].sched.group;
            d["start_ns"] = results[k].start_ns;
            d["end_ns"] = results[k].end_ns;
            out.append(d);
        }
        return out;
    }
    // ----------------------------------------------------------------------

    py::object stats() const { return json_loads(stack_->stats_json()); }

    py::list events(const std::string& device, const std::string& actions) const {
        py::list out;
        for (const TraceEvent& e : recorder_.events) {
            if (!actions.empty() && actions.find(char(e.action)) == std::string::npos) continue;
            auto it = names_.find(e.device);
            std::string name = it == names_.end() ? "?" : it->second;
            if (!device.empty() && name != device) continue;
            py::dict d = event_to_dict(e);
            d["device_name"] = name;
            out.append(d);
        }
        return out;
    }

    void clear_events() { recorder_.events.clear(); }
    void flush_traces() { stack_->flush_traces(); }

private:
    struct Free {
        void operator()(uint8_t* p) const { free(p); }
    };
    using Buffer = std::unique_ptr<uint8_t, Free>;
    static Buffer aligned(uint64_t length) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, length ? length : 1)) throw std::bad_alloc();
        memset(p, 0, length);
        return Buffer(static_cast<uint8_t*>(p));
    }
    void sync_io(Op op, uint64_t offset, uint64_t length, uint8_t* buf) {
        TaskContext task;
        task.pid = task_.pid;
        stack_->begin_batch(task);
        stack_->queue(task, op, offset, length, buf, 0);
        stack_->commit(task);
        stack_->reap(task, 1, ~uint64_t(0) / 2);
        stack_->drain();
        if (task.completions.empty()) throw std::runtime_error("mdsplit: I/O did not complete");
        if (task.completions[0].error)
            throw std::runtime_error(std::string("mdsplit: I/O failed: ") +
                                     strerror(-task.completions[0].error));
    }

    StackConfig config_;
    VirtualClock clock_;
    std::unique_ptr<Stack> stack_;
    TraceRecorder recorder_;
    TaskContext task_;
    std::map<uint64_t, Buffer> buffers_;
    std::map<uint32_t, std::string> names_;
    uint64_t next_cookie_ = 1;
};

py::list read_blktrace(const std::string& path) {
    py::list out;
    for (const TraceEvent& e : read_blktrace_file(path)) out.append(event_to_dict(e));
    return out;
}

}  // namespace

void register_buffered(pybind11::module_& m);
void register_simulate(pybind11::module_& m);

PYBIND11_MODULE(mdsplit, m) {
    m.doc() = "mdsplit: a userspace block-layer laboratory (virtual-time core)";
    m.attr("__version__") = MDSPLIT_VERSION;  // CMakeLists.txt project(VERSION)
    py::register_exception<ConfigError>(m, "ConfigError", PyExc_ValueError);

    py::class_<Simulation>(m, "Simulation")
        .def(py::init([](const std::string& toml, const std::string& base_dir,
                         const std::string& label, const std::string& trace_dir) {
                 return std::make_unique<Simulation>(toml, base_dir, false, label, trace_dir);
             }),
             py::arg("toml"), py::arg("base_dir") = ".", py::arg("label") = "md0",
             py::arg("trace_dir") = "", "A stack described by TOML text, on a virtual clock.")
        .def_static(
            "from_file",
            [](const std::string& path, const std::string& label, const std::string& trace_dir) {
                return std::make_unique<Simulation>(path, "", true, label, trace_dir);
            },
            py::arg("path"), py::arg("label") = "md0", py::arg("trace_dir") = "")
        .def_property_readonly("size", &Simulation::size)
        .def_property_readonly("now_ns", &Simulation::now_ns)
        .def("submit", &Simulation::submit, py::arg("op"), py::arg("offset"), py::arg("length"))
        .def("submit_batch", &Simulation::submit_batch, py::arg("ios"))
        .def("run", &Simulation::run)
        .def("read", &Simulation::read, py::arg("offset"), py::arg("length"))
        .def("write", &Simulation::write, py::arg("offset"), py::arg("data"))
        .def("run_workload", &Simulation::run_workload, py::arg("rw"), py::arg("bs"),
             py::arg("iodepth") = 1, py::arg("size") = 0, py::arg("total") = 0,
             py::arg("offset") = 0, py::arg("batch") = 1, py::arg("seed") = 1)
        .def("run_workloads", &Simulation::run_workloads, py::arg("tasks"),
             "Runs several closed-loop tasks concurrently (each its own pid, group, group_weight, "
             "prio/prioclass, start_ns, runtime_ns, ...); returns one result dict per task.")
        .def("stats", &Simulation::stats)
        .def("events", &Simulation::events, py::arg("device") = "", py::arg("actions") = "")
        .def("clear_events", &Simulation::clear_events)
        .def("flush_traces", &Simulation::flush_traces);

    m.def("read_blktrace", &read_blktrace, py::arg("path"),
          "Reads a blktrace file written by the engine into a list of event dicts.");
    m.def(
        "load_stack_text",
        [](const std::string& text, const std::string& base_dir) {
            load_stack_text(text, base_dir, "<text>");
            return true;
        },
        py::arg("text"), py::arg("base_dir") = ".",
        "Validates a stack description; raises ConfigError with the one-line message.");
    register_buffered(m);
    register_simulate(m);
}
