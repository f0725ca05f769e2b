// [members.faults]: each fault kind fails exactly the requests it should,
// every I/O completes exactly once, and RAID5 survives one member failing
// at run time (fail_at, or any failed member I/O) and fails with two.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "config/config_loader.h"
#include "core/drivers/fault_injector.h"
#include "core/md/raid5_device.h"
#include "stack/stack.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

struct Buffer {
    explicit Buffer(uint64_t n) : size(n) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, n)) abort();
        data = static_cast<uint8_t*>(p);
        memset(data, 0, n);
    }
    ~Buffer() { free(data); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    uint8_t* data;
    uint64_t size;
};

// A stack from TOML text on a virtual clock, with synchronous and batched I/O.
class Rig {
public:
    explicit Rig(const std::string& toml)
        : config_(load_stack_text(toml, "/tmp", "<test>")),
          stack_(config_, clock_, StackOptions{}) {
        task_.pid = 3;
    }
    Stack& stack() { return stack_; }
    uint64_t now() { return stack_.loop().now(); }

    // Queues each I/O in one batch, runs to idle; returns each I/O's error
    // (by cookie order) and checks each completed exactly once.
    std::vector<int32_t> batch(Op op, const std::vector<uint64_t>& offsets, uint64_t length,
                               uint8_t* data) {
        stack_.begin_batch(task_);
        for (size_t i = 0; i < offsets.size(); i++)
            stack_.queue(task_, op, offsets[i], length, data ? data + i * length : nullptr, i);
        stack_.commit(task_);
        stack_.reap(task_, offsets.size(), ~uint64_t(0) / 2);
        stack_.drain();
        std::vector<int32_t> errors(offsets.size(), 1);
        std::vector<int> times(offsets.size(), 0);
        for (const IoCompletion& c : task_.completions) {
            EXPECT_LT(c.cookie, offsets.size());
            if (c.cookie >= offsets.size()) continue;
            times[c.cookie]++;
            errors[c.cookie] = c.error;
        }
        for (size_t i = 0; i < times.size(); i++) EXPECT_EQ(times[i], 1) << "I/O " << i;
        task_.completions.clear();
        EXPECT_EQ(task_.in_flight, 0u);
        return errors;
    }
    int32_t io(Op op, uint64_t offset, uint64_t length, uint8_t* data) {
        return batch(op, {offset}, length, data)[0];
    }
    FaultInjector& injector(size_t member) {
        auto* f = dynamic_cast<FaultInjector*>(&stack_.members().at(member)->backend());
        EXPECT_NE(f, nullptr);
        return *f;
    }

private:
    StackConfig config_;
    VirtualClock clock_;
    Stack stack_;
    TaskContext task_;
};

std::string passthrough(const std::string& faults, const std::string& extra = "") {
    return "[device]\nkind = \"passthrough\"\n[[members]]\nbackend = \"ram\"\nsize = \"4m\"\n" +
           extra + "[members.faults]\n" + faults;
}

// n sequential 4 KiB reads, one at a time; returns the 1-based numbers that failed.
std::vector<uint64_t> sequential_failures(Rig& rig, uint64_t n, Op op = Op::Read) {
    Buffer buf(4 * kKiB);
    std::vector<uint64_t> failed;
    for (uint64_t i = 0; i < n; i++) {
        int32_t e = rig.io(op, i * 4 * kKiB, 4 * kKiB, buf.data);
        if (e) {
            EXPECT_EQ(e, -EIO);
            failed.push_back(i + 1);
        }
    }
    return failed;
}

TEST(FaultInjectorTest, FailNthFailsExactlyThoseRequests) {
    Rig rig(passthrough("fail_nth = [3, 17, 100]\n"));
    EXPECT_EQ(sequential_failures(rig, 120), (std::vector<uint64_t>{3, 17, 100}));
    EXPECT_EQ(rig.injector(0).counters().failed_nth, 3u);
    EXPECT_EQ(rig.injector(0).counters().requests, 120u);
    const DiskStats& m0 = rig.stack().members()[0]->stats();
    EXPECT_EQ(m0.errors[0], 3u);
    EXPECT_EQ(rig.stack().top().stats().errors[0], 3u);
}

TEST(FaultInjectorTest, FailSectorsFailsRequestsTouchingTheRange) {
    // Sectors [20, 30): 4 KiB I/Os 2 (sectors 16..23) and 3 (24..31).
    Rig rig(passthrough("fail_sectors = [[20, 30], [800, 801]]\n"));
    EXPECT_EQ(sequential_failures(rig, 120, Op::Write), (std::vector<uint64_t>{3, 4, 101}));
    EXPECT_EQ(rig.injector(0).counters().failed_sectors, 3u);
    // A large I/O touching the range fails whole; one beside it does not.
    Buffer big(64 * kKiB);
    EXPECT_EQ(rig.io(Op::Read, 0, 64 * kKiB, big.data), -EIO);
    EXPECT_EQ(rig.io(Op::Read, 16 * kKiB, 64 * kKiB, big.data), 0);
}

TEST(FaultInjectorTest, FailProbabilityFollowsTheSeededStream) {
    const double p = 0.05;
    const uint64_t n = 1000;  // the device holds 1024 blocks
    Rig rig(passthrough("fail_probability = 0.05\nseed = 7\n"));
    std::vector<uint64_t> failed = sequential_failures(rig, n);
    // The same stream, reproduced.
    uint64_t state = 7;
    std::vector<uint64_t> expected;
    for (uint64_t i = 1; i <= n; i++)
        if (FaultInjector::unit_interval(FaultInjector::splitmix64(state)) < p)
            expected.push_back(i);
    EXPECT_EQ(failed, expected);
    EXPECT_GT(failed.size(), 25u);
    EXPECT_LT(failed.size(), 80u);
    // Same seed, same failures; another seed, others.
    Rig again(passthrough("fail_probability = 0.05\nseed = 7\n"));
    EXPECT_EQ(sequential_failures(again, n), failed);
    Rig other(passthrough("fail_probability = 0.05\nseed = 8\n"));
    EXPECT_NE(sequential_failures(other, n), failed);
}

TEST(FaultInjectorTest, ZeroProbabilityFailsNothing) {
    Rig rig(passthrough("fail_probability = 0\n"));
    EXPECT_TRUE(sequential_failures(rig, 200).empty());
}

TEST(FaultInjectorTest, LatencySpikeDelaysEveryNthRequest) {
    Rig rig(passthrough("latency_spike = { every = 4, extra = \"20ms\" }\n",
                        "model = { command = \"100us\" }\n"));
    Buffer buf(4 * kKiB);
    std::vector<uint64_t> slow;
    for (uint64_t i = 1; i <= 12; i++) {
        uint64_t t0 = rig.now();
        ASSERT_EQ(rig.io(Op::Read, i * 4 * kKiB, 4 * kKiB, buf.data), 0);
        uint64_t took = rig.now() - t0;
        if (took >= 20'000'000) slow.push_back(i);
        EXPECT_LT(took, 21'000'000u);
    }
    EXPECT_EQ(slow, (std::vector<uint64_t>{4, 8, 12}));
    EXPECT_EQ(rig.injector(0).counters().spikes, 3u);
    EXPECT_EQ(rig.injector(0).counters().failed(), 0u);
}

TEST(FaultInjectorTest, FailAtKillsTheMember) {
    // 1 ms per request: requests from the 10th millisecond on fail.
    Rig rig(passthrough("fail_at = \"10ms\"\n", "model = { command = \"1ms\" }\n"));
    Buffer buf(4 * kKiB);
    std::vector<uint64_t> failed = sequential_failures(rig, 20);
    ASSERT_FALSE(failed.empty());
    EXPECT_GE(failed.front(), 10u);
    EXPECT_LE(failed.front(), 11u);
    for (size_t i = 1; i < failed.size(); i++) EXPECT_EQ(failed[i], failed[i - 1] + 1);
    EXPECT_EQ(failed.back(), 20u);
    EXPECT_TRUE(rig.injector(0).dead());
}

TEST(FaultInjectorTest, BatchedIoCompletesOnceEvenWhenEverythingFails) {
    Rig rig(passthrough("fail_at = \"0s\"\n"));
    Buffer buf(64 * 16 * kKiB);
    std::vector<uint64_t> offsets;
    for (uint64_t i = 0; i < 64; i++) offsets.push_back(i * 16 * kKiB);
    for (int32_t e : rig.batch(Op::Write, offsets, 16 * kKiB, buf.data)) EXPECT_EQ(e, -EIO);
    EXPECT_EQ(rig.stack().layer().bios().outstanding(), 0u);
    EXPECT_EQ(rig.stack().layer().requests().outstanding(), 0u);
}

// ---------------------------------------------------------------- RAID5

std::string raid5(uint32_t members, const std::vector<std::string>& faults) {
    std::string t = "[device]\nkind = \"raid5\"\nchunk = \"16k\"\n";
    for (uint32_t i = 0; i < members; i++) {
        t += "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\nmodel = { command = \"100us\" }\n";
        if (i < faults.size() && !faults[i].empty()) t += "[members.faults]\n" + faults[i];
    }
    return t;
}

Raid5Device& md_of(Rig& rig) { return dynamic_cast<Raid5Device&>(rig.stack().top()); }

// Random writes and reads, checked against a model, before and after a
// member dies half-way: no error reaches the submitter.
TEST(FaultInjectorRaid5Test, OneMemberDyingHalfWayIsInvisible) {
    Rig rig(raid5(5, {"", "", "fail_at = \"30ms\"\n"}));
    Raid5Device& md = md_of(rig);
    uint64_t size = rig.stack().size_bytes();
    std::vector<uint8_t> model(size, 0);
    std::mt19937_64 rng(4);
    Buffer buf(8 * 64 * kKiB);
    for (int round = 0; round < 60; round++) {
        std::vector<uint64_t> offsets;
        uint64_t len = (1 + rng() % 16) * 4 * kKiB;
        std::set<uint64_t> used;
        for (int k = 0; k < 8; k++) {
            uint64_t off = (rng() % ((size - len) / (64 * kKiB))) * 64 * kKiB;
            if (used.insert(off).second) offsets.push_back(off);
        }
        Op op = round % 3 == 2 ? Op::Read : Op::Write;
        if (op == Op::Write)
            for (uint64_t i = 0; i < offsets.size() * len; i++) buf.data[i] = uint8_t(rng());
        for (int32_t e : rig.batch(op, offsets, len, buf.data)) ASSERT_EQ(e, 0) << round;
        for (size_t k = 0; k < offsets.size(); k++) {
            uint8_t* b = buf.data + k * len;
            if (op == Op::Write)
                memcpy(model.data() + offsets[k], b, len);
            else
                ASSERT_EQ(memcmp(b, model.data() + offsets[k], len), 0) << round;
        }
    }
    EXPECT_GE(rig.now(), 30'000'000u);
    EXPECT_EQ(md.failed_member(), 2);
    EXPECT_FALSE(md.array_failed());
    EXPECT_GT(rig.injector(2).counters().failed_dead, 0u);
    Buffer all(size);
    ASSERT_EQ(rig.io(Op::Read, 0, size, all.data), 0);
    EXPECT_EQ(memcmp(all.data, model.data(), size), 0);
    EXPECT_EQ(rig.stack().top().stats().errors[0] + rig.stack().top().stats().errors[1], 0u);
    EXPECT_EQ(md.active_stripes(), 0u);
}

// The Nth request of a member fails: that member is Faulty, nothing else.
TEST(FaultInjectorRaid5Test, OneFailedRequestFailsTheMemberOnly) {
    Rig rig(raid5(4, {"", "fail_nth = [5]\n"}));
    uint64_t size = rig.stack().size_bytes();
    Buffer w(size), r(size);
    std::mt19937_64 rng(1);
    for (uint64_t i = 0; i < size; i++) w.data[i] = uint8_t(rng());
    for (uint64_t off = 0; off < size; off += 16 * kKiB)
        ASSERT_EQ(rig.io(Op::Write, off, 16 * kKiB, w.data + off), 0);
    for (uint64_t off = 0; off < size; off += 12 * kKiB) {
        uint64_t len = std::min<uint64_t>(12 * kKiB, size - off);
        ASSERT_EQ(rig.io(Op::Read, off, len, r.data + off), 0);
    }
    EXPECT_EQ(memcmp(w.data, r.data, size), 0);
    EXPECT_EQ(md_of(rig).failed_member(), 1);
    EXPECT_EQ(rig.injector(1).counters().requests, 5u);  // never touched again
}

// Two members dead: every I/O from then on fails with EIO, promptly, and
// each completes exactly once.
TEST(FaultInjectorRaid5Test, TwoDeadMembersFailTheArray) {
    Rig rig(raid5(4, {"fail_at = \"5ms\"\n", "", "fail_at = \"8ms\"\n"}));
    Buffer buf(8 * 32 * kKiB);
    int failures = 0, ok = 0;
    for (int round = 0; round < 40; round++) {
        std::vector<uint64_t> offsets;
        for (uint64_t k = 0; k < 8; k++)
            offsets.push_back((uint64_t(round) * 8 + k) * 32 * kKiB % (2 * kMiB));
        for (int32_t e :
             rig.batch(round % 2 ? Op::Read : Op::Write, offsets, 32 * kKiB, buf.data)) {
            if (e) {
                EXPECT_EQ(e, -EIO);
                failures++;
            } else {
                EXPECT_EQ(failures, 0) << "success after the array failed";
                ok++;
            }
        }
    }
    EXPECT_GT(ok, 0);
    EXPECT_GT(failures, 0);
    EXPECT_TRUE(md_of(rig).array_failed());
    EXPECT_EQ(md_of(rig).active_stripes(), 0u);
    EXPECT_EQ(rig.stack().layer().bios().outstanding(), 0u);
    EXPECT_EQ(rig.stack().layer().requests().outstanding(), 0u);
}

// ---------------------------------------------------------------- config

TEST(FaultConfigTest, ReadsEveryKey) {
    StackConfig c =
        load_stack_text(passthrough("fail_nth = [250, 100]\nfail_sectors = [[8, 16]]\n"
                                    "fail_probability = 0.25\nseed = 9\n"
                                    "latency_spike = { every = 1000, extra = \"20ms\" }\n"
                                    "fail_at = \"3s\"\n"),
                        "/tmp", "s.toml");
    ASSERT_TRUE(c.members[0].faults);
    const FaultConfig& f = *c.members[0].faults;
    EXPECT_EQ(f.fail_nth, (std::vector<uint64_t>{250, 100}));
    ASSERT_EQ(f.fail_sectors.size(), 1u);
    EXPECT_EQ(f.fail_sectors[0], (std::pair<uint64_t, uint64_t>{8, 16}));
    EXPECT_DOUBLE_EQ(f.fail_probability, 0.25);
    EXPECT_EQ(f.seed, 9u);
    EXPECT_EQ(f.spike_every, 1000u);
    EXPECT_EQ(f.spike_extra_ns, 20'000'000u);
    ASSERT_TRUE(f.fail_at_ns);
    EXPECT_EQ(*f.fail_at_ns, 3'000'000'000u);
    // The inline-table spelling is the same key.
    StackConfig inline_form = load_stack_text(
        "[[members]]\nbackend = \"ram\"\nsize = \"1m\"\nfaults = { fail_nth = [1] }\n", "/tmp",
        "s");
    ASSERT_TRUE(inline_form.members[0].faults);
    EXPECT_FALSE(load_stack_text(passthrough(""), "/tmp", "s").members[0].faults->fail_at_ns);
}

TEST(FaultConfigTest, RejectsBadValuesWithOneLine) {
    auto message = [](const std::string& faults) {
        try {
            load_stack_text(passthrough(faults), "/tmp", "s.toml");
        } catch (const ConfigError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    EXPECT_EQ(message("fail_nth = [0]\n"),
              "s.toml: members[0].faults.fail_nth[0]: integer 0 is not a request number; allowed: "
              "an array of request numbers >= 1, like [100, 250]");
    EXPECT_EQ(message("fail_sectors = [[10, 10]]\n"),
              "s.toml: members[0].faults.fail_sectors[0]: [10, 10] is not a sector range; allowed: "
              "an array of [start, end] member sector ranges (512-byte sectors, start < end), like "
              "[[2048, 2056]]");
    EXPECT_EQ(message("fail_sectors = [[0, 8193]]\n"),
              "s.toml: members[0].faults.fail_sectors[0]: [0, 8193] ends past the member's last "
              "sector (8192 sectors); allowed: ranges inside the member");
    EXPECT_EQ(message("fail_probability = 1.5\n"),
              "s.toml: members[0].faults.fail_probability: float 1.5 is out of range; allowed: a "
              "number from 0.000000 to 1.000000");
    EXPECT_EQ(message("latency_spike = { every = 10 }\n"),
              "s.toml: members[0].faults.latency_spike.extra: missing; allowed: { every = N, "
              "extra = \"20ms\" }, N >= 1, extra > 0");
    EXPECT_EQ(message("fail_at = 3\n"),
              "s.toml: members[0].faults.fail_at: integer 3 has no unit; allowed: a string with a "
              "unit ns, us, ms or s like \"80us\", \"8ms\" (or the integer 0)");
    EXPECT_EQ(message("fail_after = \"3s\"\n"),
              "s.toml: members[0].faults.fail_after: unknown key; allowed: fail_nth, fail_sectors, "
              "fail_probability, seed, latency_spike, fail_at");
    std::string failed_too;
    try {
        load_stack_text(
            "[device]\nkind = \"raid5\"\n[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n"
            "failed = true\nfaults = { fail_nth = [1] }\n[[members]]\nbackend = \"ram\"\n"
            "size = \"1m\"\n[[members]]\nbackend = \"ram\"\nsize = \"1m\"\n",
            "/tmp", "s.toml");
    } catch (const ConfigError& e) {
        failed_too = e.what();
    }
    EXPECT_EQ(failed_too,
              "s.toml: members[0].faults: a failed member receives no I/O to fail; allowed: faults "
              "on a member without failed = true");
}

}  // namespace
}  // namespace mdsplit
