// The direct-I/O bio builder (engine/core/bio_builder.h) against seed 001:
// one 64 MiB read (dd bs=64m count=1 iflag=direct) into a buffer whose
// physical layout is the thread's (jobs/bio-*.toml: runs of 1/2/4 pages,
// 10/80/10 %, seed 1), at max_sectors 512 KiB, per bio policy. The sizes
// follow Linux 6.6 bio_iov_iter_get_pages(): batches of 256 - bi_vcnt pages
// until a bio holds BIO_MAX_VECS bvecs; `align` is Ming Lei's 256 KiB patch
// quoted in the seed, whose trace shows `+ 3584` bios.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "config/stack_config.h"
#include "core/block/bio_builder.h"

namespace mdsplit {
namespace {

constexpr uint64_t kIo = 64ull << 20;
constexpr uint64_t kMaxSectorsBytes = 512 << 10;

struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};

BioConfig thread_layout(BioPolicy policy) {
    BioConfig c;
    c.policy = policy;
    c.align_bytes = 256 << 10;
    c.contiguity = Contiguity::Distribution;
    c.run_pages = {{1, 0.1}, {2, 0.8}, {4, 0.1}};
    c.run_seed = 1;
    return c;
}

BioConfig pairs_layout(BioPolicy policy) {
    BioConfig c;
    c.policy = policy;
    c.align_bytes = 256 << 10;
    c.contiguity = Contiguity::Pattern;
    c.run_pattern = {2};
    return c;
}

// Bio sizes in sectors for one 64 MiB I/O into a page-aligned buffer.
std::vector<uint64_t> bio_sectors(const BioConfig& config,
                                  std::vector<BioPiece>* pieces = nullptr) {
    std::unique_ptr<void, FreeDeleter> buffer(std::aligned_alloc(4096, kIo));
    BioBuilder builder(config, kMaxSectorsBytes, 512);
    std::vector<BioPiece> out;
    builder.build(buffer.get(), kIo, out);
    std::vector<uint64_t> sectors;
    uint64_t next = 0;
    for (const BioPiece& p : out) {
        EXPECT_EQ(p.offset, next);
        next += p.length;
        sectors.push_back(p.length >> 9);
    }
    EXPECT_EQ(next, kIo);
    if (pieces) *pieces = out;
    return sectors;
}

// original, thread layout: each bio ends when a batch fills the 256th bvec;
// sizes are not multiples of 1024 sectors (the thread's complaint).
TEST(BioBuilderTest, OriginalThreadLayoutGivesUnalignedFullBios) {
    std::vector<BioPiece> pieces;
    std::vector<uint64_t> got = bio_sectors(thread_layout(BioPolicy::Original), &pieces);
    std::vector<uint64_t> want = {4160, 4328, 4448, 4344, 4336, 4256, 4224, 4440, 4256, 4240, 4400,
                                  4280, 4208, 4320, 4320, 4128, 4280, 4320, 4264, 4352, 4312, 4328,
                                  4192, 4264, 4440, 4336, 4232, 4392, 4344, 4240, 2088};
    EXPECT_EQ(got, want);
    for (size_t i = 0; i + 1 < pieces.size(); ++i) EXPECT_EQ(pieces[i].bvecs, kBioMaxVecs) << i;
}

// align, thread layout: 36 bios of 3584 sectors (the seed's trace), then
// the 2048-sector remainder.
TEST(BioBuilderTest, AlignThreadLayoutGives3584SectorBios) {
    std::vector<uint64_t> want(36, 3584);
    want.push_back(2048);
    EXPECT_EQ(bio_sectors(thread_layout(BioPolicy::Align)), want);
}

// max_sectors, thread layout: 128 bios of exactly 512 KiB.
TEST(BioBuilderTest, MaxSectorsThreadLayoutGivesDeviceLimitBios) {
    EXPECT_EQ(bio_sectors(thread_layout(BioPolicy::MaxSectors)), std::vector<uint64_t>(128, 1024));
}

// original, pages in contiguous pairs: batches 256, 128, ..., 2, 1 pages =
// 511 pages; later bios start on the pair's second page and hold 510.
TEST(BioBuilderTest, OriginalPairsGiveBatchSumNot256TimesRun) {
    std::vector<uint64_t> want = {4088};
    want.insert(want.end(), 31, 4080);
    want.push_back(504);
    EXPECT_EQ(bio_sectors(pairs_layout(BioPolicy::Original)), want);
}

// align, pairs: batches 256 + 128 + 64 pages, then 32 pages cannot reach
// the next 256 KiB and the bio (448 pages) is aligned: it ends.
TEST(BioBuilderTest, AlignPairsStopsAt448Pages) {
    std::vector<uint64_t> want(36, 3584);
    want.push_back(2048);
    EXPECT_EQ(bio_sectors(pairs_layout(BioPolicy::Align)), want);
}

// No contiguity: every page is its own bvec, so every bio is 256 pages.
TEST(BioBuilderTest, NoContiguityGivesOneMebibyteBios) {
    BioConfig c;
    EXPECT_EQ(bio_sectors(c), std::vector<uint64_t>(64, 2048));
}

// No contiguity, at most BIO_MAX_VECS pages (the one-bio shortcut): one bio
// with a bvec per page spanned, under every policy; a page more that the
// unaligned buffer spans, two bios (the first one 256 bvecs).
TEST(BioBuilderTest, NoContiguityUpTo256PagesIsOneBioUnderEveryPolicy) {
    std::unique_ptr<void, FreeDeleter> buffer(std::aligned_alloc(4096, 2 << 20));
    auto* base = static_cast<uint8_t*>(buffer.get());
    for (BioPolicy policy : {BioPolicy::Original, BioPolicy::Align, BioPolicy::MaxSectors}) {
        BioConfig c;
        c.policy = policy;
        c.align_bytes = 256 << 10;
        BioBuilder builder(c, 1 << 20, 512);
        std::vector<BioPiece> out;
        builder.build(base, 4096, out);
        ASSERT_EQ(out.size(), 1u);
        EXPECT_EQ(out[0].length, 4096u);
        EXPECT_EQ(out[0].bvecs, 1u);
        builder.build(base + 512, 1 << 20, out);  // 257 pages from 512 bytes in
        ASSERT_EQ(out.size(), 2u) << int(policy);
        EXPECT_EQ(out[0].bvecs, kBioMaxVecs);
        EXPECT_EQ(out[0].length + out[1].length, uint64_t(1) << 20);
        builder.build(base + 512, (1 << 20) - 4096, out);  // 256 pages
        ASSERT_EQ(out.size(), 1u) << int(policy);
        EXPECT_EQ(out[0].bvecs, kBioMaxVecs);
    }
}

// The distribution's layout is set by contiguity.seed: another seed, other
// bios.
TEST(BioBuilderTest, DistributionLayoutFollowsTheSeed) {
    BioConfig other = thread_layout(BioPolicy::Original);
    other.run_seed = 2;
    EXPECT_NE(bio_sectors(other), bio_sectors(thread_layout(BioPolicy::Original)));
}

}  // namespace
}  // namespace mdsplit
