// md RAID5 as a bio-based virtual device (drivers/md/raid5.c, md.c).
//
// Reads: md_submit_bio() splits to md's own max_sectors, chunk_aligned_read()
// splits at the chunk boundary and raid5_read_one_chunk() remaps the piece
// to its member with a clone (trace A) submitted through submit_bio_noacct().
// Writes, and reads of a failed member's chunks, go through 4 KiB stripe
// heads handled by a raid5d-like worker: full-stripe writes reconstruct
// parity without reads, partial ones read-modify-write or reconstruct-write
// (whichever reads less, handle_stripe_dirtying), degraded reads rebuild the
// missing unit from the others. raid5_make_request() walks a bio stripe
// head by stripe head, each head taking all of the bio's pieces in its row
// at once (add_all_stripe_bios); a row without a free head waits for one.
// Writes queued on a head join its pending write until the reconstruction
// starts (they stay on dev->towrite until ops_run_biodrain); one that
// overlaps a queued piece, and every request to rows being discarded, waits
// (R5_Overlap). A head writes one reconstruction at a time, so parity is
// never torn.
//
// Member failure (md_error()): a member whose I/O fails is marked Faulty and
// never submitted to again; the array continues degraded (an aligned read
// that failed is retried through the stripe cache and rebuilt, a stripe
// whose pre-read or degraded read lost a member decides again without it, a write whose member
// write failed completes: its unit lives on in parity). With two members
// Faulty the array has failed: every bio, queued or new, completes with EIO.
#pragma once

#include <bit>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/json_writer.h"
#include "config/stack_config.h"
#include "core/block/block_layer.h"
#include "core/block/member_queue.h"
#include "core/md/raid5_layout.h"
#include "core/md/raid5_stripe_cache.h"

namespace mdsplit {

class Raid5Device final : public BlockDevice {
public:
    // What the stripe cache did, for tests and reports.
    struct Counters {
        uint64_t aligned_reads = 0;       // raid5_read_one_chunk() bios
        uint64_t degraded_reads = 0;      // stripe units rebuilt from the other members
        uint64_t full_stripe_writes = 0;  // reconstruct writes that read nothing
        uint64_t rcw = 0;                 // reconstruct writes with reads
        uint64_t rmw = 0;                 // read-modify-writes
        uint64_t degraded_writes = 0;     // stripe writes with the failed member involved
        uint64_t member_errors = 0;       // member bios that completed with an error
        uint64_t discarded_stripes = 0;   // whole stripes make_discard_request() discarded
        uint64_t members_failed = 0;      // members marked Faulty while running (md_error)
        uint64_t read_retries = 0;        // aligned reads retried through the stripe cache
        uint64_t stripe_retries = 0;      // stripe reads redone without a failed member
        uint64_t preread_reads = 0;       // member reads handle_stripe_dirtying() issued
        uint64_t delayed_stripes = 0;     // stripes put on the delayed list (STRIPE_DELAYED)
        uint64_t overlap_waits = 0;       // requests and discards that waited (R5_Overlap)
    };

    // `failed[i]`: member i is failed from the start (at most one); it is
    // never submitted to.
    Raid5Device(BlockLayer& layer, std::string name, uint32_t devt,
                std::vector<MemberQueue*> members, const std::vector<bool>& failed,
                const DeviceConfig& config);
    ~Raid5Device() override;

    void submit_bio(Bio* bio) override;
    bool stacked() const override { return true; }
    void trace_bio_complete(const Bio* bio) override;
    uint64_t members_failed_while_running() const override {
        return failed_mask_ & ~failed_at_start_;
    }

    const Raid5Geometry& geometry() const { return geometry_; }
    // The bytes of each member the array uses (md's usable size: whole rows).
    uint64_t member_bytes() const { return (capacity() / geometry_.data_disks()) << kSectorShift; }
    // The lowest Faulty member, -1 when none.
    int failed_member() const { return failed_mask_ ? std::countr_zero(failed_mask_) : -1; }
    uint64_t failed_members() const override { return failed_mask_; }  // bit i: Faulty
    // Failed from the start (the array not yet used): never read, never
    // counted as failed while running.
    void assemble_failed(uint32_t member) override;
    // Called as a member turns Faulty while running (md_error), where md
    // records it in the other members' superblocks (md_update_sb).
    void set_member_failed_hook(std::function<void(uint32_t)> hook) {
        member_failed_hook_ = std::move(hook);
    }
    int failed_count() const { return std::popcount(failed_mask_); }
    // More members Faulty than RAID5 survives: all I/O fails with EIO.
    // (Checked per bio: two bits set, without a popcount call.)
    bool array_failed() const { return (failed_mask_ & (failed_mask_ - 1)) != 0; }
    // md_error(): marks member i Faulty (idempotent).
    void md_error(uint32_t member);
    const Counters& counters() const { return counters_; }
    const Raid5StripeCache::Counters& cache_counters() const { return cache_.counters; }
    // Stripe heads holding requests or I/O (0 once everything completed).
    size_t active_stripes() const { return cache_.active(); }
    // The counters as a JSON object (the sidecar's "raid5" of the md device).
    void write_json(JsonWriter& j) const;

private:
    using StripeEntry = Raid5StripeEntry;
    using StripeHead = Raid5StripeHead;
    // What make_stripe_request() adds to one stripe head: every piece of the
    // bio in that row at once (add_all_stripe_bios), or nothing while the
    // submitter waits (no free head, or an overlapping request).
    struct StripeRequest {
        sector_t row;
        uint32_t pd_idx;
        uint32_t pid;  // the submitter
        bool write;
        bool sync;
        std::vector<StripeEntry> entries;
    };
    // A discard on its way to the members: writes to its rows wait for it.
    struct DiscardRange {
        Bio* bio;             // the md-accounted bio
        sector_t begin, end;  // member sectors of the whole stripes
        uint32_t pending;     // member discards in flight + the submission
    };

    Bio* chunk_aligned_read(Bio* bio);
    bool raid5_read_one_chunk(Bio* bio);
    void make_discard_request(Bio* bio);
    static void discard_endio(Bio* bio);
    void make_stripe_request(Bio* bio);
    Bio* account_bio(Bio* bio);

    sector_t raid5_bio_lowest_chunk_sector(const Bio* bio) const;
    void add_stripe_request(StripeRequest&& req);
    enum class AddResult { Added, NoHead, Overlap, Behind };
    AddResult add_all_stripe_bios(const StripeRequest& req);
    bool stripe_bio_overlaps(const StripeHead* sh, const StripeRequest& req) const;
    bool discard_may_start(const DiscardRange& d) const;
    void start_discard(DiscardRange d);
    void end_discard(Bio* ab);
    void wake_stripe_waiters();
    void release_stripe(StripeHead* sh);
    void clear_preread_active(StripeHead* sh);
    void queue_stripe(StripeHead* sh);
    void wake_raid5d();
    void raid5d();
    void handle_stripe(StripeHead* sh);
    void start_degraded_read(StripeHead* sh);
    void end_degraded_read(StripeHead* sh);
    bool handle_stripe_dirtying(StripeHead* sh);
    void compute_failed_unit(StripeHead* sh);
    void reconstruct_and_write(StripeHead* sh);
    void end_writes(StripeHead* sh);
    void submit_member_io(StripeHead* sh, Op op, uint64_t member_mask);
    void trace_remap(const Bio* clone, sector_t from_sector);
    uint32_t member_index(const BlockDevice* dev) const;
    void fail_stripe_requests(StripeHead* sh);

    static void align_endio(Bio* clone);
    static void stripe_bio_endio(Bio* bio);
    static void stripe_io_endio(Bio* bio);
    static void raid5d_callback(void* arg, uint64_t tag);

    BlockLayer& layer_;
    std::vector<MemberQueue*> members_;
    Raid5Geometry geometry_;
    uint64_t failed_mask_ = 0;      // Faulty members
    uint64_t failed_at_start_ = 0;  // those of them the config named failed
    std::function<void(uint32_t)> member_failed_hook_;
    bool discard_safely_ = false;  // DeviceConfig::devices_handle_discard_safely
    Counters counters_;
    Raid5StripeCache cache_;
    std::deque<StripeRequest> waiting_;  // requests of blocked submitters, in order
    std::unordered_map<uint32_t, uint32_t> waiting_pids_;  // blocked submitter -> its requests
    bool waking_ = false, wake_again_ = false;
    std::deque<DiscardRange> waiting_discards_;  // discards waiting for busy stripes (R5_Overlap)
    std::vector<DiscardRange> discards_;         // discards at the members
    bool raid5d_scheduled_ = false;
    TaskContext raid5d_task_;  // raid5d's own context and plug
};

}  // namespace mdsplit
