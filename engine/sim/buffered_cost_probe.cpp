#include "sim/buffered_cost_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/event_loop.h"
#include "config/config_loader.h"
#include "core/block/task_context.h"
#include "core/mm/page_cache.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

uint64_t now_ns() {
    static const RealClock clock;
    return clock.now_ns();
}

uint64_t median(std::vector<uint64_t> v) {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    return v[v.size() / 2];
}

// The median of `rounds` timings of `n` calls of f(i), per call (the median
// keeps a preemption in one round out of the figure).
template <class F>
uint64_t per_call_ns(uint32_t n, F&& f, int rounds = 5) {
    std::vector<uint64_t> t;
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = now_ns();
        for (uint32_t i = 0; i < n; i++) f(i);
        t.push_back((now_ns() - t0) / n);
    }
    return median(std::move(t));
}

// Page cache: find_get_page() of a cached page (under the cache's lock, as
// the read attempt takes it), and page_cache_alloc() + add_to_page_cache_lru()
// of a new one in a full cache (the LRU tail is evicted), as in the seed's
// random reads over a file four times the cache.
void measure_page_cache(BufferedCosts& c) {
    constexpr uint64_t kCachePages = 16384;  // 64 MiB
    PageCache cache(kCachePages << kPageShift, 64 * kCachePages << kPageShift);
    std::lock_guard<std::mutex> lock(cache.mutex());
    for (uint64_t i = 0; i < kCachePages; i++) {
        Page* p = cache.add_locked(i);
        p->flags = kPgUptodate;
        cache.put(p);
    }
    std::mt19937_64 rng(1);
    std::vector<uint64_t> hits(1 << 16), misses(1 << 16);
    for (auto& i : hits) i = rng() % kCachePages;
    uint64_t next = kCachePages;
    for (auto& i : misses) i = next++;
    Page* sink = nullptr;
    c.lookup_ns = per_call_ns(uint32_t(hits.size()), [&](uint32_t i) {
        Page* p = cache.find(hits[i]);
        if (p) cache.mark_accessed(p);
        sink = p;
    });
    (void)sink;
    uint32_t used = 0;
    c.page_alloc_ns = per_call_ns(
        uint32_t(misses.size() / 5),
        [&](uint32_t) {
            Page* p = cache.add_locked(misses[used++ % misses.size()]);
            if (!p) return;
            p->flags = kPgUptodate;  // end_page_read(): clean and evictable again
            cache.put(p);
        },
        5);
}

// copy_to_user() of 4 KiB from a page that is not in the CPU's caches.
void measure_copy(BufferedCosts& c) {
    constexpr size_t kPages = 16384;  // 64 MiB: larger than the caches
    std::unique_ptr<uint8_t[]> pages(new uint8_t[kPages * 4096]);
    std::memset(pages.get(), 1, kPages * 4096);
    alignas(64) static uint8_t user[4096];
    std::mt19937_64 rng(2);
    std::vector<uint32_t> order(kPages);
    for (auto& i : order) i = uint32_t(rng() % kPages);
    c.copy_4k_ns = per_call_ns(uint32_t(kPages), [&](uint32_t i) {
        std::memcpy(user, pages.get() + size_t(order[i]) * 4096, 4096);
        asm volatile("" : : "r"(user) : "memory");
    });
}

// A page-wait callback armed (io_rw_should_retry + __wait_on_page_locked_async
// queueing the wait entry) and the callback run from the loop's deferred
// queue (io_async_buf_func -> task_work -> io_req_task_submit), and a
// completion recorded (io_cqring_add_event).
void measure_loop_steps(BufferedCosts& c) {
    std::mutex mu;
    Page page;
    std::vector<PageWaiter> waiters(4096);
    c.arm_ns = per_call_ns(uint32_t(waiters.size()), [&](uint32_t i) {
        std::lock_guard<std::mutex> l(mu);
        PageWaiter& w = waiters[i];
        w.page = &page;
        w.next = page.waiters;
        page.waiters = &w;
    });
    RealClock clock;
    EventLoop loop(clock);
    uint64_t ran = 0;
    auto cb = [](void* arg, uint64_t) { ++*static_cast<uint64_t*>(arg); };
    c.task_work_ns = per_call_ns(4096, [&](uint32_t) {
        loop.defer(cb, &ran);
        loop.run_ready();
    });
    TaskContext task;
    task.completions.reserve(64);
    c.cqe_ns = per_call_ns(1 << 16, [&](uint32_t i) {
        task.completions.push_back(IoCompletion{i, 0, 0});
        if (task.completions.size() == 64) task.completions.clear();
    });
}

// io_queue_async_work(): a work item handed to a worker thread that sleeps
// on a condition variable (the submitter's side: queue + wake, punt_ns), and
// how long the worker takes to run after the wake (wakeup_ns). Each hand-off
// is made to a parked worker (idle for 100 us), as io_wqe_enqueue() wakes a
// free worker (io_wqe_activate_free_worker) at every depth: the pool holds up
// to min(iodepth, 4 x CPUs) workers and each parks between its I/Os. The
// submitter then sleeps until the worker answers, as a submitter with
// nothing else to do waits for its completion (the scheduler may run the
// worker on the submitter's CPU).
void measure_handoff(BufferedCosts& c, uint32_t n) {
    std::mutex mu;
    std::condition_variable to_worker, to_submitter;
    std::deque<uint64_t> queue;
    bool stop = false, answered = false;
    int idle = 0;
    std::vector<uint64_t> wake;
    std::thread worker([&] {
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
            while (queue.empty() && !stop) {
                idle++;
                to_worker.wait(lk);
                idle--;
            }
            if (stop) return;
            uint64_t sent = queue.front();
            queue.pop_front();
            wake.push_back(now_ns() - sent);
            answered = true;
            to_submitter.notify_one();
        }
    });
    std::vector<uint64_t> punt;
    for (uint32_t i = 0; i < n; i++) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        uint64_t t0 = now_ns();
        std::unique_lock<std::mutex> lk(mu);
        queue.push_back(t0);
        if (idle > 0) to_worker.notify_one();
        lk.unlock();
        punt.push_back(now_ns() - t0);
        lk.lock();
        to_submitter.wait(lk, [&] { return answered; });
        answered = false;
    }
    {
        std::lock_guard<std::mutex> l(mu);
        stop = true;
        to_worker.notify_one();
    }
    worker.join();
    c.punt_ns = median(punt);
    c.wakeup_ns = median(wake);
}

// ->readpage(): 4 KiB reads (and reads of 8 pages, for bio_page_ns)
// submitted through a real stack (bio, plug, request, io_uring SQE,
// io_uring_enter) to an O_DIRECT member file; only the submission is timed,
// as only it is on the submitting CPU.
void measure_submission(BufferedCosts& c, const BufferedCostProbeOptions& o) {
    std::string path = o.scratch_dir + "/mdsplit-cost-probe-XXXXXX";
    std::vector<char> name(path.begin(), path.end());
    name.push_back('\0');
    int fd = mkstemp(name.data());
    if (fd < 0)
        throw std::runtime_error("mdsplit: cost probe: cannot create a scratch file in " +
                                 o.scratch_dir + ": " + strerror(errno));
    struct Unlink {
        std::string path;
        ~Unlink() { unlink(path.c_str()); }
    } unlink_after{name.data()};
    {
        std::vector<char> block(1 << 20, 'x');
        for (uint64_t off = 0; off < o.scratch_bytes; off += block.size())
            if (pwrite(fd, block.data(), block.size(), off_t(off)) != ssize_t(block.size())) {
                close(fd);
                throw std::runtime_error("mdsplit: cost probe: cannot write " +
                                         std::string(name.data()) + ": " + strerror(errno));
            }
        fsync(fd);
        close(fd);
    }
    std::string toml = "[device]\nkind = \"passthrough\"\n[[members]]\npath = \"" +
                       std::string(name.data()) + "\"\nbackend = \"io_uring\"\n";
    StackConfig config = load_stack_text(toml, o.scratch_dir, "probe");
    RealClock clock;
    StackOptions so;
    so.label = "probe";
    so.writable = false;
    Stack stack(config, clock, so);
    TaskContext task;
    task.pid = 1;
    void* buf = nullptr;
    if (posix_memalign(&buf, 4096, 16 * 8 * 4096)) throw std::bad_alloc();
    std::unique_ptr<void, decltype(&free)> hold(buf, free);
    std::mt19937_64 rng(3);
    uint64_t slots = o.scratch_bytes / (8 * 4096);
    // Reads submitted `batch` at a time in one plug, as a deep queue's
    // submitter issues them (one io_uring_enter for the batch, the plug
    // flushed once): the submission time per read.
    auto submit_ns = [&](uint64_t bytes, uint32_t batch) {
        std::vector<uint64_t> t;
        for (uint32_t i = 0; i < o.reads; i += batch) {
            uint64_t t0 = now_ns();
            stack.begin_batch(task);
            for (uint32_t k = 0; k < batch; k++)
                stack.queue(task, Op::Read, (rng() % slots) * 8 * 4096, bytes,
                            static_cast<uint8_t*>(buf) + size_t(k) * 8 * 4096, i + k);
            stack.commit(task);
            t.push_back((now_ns() - t0) / batch);
            stack.reap(task, batch, 10'000'000'000ull);
            task.completions.clear();
        }
        return median(t);
    };
    constexpr uint32_t kBatch = 16;
    submit_ns(4096, kBatch);  // warm-up: the ring, the request pools
    uint64_t one = submit_ns(4096, kBatch);
    uint64_t eight = submit_ns(8 * 4096, kBatch);
    c.bio_page_ns = eight > one ? (eight - one) / 7 : 0;
    c.bio_submit_ns = one > c.bio_page_ns ? one - c.bio_page_ns : one;  // a 1-page bio: both
}

}  // namespace

BufferedCosts measure_buffered_costs(const BufferedCostProbeOptions& options, BufferedCosts base) {
    BufferedCosts c = base;
    measure_page_cache(c);
    measure_copy(c);
    measure_loop_steps(c);
    measure_handoff(c, options.wakeups);
    measure_submission(c, options);
    return c;
}

}  // namespace mdsplit
