// What Simulation.run_workload() takes and returns at the Python boundary:
// the fio-style arguments made into a ClosedLoopSpec, and the IoTally
// returned as a dict.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "py_args.h"
#include "sim/io_slots.h"
#include "sim/io_tally.h"

namespace mdsplit {

/**
 * set_rw - fio's rw= into a spec: "read", "write", their "rand" forms, and
 * with @discard "trim" / "randtrim" (or the kernel's "discard")
 *
 * Throws ValueError naming @where's rw and the allowed values otherwise.
 */
inline std::string rw_allowed(bool discard) {
    return std::string("read, write, randread, randwrite") +
           (discard ? ", trim, randtrim, discard, randdiscard" : "");
}

// An rw argument given apart from a dict: a str, else one line naming @where.
inline std::string rw_arg(pybind11::handle rw, const std::string& where, bool discard) {
    return py_args::text(rw, where, rw_allowed(discard));
}

inline void set_rw(ClosedLoopSpec& spec, const std::string& where, const std::string& rw,
                   bool discard) {
    spec.random = rw.rfind("rand", 0) == 0;
    std::string op = spec.random ? rw.substr(4) : rw;
    if (op == "read") {
        spec.op = Op::Read;
    } else if (op == "write") {
        spec.op = Op::Write;
    } else if (discard && (op == "trim" || op == "discard")) {
        spec.op = Op::Discard;
    } else {
        py_args::fail(where + ": rw", "\"" + rw + "\"", rw_allowed(discard));
    }
}

// The arguments Simulation.run_workload() takes, into `spec`; `where` names them in messages. The depth and
// batch are refused outside 1..kMaxIodepth rather than cut to 32 bits or
// raised from 0 to 1.
inline void set_closed_loop(ClosedLoopSpec& spec, const std::string& where, const std::string& rw,
                            bool discard, uint64_t bs, uint64_t iodepth, uint64_t size,
                            uint64_t total, uint64_t offset, uint64_t batch, uint64_t seed) {
    set_rw(spec, where, rw, discard);
    spec.where = where;  // the engine's messages (workload_region) name it so
    spec.block_size = bs;
    spec.iodepth =
        uint32_t(py_args::checked(iodepth, where + ": iodepth", 1, py_args::kMaxIodepth));
    spec.size = size;
    spec.total_bytes = total;
    spec.offset = offset;
    spec.batch = uint32_t(py_args::checked(batch, where + ": batch", 1, py_args::kMaxIodepth));
    spec.seed = seed;
}

inline pybind11::dict io_tally_dict(const IoTally& r) {
    pybind11::dict d;
    d["ios"] = r.ios;
    d["bytes"] = r.bytes;
    d["errors"] = r.errors;
    d["elapsed_ns"] = r.elapsed_ns;
    d["iops"] = r.iops();
    d["bandwidth_bps"] = r.bandwidth_bps();
    d["mean_latency_ns"] = r.mean_latency_ns();
    d["max_latency_ns"] = r.max_latency_ns;
    return d;
}

}  // namespace mdsplit
