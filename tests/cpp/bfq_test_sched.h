// A BfqScheduler on a virtual clock, driven request by request, for the
// BFQ GoogleTest files (bfq_scheduler_test.cpp, bfq_waker_test.cpp).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "core/block/bfq_scheduler.h"

namespace mdsplit::bfq_test {

inline constexpr uint64_t kMs = 1'000'000;

class Sched {
public:
    explicit Sched(GroupCounting counting, uint64_t slice_idle_ns = 8 * kMs,
                   uint32_t max_budget = 16384, double time_scale = 1.0)
        : loop(clock) {
        BfqConfig c;
        c.group_counting = counting;
        c.slice_idle_ns = slice_idle_ns;
        c.max_budget_sectors = max_budget;
        BfqScheduler::Options o;
        o.time_scale = time_scale;
        sched = std::make_unique<BfqScheduler>(loop, c, o);
    }
    TaskContext& task(uint32_t pid, const std::string& group = "", uint8_t prio = 4,
                      IoprioClass cls = IoprioClass::BE, uint32_t group_weight = 100) {
        tasks.emplace_back();
        TaskContext& t = tasks.back();
        t.pid = pid;
        t.sched.group = group;
        t.sched.ioprio = prio;
        t.sched.ioprio_class = cls;
        t.sched.group_weight = group_weight;
        return t;
    }
    Request* insert(TaskContext& t, sector_t sector, uint32_t sectors = 8) {
        rqs.push_back(std::make_unique<Request>());
        Request* rq = rqs.back().get();
        rq->op = Op::Read;  // reads are sync
        rq->sector = sector;
        rq->nr_sectors = sectors;
        rq->pid = t.pid;
        sched->insert(rq, &t);
        return rq;
    }
    void advance(uint64_t ns) {
        clock.advance_to(clock.now_ns() + ns);
        loop.run_ready();
    }
    const bfq::BfqQueue* queue(const TaskContext& t) const {
        return sched->find_queue(t.pid, t.sched.group);
    }
    bool asymmetric(const TaskContext& t) const { return sched->asymmetric_scenario(queue(t)); }
    uint32_t groups_counted() { return sched->data().num_groups_with_pending_reqs; }

    VirtualClock clock;
    EventLoop loop;
    std::unique_ptr<BfqScheduler> sched;
    std::deque<TaskContext> tasks;
    std::vector<std::unique_ptr<Request>> rqs;
};

}  // namespace mdsplit::bfq_test
