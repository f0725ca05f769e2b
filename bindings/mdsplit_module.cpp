// Python module `mdsplit`: the same core as the fio engine, run on a virtual
// clock so that a whole experiment is deterministic and takes milliseconds.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/resolved_path.h"
#include "config/config_loader.h"
#include "core/trace/blktrace_writer.h"
#include "exclusive_use.h"
#include "py_args.h"
#include "python_interrupt.h"
#include "stack/device_safety.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace py = pybind11;
using namespace mdsplit;

namespace {

using py_args::u64;

Op parse_op(py::handle op_arg, const std::string& where) {
    const std::string allowed = "\"read\" | \"write\" | \"discard\"";
    std::string op = py_args::text(op_arg, where, allowed);
    if (op == "read") return Op::Read;
    if (op == "write") return Op::Write;
    if (op == "discard") return Op::Discard;
    py_args::fail(where, "\"" + op + "\"", allowed);
}

const char* const kBatchAllowed = "a list of (op, offset, length) tuples";

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

// A stack on a virtual clock, with every trace event recorded (unless
// record_events=False: a long run keeps about 60 bytes an event).
class Simulation {
public:
    static constexpr const char* kName = "Simulation";
    InUse in_use;  // every bound method holds it (exclusive_use.h)

    Simulation(const std::string& toml, const std::string& base_dir, bool is_file,
               const std::string& label, const std::string& trace_dir, bool record_events)
        : record_events_(record_events) {
        config_ = is_file ? load_stack_file(toml) : load_stack_text(toml, base_dir, "<text>");
        StackOptions so;
        so.label = label;
        so.trace_dir = trace_dir;
        stack_ = std::make_unique<Stack>(config_, clock_, so);
        if (record_events_) stack_->tracer().add_global_sink(&recorder_);
        names_[stack_->top().devt()] = stack_->top().name();
        for (MemberQueue* m : stack_->members()) names_[m->devt()] = m->name();
    }

    // Dropped with I/O in flight: it completes first, into buffers that are
    // still there (the kernel would otherwise read or fill freed memory:
    // garbage written to a member file, a corrupted heap).
    ~Simulation() {
        try {
            stack_->drain();
        } catch (const std::exception&) {
        }
    }
    Simulation(const Simulation&) = delete;
    Simulation& operator=(const Simulation&) = delete;

    uint64_t size() const { return stack_->size_bytes(); }
    uint64_t now_ns() const { return clock_.now_ns(); }

    // Submits one I/O now (inside one plug) and returns its cookie; run()
    // or wait() completes it.
    // Integers are checked here, one line naming the argument (pybind's own
    // conversion error is several lines and takes a bool for an int).
    uint64_t submit(py::handle op, py::handle offset, py::handle length) {
        return queue_all({Request{parse_op(op, "submit: op"), u64(offset, "submit: offset"),
                                  u64(length, "submit: length")}})[0];
    }

    // Several I/Os in one plug (one fio batch): [(op, offset, length), ...].
    py::list submit_batch(py::handle ios_arg) {
        std::vector<Request> requests;
        py::sequence ios = py_args::list_or_tuple(ios_arg, "submit_batch: ios", kBatchAllowed);
        for (size_t i = 0; i < ios.size(); i++) {
            std::string where = "submit_batch: ios[" + std::to_string(i) + "]";
            py::sequence io = py_args::fixed_tuple(ios[i], 3, where, kBatchAllowed);
            requests.push_back(Request{parse_op(io[0], where + ": op"),
                                       u64(io[1], where + ": offset"),
                                       u64(io[2], where + ": length")});
        }
        py::list cookies;
        for (uint64_t cookie : queue_all(requests)) cookies.append(cookie);
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

    void write(py::handle offset_arg, py::handle data) {
        std::string s = py_args::bytes_like(data, "write: data");
        uint64_t offset = u64(offset_arg, "write: offset");
        check_block_aligned("write", offset, s.size());
        py_args::write_fits("write", offset, s.size(), size());
        auto buf = aligned(s.size());
        memcpy(buf.get(), s.data(), s.size());
        sync_io(Op::Write, offset, s.size(), buf.get());
    }

    // The bytes read: fewer than `length` past the end of the device (a
    // short read), never zero padding that the device does not hold.
    py::bytes read(py::handle offset_arg, py::handle length_arg) {
        uint64_t offset = u64(offset_arg, "read: offset"), length = u64(length_arg, "read: length");
        check_block_aligned("read", offset, length);
        auto buf = io_buffer(offset, length);
        IoCompletion c = sync_io(Op::Read, offset, length, buf.get());
        return py::bytes(reinterpret_cast<const char*>(buf.get()),
                         length - std::min(length, c.resid));
    }

    py::object stats() const { return json_loads(stack_->stats_json()); }

    py::list events(py::handle device_arg, py::handle actions_arg, const py::kwargs& kwargs) const {
        py_args::no_other_keywords(kwargs, "events", "device, actions");
        std::string device = py_args::text(device_arg, "events: device",
                                           "a device name of the stack, or \"\" for all");
        std::string actions = py_args::text(actions_arg, "events: actions",
                                            "letters of \"" + std::string(kTraceActionLetters) +
                                                "\" (blkparse's action column), or \"\" for all");
        // A filter that can match nothing is a mistake, not an empty answer.
        if (size_t bad = actions.find_first_not_of(kTraceActionLetters); bad != std::string::npos)
            py_args::fail("events: actions",
                          "'" + actions.substr(bad, 1) + "' is not a blktrace action",
                          "letters of \"" + std::string(kTraceActionLetters) +
                              "\" (blkparse's action column)");
        if (!device.empty()) {
            std::string known;
            bool found = false;
            for (const auto& [devt, name] : names_) {
                found |= name == device;
                known += (known.empty() ? "" : ", ") + name;
            }
            if (!found)
                py_args::fail("events: device", "\"" + device + "\" is not a device of the stack",
                              known + ", or \"\" for all");
        }
        if (!record_events_)
            py_args::fail("events", "this Simulation records no events",
                          "Simulation(..., record_events=True), the default");
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
    struct Request {
        Op op;
        uint64_t offset, length;
    };

    static Buffer aligned(uint64_t length) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, length ? length : 1)) throw std::bad_alloc();
        memset(p, 0, length);
        return Buffer(static_cast<uint8_t*>(p));
    }
    // The buffer of a direct I/O: the stack moves no byte past its end (a
    // read there is cut short, a write refused), so neither does the buffer,
    // and read(0, 2**40) of a small device does not allocate a TiB.
    Buffer io_buffer(uint64_t offset, uint64_t length) const {
        uint64_t end = size();
        return aligned(offset >= end ? 0 : std::min(length, end - offset));
    }

    // Queues already checked requests in one plug; their cookies. Buffers
    // are allocated first, so nothing can fail with the plug open.
    std::vector<uint64_t> queue_all(const std::vector<Request>& requests) {
        std::vector<Buffer> bufs;
        for (const Request& r : requests) bufs.push_back(io_buffer(r.offset, r.length));
        std::vector<uint64_t> cookies;
        stack_->begin_batch(task_);
        for (size_t i = 0; i < requests.size(); i++) {
            uint64_t cookie = next_cookie_++;
            uint8_t* p = bufs[i].get();
            buffers_[cookie] = std::move(bufs[i]);
            stack_->queue(task_, requests[i].op, requests[i].offset, requests[i].length, p, cookie);
            cookies.push_back(cookie);
        }
        stack_->commit(task_);
        return cookies;
    }

    // A synchronous direct I/O the device would refuse (blkdev_dio_invalid:
    // EINVAL) is refused here with the reason, not "I/O failed".
    void check_block_aligned(const char* call, uint64_t offset, uint64_t length) const {
        py_args::direct_io_aligned(call, offset, length, stack_->logical_block_size());
    }

    IoCompletion sync_io(Op op, uint64_t offset, uint64_t length, uint8_t* buf) {
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
        return task.completions[0];
    }

    StackConfig config_;
    VirtualClock clock_;
    bool record_events_;
    TraceRecorder recorder_;
    TaskContext task_;
    std::map<uint64_t, Buffer> buffers_;
    std::map<uint32_t, std::string> names_;
    uint64_t next_cookie_ = 1;
    // Last: destroyed first, before the buffers, task and recorder it uses.
    std::unique_ptr<Stack> stack_;
};

py::list read_blktrace(py::handle path_arg) {
    std::string path = py_args::path(path_arg, "read_blktrace: path", "a path (a str)");
    py::list out;
    for (const TraceEvent& e : read_blktrace_file(path)) out.append(event_to_dict(e));
    return out;
}

}  // namespace

void register_buffered(pybind11::module_& m);
void register_simulate(pybind11::module_& m);
void register_run_plan(pybind11::module_& m);

PYBIND11_MODULE(mdsplit, m) {
    m.doc() = "mdsplit: a userspace block-layer laboratory (virtual-time core)";
    m.attr("__version__") = MDSPLIT_VERSION;  // CMakeLists.txt project(VERSION)
    py::register_exception<ConfigError>(m, "ConfigError", PyExc_ValueError);
    py_args::register_errors(m);

    py::class_<Simulation>(m, "Simulation")
        .def(py::init([](py::handle toml, py::handle base_dir, py::handle label,
                         py::handle trace_dir, py::handle record_events, const py::kwargs& kw) {
                 const std::string w = "Simulation: ";
                 py_args::no_other_keywords(kw, "Simulation",
                                            "toml, base_dir, label, trace_dir, record_events");
                 return std::make_unique<Simulation>(
                     py_args::text(toml, w + "toml", "the stack's TOML text (a str)"),
                     py_args::path(base_dir, w + "base_dir", "a directory (a str)"), false,
                     py_args::text(label, w + "label", "a device name (a str)"),
                     py_args::path(trace_dir, w + "trace_dir", "a directory (a str), or \"\""),
                     py_args::boolean(record_events, w + "record_events"));
             }),
             py::arg("toml"), py::arg("base_dir") = ".", py::arg("label") = "md0",
             py::arg("trace_dir") = "", py::arg("record_events") = true,
             "A stack described by TOML text, on a virtual clock. One call at a time per object: "
             "a call from another thread while one runs raises RuntimeError.")
        .def_static(
            "from_file",
            [](py::handle path, py::handle label, py::handle trace_dir, py::handle record_events,
               const py::kwargs& kw) {
                const std::string w = "Simulation.from_file: ";
                py_args::no_other_keywords(kw, "Simulation.from_file",
                                           "path, label, trace_dir, record_events");
                return std::make_unique<Simulation>(
                    py_args::path(path, w + "path", "a stack file's path (a str)"), "", true,
                    py_args::text(label, w + "label", "a device name (a str)"),
                    py_args::path(trace_dir, w + "trace_dir", "a directory (a str), or \"\""),
                    py_args::boolean(record_events, w + "record_events"));
            },
            py::arg("path"), py::arg("label") = "md0", py::arg("trace_dir") = "",
            py::arg("record_events") = true)
        .def_property_readonly("size", exclusive(&Simulation::size))
        .def_property_readonly("now_ns", exclusive(&Simulation::now_ns))
        .def("submit", exclusive(&Simulation::submit), py::arg("op"), py::arg("offset"),
             py::arg("length"))
        .def("submit_batch", exclusive(&Simulation::submit_batch), py::arg("ios"),
             "Several I/Os in one plug: [(op, offset, length), ...]; every op is checked before "
             "any is queued.")
        .def("run", exclusive(&Simulation::run))
        .def("read", exclusive(&Simulation::read), py::arg("offset"), py::arg("length"),
             "The bytes read: fewer than length when the read runs past the end of the device.")
        .def("write", exclusive(&Simulation::write), py::arg("offset"), py::arg("data"))
        .def("stats", exclusive(&Simulation::stats))
        .def("events", exclusive(&Simulation::events), py::arg("device") = "",
             py::arg("actions") = "")
        .def("clear_events", exclusive(&Simulation::clear_events))
        .def("flush_traces", exclusive(&Simulation::flush_traces));

    m.def("read_blktrace", &read_blktrace, py::arg("path"),
          "Reads a blktrace file written by the engine into a list of event dicts.");
    m.def(
        "load_stack_text",
        [](py::handle text, py::handle base_dir, py::handle source, const py::kwargs& kw) {
            const std::string w = "load_stack_text: ";
            py_args::no_other_keywords(kw, "load_stack_text", "text, base_dir, source");
            load_stack_text(py_args::text(text, w + "text", "the stack's TOML text (a str)"),
                            py_args::path(base_dir, w + "base_dir", "a directory (a str)"),
                            py_args::text(source, w + "source", "a file name (a str)"));
            return true;
        },
        py::arg("text"), py::arg("base_dir") = ".", py::arg("source") = "<text>",
        "Validates a stack description; raises ConfigError with the one-line message, which "
        "starts with `source` (the file's name, as the engine prints it).");
    m.def(
        "file_in_use",
        [](py::handle path_arg) {
            std::string path = py_args::path(path_arg, "file_in_use: path", "a path (a str)");
            return find_file_use(path);
        },
        py::arg("path"),
        "\"\" or how the regular file at path is in use below a block device (\"the backing "
        "file of loop 7:0\", \"used as swap\"): what an output replacing it would destroy.");
    m.def(
        "resolved_path",
        [](py::handle path_arg) {
            std::string path = py_args::path(path_arg, "resolved_path: path", "a path (a str)");
            return resolved_path(path);
        },
        py::arg("path"),
        "The absolute path open(2) would create or open at path (links followed, a dangling "
        "last one too; \"tr/\" is \"tr\"): the engine's identity of an output path.");
    register_buffered(m);
    register_simulate(m);
    register_run_plan(m);
    py_args::one_line_call_errors(m);
}
