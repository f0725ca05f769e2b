// BlktraceWriter / read_blktrace_file: the kernel's binary format
// (include/uapi/linux/blktrace_api.h), checked by round trips and by the
// real blkparse and btt when they are installed.
#include "core/trace/blktrace_writer.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#if __has_include(<linux/blktrace_api.h>)
#include <linux/blktrace_api.h>
#define MDSPLIT_HAVE_UAPI_BLKTRACE 1
#endif

namespace mdsplit {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kMd0 = (9u << 20) | 0;   // md0: major 9, minor 0
constexpr uint32_t kSdb = (8u << 20) | 16;  // sdb: major 8, minor 16

TraceEvent make(TraceAction action, uint64_t seq, Op op, sector_t sector, uint32_t bytes) {
    TraceEvent e;
    e.sequence = seq;
    e.time_ns = 1000 * seq;
    e.device = kSdb;
    e.action = action;
    e.op = op;
    e.sector = sector;
    e.bytes = bytes;
    e.pid = 4242;
    return e;
}

void expect_same(const TraceEvent& a, const TraceEvent& b) {
    EXPECT_EQ(a.sequence, b.sequence);
    EXPECT_EQ(a.time_ns, b.time_ns);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(static_cast<char>(a.action), static_cast<char>(b.action));
    EXPECT_EQ(a.op, b.op) << "action " << static_cast<char>(a.action);
    EXPECT_EQ(a.sync, b.sync) << "action " << static_cast<char>(a.action);
    EXPECT_EQ(a.sector, b.sector);
    EXPECT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(a.pid, b.pid);
    EXPECT_EQ(a.error, b.error);
    EXPECT_EQ(a.new_sector, b.new_sector);
    EXPECT_EQ(a.from_device, b.from_device);
    EXPECT_EQ(a.from_sector, b.from_sector);
    EXPECT_EQ(a.depth, b.depth);
}

// One event of every kind, with the payload fields the kernel carries.
std::vector<TraceEvent> every_action() {
    std::vector<TraceEvent> v;
    uint64_t seq = 1;
    TraceEvent q = make(TraceAction::Queue, seq++, Op::Read, 2048, 8192);
    q.sync = true;
    v.push_back(q);
    TraceEvent x = make(TraceAction::Split, seq++, Op::Read, 2048, 4096);
    x.sync = true;
    x.new_sector = 2056;
    v.push_back(x);
    TraceEvent a = make(TraceAction::Remap, seq++, Op::Write, 1024, 4096);
    a.from_device = kMd0;
    a.from_sector = 0x1'2345'6789ull;  // needs all 64 bits of sector_from
    v.push_back(a);
    v.push_back(make(TraceAction::GetRq, seq++, Op::Write, 1024, 4096));
    v.push_back(make(TraceAction::Plug, seq++, Op::Read, 0, 0));  // opf 0: always R
    v.push_back(make(TraceAction::BackMerge, seq++, Op::Write, 1032, 4096));
    v.push_back(make(TraceAction::FrontMerge, seq++, Op::Write, 1016, 4096));
    TraceEvent u = make(TraceAction::Unplug, seq++, Op::Read, 0, 0);
    u.depth = 3;
    v.push_back(u);
    v.push_back(make(TraceAction::Insert, seq++, Op::Write, 1016, 12288));
    v.push_back(make(TraceAction::Issue, seq++, Op::Write, 1016, 12288));
    TraceEvent c = make(TraceAction::Complete, seq++, Op::Write, 1016, 12288);
    c.error = -5;  // -EIO
    v.push_back(c);
    TraceEvent f = make(TraceAction::Queue, seq++, Op::Flush, 0, 0);
    f.sync = true;
    v.push_back(f);
    return v;
}

std::vector<unsigned char> slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs `cmd` under /bin/sh; returns its stdout and sets *status.
std::string run(const std::string& cmd, int* status) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) {
        *status = -1;
        return out;
    }
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    *status = ::pclose(p);
    return out;
}

uint64_t sum_counter(const std::string& text, const std::string& label) {
    const std::regex re(label + R"(:\s+([0-9,]+))");
    uint64_t total = 0;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
         ++it) {
        std::string digits = (*it)[1];
        digits.erase(std::remove(digits.begin(), digits.end(), ','), digits.end());
        total += std::stoull(digits);
    }
    return total;
}

class BlktraceWriterTest : public ::testing::Test {
protected:
    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "mdsplit-blktrace-XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    std::string file(const std::string& name) const { return (dir_ / name).string(); }

    fs::path dir_;
};

TEST_F(BlktraceWriterTest, ActionWordsMatchTheKernel) {
    TraceEvent q = make(TraceAction::Queue, 1, Op::Write, 8, 4096);
    q.sync = true;
    // "Q WS": what every O_DIRECT write shows in a real trace.
    EXPECT_EQ(blktrace_action(q), 0x001a0001u);
    TraceEvent c = make(TraceAction::Complete, 2, Op::Read, 8, 4096);
    EXPECT_EQ(blktrace_action(c), 0x01810008u);                      // rq: with BLK_TC_FS
    EXPECT_EQ(blktrace_action(c, /*bio_based=*/true), 0x00810008u);  // bio_complete
#ifdef MDSPLIT_HAVE_UAPI_BLKTRACE
    EXPECT_EQ(blktrace_action(q),
              unsigned(BLK_TA_QUEUE | BLK_TC_ACT(BLK_TC_WRITE) | BLK_TC_ACT(BLK_TC_SYNC)));
    EXPECT_EQ(blktrace_action(make(TraceAction::Split, 3, Op::Read, 8, 4096)),
              unsigned(BLK_TA_SPLIT | BLK_TC_ACT(BLK_TC_READ)));
    EXPECT_EQ(blktrace_action(make(TraceAction::Remap, 3, Op::Read, 8, 4096)),
              unsigned(BLK_TA_REMAP | BLK_TC_ACT(BLK_TC_READ)));
    EXPECT_EQ(blktrace_action(make(TraceAction::Issue, 3, Op::Write, 8, 4096)),
              unsigned(BLK_TA_ISSUE | BLK_TC_ACT(BLK_TC_FS) | BLK_TC_ACT(BLK_TC_WRITE)));
    EXPECT_EQ(blktrace_action(make(TraceAction::Insert, 3, Op::Read, 8, 4096)),
              unsigned(BLK_TA_INSERT | BLK_TC_ACT(BLK_TC_FS) | BLK_TC_ACT(BLK_TC_READ)));
    EXPECT_EQ(blktrace_action(make(TraceAction::GetRq, 3, Op::Read, 8, 4096)),
              unsigned(BLK_TA_GETRQ | BLK_TC_ACT(BLK_TC_READ)));
    EXPECT_EQ(blktrace_action(make(TraceAction::BackMerge, 3, Op::Read, 8, 4096)),
              unsigned(BLK_TA_BACKMERGE | BLK_TC_ACT(BLK_TC_READ)));
    EXPECT_EQ(blktrace_action(make(TraceAction::FrontMerge, 3, Op::Read, 8, 4096)),
              unsigned(BLK_TA_FRONTMERGE | BLK_TC_ACT(BLK_TC_READ)));
    // blk_add_trace_plug/unplug pass opf 0: READ, whatever the event says.
    EXPECT_EQ(blktrace_action(make(TraceAction::Plug, 3, Op::Write, 0, 0)),
              unsigned(BLK_TA_PLUG | BLK_TC_ACT(BLK_TC_READ)));
    EXPECT_EQ(blktrace_action(make(TraceAction::Unplug, 3, Op::Write, 0, 0)),
              unsigned(BLK_TA_UNPLUG_IO | BLK_TC_ACT(BLK_TC_READ)));
    EXPECT_EQ(blktrace_action(make(TraceAction::Queue, 3, Op::Flush, 0, 0)),
              unsigned(BLK_TA_QUEUE | BLK_TC_ACT(BLK_TC_WRITE) | BLK_TC_ACT(BLK_TC_FLUSH)));
    EXPECT_EQ(blk::kTnProcess, unsigned(BLK_TN_PROCESS));
    EXPECT_EQ(sizeof(blk::IoTrace), sizeof(struct blk_io_trace));
    EXPECT_EQ(sizeof(blk::IoTraceRemap), sizeof(struct blk_io_trace_remap));
    EXPECT_EQ(blk::kTraceMagic | blk::kTraceVersion,
              unsigned(BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION));
#endif
}

TEST_F(BlktraceWriterTest, RoundTripsEveryAction) {
    const std::vector<TraceEvent> in = every_action();
    {
        BlktraceWriter w(file("sdb.blktrace.0"));
        for (const TraceEvent& e : in) w.record(e);
        EXPECT_EQ(w.events_written(), in.size());
    }
    const std::vector<TraceEvent> out = read_blktrace_file(file("sdb.blktrace.0"));
    ASSERT_EQ(out.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        SCOPED_TRACE(i);
        expect_same(in[i], out[i]);
    }
}

TEST_F(BlktraceWriterTest, RawLayoutIsTheKernels) {
    TraceEvent x = make(TraceAction::Split, 7, Op::Read, 2048, 4096);
    x.new_sector = 2056;
    TraceEvent a = make(TraceAction::Remap, 8, Op::Read, 1024, 4096);
    a.from_device = kMd0;
    a.from_sector = 2048;
    {
        BlktraceWriter w(file("sdb.blktrace.0"));
        w.record(x);
        w.record(a);
    }
    const std::vector<unsigned char> raw = slurp(file("sdb.blktrace.0"));
    ASSERT_EQ(raw.size(), 3 * 48 + 16 + 8 + 16);

    // trace_note_tsk(): BLK_TN_PROCESS, sequence 0, comm[16] "fio".
    blk::IoTrace t;
    std::memcpy(&t, raw.data(), sizeof(t));
    EXPECT_EQ(t.magic, 0x65617407u);
    EXPECT_EQ(t.sequence, 0u);
    EXPECT_EQ(t.action, 1u << 26);
    EXPECT_EQ(t.pid, 4242u);
    EXPECT_EQ(t.device, kSdb);
    ASSERT_EQ(t.pdu_len, 16);
    EXPECT_STREQ(reinterpret_cast<const char*>(raw.data() + 48), "fio");

    size_t off = 48 + 16;
    std::memcpy(&t, raw.data() + off, sizeof(t));
    EXPECT_EQ(t.magic, 0x65617407u);
    EXPECT_EQ(t.sequence, 7u);
    EXPECT_EQ(t.time, 7000u);
    EXPECT_EQ(t.sector, 2048u);
    EXPECT_EQ(t.bytes, 4096u);
    EXPECT_EQ(t.action, 13u | (1u << 16));  // BLK_TA_SPLIT | READ
    EXPECT_EQ(t.cpu, 0u);
    ASSERT_EQ(t.pdu_len, 8);
    const std::vector<unsigned char> be_2056 = {0, 0, 0, 0, 0, 0, 0x08, 0x08};
    EXPECT_TRUE(std::equal(be_2056.begin(), be_2056.end(), raw.begin() + off + 48));

    off += 48 + 8;
    std::memcpy(&t, raw.data() + off, sizeof(t));
    ASSERT_EQ(t.pdu_len, 16);
    // struct blk_io_trace_remap { __be32 device_from; __be32 device_to; __be64 sector_from; }
    const std::vector<unsigned char> remap = {
        0x00, 0x90, 0x00, 0x00,                         // device_from 9,0
        0x00, 0x80, 0x00, 0x10,                         // device_to 8,16
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x00  // sector_from 2048
    };
    EXPECT_TRUE(std::equal(remap.begin(), remap.end(), raw.begin() + off + 48));
}

TEST_F(BlktraceWriterTest, OneProcessNotePerPid) {
    {
        BlktraceWriter w(file("sdb.blktrace.0"), {.process_name = "fio-job"});
        for (uint64_t i = 1; i <= 6; ++i) {
            TraceEvent e = make(TraceAction::Queue, i, Op::Read, 8 * i, 4096);
            e.pid = i % 2 ? 100 : 0;
            w.record(e);
        }
    }
    const std::vector<unsigned char> raw = slurp(file("sdb.blktrace.0"));
    std::vector<std::string> notes;
    for (size_t off = 0; off < raw.size();) {
        blk::IoTrace t;
        std::memcpy(&t, raw.data() + off, sizeof(t));
        if (t.action == blk::kTnProcess) {
            notes.push_back(std::to_string(t.pid) + ":" +
                            reinterpret_cast<const char*>(raw.data() + off + 48));
        }
        off += 48 + t.pdu_len;
    }
    EXPECT_EQ(notes, (std::vector<std::string>{"100:fio-job", "0:swapper/0"}));
    EXPECT_EQ(read_blktrace_file(file("sdb.blktrace.0")).size(), 6u);
}

TEST_F(BlktraceWriterTest, ManyEventsCrossTheBuffer) {
    constexpr uint64_t kCount = 20000;  // ~1 MiB: many 64 KiB buffer flushes
    {
        BlktraceWriter w(file("sdb.blktrace.0"));
        for (uint64_t i = 1; i <= kCount; ++i) {
            TraceEvent e =
                make(i % 3 ? TraceAction::Queue : TraceAction::Split, i, Op::Write, i * 8, 4096);
            e.new_sector = i * 8 + 4;
            e.pid = 1000 + i % 4;
            w.record(e);
            if (i == kCount / 2) w.flush();
        }
    }
    const std::vector<TraceEvent> out = read_blktrace_file(file("sdb.blktrace.0"));
    ASSERT_EQ(out.size(), kCount);
    for (uint64_t i = 1; i <= kCount; ++i) {
        ASSERT_EQ(out[i - 1].sequence, i);
        ASSERT_EQ(out[i - 1].sector, i * 8);
        ASSERT_EQ(out[i - 1].pid, 1000 + i % 4);
        if (out[i - 1].action == TraceAction::Split) {
            ASSERT_EQ(out[i - 1].new_sector, i * 8 + 4);
        }
    }
}

TEST_F(BlktraceWriterTest, ReadsOtherEndianTraces) {
    const std::vector<TraceEvent> in = every_action();
    {
        BlktraceWriter w(file("sdb.blktrace.0"));
        for (const TraceEvent& e : in) w.record(e);
    }
    // Swap every header field as a trace from the other byte order would
    // have them; the payloads are big endian in both.
    std::vector<unsigned char> raw = slurp(file("sdb.blktrace.0"));
    for (size_t off = 0; off < raw.size();) {
        blk::IoTrace t;
        std::memcpy(&t, raw.data() + off, sizeof(t));
        const size_t pdu_len = t.pdu_len;
        t.magic = __builtin_bswap32(t.magic);
        t.sequence = __builtin_bswap32(t.sequence);
        t.time = __builtin_bswap64(t.time);
        t.sector = __builtin_bswap64(t.sector);
        t.bytes = __builtin_bswap32(t.bytes);
        t.action = __builtin_bswap32(t.action);
        t.pid = __builtin_bswap32(t.pid);
        t.device = __builtin_bswap32(t.device);
        t.cpu = __builtin_bswap32(t.cpu);
        t.error = __builtin_bswap16(t.error);
        t.pdu_len = __builtin_bswap16(t.pdu_len);
        std::memcpy(raw.data() + off, &t, sizeof(t));
        off += sizeof(t) + pdu_len;
    }
    {
        std::ofstream o(file("swapped.blktrace.0"), std::ios::binary);
        o.write(reinterpret_cast<const char*>(raw.data()), std::streamsize(raw.size()));
    }
    const std::vector<TraceEvent> out = read_blktrace_file(file("swapped.blktrace.0"));
    ASSERT_EQ(out.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
        SCOPED_TRACE(i);
        expect_same(in[i], out[i]);
    }
}

TEST_F(BlktraceWriterTest, RejectsGarbageAndTruncation) {
    {
        BlktraceWriter w(file("sdb.blktrace.0"));
        w.record(every_action()[1]);  // a split: 48 + 8 bytes
    }
    std::vector<unsigned char> raw = slurp(file("sdb.blktrace.0"));
    {
        std::ofstream o(file("short.blktrace.0"), std::ios::binary);
        o.write(reinterpret_cast<const char*>(raw.data()), std::streamsize(raw.size() - 3));
    }
    EXPECT_THROW(read_blktrace_file(file("short.blktrace.0")), std::runtime_error);
    {
        std::ofstream o(file("junk.blktrace.0"), std::ios::binary);
        o << std::string(96, 'x');
    }
    EXPECT_THROW(read_blktrace_file(file("junk.blktrace.0")), std::runtime_error);
    EXPECT_THROW(read_blktrace_file(file("missing.blktrace.0")), std::runtime_error);
}

TEST_F(BlktraceWriterTest, CreateFailureNamesThePath) {
    const std::string path = file("no/such/dir/md0.blktrace.0");
    try {
        BlktraceWriter w(path);
        FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "mdsplit: mdsplit_trace: cannot create " + path + ": " + std::strerror(ENOENT));
    }
}

// blkparse must read the file as it reads the kernel's: `-i DIR/NAME` opens
// DIR/NAME.blktrace.0.
TEST_F(BlktraceWriterTest, BlkparsePrintsTheEvents) {
    if (::access("/usr/bin/blkparse", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/blkparse";
    constexpr int kReads = 5;
    constexpr int kWrites = 3;
    {
        BlktraceWriter w(file("m0.blktrace.0"));
        uint64_t seq = 1;
        auto io = [&](Op op, sector_t sector, uint32_t sectors, bool sync) {
            for (TraceAction a : {TraceAction::Queue, TraceAction::GetRq, TraceAction::Insert,
                                  TraceAction::Issue, TraceAction::Complete}) {
                TraceEvent e = make(a, seq, op, sector, sectors * 512);
                e.sequence = seq * 3;  // global numbering: gaps in a device's file
                e.sync = sync;
                if (a == TraceAction::Complete) e.time_ns += 250'000;
                w.record(e);
                ++seq;
            }
        };
        io(Op::Read, 2048, 8, false);
        for (int i = 1; i < kReads; ++i) io(Op::Read, 4096 + 8 * i, 8, true);
        for (int i = 0; i < kWrites; ++i) io(Op::Write, 65536 + 16 * i, 16, true);
        TraceEvent a = make(TraceAction::Remap, seq++, Op::Read, 4096, 4096);
        a.sequence = seq * 3;
        a.from_device = kMd0;
        a.from_sector = 123456;
        w.record(a);
        TraceEvent u = make(TraceAction::Unplug, seq++, Op::Read, 0, 0);
        u.sequence = seq * 3;
        u.depth = 2;
        w.record(u);
    }
    int status = 0;
    const std::string dump = file("dump.bin");
    const std::string text =
        run("/usr/bin/blkparse -i '" + file("m0") + "' -d '" + dump + "' 2>/dev/null", &status);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;

    EXPECT_TRUE(std::regex_search(text, std::regex(R"( C +R 2048 \+ 8 \[0\])"))) << text;
    EXPECT_TRUE(std::regex_search(text, std::regex(R"( Q +RS 4104 \+ 8 \[fio\])"))) << text;
    EXPECT_TRUE(std::regex_search(text, std::regex(R"( D +WS 65536 \+ 16 \[fio\])"))) << text;
    EXPECT_TRUE(std::regex_search(text, std::regex(R"( A +R 4096 \+ 8 <- \(9,0\) 123456)")))
        << text;
    EXPECT_TRUE(std::regex_search(text, std::regex(R"( U +N \[fio\] 2)"))) << text;
    EXPECT_EQ(sum_counter(text, "Reads Completed"), uint64_t(kReads)) << text;
    EXPECT_EQ(sum_counter(text, "Writes Completed"), uint64_t(kWrites)) << text;
    EXPECT_EQ(sum_counter(text, "Read Dispatches"), uint64_t(kReads)) << text;
    EXPECT_EQ(sum_counter(text, "IO unplugs"), 1u) << text;

    // -d writes what it parsed in the same format (with the notes), times
    // counted from the first event: btt's input.
    std::vector<TraceEvent> ours = read_blktrace_file(file("m0.blktrace.0"));
    const std::vector<TraceEvent> dumped = read_blktrace_file(dump);
    ASSERT_EQ(dumped.size(), ours.size());
    const uint64_t genesis = ours.front().time_ns;
    for (size_t i = 0; i < ours.size(); ++i) {
        SCOPED_TRACE(i);
        ours[i].time_ns -= genesis;
        expect_same(ours[i], dumped[i]);
    }
    if (::access("/usr/bin/btt", X_OK) == 0) {
        // btt writes its *_iops_fp.dat / *_mbps_fp.dat into the current directory.
        const std::string btt =
            run("cd '" + dir_.string() + "' && /usr/bin/btt -i '" + dump + "' 2>&1", &status);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << btt;
        // D2C: 251 us for every request.
        const std::regex d2c(R"(D2C +0\.000251\d* +0\.000251\d* +0\.000251\d* +8\b)");
        EXPECT_TRUE(std::regex_search(btt, d2c)) << btt;
    }
}

}  // namespace
}  // namespace mdsplit
