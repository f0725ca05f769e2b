// measure_buffered_costs(): every figure it measures is measured (a real
// step takes some time), the ones it does not measure (fio's, cpus) come
// from the base, and a scratch directory it cannot use is a clear error.
// No figure is compared with a bound: these machines are noisy.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "sim/buffered_cost_probe.h"

namespace mdsplit {
namespace {

TEST(BufferedCostProbeTest, MeasuresEveryStepItOwns) {
    BufferedCostProbeOptions o;
    o.scratch_dir = "/var/tmp";
    o.scratch_bytes = 8ull << 20;
    o.reads = 64;
    o.wakeups = 20;
    BufferedCosts base;
    base.fio_submit_ns = 12345;
    base.fio_complete_ns = 678;
    base.cpus = 3;
    BufferedCosts c = measure_buffered_costs(o, base);
    EXPECT_GT(c.bio_submit_ns, 0u);  // a read submitted to io_uring
    EXPECT_GT(c.copy_4k_ns, 0u);
    EXPECT_GT(c.punt_ns, 0u);
    EXPECT_GT(c.wakeup_ns, 0u);  // a thread that slept runs again
    EXPECT_EQ(c.fio_submit_ns, 12345u);
    EXPECT_EQ(c.fio_complete_ns, 678u);
    EXPECT_EQ(c.cpus, 3u);
    EXPECT_EQ(c.dirty_page_ns, base.dirty_page_ns);
}

TEST(BufferedCostProbeTest, AnUnusableScratchDirectoryIsAClearError) {
    BufferedCostProbeOptions o;
    o.scratch_dir = "/nonexistent/mdsplit";
    o.reads = 16;
    o.wakeups = 2;
    try {
        measure_buffered_costs(o);
        FAIL() << "no error";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(
            std::string(e.what()).find("cannot create a scratch file in /nonexistent/mdsplit"),
            std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace mdsplit
