// IoUringRing's registered buffer (fio's fixedbufs): a member I/O wholly
// inside the region goes to the kernel as READ_FIXED / WRITE_FIXED, one
// outside it as a plain READ / WRITE, and the data is right either way.
#include "core/drivers/io_uring_ring.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/drivers/io_uring_backend.h"

namespace mdsplit {
namespace {

struct Completions {
    std::vector<int64_t> results;
};

void record(void* ctx, Request*, int64_t res) {
    static_cast<Completions*>(ctx)->results.push_back(res);
}

class IoUringRingTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/mdsplit-ring-XXXXXX";
        int fd = mkstemp(tmpl);
        ASSERT_GE(fd, 0);
        close(fd);
        path_ = tmpl;
    }
    void TearDown() override { unlink(path_.c_str()); }

    // One request of `len` bytes at sector 0, from or into `buf`, run to completion.
    int64_t run(IoUringRing& ring, IoUringBackend& backend, Op op, void* buf, size_t len) {
        Completions done;
        backend.set_completion(record, &done);
        Request rq;
        rq.op = op;
        rq.sector = 0;
        rq.nr_sectors = uint32_t(len >> kSectorShift);
        rq.iov.push_back(iovec{buf, len});
        backend.submit(&rq);
        backend.kick();
        for (int i = 0; i < 100 && done.results.empty(); i++) {
            ring.wait(100'000'000);
            ring.poll();
        }
        EXPECT_EQ(done.results.size(), 1u);
        return done.results.front();
    }

    std::string path_;
};

TEST_F(IoUringRingTest, IoInsideTheRegisteredBufferIsIssuedFixed) {
    IoUringRing ring(8);
    IoUringBackend backend(ring, path_, 1 << 20, /*direct=*/false, /*writable=*/true);
    std::vector<char> region(64 * 1024);
    if (!ring.register_buffer(region.data(), region.size()))
        GTEST_SKIP() << "the kernel refused to register a buffer (memlock limit?)";
    EXPECT_EQ(ring.registered_buffer_bytes(), region.size());
    EXPECT_FALSE(ring.register_buffer(region.data(), region.size()));  // one region per ring

    char* out = region.data() + 8192;
    memset(out, 'x', 4096);
    EXPECT_EQ(run(ring, backend, Op::Write, out, 4096), 4096);
    EXPECT_EQ(ring.fixed_buffer_ios(), 1u);

    char* in = region.data() + 16384;
    memset(in, 0, 4096);
    EXPECT_EQ(run(ring, backend, Op::Read, in, 4096), 4096);
    EXPECT_EQ(ring.fixed_buffer_ios(), 2u);
    EXPECT_EQ(memcmp(in, out, 4096), 0);
}

TEST_F(IoUringRingTest, IoOutsideOrAcrossTheRegionIsIssuedPlain) {
    IoUringRing ring(8);
    IoUringBackend backend(ring, path_, 1 << 20, false, true);
    std::vector<char> region(8192);
    if (!ring.register_buffer(region.data(), region.size()))
        GTEST_SKIP() << "the kernel refused to register a buffer (memlock limit?)";
    std::vector<char> elsewhere(4096, 'y');
    EXPECT_EQ(run(ring, backend, Op::Write, elsewhere.data(), 4096), 4096);
    // Starts inside the region, ends past it.
    EXPECT_EQ(ring.fixed_buffer_index(region.data() + 4096, 8192), -1);
    EXPECT_EQ(ring.fixed_buffer_index(region.data() + 4096, 4096), 0);
    EXPECT_EQ(ring.fixed_buffer_ios(), 0u);

    std::vector<char> back(4096, 0);
    EXPECT_EQ(run(ring, backend, Op::Read, back.data(), 4096), 4096);
    EXPECT_EQ(back, elsewhere);
    EXPECT_EQ(ring.fixed_buffer_ios(), 0u);
}

TEST_F(IoUringRingTest, WithoutARegisteredBufferNothingIsFixed) {
    IoUringRing ring(8);
    EXPECT_EQ(ring.registered_buffer_bytes(), 0u);
    char buf[64];
    EXPECT_EQ(ring.fixed_buffer_index(buf, sizeof buf), -1);
    EXPECT_FALSE(ring.register_buffer(nullptr, 4096));
}

}  // namespace
}  // namespace mdsplit
