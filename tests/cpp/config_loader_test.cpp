// The stack-file loader: valid files come back with the right values, and
// each kind of bad file is refused with a one-line message naming the key.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "config/config_loader.h"
#include "config/size_parse.h"
#include "stack/storage_probe.h"

namespace mdsplit {
namespace {

namespace fs = std::filesystem;

class TempDir {
public:
    TempDir() {
        std::string pattern = (fs::temp_directory_path() / "mdsplit-config-XXXXXX").string();
        char* created = ::mkdtemp(pattern.data());
        if (created == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        path_ = created;
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const fs::path& path() const { return path_; }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    fs::path path_;
};

void write_file(const std::string& path, const std::string& content) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream out(path, std::ios::binary);
    out << content;
}

void make_sized_file(const std::string& path, uintmax_t size) {
    write_file(path, "");
    fs::resize_file(path, size);
}

class ConfigLoaderTest : public ::testing::Test {
protected:
    StackConfig load(const std::string& text) {
        return load_stack_text(text, dir_.path().string(), "stack.toml");
    }

    // Loading `text` must fail with a one-line message that starts with
    // "stack.toml: <key>: " and contains `detail`.
    void expect_error(const std::string& text, const std::string& key,
                      const std::string& detail = "") {
        try {
            load(text);
            ADD_FAILURE() << "no error for key " << key << " in:\n" << text;
        } catch (const ConfigError& error) {
            std::string message = error.what();
            EXPECT_EQ(message.rfind("stack.toml: " + key + ": ", 0), 0u) << message;
            EXPECT_NE(message.find("allowed: "), std::string::npos) << message;
            EXPECT_NE(message.find(detail), std::string::npos) << message;
            EXPECT_EQ(message.find('\n'), std::string::npos) << message;
        }
    }

    TempDir dir_;
};

// One valid passthrough member, to which tests add a section.
const std::string kOneMember = R"(
[[members]]
path = "m0.img"
size = "1g"
)";

// Three valid raid5 members.
const std::string kRaid5 = R"(
[device]
kind = "raid5"
[[members]]
path = "m0.img"
size = "1g"
[[members]]
path = "m1.img"
size = "1g"
[[members]]
path = "m2.img"
size = "1g"
)";

// ---------------------------------------------------------------------------
// Sizes and durations

TEST(SizeParseTest, AcceptsBytesAndBinarySuffixes) {
    EXPECT_EQ(parse_size("4096", "k"), 4096u);
    EXPECT_EQ(parse_size("64k", "k"), 64u * 1024);
    EXPECT_EQ(parse_size("64K", "k"), 64u * 1024);
    EXPECT_EQ(parse_size("512KiB", "k"), 512u * 1024);
    EXPECT_EQ(parse_size("512kb", "k"), 512u * 1024);
    EXPECT_EQ(parse_size("2g", "k"), 2ull << 30);
    EXPECT_EQ(parse_size("3 MiB", "k"), 3ull << 20);
    EXPECT_EQ(parse_size("1t", "k"), 1ull << 40);
    EXPECT_EQ(parse_size("1.5m", "k"), 3ull << 19);
    EXPECT_EQ(parse_size("100b", "k"), 100u);
    EXPECT_EQ(parse_size("0", "k"), 0u);
}

TEST(SizeParseTest, RefusesNonSizes) {
    for (const char* text : {"12q", "", "k", "-4k", "1.k", "0.1k", "99999999999t", "4 k b"}) {
        try {
            parse_size(text, "members[1].size");
            ADD_FAILURE() << "accepted " << text;
        } catch (const ConfigError& error) {
            EXPECT_EQ(std::string(error.what()).rfind("members[1].size: ", 0), 0u) << error.what();
        }
    }
}

TEST(SizeParseTest, AcceptsDurationsWithUnits) {
    EXPECT_EQ(parse_duration_ns("80us", "k"), 80'000u);
    EXPECT_EQ(parse_duration_ns("8ms", "k"), 8'000'000u);
    EXPECT_EQ(parse_duration_ns("1.5ms", "k"), 1'500'000u);
    EXPECT_EQ(parse_duration_ns("2s", "k"), 2'000'000'000u);
    EXPECT_EQ(parse_duration_ns("100ns", "k"), 100u);
    EXPECT_EQ(parse_duration_ns("16.5US", "k"), 16'500u);
    EXPECT_EQ(parse_duration_ns("3\xc2\xb5s", "k"), 3'000u);  // µs
    EXPECT_EQ(parse_duration_ns("0", "k"), 0u);
}

TEST(SizeParseTest, RefusesDurationsWithoutUnits) {
    for (const char* text : {"8", "8 weeks", "ms", "1.5ns", "8m"}) {
        try {
            parse_duration_ns(text, "bfq.slice_idle");
            ADD_FAILURE() << "accepted " << text;
        } catch (const ConfigError& error) {
            EXPECT_EQ(std::string(error.what()).rfind("bfq.slice_idle: ", 0), 0u) << error.what();
        }
    }
}

// ---------------------------------------------------------------------------
// Valid files

TEST_F(ConfigLoaderTest, MinimalFileGetsDefaults) {
    StackConfig config = load(kOneMember);
    EXPECT_EQ(config.source, "stack.toml");
    EXPECT_EQ(config.device.kind, DeviceKind::Passthrough);
    EXPECT_EQ(config.device.split_order, SplitOrder::Fixed);
    EXPECT_EQ(config.device.scheduler, SchedulerKind::None);
    EXPECT_EQ(config.device.max_sectors_bytes, 1024u * 1024);
    ASSERT_EQ(config.members.size(), 1u);
    const MemberConfig& member = config.members[0];
    EXPECT_EQ(member.path, dir_.file("m0.img"));
    EXPECT_EQ(member.size, 1ull << 30);
    EXPECT_EQ(member.backend, BackendKind::IoUring);
    EXPECT_FALSE(member.model.has_value());
    EXPECT_EQ(member.max_sectors_bytes, 512u * 1024);
    EXPECT_EQ(member.queue_depth, 64u);
    EXPECT_EQ(member.logical_block_size, 512u);
    EXPECT_FALSE(member.failed);
    EXPECT_TRUE(member.direct);
    EXPECT_EQ(config.bio.policy, BioPolicy::Original);
    EXPECT_EQ(config.bio.contiguity, Contiguity::None);
    EXPECT_EQ(config.bfq.group_counting, GroupCounting::Fixed);
    EXPECT_EQ(config.bfq.slice_idle_ns, 8'000'000u);
    EXPECT_EQ(config.page_cache.ra_kb, 128u);
    EXPECT_EQ(config.page_cache.variant, BufferedVariant::ForcedRa);
}

TEST_F(ConfigLoaderTest, FullRaid5FileReadsEveryKey) {
    StackConfig config = load(R"(
[device]
kind = "raid5"
chunk = "64k"
layout = "right-asymmetric"
max_sectors = "1m"
split_order = "legacy"
scheduler = "bfq"

[[members]]
path = "m0.img"
size = "2g"
backend = "ram"
model = "sata-ssd"
max_sectors = "128KiB"
queue_depth = 32
logical_block_size = 4096
failed = true

[[members]]
path = "m1.img"
size = 1073741824
backend = "null"

[[members]]
path = "m2.img"
size = "1G"
direct = false

[bio]
policy = "align"
align = "256k"
contiguity = "pagemap"

[bfq]
group_counting = "legacy"
slice_idle = 0
low_latency = false
strict_guarantees = true
max_budget = 8192
timeout_sync = "250ms"

[page_cache]
size = "512m"
ra_kb = 0
rasync = false
variant = "pre-c8d317aa"
)");
    EXPECT_EQ(config.device.kind, DeviceKind::Raid5);
    EXPECT_EQ(config.device.chunk_bytes, 64u * 1024);
    EXPECT_EQ(config.device.layout, Raid5Layout::RightAsymmetric);
    EXPECT_EQ(config.device.split_order, SplitOrder::Legacy);
    EXPECT_EQ(config.device.scheduler, SchedulerKind::Bfq);
    ASSERT_EQ(config.members.size(), 3u);
    const MemberConfig& first = config.members[0];
    EXPECT_EQ(first.size, 2ull << 30);
    EXPECT_EQ(first.backend, BackendKind::Ram);
    ASSERT_TRUE(first.model.has_value());
    EXPECT_EQ(first.model->name, "sata-ssd");
    EXPECT_EQ(first.max_sectors_bytes, 128u * 1024);
    EXPECT_EQ(first.queue_depth, 32u);
    EXPECT_EQ(first.logical_block_size, 4096u);
    EXPECT_TRUE(first.failed);
    EXPECT_TRUE(first.direct);
    EXPECT_FALSE(config.members[2].direct);
    EXPECT_EQ(config.members[1].size, 1ull << 30);
    EXPECT_EQ(config.members[1].backend, BackendKind::Null);
    EXPECT_EQ(config.bio.policy, BioPolicy::Align);
    EXPECT_EQ(config.bio.align_bytes, 256u * 1024);
    EXPECT_EQ(config.bio.contiguity, Contiguity::Pagemap);
    EXPECT_EQ(config.bfq.group_counting, GroupCounting::Legacy);
    EXPECT_EQ(config.bfq.slice_idle_ns, 0u);
    EXPECT_FALSE(config.bfq.low_latency);
    EXPECT_TRUE(config.bfq.strict_guarantees);
    EXPECT_EQ(config.bfq.max_budget_sectors, 8192u);
    EXPECT_EQ(config.bfq.timeout_sync_ns, 250'000'000u);
    EXPECT_EQ(config.page_cache.size_bytes, 512u << 20);
    EXPECT_EQ(config.page_cache.ra_kb, 0u);
    EXPECT_FALSE(config.page_cache.rasync);
    EXPECT_EQ(config.page_cache.variant, BufferedVariant::PreC8d317aa);
}

TEST_F(ConfigLoaderTest, RelativePathsResolveAgainstTheStackFile) {
    make_sized_file(dir_.file("data/existing.img"), 1 << 20);
    std::string stack_path = dir_.file("jobs/stack.toml");
    write_file(stack_path, R"(
[[members]]
path = "../data/existing.img"
)");
    StackConfig config = load_stack_file(stack_path);
    EXPECT_EQ(config.source, stack_path);
    ASSERT_EQ(config.members.size(), 1u);
    // ".." is left to the kernel (it follows a symlink before it).
    EXPECT_EQ(config.members[0].path, dir_.file("jobs/../data/existing.img"));
    EXPECT_EQ(config.members[0].size, 0u);  // an existing file keeps its own size
}

// "lnk/../m.img" is the m.img beside lnk's target, as open(2) finds it.
TEST_F(ConfigLoaderTest, DotDotAfterASymlinkIsTheTargetsParent) {
    make_sized_file(dir_.file("other/deep/keep"), 4096);
    make_sized_file(dir_.file("other/m.img"), 1 << 20);
    std::filesystem::create_symlink(dir_.file("other/deep"), dir_.file("lnk"));
    StackConfig config = load("[[members]]\npath = \"" + dir_.file("lnk/../m.img") + "\"\n");
    EXPECT_EQ(config.members[0].size, 0u);
    struct stat named {
    }, target{};
    ASSERT_EQ(stat(config.members[0].path.c_str(), &named), 0);
    ASSERT_EQ(stat(dir_.file("other/m.img").c_str(), &target), 0);
    EXPECT_EQ(named.st_ino, target.st_ino);
}

// b.img -> a.img, neither existing yet: the first member creates a.img, the
// second would open it through the link.
TEST_F(ConfigLoaderTest, MemberThroughADanglingLinkToAnotherIsRefused) {
    std::filesystem::create_symlink("a.img", dir_.file("b.img"));
    expect_error(
        "[[members]]\npath = \"a.img\"\nsize = \"1m\"\n"
        "[[members]]\npath = \"b.img\"\nsize = \"1m\"\n",
        "members[1].path", "is the same file as members[0].path");
}

// A NUL would end the path early for the kernel: another file than named.
TEST_F(ConfigLoaderTest, PathWithANulIsRefused) {
    expect_error("[[members]]\npath = \"new.img\\u0000zzz\"\nsize = \"1m\"\n", "members[0].path",
                 "NUL");
}

TEST_F(ConfigLoaderTest, AbsolutePathsStayAsWritten) {
    std::string absolute = dir_.file("elsewhere/m.img");
    StackConfig config = load("[[members]]\npath = \"" + absolute + "\"\nsize = \"4m\"\n");
    EXPECT_EQ(config.members[0].path, absolute);
}

TEST_F(ConfigLoaderTest, RamMemberNeedsNoPath) {
    StackConfig config = load(R"(
[[members]]
backend = "ram"
size = "64m"
)");
    EXPECT_TRUE(config.members[0].path.empty());
    EXPECT_EQ(config.members[0].size, 64u << 20);
}

TEST_F(ConfigLoaderTest, PresetsAreEmbeddedAndDocumented) {
    std::vector<std::string> names = preset_model_names();
    for (const char* expected : {"sata-ssd", "nvme", "ufs", "slow-qd1", "hdd"}) {
        EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
    }
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
    for (const auto& [name, model] : preset_models()) {
        EXPECT_EQ(model.name, name);
        EXPECT_FALSE(model.description.empty()) << name;
        EXPECT_GE(model.parallelism, 1u) << name;
    }
    const TimingModelConfig& slow = preset_models().at("slow-qd1");
    EXPECT_EQ(slow.command_ns, 100'000'000u);
    EXPECT_EQ(slow.parallelism, 1u);
}

// The md RAID5 reproduction needs a SATA member to serve 128 KiB sequential
// requests markedly faster than 64 KiB requests with seeks between them.
TEST_F(ConfigLoaderTest, SataPresetPunishesSmallNonSequentialRequests) {
    const TimingModelConfig& sata = preset_models().at("sata-ssd");
    auto service_ns = [&](uint64_t bytes, bool sequential) {
        return sata.command_ns + bytes * 1'000'000'000ull / sata.bandwidth_bps +
               (sequential ? 0 : sata.random_penalty_ns);
    };
    uint64_t merged = service_ns(128 * 1024, true);
    uint64_t split_with_seeks = 2 * service_ns(64 * 1024, false);
    EXPECT_GT(double(split_with_seeks) / double(merged), 1.4);
    EXPECT_GE(sata.random_penalty_ns, 10'000u);
}

TEST_F(ConfigLoaderTest, MemberModelResolvesPresetsOwnTablesAndInlineTables) {
    StackConfig config = load(R"(
[device]
kind = "raid5"

[models.nvme]
command = "1us"
parallelism = 4

[models.mine]
description = "a test device"
command = "80us"
bandwidth = "550m"
random_penalty = "20us"
parallelism = 32
write_command = "100us"
write_bandwidth = "400m"

[[members]]
path = "m0.img"
size = "1g"
model = "sata-ssd"

[[members]]
path = "m1.img"
size = "1g"
model = "nvme"

[[members]]
path = "m2.img"
size = "1g"
model = "mine"

[[members]]
path = "m3.img"
size = "1g"
model = { command = "5us", bandwidth = "2g", parallelism = 8 }
)");
    ASSERT_EQ(config.members.size(), 4u);
    const TimingModelConfig& preset = preset_models().at("sata-ssd");
    EXPECT_EQ(config.members[0].model->command_ns, preset.command_ns);
    EXPECT_EQ(config.members[0].model->bandwidth_bps, preset.bandwidth_bps);
    // The file's own [models.nvme] wins over the preset of that name.
    EXPECT_EQ(config.members[1].model->command_ns, 1'000u);
    EXPECT_EQ(config.members[1].model->parallelism, 4u);
    const TimingModelConfig& mine = *config.members[2].model;
    EXPECT_EQ(mine.name, "mine");
    EXPECT_EQ(mine.description, "a test device");
    EXPECT_EQ(mine.command_ns, 80'000u);
    EXPECT_EQ(mine.bandwidth_bps, 550ull << 20);
    EXPECT_EQ(mine.random_penalty_ns, 20'000u);
    EXPECT_EQ(mine.parallelism, 32u);
    EXPECT_EQ(mine.write_command_ns, 100'000u);
    EXPECT_EQ(mine.write_bandwidth_bps, 400ull << 20);
    const TimingModelConfig& inline_model = *config.members[3].model;
    EXPECT_EQ(inline_model.name, "members[3].model");
    EXPECT_EQ(inline_model.command_ns, 5'000u);
    EXPECT_EQ(inline_model.bandwidth_bps, 2ull << 30);
    EXPECT_EQ(inline_model.parallelism, 8u);
    EXPECT_EQ(config.models.size(), 2u);
    EXPECT_EQ(find_model(config, "mine").command_ns, 80'000u);
    EXPECT_EQ(find_model(config, "ufs").name, "ufs");
    EXPECT_THROW(find_model(config, "floppy"), ConfigError);
}

// prefetch_window is a size or "request"; anything else names the key and both.
TEST_F(ConfigLoaderTest, PrefetchWindowIsASizeOrRequest) {
    StackConfig config = load(R"(
[models.a]
prefetch_window = "128k"
[models.b]
prefetch_window = "request"
[models.c]
command = "1us"
[[members]]
path = "m.img"
size = "1g"
model = "a"
)");
    EXPECT_EQ(find_model(config, "a").prefetch_window_bytes, 128 * 1024u);
    EXPECT_EQ(find_model(config, "b").prefetch_window_bytes,
              TimingModelConfig::kPrefetchWindowRequest);
    EXPECT_EQ(find_model(config, "c").prefetch_window_bytes, 0u);
    expect_error(kOneMember + "[models.x]\nprefetch_window = \"requests\"\n",
                 "models.x.prefetch_window", R"(or "request")");
    expect_error(kOneMember + "[models.x]\nprefetch_window = -1\n", "models.x.prefetch_window",
                 R"(or "request")");
    expect_error(kOneMember + "[models.x]\nprefetch_window = true\n", "models.x.prefetch_window",
                 "expected a size");
}

// jitter_seed: an integer from 0 to 1000000; anything else names the key and the range.
TEST_F(ConfigLoaderTest, JitterSeedIsARangedInteger) {
    StackConfig config = load(kOneMember + "[models.x]\njitter = \"2us\"\njitter_seed = 9\n");
    EXPECT_EQ(find_model(config, "x").jitter_seed, 9u);
    expect_error(kOneMember + "[models.x]\njitter_seed = -1\n", "models.x.jitter_seed",
                 "an integer from 0 to 1000000");
    expect_error(kOneMember + "[models.x]\njitter_seed = \"3\"\n", "models.x.jitter_seed",
                 "expected an integer");
}

TEST_F(ConfigLoaderTest, ContiguityDistributionIsNormalised) {
    StackConfig config = load(kOneMember + R"(
[bio]
contiguity = { runs = [[1, 5], [16, 3.0], [256, 2]] }
)");
    EXPECT_EQ(config.bio.contiguity, Contiguity::Distribution);
    ASSERT_EQ(config.bio.run_pages.size(), 3u);
    EXPECT_EQ(config.bio.run_pages[0].first, 1u);
    EXPECT_DOUBLE_EQ(config.bio.run_pages[0].second, 0.5);
    EXPECT_EQ(config.bio.run_pages[1].first, 16u);
    EXPECT_DOUBLE_EQ(config.bio.run_pages[1].second, 0.3);
    EXPECT_EQ(config.bio.run_pages[2].first, 256u);
    EXPECT_DOUBLE_EQ(config.bio.run_pages[2].second, 0.2);
}

// contiguity.seed sets the distribution's generator; default 1.
TEST_F(ConfigLoaderTest, ContiguitySeedIsRead) {
    EXPECT_EQ(load(kOneMember + "[bio]\ncontiguity = { runs = [[2, 1]], seed = 7 }\n").bio.run_seed,
              7u);
    EXPECT_EQ(load(kOneMember + "[bio]\ncontiguity = { runs = [[2, 1]] }\n").bio.run_seed, 1u);
}

// A bad seed, or a seed beside a pattern, is one error naming the key.
TEST_F(ConfigLoaderTest, BadContiguitySeedNamesTheKey) {
    expect_error(kOneMember + "[bio]\ncontiguity = { runs = [[2, 1]], seed = -1 }\n",
                 "bio.contiguity.seed", "an integer from 0");
    expect_error(kOneMember + "[bio]\ncontiguity = { runs = [[2, 1]], seed = \"x\" }\n",
                 "bio.contiguity.seed", "an integer from 0");
    expect_error(kOneMember + "[bio]\ncontiguity = { pattern = [2], seed = 3 }\n",
                 "bio.contiguity.seed", "beside runs");
}

// write_random_penalty is read; absent, writes take random_penalty.
TEST_F(ConfigLoaderTest, WriteRandomPenaltyDefaultsToRandomPenalty) {
    StackConfig config = load(kOneMember + R"(
[models.a]
random_penalty = "40us"
[models.b]
random_penalty = "40us"
write_random_penalty = "75us"
)");
    EXPECT_EQ(find_model(config, "a").write_random_penalty_ns, 40'000u);
    EXPECT_EQ(find_model(config, "b").write_random_penalty_ns, 75'000u);
}

TEST_F(ConfigLoaderTest, EnumNamesRoundTrip) {
    EXPECT_STREQ(device_kind_name(DeviceKind::Raid5), "raid5");
    EXPECT_STREQ(raid5_layout_name(Raid5Layout::LeftSymmetric), "left-symmetric");
    EXPECT_STREQ(buffered_variant_name(BufferedVariant::C8d317aa), "c8d317aa");
    EXPECT_STREQ(backend_name(BackendKind::IoUring), "io_uring");
    EXPECT_STREQ(bio_policy_name(BioPolicy::MaxSectors), "max_sectors");
}

// ---------------------------------------------------------------------------
// Bad files: each message names the key

TEST_F(ConfigLoaderTest, UnknownKeysAnywhereAreErrors) {
    expect_error(kOneMember + "[devices]\nkind = \"raid5\"\n", "devices",
                 "device, members, bio, bfq, page_cache, cpu, models");
    expect_error(kOneMember + "[device]\nchunk_size = \"64k\"\n", "device.chunk_size",
                 "kind, chunk, layout");
    expect_error(kOneMember + "[[members]]\npath = \"m1.img\"\nsise = \"1g\"\n", "members[1].sise",
                 "path, size, backend");
    expect_error(kOneMember + "[bio]\npolcy = \"align\"\n", "bio.polcy", "policy");
    expect_error(kOneMember + "[bfq]\nslice = \"8ms\"\n", "bfq.slice", "slice_idle");
    expect_error(kOneMember + "[page_cache]\nreadahead = 0\n", "page_cache.readahead", "ra_kb");
    expect_error(kOneMember + "[models.fast]\nlatency = \"1us\"\n", "models.fast.latency",
                 "command, bandwidth");
    expect_error(kOneMember + "[bio]\ncontiguity = { run = [[1, 1]] }\n", "bio.contiguity.run",
                 "runs");
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nmodel = { cmd = \"1us\" }\n",
                 "members[0].model.cmd", "command");
}

TEST_F(ConfigLoaderTest, BadSizeNamesTheMemberKey) {
    try {
        load(kOneMember + "[[members]]\npath = \"m1.img\"\nsize = \"12q\"\n");
        FAIL() << "accepted 12q";
    } catch (const ConfigError& error) {
        EXPECT_STREQ(error.what(),
                     "stack.toml: members[1].size: \"12q\" is not a size; allowed: an integer "
                     "number of bytes or a string like \"64k\", \"2g\"");
    }
}

TEST_F(ConfigLoaderTest, ZeroSizeIsRefused) {
    expect_error("[[members]]\npath = \"m.img\"\nsize = 0\n", "members[0].size", "empty");
}

TEST_F(ConfigLoaderTest, NegativeSizeIsRefused) {
    expect_error("[[members]]\npath = \"m.img\"\nsize = -1\n", "members[0].size", "negative");
}

TEST_F(ConfigLoaderTest, MaxSectorsMustBeWholeSectorsOfAtLeast4k) {
    expect_error(kOneMember + "[device]\nmax_sectors = 1000\n", "device.max_sectors",
                 "multiple of 512");
    expect_error(kOneMember + "[device]\nmax_sectors = \"2k\"\n", "device.max_sectors",
                 "multiple of 512");
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nmax_sectors = \"100000\"\n",
                 "members[0].max_sectors", "multiple of 512");
}

TEST_F(ConfigLoaderTest, ChunkMustBeAPowerOfTwoOfAtLeast4k) {
    std::string members = kRaid5.substr(kRaid5.find("[[members]]"));
    expect_error("[device]\nkind = \"raid5\"\nchunk = \"48k\"\n" + members, "device.chunk",
                 "power of two");
    expect_error("[device]\nkind = \"raid5\"\nchunk = 2048\n" + members, "device.chunk",
                 "power of two");
}

TEST_F(ConfigLoaderTest, MemberCountMustFitTheKind) {
    expect_error(R"(
[device]
kind = "raid5"
[[members]]
path = "a.img"
size = "1g"
[[members]]
path = "b.img"
size = "1g"
)",
                 "members", "at least 3");
    expect_error(kOneMember + "[[members]]\npath = \"m1.img\"\nsize = \"1g\"\n", "members",
                 "exactly 1");
}

TEST_F(ConfigLoaderTest, NoMembersIsAnError) {
    expect_error("[device]\nkind = \"passthrough\"\n", "members", "no members");
    expect_error("members = []\n", "members", "no members");
    expect_error("members = \"m.img\"\n", "members", "array of tables");
}

TEST_F(ConfigLoaderTest, MemberPathThatIsADirectoryIsRefused) {
    fs::create_directories(dir_.file("a-directory"));
    expect_error("[[members]]\npath = \"a-directory\"\nsize = \"1g\"\n", "members[0].path",
                 "is a directory");
}

TEST_F(ConfigLoaderTest, MemberPathThatIsACharacterDeviceIsRefused) {
    expect_error("[[members]]\npath = \"/dev/null\"\n", "members[0].path",
                 "neither a regular file nor a block device");
}

TEST_F(ConfigLoaderTest, TwoMembersOnOneFileAreRefused) {
    // Missing files: compared by canonical path.
    expect_error(R"(
[device]
kind = "raid5"
[[members]]
path = "a.img"
size = "1g"
[[members]]
path = "b.img"
size = "1g"
[[members]]
path = "sub/../a.img"
size = "1g"
)",
                 "members[2].path", "same file as members[0].path");
    // Existing files: compared by device and inode, so hard links are caught.
    make_sized_file(dir_.file("x.img"), 1 << 20);
    fs::create_hard_link(dir_.file("x.img"), dir_.file("y.img"));
    expect_error(R"(
[device]
kind = "raid5"
[[members]]
path = "x.img"
[[members]]
path = "y.img"
[[members]]
path = "z.img"
size = "1m"
)",
                 "members[1].path", "same file as members[0].path");
}

TEST_F(ConfigLoaderTest, MissingFileNeedsASize) {
    expect_error("[[members]]\npath = \"nowhere.img\"\n", "members[0].size", "does not exist");
    make_sized_file(dir_.file("empty.img"), 0);
    expect_error("[[members]]\npath = \"empty.img\"\n", "members[0].size", "is empty");
    expect_error("[[members]]\nbackend = \"ram\"\n", "members[0].size", "needs a size");
    expect_error("[[members]]\nsize = \"1g\"\n", "members[0].path", "io_uring member");
}

TEST_F(ConfigLoaderTest, LogicalBlockSizeMustBeAStandardOne) {
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nlogical_block_size = 3000\n",
                 "members[0].logical_block_size", "512 | 1024 | 2048 | 4096");
    expect_error("[[members]]\npath = \"m.img\"\nsize = 6144\nlogical_block_size = \"4k\"\n",
                 "members[0].size", "logical block size");
}

TEST_F(ConfigLoaderTest, QueueDepthMustBeFrom1To4096) {
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nqueue_depth = 0\n",
                 "members[0].queue_depth", "from 1 to 4096");
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nqueue_depth = 4097\n",
                 "members[0].queue_depth", "from 1 to 4096");
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nqueue_depth = \"32\"\n",
                 "members[0].queue_depth", "expected an integer");
}

TEST_F(ConfigLoaderTest, UnknownEnumStringsListTheAllowedOnes) {
    expect_error(kOneMember + "[device]\nkind = \"raid6\"\n", "device.kind",
                 "\"passthrough\" | \"raid5\"");
    expect_error(kOneMember + "[device]\nsplit_order = \"new\"\n", "device.split_order",
                 "\"legacy\" | \"fixed\"");
    expect_error(kOneMember + "[device]\nscheduler = \"kyber\"\n", "device.scheduler",
                 "\"none\" | \"bfq\" | \"mq-deadline\"");
    expect_error(kOneMember + "[device]\nlayout = \"left\"\n", "device.layout",
                 "\"left-symmetric\"");
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nbackend = \"aio\"\n",
                 "members[0].backend", "\"io_uring\" | \"ram\" | \"null\"");
    expect_error(kOneMember + "[bio]\npolicy = \"aligned\"\n", "bio.policy",
                 "\"original\" | \"align\" | \"max_sectors\"");
    expect_error(kOneMember + "[bio]\ncontiguity = \"distribution\"\n", "bio.contiguity",
                 "\"none\" | \"pagemap\"");
    expect_error(kOneMember + "[bfq]\ngroup_counting = \"6.2\"\n", "bfq.group_counting",
                 "\"legacy\" | \"fixed\"");
    expect_error(kOneMember + "[page_cache]\nvariant = \"mainline\"\n", "page_cache.variant",
                 "\"pre-c8d317aa\" | \"c8d317aa\" | \"forced-ra\"");
}

TEST_F(ConfigLoaderTest, UnknownModelNameListsTheKnownOnes) {
    expect_error(kOneMember.substr(0, kOneMember.size() - 1) + "\nmodel = \"floppy\"\n" +
                     "[models.mine]\ncommand = \"1us\"\n",
                 "members[0].model", "\"mine\" | \"hdd\"");
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nmodel = 5\n", "members[0].model",
                 "expected a model name or a table");
}

TEST_F(ConfigLoaderTest, WrongTypesAreNamed) {
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nfailed = \"yes\"\n",
                 "members[0].failed", "expected a boolean");
    expect_error("[[members]]\npath = 7\nsize = \"1g\"\n", "members[0].path", "expected a string");
    expect_error("[[members]]\npath = \"m.img\"\nsize = 1.5\n", "members[0].size",
                 "expected a size");
    expect_error("device = 3\n" + kOneMember, "device", "expected a table");
    expect_error(kOneMember + "[bfq]\nlow_latency = 1\n", "bfq.low_latency", "expected a boolean");
}

TEST_F(ConfigLoaderTest, DurationsNeedAUnit) {
    expect_error(kOneMember + "[bfq]\nslice_idle = 8\n", "bfq.slice_idle", "has no unit");
    expect_error(kOneMember + "[bfq]\nslice_idle = \"8\"\n", "bfq.slice_idle", "has no unit");
    expect_error(kOneMember + "[bfq]\ntimeout_sync = \"125 jiffies\"\n", "bfq.timeout_sync",
                 "is not a duration");
    expect_error(kOneMember + "[bfq]\ntimeout_sync = 0\n", "bfq.timeout_sync", "cannot be 0");
    expect_error(kOneMember + "[models.m]\ncommand = 80\n", "models.m.command", "has no unit");
}

TEST_F(ConfigLoaderTest, BioAlignAndContiguityAreChecked) {
    expect_error(kOneMember + "[bio]\nalign = \"96k\"\n", "bio.align", "power of two");
    expect_error(kOneMember + "[bio]\nalign = \"2k\"\n", "bio.align", "power of two");
    expect_error(kOneMember + "[bio]\ncontiguity = { runs = [] }\n", "bio.contiguity.runs",
                 "non-empty");
    expect_error(kOneMember + "[bio]\ncontiguity = { runs = [[0, 1.0]] }\n",
                 "bio.contiguity.runs[0][0]", "page count");
    expect_error(kOneMember + "[bio]\ncontiguity = { runs = [[4, -1.0]] }\n",
                 "bio.contiguity.runs[0][1]", "weight");
    expect_error(kOneMember + "[bio]\ncontiguity = { runs = [[4, 1], 7] }\n",
                 "bio.contiguity.runs[1]", "[pages, weight]");
    expect_error(kOneMember + "[bio]\ncontiguity = 3\n", "bio.contiguity",
                 "expected a string or a table");
}

TEST_F(ConfigLoaderTest, ModelValuesAreChecked) {
    expect_error(kOneMember + "[models.m]\nparallelism = 0\n", "models.m.parallelism",
                 "out of range");
    expect_error(kOneMember + "[models.m]\nbandwidth = \"fast\"\n", "models.m.bandwidth",
                 "is not a size");
    expect_error("models = { m = 3 }\n" + kOneMember, "models.m", "expected a table");
}

TEST_F(ConfigLoaderTest, FailedMembersAreChecked) {
    expect_error("[[members]]\npath = \"m.img\"\nsize = \"1g\"\nfailed = true\n",
                 "members[0].failed", "only a raid5 member");
    std::string two_failed = R"(
[device]
kind = "raid5"
[[members]]
path = "m0.img"
size = "1g"
failed = true
[[members]]
path = "m1.img"
size = "1g"
failed = true
[[members]]
path = "m2.img"
size = "1g"
)";
    expect_error(two_failed, "members[1].failed", "survives one failure");
}

TEST_F(ConfigLoaderTest, PageCacheValuesAreChecked) {
    expect_error(kOneMember + "[page_cache]\nsize = 0\n", "page_cache.size", "pages");
    expect_error(kOneMember + "[page_cache]\nra_kb = 6\n", "page_cache.ra_kb", "pages");
    expect_error(kOneMember + "[page_cache]\nra_kb = -4\n", "page_cache.ra_kb", "out of range");
}

TEST_F(ConfigLoaderTest, RaidMemberSmallerThanAChunkIsRefused) {
    expect_error(R"(
[device]
kind = "raid5"
chunk = "512k"
[[members]]
path = "m0.img"
size = "256k"
[[members]]
path = "m1.img"
size = "1g"
[[members]]
path = "m2.img"
size = "1g"
)",
                 "members[0].size", "smaller than one chunk");
}

// ---------------------------------------------------------------------------
// TOML syntax errors and unreadable files

TEST_F(ConfigLoaderTest, TomlSyntaxErrorsGiveLineAndColumn) {
    try {
        load("[device]\nkind = \"raid5\"\nchunk = = 4\n");
        FAIL() << "accepted a syntax error";
    } catch (const ConfigError& error) {
        std::string message = error.what();
        EXPECT_EQ(message.rfind("stack.toml:3:", 0), 0u) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
}

TEST_F(ConfigLoaderTest, DuplicateTablesAreTomlErrors) {
    try {
        load(kRaid5 + "[device]\n");
        FAIL() << "accepted a duplicate table";
    } catch (const ConfigError& error) {
        EXPECT_EQ(std::string(error.what()).rfind("stack.toml:", 0), 0u) << error.what();
    }
}

TEST_F(ConfigLoaderTest, UnreadableFileIsAnError) {
    std::string missing = dir_.file("missing.toml");
    try {
        load_stack_file(missing);
        FAIL() << "loaded a missing file";
    } catch (const ConfigError& error) {
        EXPECT_EQ(std::string(error.what()).rfind(missing + ": cannot read", 0), 0u)
            << error.what();
    }
    EXPECT_THROW(load_stack_file(dir_.path().string()), ConfigError);
}

// [cpu.buffered] sets BufferedCosts' steps (durations) and cpus; the rest keep their defaults.
TEST_F(ConfigLoaderTest, CpuBufferedSetsBufferedCosts) {
    StackConfig config =
        load(kOneMember + "[cpu.buffered]\npunt = \"2500ns\"\nfio_submit = \"1us\"\ncpus = 4\n");
    EXPECT_EQ(config.cpu.buffered.punt_ns, 2500u);
    EXPECT_EQ(config.cpu.buffered.fio_submit_ns, 1000u);
    EXPECT_EQ(config.cpu.buffered.cpus, 4u);
    EXPECT_EQ(config.cpu.buffered.wakeup_ns, BufferedCosts{}.wakeup_ns);
}

// A [cpu.buffered] step above 1 ms, an unknown step and cpus 0 are refused by name.
TEST_F(ConfigLoaderTest, CpuBufferedRefusesBadKeys) {
    expect_error(kOneMember + "[cpu.buffered]\npunt = \"2ms\"\n", "cpu.buffered.punt",
                 "out of range");
    expect_error(kOneMember + "[cpu.buffered]\npuntt = \"2us\"\n", "cpu.buffered.puntt",
                 "unknown key");
    expect_error(kOneMember + "[cpu.buffered]\ncpus = 0\n", "cpu.buffered.cpus", "out of range");
}

}  // namespace
}  // namespace mdsplit
