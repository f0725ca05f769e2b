#include "base/event_loop.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

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
    deferred_.push_back(Deferred{cb, arg, tag, event_time()});
}

uint64_t EventLoop::add_hold(uint64_t horizon, uint64_t expires) {
    holds_.push_back(Hold{next_hold_id_, horizon, expires});
    return next_hold_id_++;
}

void EventLoop::release_hold(uint64_t id) {
    for (size_t i = 0; i < holds_.size(); i++) {
        if (holds_[i].id == id) {
            holds_[i] = holds_.back();
            holds_.pop_back();
            return;
        }
    }
}

bool EventLoop::held(uint64_t deadline, uint64_t now) const {
    for (const Hold& h : holds_)
        if (h.horizon < deadline && h.expires > now) return true;
    return false;
}

// The timers due at now(): on the real clock the time run_ready() read when
// it began (a timer falling due while its callbacks run waits for the next
// call). run_ready() calls it only when a timer is armed.
size_t EventLoop::run_due_timers() {
    size_t ran = 0;
    uint64_t now = this->now();
    uint64_t fired_at = 0;
    while (!timers_.empty() && timers_.front().deadline <= now) {
        uint64_t next = timers_.front().deadline;
        // A late pass keeps time order: the work an earlier timer deferred
        // runs before a later timer (run_ready() comes back here after it),
        // and a hold taken by an earlier event counts at once.
        if (ran && next > fired_at && !deferred_.empty()) break;
        if (!holds_.empty() && held(next, now)) break;
        std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
        Timer t = timers_.back();
        timers_.pop_back();
        if (!cancelled_.empty() && cancelled_.erase(t.id)) continue;
        armed_.erase(t.id);
        event_at_ = fired_at = t.deadline;
        t.cb(t.arg, t.tag);
        event_at_ = kNoEvent;
        ++ran;
    }
    return ran;
}

// One clock read per call on the real clock, as the kernel stamps a batch of
// completions with one ktime (blk_mq_end_request_batch): the passes after
// the first run at that time too.
size_t EventLoop::run_ready() {
    if (!virtual_) refresh();
    size_t ran = 0;
    for (;;) {
        // The common empty cases tested here, not in a call: this loop runs
        // once per I/O.
        size_t round = posted_nonempty_.load(std::memory_order_acquire) ? run_posted() : 0;
        // Virtual clock: real completions are taken only by settle().
        if (!virtual_)
            for (CompletionSource* s : sources_) round += s->poll();
        // Run only what was deferred before this pass; callbacks may defer more.
        for (size_t n = deferred_.size(); n > 0 && !deferred_.empty(); --n) {
            Deferred d = deferred_.front();
            deferred_.pop_front();
            event_at_ = d.at;
            d.cb(d.arg, d.tag);
            event_at_ = kNoEvent;
            ++round;
        }
        if (!timers_.empty()) round += run_due_timers();
        ran += round;
        if (round == 0) break;
    }
    return ran;
}

// ---- Real I/O under the virtual clock ----------------------------------------
// Real requests (a member file's io_uring I/O) finish when the host finishes
// them; the virtual clock must not depend on when that is. So the sources are
// not polled in passing: settle() waits until everything in flight is done,
// reaps it all, and only then releases what waited for it (MemberQueue
// completes the arrivals in issue order). The loop settles before the clock
// passes the earliest time a real request is due (its timing model's
// completion, or its issue time without a model): what a run sees does not
// depend on the host's speed, only on the model.
void EventLoop::add_real_io(uint64_t due_ns) { real_due_.insert(due_ns); }

void EventLoop::remove_real_io(uint64_t due_ns) {
    auto it = real_due_.find(due_ns);
    if (it != real_due_.end()) real_due_.erase(it);
}

void EventLoop::defer_until_settled(EventCallback cb, void* arg, uint64_t tag) {
    settled_waiters_.push_back(Deferred{cb, arg, tag});
}

// An entry stays in real_due_ until the request reaches its queue (after
// its model time): an early settle is only wasted work, never wrong.
bool EventLoop::must_settle_before(uint64_t t) const {
    if (!settled_waiters_.empty()) return true;
    size_t in_flight = 0;
    for (const CompletionSource* s : sources_) in_flight += s->in_flight();
    if (!in_flight) return false;
    if (t == std::numeric_limits<uint64_t>::max()) return true;  // nothing else can happen
    if (int64_t(in_flight) <= untracked_) return false;
    return real_due_.empty() || t >= *real_due_.begin();
}

size_t EventLoop::settle(bool all) {
    size_t n = 0;
    for (CompletionSource* s : sources_) {
        n += s->poll();
        while (int64_t(s->in_flight()) > (all ? 0 : untracked_)) {
            s->wait(std::numeric_limits<uint64_t>::max());
            n += s->poll();
        }
    }
    for (const Deferred& d : settled_waiters_) deferred_.push_back(d);
    n += settled_waiters_.size();
    settled_waiters_.clear();
    return n;
}
// ----------------------------------------------------------------------------

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
    if (timers_.empty()) return std::numeric_limits<uint64_t>::max();
    uint64_t deadline = timers_.front().deadline;
    // Held: it fires when the last hold that keeps it expires.
    uint64_t at = deadline;
    for (const Hold& h : holds_)
        if (h.horizon < deadline) at = std::max(at, h.expires);
    return at;
}

bool EventLoop::has_pending() const {
    if (!deferred_.empty() || !settled_waiters_.empty()) return true;
    if (remote_expected_ > 0 || posted_nonempty_.load(std::memory_order_acquire)) return true;
    if (!armed_.empty()) return true;
    for (const CompletionSource* s : sources_)
        if (s->in_flight()) return true;
    return false;
}

bool EventLoop::wait_for_next(uint64_t max_wait_ns) {
    drop_cancelled_top();
    if (!deferred_.empty()) return true;
    if (posted_nonempty_.load(std::memory_order_acquire)) return true;
    size_t in_flight = 0;
    for (const CompletionSource* s : sources_) in_flight += s->in_flight();
    uint64_t deadline = next_deadline();
    uint64_t now = clock_.now_ns();
    if (clock_.is_virtual()) {
        // Virtual time: backends complete through timers or deferred work,
        // so the next thing to happen is the next timer, once the real I/O
        // due by then is in.
        if (must_settle_before(deadline)) {
            settle(deadline == std::numeric_limits<uint64_t>::max());
            return true;
        }
        if (deadline == std::numeric_limits<uint64_t>::max()) {
            if (remote_expected_ > 0 && in_flight == 0) {
                // Real threads on a virtual clock (tests only): wait for a post.
                wait_remote(max_wait_ns, nullptr);
                return true;
            }
            return in_flight != 0 || remote_expected_ > 0;
        }
        static_cast<VirtualClock&>(clock_).advance_to(deadline);
        return true;
    }
    if (in_flight == 0 && deadline == std::numeric_limits<uint64_t>::max() && remote_expected_ <= 0)
        return false;
    uint64_t timeout = deadline > now ? std::min(deadline - now, max_wait_ns) : 0;
    if (timeout == 0) return true;
    precise_sleeps();
    if (timeout <= kSpinWaitNs) {
        spin_until(now + timeout);
        return true;
    }
    if (remote_expected_ > 0) {
        CompletionSource* busy = nullptr;
        for (CompletionSource* s : sources_)
            if (s->in_flight()) {
                busy = s;
                break;
            }
        wait_remote(timeout, busy);
        return true;
    }
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

// The kernel lets a sleep end up to the thread's timer slack late (50 us by
// default): each wait of the loop for a modelled time would end that late.
// Once per thread that waits: slack 1 ns (the thread is fio's job thread,
// whose thinktime sleeps then end on time too).
void EventLoop::precise_sleeps() {
    static thread_local bool set = false;
    if (set) return;
    set = true;
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

// A wait shorter than a wake-up costs (kSpinWaitNs) is spun: the clock is
// re-read until `until`, then the caller's run_ready() polls the sources.
void EventLoop::spin_until(uint64_t until) {
    while (clock_.now_ns() < until) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

// ---- Posting from other threads ------------------------------------------

EventLoop::~EventLoop() {
    if (wake_fd_ >= 0 && wake_fd_owned_) close(wake_fd_);
}

void EventLoop::ensure_wake_fd() {
    std::call_once(wake_fd_once_, [this] {
        wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (wake_fd_ < 0)
            throw std::runtime_error(std::string("mdsplit: eventfd: ") + strerror(errno));
        wake_fd_owned_ = true;
    });
}

void EventLoop::set_wake_fd(int fd, bool covers_sources) {
    std::call_once(wake_fd_once_, [&] {
        wake_fd_ = fd;
        wake_covers_sources_ = covers_sources;
    });
}

void EventLoop::post(EventCallback cb, void* arg, uint64_t tag) {
    ensure_wake_fd();
    bool wake;
    {
        std::lock_guard<std::mutex> lock(posted_mutex_);
        wake = posted_.empty();
        posted_.push_back(Deferred{cb, arg, tag});
        posted_nonempty_.store(true, std::memory_order_release);
    }
    // Only the first post of a batch writes: the loop checks the flag before
    // it blocks, and a stale count only costs one spurious wake-up.
    if (wake) {
        uint64_t one = 1;
        ssize_t n;
        do n = write(wake_fd_, &one, sizeof(one));
        while (n < 0 && errno == EINTR);
    }
}

void EventLoop::expect_remote(int64_t delta) {
    if (delta > 0) ensure_wake_fd();
    remote_expected_ += delta;
}

// Runs what other threads posted; run_ready() calls it only when
// posted_nonempty_ says there is something.
size_t EventLoop::run_posted() {
    {
        std::lock_guard<std::mutex> lock(posted_mutex_);
        posted_running_.swap(posted_);
        posted_nonempty_.store(false, std::memory_order_release);
    }
    size_t n = posted_running_.size();
    for (size_t i = 0; i < n; i++)
        posted_running_[i].cb(posted_running_[i].arg, posted_running_[i].tag);
    posted_running_.clear();
    return n;
}

void EventLoop::wait_remote(uint64_t timeout_ns, CompletionSource* source) {
    pollfd fds[2];
    nfds_t n = 0;
    fds[n++] = pollfd{wake_fd_, POLLIN, 0};
    if (source && !wake_covers_sources_) {
        int fd = source->poll_fd();
        if (fd < 0) {
            // The source cannot be polled: wait in it for a slice, so posts
            // are seen within kRemoteWaitSliceNs.
            source->wait(std::min(timeout_ns, kRemoteWaitSliceNs));
            return;
        }
        fds[n++] = pollfd{fd, POLLIN, 0};
    }
    timespec ts{time_t(timeout_ns / 1'000'000'000), long(timeout_ns % 1'000'000'000)};
    int r = ppoll(fds, n, &ts, nullptr);
    if (r > 0 && (fds[0].revents & POLLIN)) {
        uint64_t count;
        while (read(wake_fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
        }
    }
}

}  // namespace mdsplit
