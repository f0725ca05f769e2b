// The member-queue test rig shared by plug_merge_test.cpp and
// mq_deadline_test.cpp: an event loop, a block layer, member queues over
// recording RAM backends, and helpers to submit bios and read the trace.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/drivers/backend.h"
#include "core/drivers/ram_backend.h"
#include "core/trace/trace_event.h"
#include "core/trace/tracer.h"

namespace mdsplit {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kMemberBytes = 64 * kMiB;

uint32_t sectors_of(uint64_t bytes) { return uint32_t(bytes >> kSectorShift); }

// Forwards to a RamBackend and records what each issued request looked like.
class RecordingBackend final : public Backend {
public:
    struct Issued {
        Op op;
        sector_t sector;
        uint32_t nr_sectors;
        uint32_t nr_bios;
        size_t iovecs;
    };
    RecordingBackend(EventLoop& loop, uint64_t size)
        : ram_(std::make_unique<RamBackend>(loop, size)) {
        ram_->set_completion(&RecordingBackend::forward, this);
    }
    void submit(Request* rq) override {
        issued.push_back(Issued{rq->op, rq->sector, rq->nr_sectors, rq->nr_bios, rq->iov.size()});
        ram_->submit(rq);
    }
    uint64_t size_bytes() const override { return ram_->size_bytes(); }
    const char* kind() const override { return "recording"; }
    RamBackend& ram() { return *ram_; }
    std::vector<Issued> issued;

private:
    static void forward(void* ctx, Request* rq, int64_t res) {
        static_cast<RecordingBackend*>(ctx)->complete(rq, res);
    }
    std::unique_ptr<RamBackend> ram_;
};

MemberQueueLimits member_limits(uint64_t max_bytes, uint32_t queue_depth = 64) {
    MemberQueueLimits limits;
    limits.max_sectors = sectors_of(max_bytes);
    limits.queue_depth = queue_depth;
    return limits;
}

// A block layer with members and one submitting task whose plug is open.
class PlugHarness {
public:
    PlugHarness() : loop_(clock_), tracer_(loop_), layer_(loop_, tracer_, SplitInsert::Head) {
        tracer_.add_global_sink(&recorder_);
        task_.pid = 7;
        layer_.set_current(&task_);
    }
    ~PlugHarness() { layer_.set_current(nullptr); }

    MemberQueue& add_member(const MemberQueueLimits& limits) {
        auto backend = std::make_unique<RecordingBackend>(loop_, kMemberBytes);
        recorders_.push_back(backend.get());
        return add_member(std::move(backend), limits);
    }
    MemberQueue& add_member(std::unique_ptr<Backend> backend, const MemberQueueLimits& limits) {
        size_t i = members_.size();
        members_.push_back(std::make_unique<MemberQueue>(layer_, "m" + std::to_string(i),
                                                         make_devt(8, uint32_t(16 * i)),
                                                         std::move(backend), limits));
        return *members_.back();
    }
    RecordingBackend& recorder(size_t i) { return *recorders_.at(i); }

    void start_plug() { layer_.start_plug(task_); }
    void finish_plug() { layer_.finish_plug(task_); }
    PlugList& plug() { return task_.plug; }

    // submit_bio() of one bio from the task; it completes into `completed`.
    void submit(MemberQueue& dev, Op op, sector_t sector, uint32_t nr_sectors,
                uint8_t* data = nullptr) {
        Bio* bio = layer_.bios().alloc();
        bio->op = op;
        bio->flags = kBioSync;
        bio->sector = sector;
        bio->nr_sectors = nr_sectors;
        bio->dev = &dev;
        bio->data = data;
        bio->pid = task_.pid;
        bio->end_io = &PlugHarness::bio_done;
        bio->private_data = this;
        submitted++;
        layer_.submit_bio_noacct(bio);
    }

    void run_until_idle() {
        loop_.run_ready();
        while (loop_.has_pending()) {
            if (!loop_.wait_for_next()) break;
            loop_.run_ready();
        }
    }

    // The blktrace letters of one device's events, in order.
    std::string actions(const MemberQueue& dev) const {
        std::string out;
        for (const TraceEvent& e : recorder_.events)
            if (e.device == dev.devt()) out += char(e.action);
        return out;
    }
    std::vector<TraceEvent> events(const MemberQueue& dev, TraceAction action) const {
        std::vector<TraceEvent> out;
        for (const TraceEvent& e : recorder_.events)
            if (e.device == dev.devt() && e.action == action) out.push_back(e);
        return out;
    }
    size_t count(TraceAction action) const {
        size_t n = 0;
        for (const TraceEvent& e : recorder_.events) n += e.action == action;
        return n;
    }

    EventLoop& loop() { return loop_; }
    VirtualClock& clock() { return clock_; }
    BlockLayer& layer() { return layer_; }
    int submitted = 0;
    int completed = 0;

private:
    static void bio_done(Bio* bio) {
        static_cast<PlugHarness*>(bio->private_data)->completed++;
        bio->pool->put(bio);
    }

    VirtualClock clock_;
    EventLoop loop_;
    Tracer tracer_;
    TraceRecorder recorder_;
    BlockLayer layer_;
    TaskContext task_;
    std::vector<std::unique_ptr<MemberQueue>> members_;
    std::vector<RecordingBackend*> recorders_;
};

}  // namespace
}  // namespace mdsplit
