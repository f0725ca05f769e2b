// RunPlan (engine/stack/run_plan.h): the run-wide decisions from plain job
// descriptions, without fio.
#include "stack/run_plan.h"

#include <gtest/gtest.h>

namespace mdsplit {
namespace {

PlanJob job(const std::string& name, bool thread, const std::string& config = "s.toml") {
    PlanJob j;
    j.name = name;
    j.config = config;
    j.filename = j.device = "md0";
    j.thread = thread;
    return j;
}

RunPlan plan(std::vector<PlanJob> jobs) {
    for (size_t i = 0; i < jobs.size(); i++) jobs[i].number = uint32_t(i + 1);
    return RunPlan(std::move(jobs), [](const std::string& p) { return "/r/" + p; });
}

StackConfig raid5() {
    StackConfig c;
    c.device.kind = DeviceKind::Raid5;
    return c;
}

TEST(RunPlan, ForkedJobsOnOneRaid5AtOnceAreRefused) {
    RunPlan p = plan({job("a", false), job("b", false)});
    EXPECT_NE(p.sharing_refusal(0, raid5()).find("jobs a and b share the device of s.toml (raid5)"),
              std::string::npos);
}

TEST(RunPlan, AStonewallLetsForkedJobsOwnARaid5InTurn) {
    PlanJob b = job("b", false);
    b.stonewall = true;
    RunPlan p = plan({job("a", false), b});
    EXPECT_EQ(p.sharing_refusal(0, raid5()), "");
}

TEST(RunPlan, ThreadsShareOneStackKey) {
    RunPlan p = plan({job("a", true), job("b", true), job("c", false)});
    EXPECT_EQ(p.stack_key(0), p.stack_key(1));
    EXPECT_NE(p.stack_key(0), p.stack_key(2));
    EXPECT_TRUE(p.shares_stack(0, 1));
    EXPECT_FALSE(p.shares_stack(0, 2));
}

TEST(RunPlan, StackUseCountsWritersAndTheirMountOverride) {
    PlanJob w = job("w", true);
    w.writes = true;
    RunPlan p = plan({job("r", true), w, job("other", true, "t.toml")});
    StackUse use = p.stack_use(0);
    EXPECT_EQ(use.jobs, (std::vector<std::string>{"r", "w"}));
    EXPECT_TRUE(use.writes);
    EXPECT_FALSE(use.writers_allow_mounted);
}

TEST(RunPlan, ASubjobsSidecarAndForkedTraceGetItsNumber) {
    PlanJob a = job("a", false);
    a.stats = "s.json";
    a.trace = "tr/";
    a.subjob = 2;
    RunPlan p = plan({a});
    EXPECT_EQ(p.stats_path(0), "s.json.2");
    EXPECT_EQ(p.trace_dir(0), "tr.2");
}

TEST(RunPlan, TwoDevicesWritingOneSidecarAreRefused) {
    PlanJob a = job("a", false), b = job("b", false);
    a.stats = b.stats = "s.json";
    RunPlan p = plan({a, b});
    EXPECT_NE(p.stats_rival_refusal(0).find("job b writes it too"), std::string::npos);
}

TEST(RunPlan, JobsOfOneDeviceNamingTwoTraceDirectoriesAreRefused) {
    PlanJob a = job("a", true), b = job("b", true);
    a.trace = "t1";
    RunPlan p = plan({a, b});
    EXPECT_NE(p.trace_agreement_refusal(0).find("jobs a (t1) and b (none)"), std::string::npos);
}

TEST(RunPlan, CgroupInARunOfThreadsIsRefused) {
    PlanJob a = job("a", true);
    a.cgroup = "g";
    RunPlan p = plan({a, job("b", true)});
    EXPECT_NE(p.thread_cgroup_refusal().find("cgroup=g (job a)"), std::string::npos);
}

TEST(RunPlan, OneGroupAtTwoWeightsIsRefused) {
    PlanJob a = job("a", true), b = job("b", true);
    a.group = b.group = "g";
    b.group_weight = 200;
    RunPlan p = plan({a, b});
    EXPECT_NE(p.sharing_refusal(0, StackConfig{}).find("jobs a (100) and b (200) put group g"),
              std::string::npos);
}

TEST(RunPlan, CreateSerializeOffBesideAForkedJobIsRefused) {
    PlanJob a = job("a", true);
    a.create_serialize = false;
    RunPlan p = plan({a, job("b", false)});
    EXPECT_NE(p.create_serialize_refusal(0).find("while job b runs as a forked process"),
              std::string::npos);
}

TEST(RunPlan, OtherEnginesJobsCountOnlyForOrder) {
    PlanJob other = job("x", false);
    other.ours = false;
    other.stonewall = true;
    RunPlan p = plan({job("a", false), other, job("b", false)});
    EXPECT_EQ(p.stack_use(0).jobs, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(p.sharing_refusal(0, raid5()), "");  // x's stonewall parts them
}

TEST(RunPlan, AJobWithoutAStackFileIsRefusedFirst) {
    PlanJob j = job("a", false, "");
    j.group_weight_text = "-1";
    EXPECT_EQ(plan({j}).option_refusal(0),
              "mdsplit: mdsplit_config is required: the TOML file describing the device stack "
              "(see docs/stack-toml.md)");
}

TEST(RunPlan, AGroupWeightIsReadAsFioReadsANumber) {
    EXPECT_EQ(group_weight_of("0x10"), 16u);
    EXPECT_EQ(group_weight_of("1000"), 1000u);
    EXPECT_EQ(group_weight_of("-1"), 0u);
    EXPECT_EQ(group_weight_of("1001"), 0u);
    EXPECT_EQ(group_weight_of("5x"), 0u);
}

TEST(RunPlan, AGroupWeightThatIsNoNumberIsRefused) {
    PlanJob j = job("a", false);
    j.group_weight_text = "-1";
    EXPECT_EQ(plan({j}).option_refusal(0),
              "mdsplit: mdsplit_group_weight=-1 is not a group weight; allowed: an integer "
              "1..1000");
}

TEST(RunPlan, ABufferedTrimIsRefused) {
    PlanJob j = job("a", false);
    j.trims = j.buffered = true;
    EXPECT_EQ(plan({j}).option_refusal(0).rfind("mdsplit: rw=trim/randtrim/trimwrite with "
                                                "direct=0",
                                                0),
              0u);
}

TEST(RunPlan, TwoFileNamesAreRefused) {
    PlanJob j = job("a", false);
    j.files = 2;
    EXPECT_EQ(plan({j}).option_refusal(0),
              "mdsplit: filename must name exactly one virtual device (e.g. md0); got 2 files");
}

TEST(RunPlan, AGroupNeedsBfq) {
    PlanJob j = job("a", false);
    j.mdsplit_group = "g";
    EXPECT_EQ(plan({j}).setup_refusal(0, raid5()),
              "mdsplit: mdsplit_group=g needs device.scheduler = \"bfq\" in s.toml");
}

TEST(RunPlan, AnIoschedulerOtherThanTheStacksIsRefused) {
    PlanJob j = job("a", false);
    j.ioscheduler = "bfq";
    EXPECT_EQ(plan({j}).setup_refusal(0, StackConfig{}).rfind("mdsplit: ioscheduler=bfq: ", 0), 0u);
}

TEST(RunPlan, AJobIsChargedToMdsplitGroupElseItsCgroup) {
    PlanJob a = job("a", false), b = job("b", false);
    a.mdsplit_group = "g";
    b.cgroup = "c";
    RunPlan p = plan({a, b});
    EXPECT_EQ(p.jobs()[0].group, "g");
    EXPECT_EQ(p.jobs()[1].group, "c");
}

TEST(RunPlan, TwoGroupNamesForOneJobAreRefused) {
    PlanJob j = job("a", false);
    j.mdsplit_group = "g";
    j.cgroup = "c";
    StackConfig bfq;
    bfq.device.scheduler = SchedulerKind::Bfq;
    EXPECT_EQ(plan({j}).setup_refusal(0, bfq).rfind("mdsplit: mdsplit_group=g and cgroup=c: ", 0),
              0u);
}

TEST(RunPlan, AWeightWithoutAGroupIsRefused) {
    PlanJob j = job("a", false);
    j.group_weight_text = "200";
    EXPECT_EQ(plan({j})
                  .setup_refusal(0, StackConfig{})
                  .rfind("mdsplit: mdsplit_group_weight=200 without mdsplit_group: ", 0),
              0u);
}

TEST(RunPlan, AStackOpensWritableWhenAnyJobOfItsFileMayWrite) {
    PlanJob reader = job("r", true), writer = job("w", true);
    writer.writes = true;
    RunPlan p = plan({reader, writer});
    EXPECT_TRUE(p.stack_options(0).writable);
    EXPECT_FALSE(p.exclusive(0));
    EXPECT_FALSE(plan({job("r", true)}).stack_options(0).writable);
}

TEST(RunPlan, AnEngineLineStartsWithMdsplitOnce) {
    EXPECT_EQ(engine_line("x: y"), "mdsplit: x: y");
    EXPECT_EQ(engine_line("mdsplit: x"), "mdsplit: x");
}

}  // namespace
}  // namespace mdsplit
