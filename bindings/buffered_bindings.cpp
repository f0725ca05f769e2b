// Python: buffered I/O through the page cache (seed 003) on a virtual clock.
//
//   sim = mdsplit.BufferedSimulation(toml, variant="c8d317aa", rasync=False, ra_kb=0)
//   c = sim.submit("read", 1 << 20, 4096)      # one buffered I/O, returns its cookie
//   [done] = sim.run()                         # {"cookie", "error", "resid", "data", "path":
//   {...}} done["path"]["issued_by"], ["completed_in"], ["inline_attempts"], ["punted"], ...
//   sim.run_workload("randread", 4096, iodepth=32, total=...)  # fio's loop, with its CPU cost
//   sim.stats()["page_cache"]
//
// The module's PYBIND11_MODULE (mdsplit_module.cpp) calls register_buffered(m).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "config/config_loader.h"
#include "core/io_uring/buffered_io.h"
#include "sim/buffered_cost_probe.h"
#include "sim/buffered_workload.h"
#include "stack/stack.h"
#include "workload_args.h"

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

BufferedVariant parse_variant(const std::string& v) {
    if (v == "pre-c8d317aa") return BufferedVariant::PreC8d317aa;
    if (v == "c8d317aa") return BufferedVariant::C8d317aa;
    if (v == "forced-ra") return BufferedVariant::ForcedRa;
    throw py::value_error("variant: \"" + v +
                          "\"; allowed: \"pre-c8d317aa\" | \"c8d317aa\" | \"forced-ra\"");
}

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

// BufferedCosts <-> dict, by field name.
struct CostField {
    const char* name;
    uint64_t BufferedCosts::*field;
};
const CostField kCostFields[] = {
    {"fio_submit_ns", &BufferedCosts::fio_submit_ns},
    {"fio_complete_ns", &BufferedCosts::fio_complete_ns},
    {"lookup_ns", &BufferedCosts::lookup_ns},
    {"page_alloc_ns", &BufferedCosts::page_alloc_ns},
    {"bio_submit_ns", &BufferedCosts::bio_submit_ns},
    {"bio_page_ns", &BufferedCosts::bio_page_ns},
    {"readahead_ns", &BufferedCosts::readahead_ns},
    {"copy_4k_ns", &BufferedCosts::copy_4k_ns},
    {"arm_ns", &BufferedCosts::arm_ns},
    {"task_work_ns", &BufferedCosts::task_work_ns},
    {"punt_ns", &BufferedCosts::punt_ns},
    {"wakeup_ns", &BufferedCosts::wakeup_ns},
    {"cqe_ns", &BufferedCosts::cqe_ns},
    {"dirty_page_ns", &BufferedCosts::dirty_page_ns},
};

py::dict costs_to_dict(const BufferedCosts& c) {
    py::dict d;
    for (const CostField& f : kCostFields) d[f.name] = c.*(f.field);
    d["cpus"] = c.cpus;
    return d;
}

void costs_from_dict(BufferedCosts& c, const py::dict& d) {
    for (auto item : d) {
        std::string key = py::str(item.first);
        if (key == "cpus") {
            c.cpus = item.second.cast<uint32_t>();
            if (!c.cpus) throw py::value_error("costs: cpus must be >= 1");
            continue;
        }
        bool found = false;
        for (const CostField& f : kCostFields)
            if (key == f.name) {
                c.*(f.field) = item.second.cast<uint64_t>();
                found = true;
            }
        if (!found) throw py::key_error("costs: unknown key \"" + key + "\"");
    }
}

class BufferedSimulation {
public:
    BufferedSimulation(const std::string& toml, const std::string& base_dir, bool is_file,
                       const std::string& label, const std::string& trace_dir,
                       std::optional<std::string> variant, std::optional<bool> rasync,
                       std::optional<uint32_t> ra_kb, std::optional<uint64_t> cache_size,
                       bool record_paths) {
        config_ = is_file ? load_stack_file(toml) : load_stack_text(toml, base_dir, "<text>");
        if (variant) config_.page_cache.variant = parse_variant(*variant);
        if (rasync) config_.page_cache.rasync = *rasync;
        if (ra_kb) {
            if (*ra_kb % 4) throw py::value_error("ra_kb: must be a whole number of 4 KiB pages");
            config_.page_cache.ra_kb = *ra_kb;
        }
        if (cache_size) config_.page_cache.size_bytes = *cache_size;
        StackOptions so;
        so.label = label;
        so.trace_dir = trace_dir;
        stack_ = std::make_unique<Stack>(config_, clock_, so);
        stack_->buffered().set_record_paths(record_paths);
        task_.pid = 1;
    }

    BufferedIo& io() { return stack_->buffered(); }
    uint64_t size() const { return stack_->size_bytes(); }
    uint64_t now_ns() const { return clock_.now_ns(); }

    uint64_t submit(const std::string& op, uint64_t offset, uint64_t length, py::object data) {
        stack_->begin_batch(task_);
        uint64_t cookie = queue_one(op, offset, length, data);
        stack_->commit(task_);
        return cookie;
    }

    py::list submit_batch(const std::vector<std::tuple<std::string, uint64_t, uint64_t>>& ios) {
        py::list cookies;
        stack_->begin_batch(task_);
        for (auto& [op, offset, length] : ios)
            cookies.append(queue_one(op, offset, length, py::none()));
        stack_->commit(task_);
        return cookies;
    }

    uint64_t fsync() { return submit("fsync", 0, 0, py::none()); }

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

    py::bytes read(uint64_t offset, uint64_t length) {
        auto buf = aligned(length);
        IoCompletion c = sync_io(Op::Read, offset, length, buf.get(), true);
        return py::bytes(reinterpret_cast<const char*>(buf.get()),
                         length - std::min(length, c.resid));
    }

    void write(uint64_t offset, py::bytes data) {
        std::string s = data;
        auto buf = aligned(s.size());
        memcpy(buf.get(), s.data(), s.size());
        sync_io(Op::Write, offset, s.size(), buf.get(), true);
    }

    // Direct I/O (what the members hold), bypassing the page cache.
    py::bytes direct_read(uint64_t offset, uint64_t length) {
        auto buf = aligned(length);
        sync_io(Op::Read, offset, length, buf.get(), false);
        return py::bytes(reinterpret_cast<const char*>(buf.get()), length);
    }

    void direct_write(uint64_t offset, py::bytes data) {
        std::string s = data;
        auto buf = aligned(s.size());
        memcpy(buf.get(), s.data(), s.size());
        sync_io(Op::Write, offset, s.size(), buf.get(), false);
    }

    void sync() { stack_->sync_buffered(); }
    void invalidate() { stack_->invalidate(); }

    py::dict run_workload(const std::string& rw, uint64_t bs, uint64_t iodepth, uint64_t size,
                          uint64_t total, uint64_t offset, uint64_t batch, uint64_t seed,
                          bool end_fsync) {
        BufferedWorkloadSpec spec;
        set_closed_loop(spec, rw, /*discard=*/false, bs, iodepth, size, total, offset, batch, seed);
        spec.end_fsync = end_fsync;
        BufferedWorkloadResult r;
        {
            py::gil_scoped_release release;
            r = run_buffered_workload(*stack_, spec);
        }
        py::dict d = io_tally_dict(r);
        d["unexpected_completions"] = r.unexpected_completions;
        return d;
    }

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
    void set_costs(const py::dict& d) { costs_from_dict(io().costs(), d); }
    void set_iodepth(uint32_t depth) { io().set_iodepth(depth); }
    uint32_t max_workers() { return io().max_workers(); }
    void set_fadvise_random(bool on) { io().set_fadvise_random(on); }
    void set_record_paths(bool on) { io().set_record_paths(on); }
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

    uint64_t queue_one(const std::string& op, uint64_t offset, uint64_t length, py::object data) {
        uint64_t cookie = next_cookie_++;
        if (op == "fsync") {
            stack_->fsync(task_, cookie);
            return cookie;
        }
        Op o;
        if (op == "read")
            o = Op::Read;
        else if (op == "write")
            o = Op::Write;
        else
            throw py::value_error("op: \"" + op + "\"; allowed: \"read\" | \"write\" | \"fsync\"");
        Buffer buf = aligned(length);
        if (!data.is_none()) {
            std::string s = data.cast<py::bytes>();
            if (s.size() != length) throw py::value_error("data: length does not match");
            memcpy(buf.get(), s.data(), length);
        } else if (o == Op::Write) {
            for (uint64_t i = 0; i < length; i++) buf.get()[i] = uint8_t(cookie + i);
        }
        uint8_t* p = buf.get();
        pending_[cookie] = Pending{o, length, std::move(buf)};
        stack_->queue_buffered(task_, o, offset, length, p, cookie);
        return cookie;
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
    std::unique_ptr<Stack> stack_;
    TaskContext task_;
    std::map<uint64_t, Pending> pending_;
    uint64_t next_cookie_ = 1;
};

}  // namespace

void register_buffered(py::module_& m) {
    py::class_<BufferedSimulation>(m, "BufferedSimulation",
                                   "A stack with its page cache (buffered I/O, io_uring's buffered "
                                   "read paths), on a virtual clock.")
        .def(py::init([](const std::string& toml, const std::string& base_dir,
                         const std::string& label, const std::string& trace_dir,
                         std::optional<std::string> variant, std::optional<bool> rasync,
                         std::optional<uint32_t> ra_kb, std::optional<uint64_t> cache_size,
                         bool record_paths) {
                 return std::make_unique<BufferedSimulation>(toml, base_dir, false, label,
                                                             trace_dir, variant, rasync, ra_kb,
                                                             cache_size, record_paths);
             }),
             py::arg("toml"), py::arg("base_dir") = ".", py::arg("label") = "md0",
             py::arg("trace_dir") = "", py::arg("variant") = py::none(),
             py::arg("rasync") = py::none(), py::arg("ra_kb") = py::none(),
             py::arg("cache_size") = py::none(), py::arg("record_paths") = true,
             "TOML text; variant/rasync/ra_kb/cache_size override its [page_cache].")
        .def_static(
            "from_file",
            [](const std::string& path, const std::string& label, const std::string& trace_dir,
               std::optional<std::string> variant, std::optional<bool> rasync,
               std::optional<uint32_t> ra_kb, std::optional<uint64_t> cache_size,
               bool record_paths) {
                return std::make_unique<BufferedSimulation>(path, "", true, label, trace_dir,
                                                            variant, rasync, ra_kb, cache_size,
                                                            record_paths);
            },
            py::arg("path"), py::arg("label") = "md0", py::arg("trace_dir") = "",
            py::arg("variant") = py::none(), py::arg("rasync") = py::none(),
            py::arg("ra_kb") = py::none(), py::arg("cache_size") = py::none(),
            py::arg("record_paths") = true)
        .def_property_readonly("size", &BufferedSimulation::size)
        .def_property_readonly("now_ns", &BufferedSimulation::now_ns)
        .def_property_readonly("max_workers", &BufferedSimulation::max_workers)
        .def("submit", &BufferedSimulation::submit, py::arg("op"), py::arg("offset") = 0,
             py::arg("length") = 0, py::arg("data") = py::none(),
             "One buffered I/O (\"read\", \"write\" or \"fsync\") in its own plug; returns its "
             "cookie.")
        .def("submit_batch", &BufferedSimulation::submit_batch, py::arg("ios"))
        .def("fsync", &BufferedSimulation::fsync)
        .def(
            "run", &BufferedSimulation::run,
            "Runs until idle; the completions since last time, with \"data\" (reads) and \"path\".")
        .def("read", &BufferedSimulation::read, py::arg("offset"), py::arg("length"))
        .def("write", &BufferedSimulation::write, py::arg("offset"), py::arg("data"))
        .def("direct_read", &BufferedSimulation::direct_read, py::arg("offset"), py::arg("length"))
        .def("direct_write", &BufferedSimulation::direct_write, py::arg("offset"), py::arg("data"))
        .def("sync", &BufferedSimulation::sync, "Writes back every dirty page and waits.")
        .def("invalidate", &BufferedSimulation::invalidate, "sync(), then drops the clean pages.")
        .def("run_workload", &BufferedSimulation::run_workload, py::arg("rw"), py::arg("bs") = 4096,
             py::arg("iodepth") = 1, py::arg("size") = 0, py::arg("total") = 0,
             py::arg("offset") = 0, py::arg("batch") = 1, py::arg("seed") = 1,
             py::arg("end_fsync") = false,
             "fio's loop (ioengine=io_uring, direct=0) with fio's own CPU cost on the submitter.")
        .def("paths", &BufferedSimulation::paths, "Paths recorded since the last run()/paths().")
        .def("stats", &BufferedSimulation::stats)
        .def("page_cache_stats", &BufferedSimulation::page_cache_stats)
        .def("cache_state", &BufferedSimulation::cache_state)
        .def("costs", &BufferedSimulation::costs, "The modelled per-step costs (ns) and cpus.")
        .def("set_costs", &BufferedSimulation::set_costs, py::arg("costs"))
        .def("set_iodepth", &BufferedSimulation::set_iodepth, py::arg("iodepth"))
        .def("set_fadvise_random", &BufferedSimulation::set_fadvise_random, py::arg("on"))
        .def("set_record_paths", &BufferedSimulation::set_record_paths, py::arg("on"));

    m.def("buffered_variants", [] {
        return std::vector<std::string>{"pre-c8d317aa", "c8d317aa", "forced-ra"};
    });
    m.def(
        "buffered_default_costs", [] { return costs_to_dict(BufferedCosts{}); },
        "The default modelled costs (ns) of the buffered read steps, fitted to the seed-003 "
        "table.");
    m.def(
        "measure_buffered_costs",
        [](const std::string& scratch_dir, uint32_t reads, uint32_t wakeups) {
            BufferedCostProbeOptions o;
            o.scratch_dir = scratch_dir;
            o.reads = reads;
            o.wakeups = wakeups;
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
