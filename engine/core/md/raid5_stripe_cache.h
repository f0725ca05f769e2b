// md RAID5's stripe cache (drivers/md/raid5.c, raid5.h): the stripe heads
// of r5conf and the lists a stripe head moves between.
//
// A stripe head is one 4 KiB row across all members. md keeps
// stripe_cache_size of them (NR_STRIPES = 256 by default), spread round-robin
// over NR_STRIPE_HASH_LOCKS = 8 hash buckets (grow_one_stripe(): stripe k
// gets hash k % 8; a row's bucket is (sector >> STRIPE_SHIFT) & 7). A head
// that has no work left goes to the tail of its bucket's inactive list
// (do_release_stripe -> release_inactive_stripe_list) and stays hashed, with
// its pages: R5_UPTODATE pages are reused by the next request for that row
// (__find_stripe / find_get_stripe), without member reads. A row that is not
// cached takes the head of its bucket's inactive list (get_free_stripe, the
// least recently released; init_stripe forgets its pages). With no inactive
// head in the bucket the submitter waits (R5_INACTIVE_BLOCKED) until one is
// released and fewer than 3/4 of the heads are active (is_inactive_blocked).
//
// Heads with work sit on the handle list; a head whose write needs pre-reads
// while it is not STRIPE_PREREAD_ACTIVE waits on the delayed list
// (STRIPE_DELAYED) until raid5_activate_delayed() moves the delayed heads to
// the hold list, when fewer than IO_THRESHOLD (1) pre-reading stripes are
// active. __get_priority_stripe() serves the handle list first and the hold
// list when no full-stripe write is pending (or the hold list was bypassed
// more than BYPASS_THRESHOLD times).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/intrusive_list.h"
#include "core/block/bio.h"
#include "core/md/raid5_layout.h"

namespace mdsplit {

class Raid5Device;

// One piece of a bio in one stripe head: at most one 4 KiB unit of a member
// (the bio list hanging off sh->dev[i].toread / towrite).
struct Raid5StripeEntry {
    Bio* bio = nullptr;   // the md-accounted bio, holding one reference per entry
    uint32_t disk = 0;    // member the piece lives on
    uint32_t offset = 0;  // sectors into the member's unit
    uint32_t sectors = 0;
    uint8_t* data = nullptr;  // the piece in the bio's buffer (null: no data)
};

// struct stripe_head. Queued writes (towrite) are decided on again each time
// the head is handled, until its reconstruction drains them into `writing`;
// writes queued while that is written wait for the next reconstruction.
struct Raid5StripeHead {
    enum class Phase { Idle, DegradedRead, PreRead, Write };
    // How handle_stripe_dirtying() chose to compute the new parity.
    enum class Mode { Rcw, Rmw };
    // The list sh->lru is on.
    enum class List { None, Inactive, Handle, Hold, Delayed };

    sector_t sector = 0;  // member sector of the row (multiple of 8)
    uint32_t pd_idx = 0;
    uint32_t hash = 0;                               // hash_lock_index
    uint8_t* pages = nullptr;                        // one page per member (sh->dev[i].page)
    uint64_t uptodate = 0;                           // R5_UPTODATE per member page
    std::vector<Raid5StripeEntry> toread, towrite;   // queued (dev->toread / towrite)
    std::vector<Raid5StripeEntry> reading, writing;  // being read / drained and written
    Phase phase = Phase::Idle;
    Mode mode = Mode::Rcw;
    uint64_t written = 0;     // members with a piece in the reconstruction (dev->written)
    uint64_t write_mask = 0;  // members written after the pre-reads
    uint64_t read_mask = 0;   // members pre-read for the pending write
    uint64_t locked = 0;      // members with a bio in flight (R5_LOCKED)
    uint32_t pending = 0;     // member bios in flight
    int32_t error = 0;
    bool handling = false;          // inside handle_stripe() (STRIPE_ACTIVE)
    bool hashed = false;            // in the cache's hash (insert_hash / remove_hash)
    bool delayed = false;           // STRIPE_DELAYED
    bool preread_active = false;    // STRIPE_PREREAD_ACTIVE
    bool full_write = false;        // STRIPE_FULL_WRITE
    bool io_started = false;        // STRIPE_IO_STARTED
    bool forget_when_idle = false;  // discarded while busy: drop the pages afterwards
    List list = List::None;
    ListHook<Raid5StripeHead> lru;
    Raid5Device* conf = nullptr;

    uint8_t* page(uint32_t i) { return pages + size_t(i) * kRaid5StripeBytes; }
};

class Raid5StripeCache {
public:
    static constexpr uint32_t kHashLocks = 8;    // NR_STRIPE_HASH_LOCKS
    static constexpr uint32_t kIoThreshold = 1;  // IO_THRESHOLD
    static constexpr int kBypassThreshold = 1;   // BYPASS_THRESHOLD

    struct Counters {
        uint64_t hits = 0;    // __find_stripe() found the row's head
        uint64_t misses = 0;  // get_free_stripe() gave it a head (pages forgotten)
        uint64_t waits = 0;   // stripe requests that waited for a free head (R5_INACTIVE_BLOCKED)
    };

    Raid5StripeCache(Raid5Device* conf, uint32_t disks, uint32_t size);
    ~Raid5StripeCache();
    Raid5StripeCache(const Raid5StripeCache&) = delete;
    Raid5StripeCache& operator=(const Raid5StripeCache&) = delete;

    static uint32_t hash_of(sector_t sector) { return uint32_t(sector >> 3) & (kHashLocks - 1); }

    // find_get_stripe(): the row's cached head, taken off the inactive or
    // delayed list (a head on the handle or hold list stays there).
    Raid5StripeHead* find_get_stripe(sector_t sector);
    // __find_stripe() without taking the head: the row's cached head or null.
    const Raid5StripeHead* lookup(sector_t sector) const;
    // Some cached head of a row in [begin, end) holds requests or member I/O.
    bool any_busy(sector_t begin, sector_t end) const;
    // is_inactive_blocked() / get_free_stripe(): whether a head is free now.
    bool can_get_free_stripe(sector_t sector) const;
    // get_free_stripe() + init_stripe(): the least recently released head of
    // the row's bucket (or a head not yet used), its pages forgotten.
    Raid5StripeHead* get_free_stripe(sector_t sector, uint32_t pd_idx);
    // do_release_stripe() of an idle head: tail of its inactive list.
    void release_inactive(Raid5StripeHead* sh);
    // do_release_stripe() of a head with work: the handle or delayed list.
    void queue_handle(Raid5StripeHead* sh);
    void queue_delayed(Raid5StripeHead* sh);
    // raid5_activate_delayed(): delayed heads to the hold list, pre-reading.
    void activate_delayed();
    // __get_priority_stripe(): the next head to handle, null when none may run.
    Raid5StripeHead* get_priority_stripe();
    // Drops R5_UPTODATE of every cached row in [begin, end) (member sectors).
    void forget_pages(sector_t begin, sector_t end);
    void unlink(Raid5StripeHead* sh);

    bool blocked() const { return blocked_; }
    void set_blocked(bool b) { blocked_ = b; }
    bool has_delayed() const { return !delayed_.empty(); }
    uint32_t size() const { return size_; }
    size_t active() const;             // heads not on an inactive list (conf->active_stripes)
    uint32_t preread_active = 0;       // conf->preread_active_stripes
    uint32_t pending_full_writes = 0;  // conf->pending_full_writes
    Counters counters;

private:
    using LruList = IntrusiveList<Raid5StripeHead, &Raid5StripeHead::lru>;
    void remove_hash(Raid5StripeHead* sh);

    Raid5Device* conf_;
    uint32_t disks_;
    uint32_t size_;
    bool blocked_ = false;
    uint32_t allocated_[kHashLocks] = {};
    uint32_t quota_[kHashLocks] = {};
    size_t inactive_count_ = 0;
    std::vector<Raid5StripeHead*> all_;
    std::unordered_map<sector_t, Raid5StripeHead*> hash_;
    LruList inactive_[kHashLocks];
    LruList handle_, hold_, delayed_;
    int bypass_count_ = 0;
    Raid5StripeHead* last_hold_ = nullptr;
};

}  // namespace mdsplit
