// A workload's IoTally as the dict both simulations' run_workload() return.
#pragma once

#include <pybind11/pybind11.h>

#include "sim/io_tally.h"

namespace mdsplit {

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
