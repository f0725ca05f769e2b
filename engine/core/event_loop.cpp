#include "core/event_loop.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace mdsplit {

uint64_t EventLoop::schedule_at(uint64_t deadline_ns, EventCallback cb, void* arg, uint64_t tag) {
    uint64_t id = next_timer_id_++;
    timers_.push_back(Timer{deadline_ns, id, cb, arg, tag});
    armed_.insert(id);
    std::push_heap(timers_.begin(), timers_.end(), std::greater<>());
    return id;
}

void EventLoop::cancel(uint64_t timer_id) {
    // A timer that already fired (or was cancelled) is not in the heap.
    if (armed_.erase(timer_id)) cancelled_.insert(timer_id);
}

void EventLoop::defer(EventCallback cb, void* arg, uint64_t tag) {
    deferred_.push_back(Deferred{cb, arg, tag});
}

size_t EventLoop::run_due_timers() {
    size_t ran = 0;
    if (timers_.empty()) return 0;
    uint64_t now = virtual_ ? clock_.now_ns() : refresh();
    while (!timers_.empty() && timers_.front().deadline <= now) {
        std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
        Timer t = timers_.back();
        timers_.pop_back();
        if (!cancelled_.empty() && cancelled_.erase(t.id)) continue;
        armed_.erase(t.id);
        t.cb(t.arg, t.tag);
        ++ran;
    }
    return ran;
}

size_t EventLoop::run_ready() {
    if (!virtual_) refresh();
    size_t ran = 0;
    for (;;) {
        size_t round = 0;
        for (CompletionSource* s : sources_) round += s->poll();
        // Run only what was deferred before this pass; callbacks may defer more.
        for (size_t n = deferred_.size(); n > 0 && !deferred_.empty(); --n) {
            Deferred d = deferred_.front();
            deferred_.pop_front();
            d.cb(d.arg, d.tag);
            ++round;
        }
        round += run_due_timers();
        ran += round;
        if (round == 0) break;
    }
    return ran;
}

void EventLoop::drop_cancelled_top() {
    while (!timers_.empty() && !cancelled_.empty() && cancelled_.count(timers_.front().id)) {
        cancelled_.erase(timers_.front().id);
        std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
        timers_.pop_back();
    }
}

uint64_t EventLoop::next_deadline() const {
    // Cancelled timers may sit at the top; they only cause an early wake-up
    // (wait_for_next() drops them first).
    return timers_.empty() ? std::numeric_limits<uint64_t>::max() : timers_.front().deadline;
}

bool EventLoop::has_pending() const {
    if (!deferred_.empty()) return true;
    if (!armed_.empty()) return true;
    for (const CompletionSource* s : sources_)
        if (s->in_flight()) return true;
    return false;
}

bool EventLoop::wait_for_next(uint64_t max_wait_ns) {
    drop_cancelled_top();
    if (!deferred_.empty()) return true;
    size_t in_flight = 0;
    for (const CompletionSource* s : sources_) in_flight += s->in_flight();
    uint64_t deadline = next_deadline();
    uint64_t now = clock_.now_ns();
    if (clock_.is_virtual()) {
        // Virtual time: backends complete through timers or deferred work,
        // so the next thing to happen is the next timer.
        if (deadline == std::numeric_limits<uint64_t>::max()) return in_flight != 0;
        static_cast<VirtualClock&>(clock_).advance_to(deadline);
        return true;
    }
    if (in_flight == 0 && deadline == std::numeric_limits<uint64_t>::max()) return false;
    uint64_t timeout = deadline > now ? std::min(deadline - now, max_wait_ns) : 0;
    if (timeout == 0) return true;
    if (in_flight && !sources_.empty()) {
        // One ring serves all io_uring members of a stack, so one source blocks.
        for (CompletionSource* s : sources_)
            if (s->in_flight()) {
                s->wait(timeout);
                break;
            }
    } else {
        timespec ts{time_t(timeout / 1'000'000'000), long(timeout % 1'000'000'000)};
        nanosleep(&ts, nullptr);
    }
    return true;
}

}  // namespace mdsplit
