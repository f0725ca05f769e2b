// Routes trace events of one stack to per-device sinks, numbering them with
// one global sequence and timing them from the stack's start.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "base/event_loop.h"
#include "core/trace/trace_event.h"

namespace mdsplit {

class Tracer {
public:
    explicit Tracer(EventLoop& loop) : loop_(loop), start_ns_(loop.now()) {}

    bool enabled() const { return enabled_; }
    void add_device_sink(uint32_t devt, TraceSink* sink) {
        per_device_[devt] = sink;
        enabled_ = true;
    }
    void add_global_sink(TraceSink* sink) {
        global_.push_back(sink);
        enabled_ = true;
    }
    void emit(TraceEvent e) {
        if (!enabled_) return;
        e.sequence = ++sequence_;
        e.time_ns = loop_.now() - start_ns_;
        auto it = per_device_.find(e.device);
        if (it != per_device_.end()) it->second->record(e);
        for (TraceSink* s : global_) s->record(e);
    }
    void flush() {
        for (auto& [devt, sink] : per_device_) sink->flush();
        for (TraceSink* s : global_) s->flush();
    }
    uint64_t start_ns() const { return start_ns_; }

private:
    EventLoop& loop_;
    uint64_t start_ns_;
    uint64_t sequence_ = 0;
    bool enabled_ = false;
    std::unordered_map<uint32_t, TraceSink*> per_device_;
    std::vector<TraceSink*> global_;
};

}  // namespace mdsplit
