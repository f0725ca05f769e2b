// libFuzzer target: the bio builder, the splits (md max_sectors, chunk
// boundaries, member max_sectors) and the RAID5 mapping, on a random stack
// of null members (a virtual clock; no data is stored). For random I/O sizes,
// offsets and limits:
//   - the bio builder's pieces cover the I/O exactly once, each within its
//     limits (bvecs, max_sectors policy, logical block size);
//   - every member request stays inside its member and within the member's
//     max_sectors, in whole logical blocks;
//   - passthrough: the member requests cover the I/O exactly once;
//   - RAID5 reads (healthy): the remapped pieces cover the I/O exactly once,
//     each where raid5_compute_sector() puts it and inside one chunk;
//   - RAID5 writes: every 4 KiB data unit the I/O touches is written exactly
//     once (none on a failed member), one parity write per row touched;
//   - every I/O completes exactly once, with an error only where a fault
//     (fault injection on up to two members) allows one; nothing leaks.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "core/block/bio_builder.h"
#include "core/md/raid5_device.h"
#include "core/md/raid5_layout.h"
#include "stack/stack.h"

using namespace mdsplit;

namespace {

constexpr uint64_t kMaxIo = 1ull << 20;

uint8_t* io_buffer() {
    static uint8_t* buf = [] {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, kMaxIo)) abort();
        return static_cast<uint8_t*>(p);
    }();
    return buf;
}

[[noreturn]] void fail(const char* what, uint64_t a = 0, uint64_t b = 0) {
    fprintf(stderr, "invariant: %s (%llu, %llu)\n", what, (unsigned long long)a,
            (unsigned long long)b);
    abort();
}

// Sorted, disjoint [start, end) ranges that exactly tile [lo, hi).
void check_tiling(std::vector<std::pair<uint64_t, uint64_t>> ranges, uint64_t lo, uint64_t hi,
                  const char* what) {
    std::sort(ranges.begin(), ranges.end());
    uint64_t at = lo;
    for (auto [s, e] : ranges) {
        if (s != at || e <= s) fail(what, s, at);
        at = e;
    }
    if (at != hi) fail(what, at, hi);
}

StackConfig random_config(FuzzedDataProvider& in, bool& faulty) {
    StackConfig c;
    bool raid5 = in.ConsumeBool();
    uint32_t lbs = 512u << in.ConsumeIntegralInRange<int>(0, 3);
    c.device.kind = raid5 ? DeviceKind::Raid5 : DeviceKind::Passthrough;
    c.device.chunk_bytes = 4096ull << in.ConsumeIntegralInRange<int>(0, 8);
    c.device.layout = Raid5Layout(in.ConsumeIntegralInRange<int>(0, 3));
    c.device.max_sectors_bytes = uint64_t(in.ConsumeIntegralInRange<uint32_t>(1, 512)) * 4096;
    c.device.split_order = in.ConsumeBool() ? SplitOrder::Fixed : SplitOrder::Legacy;
    c.device.plug_order = in.ConsumeBool() ? PlugOrder::Fifo : PlugOrder::Lifo;
    c.bio.policy = BioPolicy(in.ConsumeIntegralInRange<int>(0, 2));
    c.bio.align_bytes = 4096ull << in.ConsumeIntegralInRange<int>(0, 8);
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
        case 0:
            c.bio.contiguity = Contiguity::None;
            break;
        case 1:
            c.bio.contiguity = Contiguity::Pattern;
            for (int i = in.ConsumeIntegralInRange<int>(1, 6); i > 0; i--)
                c.bio.run_pattern.push_back(in.ConsumeIntegralInRange<uint32_t>(1, 1024));
            break;
        case 2: {
            c.bio.contiguity = Contiguity::Distribution;
            double total = 0;
            for (int i = in.ConsumeIntegralInRange<int>(1, 4); i > 0; i--) {
                double w = in.ConsumeIntegralInRange<int>(1, 100);
                c.bio.run_pages.emplace_back(in.ConsumeIntegralInRange<uint32_t>(1, 512), w);
                total += w;
            }
            for (auto& [pages, w] : c.bio.run_pages) w /= total;
            break;
        }
    }
    size_t n = raid5 ? in.ConsumeIntegralInRange<size_t>(3, 10) : 1;
    uint64_t rows = in.ConsumeIntegralInRange<uint64_t>(1, 64);
    int failed = raid5 && in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(0, int(n) - 1) : -1;
    int faults = in.ConsumeIntegralInRange<int>(0, 2);  // members with injected faults
    faulty = faults > 0;
    for (size_t i = 0; i < n; i++) {
        MemberConfig m;
        m.backend = BackendKind::Null;
        m.logical_block_size = lbs;
        // Whole chunks plus a tail md ignores (a multiple of the block size).
        m.size = rows * c.device.chunk_bytes + in.ConsumeIntegralInRange<uint64_t>(0, 64) * lbs;
        m.max_sectors_bytes = uint64_t(in.ConsumeIntegralInRange<uint32_t>(1, 256)) * 4096;
        m.queue_depth = in.ConsumeIntegralInRange<uint32_t>(1, 64);
        m.failed = int(i) == failed;
        if (!m.failed && faults > 0 && in.ConsumeBool()) {
            faults--;
            FaultConfig f;
            for (int k = in.ConsumeIntegralInRange<int>(0, 3); k > 0; k--)
                f.fail_nth.push_back(in.ConsumeIntegralInRange<uint64_t>(1, 200));
            if (in.ConsumeBool()) f.fail_probability = in.ConsumeProbability<double>() * 0.2;
            f.seed = in.ConsumeIntegral<uint8_t>();
            if (in.ConsumeBool()) f.fail_at_ns = in.ConsumeIntegralInRange<uint64_t>(0, 1'000'000);
            if (in.ConsumeBool()) {
                f.spike_every = in.ConsumeIntegralInRange<uint64_t>(1, 10);
                f.spike_extra_ns = 1000;
            }
            m.faults = f;
        }
        c.members.push_back(m);
    }
    if (c.device.max_sectors_bytes % lbs) c.device.max_sectors_bytes = lbs * 8;
    return c;
}

void check_bio_pieces(const StackConfig& c, uint64_t device_max, uint32_t lbs, uint64_t length) {
    BioBuilder builder(c.bio, device_max, lbs);
    std::vector<BioPiece> pieces;
    builder.build(io_buffer(), length, pieces);
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const BioPiece& p : pieces) {
        if (p.length == 0 || p.length % lbs) fail("bio piece not whole blocks", p.length, lbs);
        if (p.bvecs == 0 || p.bvecs > kBioMaxVecs) fail("bio piece bvecs", p.bvecs);
        if (c.bio.policy == BioPolicy::MaxSectors && p.length > device_max)
            fail("bio piece above max_sectors", p.length, device_max);
        ranges.emplace_back(p.offset, p.offset + p.length);
    }
    check_tiling(ranges, 0, length, "bio pieces do not tile the I/O");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider in(data, size);
    bool faulty = false;
    StackConfig config = random_config(in, faulty);
    VirtualClock clock;
    TraceRecorder recorder;  // outlives the stack, which flushes its sinks when destroyed
    Stack stack(config, clock, StackOptions{});
    stack.tracer().add_global_sink(&recorder);
    const uint64_t dev_size = stack.size_bytes();
    const uint32_t lbs = stack.logical_block_size();
    auto* md = dynamic_cast<Raid5Device*>(&stack.top());
    std::map<uint32_t, uint32_t> member_of;  // devt -> index
    std::vector<MemberQueue*> members = stack.members();
    for (uint32_t i = 0; i < members.size(); i++) member_of[members[i]->devt()] = i;
    const uint32_t md_devt = stack.top().devt();

    TaskContext task;
    task.pid = 1;
    for (int io = in.ConsumeIntegralInRange<int>(1, 4); io > 0 && dev_size >= lbs; io--) {
        Op op = in.ConsumeBool() ? Op::Write : Op::Read;
        uint64_t blocks = dev_size / lbs;
        uint64_t off = in.ConsumeIntegralInRange<uint64_t>(0, blocks - 1) * lbs;
        uint64_t max_len = std::min<uint64_t>(kMaxIo, dev_size - off);
        uint64_t len = in.ConsumeIntegralInRange<uint64_t>(1, max_len / lbs) * lbs;
        check_bio_pieces(config, uint64_t(stack.top().max_sectors()) << kSectorShift, lbs, len);

        recorder.events.clear();
        bool array_failed_before = md && md->array_failed();
        stack.begin_batch(task);
        stack.queue(task, op, off, len, io_buffer(), 77);
        stack.commit(task);
        stack.drain();
        if (task.completions.size() != 1 || task.completions[0].cookie != 77)
            fail("I/O did not complete exactly once", task.completions.size());
        int32_t error = task.completions[0].error;
        task.completions.clear();
        if (task.in_flight) fail("in flight after drain", task.in_flight);
        if (stack.layer().bios().outstanding())
            fail("bios leaked", stack.layer().bios().outstanding());
        if (stack.layer().requests().outstanding()) fail("requests leaked");
        if (md && md->active_stripes()) fail("stripes left", md->active_stripes());
        if (error) {
            if (error != -EIO) fail("unexpected error", uint64_t(-error));
            if (!faulty) fail("error without a fault", uint64_t(-error));
            if (md && !md->array_failed()) fail("raid5 error with the array alive");
        }

        // Member requests: inside the member, within its limits.
        std::vector<std::pair<uint64_t, uint64_t>> issued, remapped;
        std::map<uint64_t, int> data_units;  // virtual sector of a written 4 KiB unit -> writes
        std::set<std::pair<uint32_t, uint64_t>> parity_rows;
        int parity_writes = 0;
        for (const TraceEvent& e : recorder.events) {
            auto it = member_of.find(e.device);
            if (it == member_of.end()) continue;
            const MemberConfig& m = config.members[it->second];
            if (e.action == TraceAction::Issue) {
                if ((e.sector << kSectorShift) + e.bytes > m.size)
                    fail("request past the member's end", e.sector, e.bytes);
                if (e.bytes > m.max_sectors_bytes) fail("request above max_sectors", e.bytes);
                if (e.bytes % m.logical_block_size ||
                    (e.sector << kSectorShift) % m.logical_block_size)
                    fail("request not in whole logical blocks", e.sector, e.bytes);
                if (m.failed) fail("I/O to a failed member", it->second);
                if (e.op == op) issued.emplace_back(e.sector, e.sector + (e.bytes >> kSectorShift));
            }
            if (e.action == TraceAction::Remap && e.from_device == md_devt && md) {
                const Raid5Geometry& g = md->geometry();
                sector_t v = g.compute_blocknr(e.sector, it->second);
                if (op == Op::Write) {
                    // Stripe I/O (pre-reads and writes): one 4 KiB unit, traced
                    // from its virtual sector (0 for parity).
                    if (e.bytes != kRaid5StripeBytes || e.sector % kRaid5StripeSectors)
                        fail("stripe I/O not one 4 KiB unit", e.sector, e.bytes);
                    if (v != Raid5Geometry::kParity && v != e.from_sector)
                        fail("stripe remap from the wrong sector", v, e.from_sector);
                    if (e.op == Op::Write && v == Raid5Geometry::kParity) {
                        parity_writes++;
                        parity_rows.insert({it->second, e.sector});
                    } else if (e.op == Op::Write) {
                        data_units[v]++;
                    }
                } else if (!faulty && md->failed_member() < 0) {
                    // A healthy array reads each chunk piece directly.
                    Raid5Location loc = g.compute_sector(e.from_sector);
                    if (loc.dd_idx != it->second || loc.member_sector != e.sector)
                        fail("read remapped to the wrong place", e.from_sector, e.sector);
                    sector_t chunk = g.chunk_sectors();
                    if (e.from_sector / chunk !=
                        (e.from_sector + (e.bytes >> kSectorShift) - 1) / chunk)
                        fail("aligned read crosses a chunk", e.from_sector, e.bytes);
                }
                if (e.op == Op::Read)
                    remapped.emplace_back(e.from_sector, e.from_sector + (e.bytes >> kSectorShift));
            }
        }
        if (faulty || array_failed_before || error) continue;
        sector_t lo = off >> kSectorShift, hi = (off + len) >> kSectorShift;
        if (!md) {
            check_tiling(issued, lo, hi, "passthrough requests do not tile the I/O");
        } else if (op == Op::Read && md->failed_member() < 0) {
            check_tiling(remapped, lo, hi, "raid5 read pieces do not tile the I/O");
        } else if (op == Op::Write) {
            sector_t first = lo & ~sector_t(kRaid5StripeSectors - 1);
            std::set<uint64_t> rows;
            for (sector_t u = first; u < hi; u += kRaid5StripeSectors) {
                Raid5Location loc = md->geometry().compute_sector(u);
                int times = data_units.count(u) ? data_units[u] : 0;
                bool on_failed = int(loc.dd_idx) == md->failed_member();
                if (times != (on_failed ? 0 : 1))
                    fail("data unit written wrongly", u, uint64_t(times));
                if (int(loc.pd_idx) != md->failed_member())
                    rows.insert(loc.member_sector & ~sector_t(kRaid5StripeSectors - 1));
            }
            for (const auto& [u, times] : data_units)
                if (u < first || u >= hi || u % kRaid5StripeSectors)
                    fail("a data unit written outside the I/O", u, uint64_t(times));
            if (size_t(parity_writes) != rows.size() || parity_rows.size() != rows.size())
                fail("parity writes", uint64_t(parity_writes), rows.size());
        }
    }
    return 0;
}
