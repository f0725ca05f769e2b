// Python: buffered I/O through the page cache (seed 003) on a virtual clock.
//
//   sim = mdsplit.BufferedSimulation(toml, variant="c8d317aa", rasync=False, ra_kb=0)
//   c = sim.submit("read", 1 << 20, 4096)      # one buffered I/O, returns its cookie
//   [done] = sim.run()                         # {"cookie", "error", "resid", "data", "path":
//   {...}} done["path"]["issued_by"], ["completed_in"], ["inline_attempts"], ["punted"], ...
//   sim.stats()["page_cache"]
//
// The module's PYBIND11_MODULE (mdsplit_module.cpp) calls register_buffered(m).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "config/config_loader.h"
#include "core/io_uring/buffered_io.h"
#include "exclusive_use.h"
#include "py_args.h"
#include "python_interrupt.h"
#include "sim/buffered_cost_probe.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace py = pybind11;
using namespace mdsplit;

namespace {

struct Free {
    void operator()(uint8_t* p) const { free(p); }
};
using Buffer = std::unique_ptr<uint8_t, Free>;

Buffer aligned(uint64_t length) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, length ? length : 1)) throw std::bad_alloc();
    memset(p, 0, length ? length : 1);
    return Buffer(static_cast<uint8_t*>(p));
}

const char* const kVariants = "\"pre-c8d317aa\" | \"c8d317aa\" | \"forced-ra\", or None";

BufferedVariant parse_variant(const std::string& v) {
    if (v == "pre-c8d317aa") return BufferedVariant::PreC8d317aa;
    if (v == "c8d317aa") return BufferedVariant::C8d317aa;
    if (v == "forced-ra") return BufferedVariant::ForcedRa;
    throw py::value_error("variant: \"" + v + "\"; allowed: " + kVariants);
}

const char* const kBatchAllowed = "a list of (op, offset, length) tuples";
const char* const kOps = "\"read\" | \"write\" | \"fsync\"";

py::dict path_to_dict(const BufferedPath& p) {
    py::dict d;
    d["cookie"] = p.cookie;
    d["op"] = op_name(p.op);
    d["error"] = p.error;
    d["resid"] = p.resid;
    d["inline_attempts"] = p.inline_attempts;
    d["task_work_runs"] = p.task_work_runs;
    d["callbacks_armed"] = p.callbacks_armed;
    d["worker_attempts"] = p.worker_attempts;
    d["punted"] = p.punted;
    d["worker"] = p.worker;
    d["pages_hit"] = p.pages_hit;
    d["pages_missed"] = p.pages_missed;
    d["submitter_reads"] = p.submitter_reads;
    d["worker_reads"] = p.worker_reads;
    d["worker_sleeps"] = p.worker_sleeps;
    d["waits"] = p.waits;
    d["completions"] = p.completions;
    d["issued_by"] = buffered_where_name(p.issued_by);
    d["completed_in"] = buffered_where_name(p.completed_in);
    d["submit_ns"] = p.submit_ns;
    d["complete_ns"] = p.complete_ns;
    return d;
}

// BufferedCosts <-> dict: kBufferedCostKeys' keys + "_ns", and cpus.
std::string cost_name(const BufferedCostKey& k) { return std::string(k.key) + "_ns"; }

py::dict costs_to_dict(const BufferedCosts& c) {
    py::dict d;
    for (const BufferedCostKey& k : kBufferedCostKeys) d[py::str(cost_name(k))] = c.*(k.field);
    d["cpus"] = c.cpus;
    return d;
}

// `d` over `c`, all or nothing: every key and value is checked before any is
// applied, so a refused dict leaves the costs as they were.
void costs_from_dict(BufferedCosts& c, py::handle d) {
    std::set<std::string> keys = {"cpus"};
    for (const BufferedCostKey& k : kBufferedCostKeys) keys.insert(cost_name(k));
    py_args::Args a(d, "set_costs: costs");
    a.allow(keys);
    BufferedCosts next = c;
    next.cpus = uint32_t(a.integer("cpus", next.cpus, 1, kMaxBufferedCpus));
    for (const BufferedCostKey& k : kBufferedCostKeys)
        next.*(k.field) = a.cost_ns(cost_name(k).c_str(), next.*(k.field));
    c = next;
}

// The [page_cache] overrides of the constructor, checked as the TOML keys
// are (config_loader.cpp, read_page_cache(), whose rule is not reachable
// from here): a cache of a whole number of 4 KiB pages, > 0, and a
// readahead of whole pages, at most 1 GiB.
void override_page_cache(PageCacheConfig& cache, std::optional<uint64_t> ra_kb,
                         std::optional<uint64_t> cache_size) {
    if (ra_kb) {
        const std::string allowed = "a multiple of 4, 0..1048576 (0 turns readahead off)";
        if (*ra_kb > (1u << 20))
            py_args::fail("ra_kb", std::to_string(*ra_kb) + " is out of range", allowed);
        if (*ra_kb % (kPageSize / 1024))
            py_args::fail("ra_kb", std::to_string(*ra_kb) + " KiB is not a whole number of pages",
                          allowed);
        cache.ra_kb = uint32_t(*ra_kb);
    }
    if (cache_size) {
        if (*cache_size == 0 || *cache_size % kPageSize)
            py_args::fail("cache_size",
                          std::to_string(*cache_size) + " bytes is not a whole number of pages",
                          "a multiple of 4096 > 0");
        cache.size_bytes = *cache_size;
    }
}

using py_args::u64;

class BufferedSimulation {
public:
    static constexpr const char* kName = "BufferedSimulation";
    InUse in_use;  // every bound method holds it (exclusive_use.h)

    BufferedSimulation(const std::string& toml, const std::string& base_dir, bool is_file,
                       const std::string& label, const std::string& trace_dir,
                       py::handle variant_arg, py::handle rasync_arg, py::handle ra_kb,
                       py::handle cache_size, py::handle record_paths) {
        std::optional<std::string> variant =
            py_args::optional_text(variant_arg, "variant", kVariants);
        std::optional<bool> rasync = py_args::optional_boolean(rasync_arg, "rasync");
        config_ = is_file ? load_stack_file(toml) : load_stack_text(toml, base_dir, "<text>");
        if (variant) config_.page_cache.variant = parse_variant(*variant);
        if (rasync) config_.page_cache.rasync = *rasync;
        override_page_cache(config_.page_cache,
                            py_args::optional_checked(ra_kb, "ra_kb", 0, 1u << 20,
                                                      "a multiple of 4; 0 turns readahead off"),
                            py_args::optional_checked(cache_size, "cache_size", 0, py_args::kU64Max,
                                                      "a multiple of 4096 > 0"));
        StackOptions so;
        so.label = label;
        so.trace_dir = trace_dir;
        stack_ = std::make_unique<Stack>(config_, clock_, so);
        stack_->buffered().set_record_paths(py_args::boolean(record_paths, "record_paths"));
        task_.pid = 1;
    }

    // Dropped: the I/O in flight completes (into buffers still there), and
    // what the page cache holds dirty is written back, as the engine does at
    // a job's end; a write-back that fails is said on stderr (a destructor
    // cannot raise).
    ~BufferedSimulation() {
        try {
            stack_->drain();
            if (uint64_t lost = stack_->sync_buffered())
                std::fprintf(stderr,
                             "mdsplit: BufferedSimulation: the write-back of %llu pages failed "
                             "as it was dropped: that data is not on the members\n",
                             static_cast<unsigned long long>(lost));
            stack_->drain();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "mdsplit: BufferedSimulation: as it was dropped: %s\n", e.what());
        }
    }
    BufferedSimulation(const BufferedSimulation&) = delete;
    BufferedSimulation& operator=(const BufferedSimulation&) = delete;

    BufferedIo& io() { return stack_->buffered(); }
    uint64_t size() const { return stack_->size_bytes(); }
    uint64_t now_ns() const { return clock_.now_ns(); }

    uint64_t submit(py::handle op, py::handle offset, py::handle length, py::object data,
                    const py::kwargs& kwargs) {
        py_args::no_other_keywords(kwargs, "submit", "op, offset, length, data");
        std::vector<Request> one;
        one.push_back(prepare(op, u64(offset, "submit: offset"), u64(length, "submit: length"),
                              data, "submit"));
        return queue_all(one)[0];
    }

    // Every I/O is checked (and its buffer made) before any is queued.
    py::list submit_batch(py::handle ios_arg) {
        std::vector<Request> requests;
        py::sequence ios = py_args::list_or_tuple(ios_arg, "submit_batch: ios", kBatchAllowed);
        for (size_t i = 0; i < ios.size(); i++) {
            std::string where = "submit_batch: ios[" + std::to_string(i) + "]";
            py::sequence io = py_args::fixed_tuple(ios[i], 3, where, kBatchAllowed);
            requests.push_back(prepare(io[0], u64(io[1], where + ": offset"),
                                       u64(io[2], where + ": length"), py::none(), where));
        }
        py::list cookies;
        for (uint64_t cookie : queue_all(requests)) cookies.append(cookie);
        return cookies;
    }

    uint64_t fsync() { return submit(py::str("fsync"), py::int_(0), py::int_(0), py::none(), {}); }

    // Runs until nothing is pending; returns the completions since last time,
    // each with the data read and the path it took.
    py::list run() {
        stack_->drain();
        std::map<uint64_t, BufferedPath> paths;
        for (BufferedPath& p : io().take_paths()) paths[p.cookie] = p;
        py::list out;
        for (const IoCompletion& c : task_.completions) {
            py::dict d;
            d["cookie"] = c.cookie;
            d["error"] = c.error;
            d["resid"] = c.resid;
            auto it = pending_.find(c.cookie);
            if (it != pending_.end()) {
                if (it->second.op == Op::Read)
                    d["data"] = py::bytes(reinterpret_cast<const char*>(it->second.buffer.get()),
                                          it->second.length - std::min(it->second.length, c.resid));
                pending_.erase(it);
            }
            auto p = paths.find(c.cookie);
            if (p != paths.end()) d["path"] = path_to_dict(p->second);
            out.append(d);
        }
        task_.completions.clear();
        return out;
    }

    py::bytes read(py::handle offset, py::handle length) {
        return read_in(u64(offset, "read: offset"), u64(length, "read: length"), true);
    }

    void write(py::handle offset_arg, py::handle data) {
        uint64_t offset = u64(offset_arg, "write: offset");
        std::string s = py_args::bytes_like(data, "write: data");
        check_write_fits("write", offset, s.size());
        auto buf = aligned(s.size());
        memcpy(buf.get(), s.data(), s.size());
        sync_io(Op::Write, offset, s.size(), buf.get(), true);
    }

    // Direct I/O (what the members hold), bypassing the page cache.
    // The bytes read, as read(): fewer than `length` past the end of the device.
    py::bytes direct_read(py::handle offset, py::handle length) {
        uint64_t at = u64(offset, "direct_read: offset"), len = u64(length, "direct_read: length");
        py_args::direct_io_aligned("direct_read", at, len, stack_->logical_block_size());
        return read_in(at, len, false);
    }

    // A read, cut at the device's end before its buffer is allocated (a
    // terabyte asked of a small device was allocated whole, or bad_alloc).
    py::bytes read_in(uint64_t offset, uint64_t length, bool buffered) {
        uint64_t end = stack_->size_bytes();
        length = offset >= end ? 0 : std::min(length, end - offset);
        if (length == 0) return py::bytes();  // pread(2) at or past the end: nothing
        auto buf = aligned(length);
        IoCompletion c = sync_io(Op::Read, offset, length, buf.get(), buffered);
        return py::bytes(reinterpret_cast<const char*>(buf.get()),
                         length - std::min(length, c.resid));
    }

    void direct_write(py::handle offset_arg, py::handle data) {
        uint64_t offset = u64(offset_arg, "direct_write: offset");
        std::string s = py_args::bytes_like(data, "direct_write: data");
        py_args::direct_io_aligned("direct_write", offset, s.size(), stack_->logical_block_size());
        check_write_fits("direct_write", offset, s.size());
        auto buf = aligned(s.size());
        memcpy(buf.get(), s.data(), s.size());
        sync_io(Op::Write, offset, s.size(), buf.get(), false);
    }

    void sync() { stack_->sync_buffered(); }
    void invalidate() { stack_->invalidate(); }

    py::list paths() {
        py::list out;
        for (const BufferedPath& p : io().take_paths()) out.append(path_to_dict(p));
        return out;
    }

    py::object stats() const {
        return py::module_::import("json").attr("loads")(stack_->stats_json());
    }
    py::object page_cache_stats() const { return stats()["page_cache"]; }
    py::dict costs() { return costs_to_dict(io().costs()); }
    void set_costs(py::object d) { costs_from_dict(io().costs(), d); }
    void set_iodepth(py::handle depth) {
        io().set_iodepth(
            uint32_t(py_args::checked(depth, "set_iodepth: iodepth", 1, py_args::kMaxIodepth)));
    }
    uint32_t max_workers() { return io().max_workers(); }
    // posix_fadvise() on the simulation's file before its first read
    // (fio's fadvise_hint): "none", "normal", "random" or "sequential".
    void set_fadvise(py::handle advice) {
        const std::string allowed = "\"none\" | \"normal\" | \"random\" | \"sequential\"";
        task_.fadvise = py_args::fadvise_from(
            "set_fadvise", py_args::text(advice, "set_fadvise: advice", allowed));
    }
    void set_record_paths(py::handle on) {
        io().set_record_paths(py_args::boolean(on, "set_record_paths: on"));
    }
    py::dict cache_state() {
        PageCache& c = io().cache();
        std::lock_guard<std::mutex> lock(c.mutex());
        py::dict d;
        d["pages"] = c.nr_pages();
        d["dirty"] = c.nr_dirty();
        d["writeback"] = c.nr_writeback();
        d["capacity_pages"] = c.capacity_pages();
        return d;
    }

private:
    struct Pending {
        Op op;
        uint64_t length;
        Buffer buffer;
    };

    // One I/O of submit()/submit_batch(), checked, with its buffer: the
    // caller's data, or zeros (a read), or a pattern of its cookie (a write
    // without data, filled once the cookie is known).
    struct Request {
        bool fsync = false;
        Op op = Op::Read;
        uint64_t offset = 0, length = 0;
        Buffer buffer;
        uint64_t buffer_bytes = 0;  // what the device can hold of it (no data: the pattern)
        bool has_data = false;
    };

    // The caller's bytes for a write of `length` (ValueError for anything else).
    static std::string write_data(const std::string& op, uint64_t length, py::handle data,
                                  const std::string& where) {
        if (op != "write") py_args::fail(where + ": data", "given for " + op, "None");
        std::string s = py_args::bytes_like(data, where + ": data");
        if (s.size() != length)
            py_args::fail(
                where + ": data",
                std::to_string(s.size()) + " bytes for a length of " + std::to_string(length),
                "bytes of the length given");
        return s;
    }

    Request prepare(py::handle op_arg, uint64_t offset, uint64_t length, py::object data,
                    const std::string& where) const {
        Request r;
        r.offset = offset;
        r.length = length;
        std::string op = py_args::text(op_arg, where + ": op", kOps);
        r.fsync = op == "fsync";
        if (!r.fsync && op != "read" && op != "write")
            py_args::fail(where + ": op", "\"" + op + "\"", kOps);
        // fsync(2) syncs the whole file: a range given with it was ignored.
        if (r.fsync && (offset || length))
            py_args::fail(where + ": " + (offset ? "offset" : "length"),
                          std::to_string(offset ? offset : length) +
                              " given for fsync, which syncs the whole device",
                          "0 (the default)");
        r.op = op == "write" ? Op::Write : Op::Read;
        r.has_data = !data.is_none();
        std::string bytes = r.has_data ? write_data(op, length, data, where) : "";
        if (r.fsync) return r;
        // The device holds no byte past its end: a read there is cut short
        // and a write fails (ENOSPC), so the buffer stops at the end too
        // (a 1 GiB read of a 16 MiB device allocated 1 GiB, a 64 GiB write
        // was std::bad_alloc). The caller's data is copied whole.
        uint64_t end = stack_->size_bytes();
        r.buffer_bytes = offset >= end ? 0 : std::min(length, end - offset);
        r.buffer = aligned(std::max<uint64_t>(r.buffer_bytes, bytes.size()));
        memcpy(r.buffer.get(), bytes.data(), bytes.size());
        return r;
    }

    void check_write_fits(const std::string& call, uint64_t offset, uint64_t length) const {
        py_args::write_fits(call, offset, length, stack_->size_bytes());
    }

    // Queues checked requests in one plug: nothing left to fail with it open.
    std::vector<uint64_t> queue_all(std::vector<Request>& requests) {
        std::vector<uint64_t> cookies;
        stack_->begin_batch(task_);
        for (Request& r : requests) {
            uint64_t cookie = next_cookie_++;
            cookies.push_back(cookie);
            if (r.fsync) {
                stack_->fsync(task_, cookie);
                continue;
            }
            uint8_t* p = r.buffer.get();
            if (r.op == Op::Write && !r.has_data)
                for (uint64_t i = 0; i < r.buffer_bytes; i++) p[i] = uint8_t(cookie + i);
            pending_[cookie] = Pending{r.op, r.length, std::move(r.buffer)};
            stack_->queue_buffered(task_, r.op, r.offset, r.length, p, cookie);
        }
        stack_->commit(task_);
        return cookies;
    }

    IoCompletion sync_io(Op op, uint64_t offset, uint64_t length, uint8_t* buf, bool buffered) {
        TaskContext task;
        task.pid = task_.pid;
        stack_->begin_batch(task);
        if (buffered)
            stack_->queue_buffered(task, op, offset, length, buf, 0);
        else
            stack_->queue(task, op, offset, length, buf, 0);
        stack_->commit(task);
        stack_->drain();
        if (buffered) io().take_paths();
        if (task.completions.size() != 1)
            throw std::runtime_error("mdsplit: I/O did not complete once");
        if (task.completions[0].error)
            throw std::runtime_error(std::string("mdsplit: I/O failed: ") +
                                     strerror(-task.completions[0].error));
        return task.completions[0];
    }

    StackConfig config_;
    VirtualClock clock_;
    TaskContext task_;
    std::map<uint64_t, Pending> pending_;
    uint64_t next_cookie_ = 1;
    // Last: destroyed first, before the buffers and task it uses.
    std::unique_ptr<Stack> stack_;
};

}  // namespace

void register_buffered(py::module_& m) {
    py::class_<BufferedSimulation>(m, "BufferedSimulation",
                                   "A stack with its page cache (buffered I/O, io_uring's buffered "
                                   "read paths), on a virtual clock.")
        .def(py::init([](py::handle toml, py::handle base_dir, py::handle label,
                         py::handle trace_dir, py::handle variant, py::handle rasync,
                         py::handle ra_kb, py::handle cache_size, py::handle record_paths,
                         const py::kwargs& kw) {
                 py_args::no_other_keywords(kw, "BufferedSimulation",
                                            "toml, base_dir, label, trace_dir, variant, rasync, "
                                            "ra_kb, cache_size, record_paths");
                 const std::string w = "BufferedSimulation: ";
                 return std::make_unique<BufferedSimulation>(
                     py_args::text(toml, w + "toml", "the stack's TOML text (a str)"),
                     py_args::path(base_dir, w + "base_dir", "a directory (a str)"), false,
                     py_args::text(label, w + "label", "a device name (a str)"),
                     py_args::path(trace_dir, w + "trace_dir", "a directory (a str), or \"\""),
                     variant, rasync, ra_kb, cache_size, record_paths);
             }),
             py::arg("toml"), py::arg("base_dir") = ".", py::arg("label") = "md0",
             py::arg("trace_dir") = "", py::arg("variant") = py::none(),
             py::arg("rasync") = py::none(), py::arg("ra_kb") = py::none(),
             py::arg("cache_size") = py::none(), py::arg("record_paths") = true,
             "TOML text; variant/rasync/ra_kb/cache_size override its [page_cache], checked as its "
             "keys are: ra_kb a multiple of 4 up to 1048576, cache_size a multiple of 4096 > 0. "
             "One call at a time per object: a call from another thread while one runs raises "
             "RuntimeError.")
        .def_static(
            "from_file",
            [](py::handle path, py::handle label, py::handle trace_dir, py::handle variant,
               py::handle rasync, py::handle ra_kb, py::handle cache_size, py::handle record_paths,
               const py::kwargs& kw) {
                py_args::no_other_keywords(kw, "BufferedSimulation.from_file",
                                           "path, label, trace_dir, variant, rasync, ra_kb, "
                                           "cache_size, record_paths");
                const std::string w = "BufferedSimulation.from_file: ";
                return std::make_unique<BufferedSimulation>(
                    py_args::path(path, w + "path", "a stack file's path (a str)"), "", true,
                    py_args::text(label, w + "label", "a device name (a str)"),
                    py_args::path(trace_dir, w + "trace_dir", "a directory (a str), or \"\""),
                    variant, rasync, ra_kb, cache_size, record_paths);
            },
            py::arg("path"), py::arg("label") = "md0", py::arg("trace_dir") = "",
            py::arg("variant") = py::none(), py::arg("rasync") = py::none(),
            py::arg("ra_kb") = py::none(), py::arg("cache_size") = py::none(),
            py::arg("record_paths") = true)
        .def_property_readonly("size", exclusive(&BufferedSimulation::size))
        .def_property_readonly("now_ns", exclusive(&BufferedSimulation::now_ns))
        .def_property_readonly("max_workers", exclusive(&BufferedSimulation::max_workers))
        .def("submit", exclusive(&BufferedSimulation::submit), py::arg("op"), py::arg("offset") = 0,
             py::arg("length") = 0, py::arg("data") = py::none(),
             "One buffered I/O (\"read\", \"write\" or \"fsync\") in its own plug; returns its "
             "cookie.")
        .def("submit_batch", exclusive(&BufferedSimulation::submit_batch), py::arg("ios"))
        .def("fsync", exclusive(&BufferedSimulation::fsync))
        .def(
            "run", exclusive(&BufferedSimulation::run),
            "Runs until idle; the completions since last time, with \"data\" (reads) and \"path\".")
        .def("read", exclusive(&BufferedSimulation::read), py::arg("offset"), py::arg("length"))
        .def("write", exclusive(&BufferedSimulation::write), py::arg("offset"), py::arg("data"))
        .def("direct_read", exclusive(&BufferedSimulation::direct_read), py::arg("offset"),
             py::arg("length"))
        .def("direct_write", exclusive(&BufferedSimulation::direct_write), py::arg("offset"),
             py::arg("data"))
        .def("sync", exclusive(&BufferedSimulation::sync),
             "Writes back every dirty page and waits.")
        .def("invalidate", exclusive(&BufferedSimulation::invalidate),
             "sync(), then drops the clean pages.")
        .def("paths", exclusive(&BufferedSimulation::paths),
             "Paths recorded since the last run()/paths().")
        .def("stats", exclusive(&BufferedSimulation::stats))
        .def("page_cache_stats", exclusive(&BufferedSimulation::page_cache_stats))
        .def("cache_state", exclusive(&BufferedSimulation::cache_state))
        .def("costs", exclusive(&BufferedSimulation::costs),
             "The modelled per-step costs (ns) and cpus.")
        .def("set_costs", exclusive(&BufferedSimulation::set_costs), py::arg("costs"),
             "Changes some costs: each in ns, at most 10**9 (a second), cpus 1..8192. All or "
             "nothing: "
             "an unknown key (UnknownKeyError, a ValueError) or a bad value changes none.")
        .def("set_iodepth", exclusive(&BufferedSimulation::set_iodepth), py::arg("iodepth"))
        .def("set_fadvise", exclusive(&BufferedSimulation::set_fadvise), py::arg("advice"),
             "posix_fadvise() on the file before its first read: \"none\" | \"normal\" | "
             "\"random\" | \"sequential\" (generic_fadvise(): random reads each miss as "
             "asked, sequential doubles the readahead window)")
        .def("set_record_paths", exclusive(&BufferedSimulation::set_record_paths), py::arg("on"));

    m.def("buffered_variants", [] {
        return std::vector<std::string>{"pre-c8d317aa", "c8d317aa", "forced-ra"};
    });
    m.def(
        "buffered_default_costs", [] { return costs_to_dict(BufferedCosts{}); },
        "The default modelled costs (ns) of the buffered read steps, fitted to the seed-003 "
        "table.");
    m.def(
        "measure_buffered_costs",
        [](py::handle scratch_dir_arg, py::handle reads, py::handle wakeups, const py::kwargs& kw) {
            py_args::no_other_keywords(kw, "measure_buffered_costs", "scratch_dir, reads, wakeups");
            std::string scratch_dir = py_args::path(
                scratch_dir_arg, "measure_buffered_costs: scratch_dir", "an existing directory");
            BufferedCostProbeOptions o;
            // The scratch file goes where the caller says, and only there: an
            // existing directory (an empty string was "/", a relative one
            // was joined twice).
            std::error_code ec;
            if (scratch_dir.empty() || !std::filesystem::is_directory(scratch_dir, ec))
                py_args::fail("measure_buffered_costs: scratch_dir",
                              "\"" + scratch_dir + "\" is not an existing directory",
                              "an existing directory on a file system that supports O_DIRECT, "
                              "like \"/var/tmp\"");
            o.scratch_dir = std::filesystem::absolute(scratch_dir).string();
            // No sample would make a figure of 0; 100000 wakeups take half a
            // minute or more (they cannot be interrupted).
            o.reads = uint32_t(py_args::checked(reads, "measure_buffered_costs: reads", 1, 100000));
            o.wakeups =
                uint32_t(py_args::checked(wakeups, "measure_buffered_costs: wakeups", 1, 100000));
            BufferedCosts c;
            {
                py::gil_scoped_release release;
                c = measure_buffered_costs(o);
            }
            return costs_to_dict(c);
        },
        py::arg("scratch_dir") = "/var/tmp", py::arg("reads") = 2000, py::arg("wakeups") = 500,
        "What each buffered read step costs on this machine, measured with the real components "
        "(engine/core/buffered_cost_probe.h), as a costs dict; fio's own costs and cpus keep "
        "their defaults.");
}
