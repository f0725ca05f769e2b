// What a kernel block tracepoint records, in one struct. Every layer emits
// these; sinks turn them into blktrace files (blktrace_writer.h) or Python
// objects (bindings). Sequence numbers are global to one stack, so the order
// of events on different devices can be recovered.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/units.h"

namespace mdsplit {

// The blktrace letters (blkparse's action column).
enum class TraceAction : char {
    Queue = 'Q',       // block_bio_queue
    Split = 'X',       // block_split        (pdu: new sector)
    Remap = 'A',       // block_bio_remap    (pdu: from device, from sector)
    GetRq = 'G',       // block_getrq
    Plug = 'P',        // block_plug
    Unplug = 'U',      // block_unplug       (pdu: depth)
    BackMerge = 'M',   // block_bio_backmerge
    FrontMerge = 'F',  // block_bio_frontmerge
    Insert = 'I',      // block_rq_insert
    Issue = 'D',       // block_rq_issue
    Complete = 'C',    // block_rq_complete / block_bio_complete
};
// Every TraceAction's letter, in the order above.
inline constexpr std::string_view kTraceActionLetters = "QXAGPUMFIDC";

struct TraceEvent {
    uint64_t sequence = 0;  // global across the stack, starts at 1
    uint64_t time_ns = 0;   // since the stack started
    uint32_t device = 0;    // major << 20 | minor (blktrace's encoding)
    TraceAction action = TraceAction::Queue;
    Op op = Op::Read;
    bool sync = false;  // REQ_SYNC (direct I/O reads and writes)
    sector_t sector = 0;
    uint32_t bytes = 0;
    uint32_t pid = 0;   // the submitting fio job
    int32_t error = 0;  // negative errno on C
    // Payloads: Split -> new_sector; Remap -> from_device + from_sector;
    // Unplug -> depth (requests flushed).
    sector_t new_sector = 0;
    uint32_t from_device = 0;
    sector_t from_sector = 0;
    uint32_t depth = 0;
};

class TraceSink {
public:
    virtual ~TraceSink() = default;
    virtual void record(const TraceEvent& event) = 0;
    virtual void flush() {}
};

// A sink that keeps every event (tests and the Python bindings).
class TraceRecorder final : public TraceSink {
public:
    void record(const TraceEvent& event) override { events.push_back(event); }
    std::vector<TraceEvent> events;
};

}  // namespace mdsplit
