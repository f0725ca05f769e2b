// libFuzzer target: blktrace writer -> reader round trip, and the reader on
// raw bytes. Mode 0: the input is a blktrace file; read_blktrace_file() must
// parse it or throw std::runtime_error. Mode 1: the input describes events;
// written by BlktraceWriter and read back, every field the format carries
// must come back unchanged.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/trace/blktrace_writer.h"

using mdsplit::Op;
using mdsplit::TraceAction;
using mdsplit::TraceEvent;

namespace {

const std::string& scratch() {
    static const std::string path = [] {
        const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        return std::string(dir) + "/mdsplit-fuzz-blktrace-" + std::to_string(getpid()) + ".0";
    }();
    return path;
}

const TraceAction kActions[] = {
    TraceAction::Queue,  TraceAction::Split,  TraceAction::Remap,     TraceAction::GetRq,
    TraceAction::Plug,   TraceAction::Unplug, TraceAction::BackMerge, TraceAction::FrontMerge,
    TraceAction::Insert, TraceAction::Issue,  TraceAction::Complete,
};

[[noreturn]] void mismatch(size_t i, const char* field) {
    fprintf(stderr, "event %zu: %s differs after the round trip\n", i, field);
    abort();
}

void raw(const uint8_t* data, size_t size) {
    {
        std::ofstream f(scratch(), std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(data), std::streamsize(size));
    }
    try {
        std::vector<TraceEvent> events = mdsplit::read_blktrace_file(scratch());
        if (events.size() > size / 48) abort();  // at most one per record header
    } catch (const std::runtime_error&) {
    }
}

void round_trip(FuzzedDataProvider& in) {
    std::vector<TraceEvent> sent;
    size_t n = in.ConsumeIntegralInRange<size_t>(0, 300);
    for (size_t i = 0; i < n && in.remaining_bytes(); i++) {
        TraceEvent e;
        e.sequence = in.ConsumeIntegral<uint64_t>();
        e.time_ns = in.ConsumeIntegral<uint64_t>();
        e.device = in.ConsumeIntegral<uint32_t>();
        e.action = kActions[in.ConsumeIntegralInRange<size_t>(0, std::size(kActions) - 1)];
        e.op = Op(in.ConsumeIntegralInRange<uint8_t>(0, 2));
        e.sync = in.ConsumeBool();
        e.sector = in.ConsumeIntegral<uint64_t>();
        e.bytes = in.ConsumeIntegral<uint32_t>();
        e.pid = in.ConsumeIntegralInRange<uint32_t>(0, 8);  // few pids: notes interleave
        e.error = in.ConsumeIntegralInRange<int32_t>(-32768, 32767);
        if (e.action == TraceAction::Split) e.new_sector = in.ConsumeIntegral<uint64_t>();
        if (e.action == TraceAction::Remap) {
            e.from_device = in.ConsumeIntegral<uint32_t>();
            e.from_sector = in.ConsumeIntegral<uint64_t>();
        }
        if (e.action == TraceAction::Unplug) e.depth = in.ConsumeIntegral<uint32_t>();
        sent.push_back(e);
    }
    mdsplit::BlktraceOptions options;
    options.bio_based = in.ConsumeBool();
    {
        mdsplit::BlktraceWriter w(scratch(), options);
        for (const TraceEvent& e : sent) w.record(e);
        w.flush();
        if (w.events_written() != sent.size()) abort();
    }
    std::vector<TraceEvent> got = mdsplit::read_blktrace_file(scratch());
    if (got.size() != sent.size()) {
        fprintf(stderr, "wrote %zu events, read %zu\n", sent.size(), got.size());
        abort();
    }
    for (size_t i = 0; i < sent.size(); i++) {
        const TraceEvent& a = sent[i];
        const TraceEvent& b = got[i];
        bool opless = a.action == TraceAction::Plug || a.action == TraceAction::Unplug;
        if (b.sequence != (a.sequence & 0xffffffffu)) mismatch(i, "sequence");
        if (b.time_ns != a.time_ns) mismatch(i, "time");
        if (b.device != a.device) mismatch(i, "device");
        if (b.action != a.action) mismatch(i, "action");
        if (b.op != (opless ? Op::Read : a.op)) mismatch(i, "op");
        if (b.sync != (opless ? false : a.sync)) mismatch(i, "sync");
        if (b.sector != a.sector) mismatch(i, "sector");
        if (b.bytes != a.bytes) mismatch(i, "bytes");
        if (b.pid != a.pid) mismatch(i, "pid");
        if (b.error != a.error) mismatch(i, "error");
        if (b.new_sector != a.new_sector) mismatch(i, "new_sector");
        if (b.from_device != a.from_device) mismatch(i, "from_device");
        if (b.from_sector != a.from_sector) mismatch(i, "from_sector");
        if (b.depth != a.depth) mismatch(i, "depth");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    if (data[0] & 1) {
        FuzzedDataProvider in(data + 1, size - 1);
        round_trip(in);
    } else {
        raw(data + 1, size - 1);
    }
    return 0;
}
