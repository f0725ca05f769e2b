// Several submitter threads on one SharedStack (fio jobs with thread=1 on
// one device): every I/O completes exactly once, to the thread that issued
// it, and the data each thread wrote reads back. CI runs these under TSan
// (build-tsan), which is where a race in the poller hand-off would show.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "config/config_loader.h"
#include "stack/shared_stack.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

constexpr uint64_t kRegion = 1 << 20;  // each thread owns 1 MiB of the device
constexpr int kThreads = 4;

class TempDir {
public:
    TempDir() {
        char tmpl[] = "/tmp/mdsplit-shared-XXXXXX";
        path_ = mkdtemp(tmpl);
    }
    ~TempDir() { std::filesystem::remove_all(path_); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

// The byte at `offset` as written by thread `t` in pass `pass`.
uint8_t pattern(int t, int pass, uint64_t offset) {
    return static_cast<uint8_t>((offset >> 9) * 31 + t * 7 + pass * 101 + (offset & 511));
}

// One fio job: `depth` I/Os in flight, 4-64 KiB, writes over its region in
// random order, then reads everything back and checks it.
void run_job(SharedStack& shared, int t, int depth, std::atomic<int>& failures) {
    TaskContext task;
    task.pid = 1000 + t;
    if (t % 2) task.sched.group = "g" + std::to_string(t);
    const uint64_t base = t * kRegion;
    // O_DIRECT members: buffers aligned as fio aligns io_u buffers.
    std::unique_ptr<uint8_t, decltype(&std::free)> memory(
        static_cast<uint8_t*>(std::aligned_alloc(4096, depth * (64 << 10))), &std::free);
    std::vector<bool> busy(depth, false);
    std::vector<IoCompletion> done;
    std::mt19937 rng(t);
    size_t outstanding = 0;
    auto reap = [&](size_t min) {
        done.clear();
        shared.reap(task, min, 5'000'000'000ull, done);
        for (const IoCompletion& c : done) {
            if (c.cookie >= static_cast<uint64_t>(depth) || !busy[c.cookie]) {
                failures++;  // not ours, or completed twice
                continue;
            }
            if (c.error != 0) failures++;
            busy[c.cookie] = false;
            outstanding--;
        }
        if (done.size() < min) {
            failures++;  // timed out: something hung
            throw std::runtime_error("reap timed out");
        }
    };
    auto slot = [&]() -> size_t {
        for (size_t i = 0;; i = (i + 1) % depth) {
            if (!busy[i]) return i;
            if (i + 1 == static_cast<size_t>(depth)) reap(1);
        }
    };
    for (int op = 0; op < 2; op++) {
        std::vector<uint64_t> chunks;
        for (uint64_t off = 0; off < kRegion; off += 64 << 10) chunks.push_back(off);
        std::shuffle(chunks.begin(), chunks.end(), rng);
        for (uint64_t chunk : chunks) {
            // 4-64 KiB pieces covering the 64 KiB chunk, so sizes vary.
            for (uint64_t off = chunk; off < chunk + (64 << 10);) {
                uint64_t len =
                    std::min<uint64_t>((1 + rng() % 16) * 4096, chunk + (64 << 10) - off);
                size_t s = slot();
                busy[s] = true;
                outstanding++;
                uint8_t* buf = memory.get() + s * (64 << 10);
                if (op == 0) {
                    for (uint64_t i = 0; i < len; i++) buf[i] = pattern(t, 0, base + off + i);
                    shared.queue(task, Op::Write, base + off, len, buf, s);
                } else {
                    shared.queue(task, Op::Read, base + off, len, buf, s);
                }
                shared.commit(task);
                if (op == 1) {
                    // Reads: wait for this one so its buffer can be checked.
                    while (busy[s]) reap(1);
                    for (uint64_t i = 0; i < len; i++) {
                        if (buf[i] != pattern(t, 0, base + off + i)) {
                            failures++;
                            break;
                        }
                    }
                }
                off += len;
            }
        }
        while (outstanding) reap(1);
    }
    shared.drain(task);
}

void run_threads(const std::string& toml, const std::string& dir) {
    StackConfig config = load_stack_text(toml, dir, "shared.toml");
    RealClock clock;
    StackOptions options;
    SharedStack shared(std::make_unique<Stack>(config, clock, options));
    ASSERT_GE(shared.size_bytes(), kThreads * kRegion);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; t++) {
        shared.attach();
        threads.emplace_back([&, t] {
            try {
                run_job(shared, t, 1 + t * 5, failures);
            } catch (const std::exception& e) {
                ADD_FAILURE() << "thread " << t << ": " << e.what();
            }
            shared.detach();
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_NE(shared.stats_json().find("\"devices\""), std::string::npos);
}

TEST(SharedStackTest, ThreadsOnARaid5OfIoUringFilesEachReadTheirOwnWrites) {
    TempDir dir;
    std::string toml = "[device]\nkind = \"raid5\"\nchunk = \"16k\"\n";
    for (int i = 0; i < 4; i++) {
        toml += "[[members]]\npath = \"m" + std::to_string(i) + ".img\"\nsize = \"4m\"\n";
    }
    run_threads(toml, dir.path());
}

TEST(SharedStackTest, ThreadsInGroupsOnABfqDeviceWithATimingModel) {
    TempDir dir;
    run_threads(
        "[device]\nkind = \"passthrough\"\nscheduler = \"bfq\"\n"
        "[[members]]\nbackend = \"ram\"\nsize = \"8m\"\nmodel = \"nvme\"\n",
        dir.path());
}

}  // namespace
}  // namespace mdsplit
