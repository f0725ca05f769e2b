// base/device_clock.h: slow motion's one conversion between loop and device time.
#include "base/device_clock.h"

#include <gtest/gtest.h>

namespace mdsplit {
namespace {

// At time_scale 1 both times are the same clock.
TEST(DeviceClockTest, ScaleOneIsTheIdentity) {
    DeviceClock c(1.0);
    EXPECT_EQ(c.loop_ns(123'456'789), 123'456'789u);
    EXPECT_EQ(c.device_ns(123'456'789), 123'456'789u);
    EXPECT_EQ(c.loop_rate(577'000'000), 577'000'000u);
}

// At time_scale k a device duration takes k times as long on the loop, and a
// device's rate is k times lower.
TEST(DeviceClockTest, SlowMotionStretchesDurationsAndDividesRates) {
    DeviceClock c(32.0);
    EXPECT_EQ(c.loop_ns(10'000), 320'000u);
    EXPECT_EQ(c.device_ns(320'000), 10'000u);
    EXPECT_EQ(c.loop_rate(3'200'000'000), 100'000'000u);
}

// A jiffy tick in device time maps to the loop and back to the same instant.
TEST(DeviceClockTest, DeviceInstantRoundTripsThroughTheLoop) {
    DeviceClock c(4.0);
    const uint64_t tick = 4'000'000;  // HZ 250
    EXPECT_EQ(c.device_ns(c.loop_ns(tick)), tick);
}

// A factor of zero or below means no slow motion.
TEST(DeviceClockTest, NonPositiveScaleMeansOne) {
    EXPECT_EQ(DeviceClock(0).scale(), 1.0);
    EXPECT_EQ(DeviceClock(-3).loop_ns(7), 7u);
}

}  // namespace
}  // namespace mdsplit
