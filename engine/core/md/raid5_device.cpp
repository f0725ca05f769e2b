#include "core/md/raid5_device.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace mdsplit {

namespace {

constexpr uint8_t kFullUnit = 0xff;  // all 8 sectors of a stripe unit written (R5_OVERWRITE)

uint64_t bit(uint32_t i) { return uint64_t(1) << i; }

// xor_blocks() over one 4 KiB page.
void xor_page(uint8_t* dst, const uint8_t* src) {
    auto* d = reinterpret_cast<uint64_t*>(dst);
    auto* s = reinterpret_cast<const uint64_t*>(src);
    for (size_t i = 0; i < kRaid5StripeBytes / sizeof(uint64_t); i++) d[i] ^= s[i];
}

}  // namespace

Raid5Device::Raid5Device(BlockLayer& layer, std::string name, uint32_t devt,
                         std::vector<MemberQueue*> members, const std::vector<bool>& failed,
                         const DeviceConfig& config)
    : BlockDevice(std::move(name), devt),
      layer_(layer),
      members_(std::move(members)),
      geometry_(uint32_t(members_.size()), uint32_t(config.chunk_bytes >> kSectorShift),
                config.layout),
      cache_(this, uint32_t(members_.size()), config.stripe_cache_size) {
    if (members_.size() > 64)
        throw std::invalid_argument("mdsplit: raid5 takes at most 64 members");
    std::vector<sector_t> sizes;
    for (size_t i = 0; i < members_.size(); i++) {
        sizes.push_back(members_[i]->capacity());
        logical_block_size_ = std::max(logical_block_size_, members_[i]->logical_block_size());
        if (i < failed.size() && failed[i]) {
            if (failed_mask_)
                throw std::invalid_argument("mdsplit: raid5 survives one failed member, not two");
            failed_mask_ |= bit(uint32_t(i));
        }
    }
    capacity_ = Raid5Geometry::usable_sectors(sizes, geometry_.chunk_sectors());
    max_sectors_ = uint32_t(config.max_sectors_bytes >> kSectorShift);
    discard_safely_ = config.devices_handle_discard_safely;
}

Raid5Device::~Raid5Device() = default;

void Raid5Device::write_json(JsonWriter& j) const {
    const Counters& c = counters_;
    const Raid5StripeCache::Counters& k = cache_.counters;
    j.begin_object().field("stripe_cache_size", cache_.size());
    j.field("stripe_cache_hits", k.hits).field("stripe_cache_misses", k.misses);
    j.field("stripe_cache_waits", k.waits).field("rmw", c.rmw).field("rcw", c.rcw);
    j.field("full_stripe_writes", c.full_stripe_writes).field("preread_reads", c.preread_reads);
    j.field("delayed_stripes", c.delayed_stripes).field("degraded_reads", c.degraded_reads);
    j.field("degraded_writes", c.degraded_writes).field("aligned_reads", c.aligned_reads);
    j.field("discarded_stripes", c.discarded_stripes).field("member_errors", c.member_errors);
    j.field("members_failed", c.members_failed).end_object();
}

void Raid5Device::trace_bio_complete(const Bio* bio) {
    layer_.trace_bio(TraceAction::Complete, this, bio);
}

void Raid5Device::trace_remap(const Bio* clone, sector_t from_sector) {
    layer_.trace_remap(clone, devt_, from_sector);
}

uint32_t Raid5Device::member_index(const BlockDevice* dev) const {
    for (uint32_t i = 0; i < members_.size(); i++)
        if (members_[i] == dev) return i;
    throw std::logic_error("mdsplit: raid5: a member bio from an unknown device");
}

// md_error() -> raid5_error(): the member is Faulty from now on.
void Raid5Device::md_error(uint32_t member) {
    if (member >= members_.size() || (failed_mask_ & bit(member))) return;
    failed_mask_ |= bit(member);
    counters_.members_failed++;
}

// md_submit_bio() -> raid5_make_request()
void Raid5Device::submit_bio(Bio* bio) {
    if (bio->end_sector() > capacity_ || array_failed()) {  // bio_check_eod(), MD_BROKEN
        bio->error = -EIO;
        bio_endio(bio);
        return;
    }
    // bio_split_to_limits(): md's own max_sectors, counted from the bio start.
    if (bio->nr_sectors > max_sectors_) bio = layer_.split_and_resubmit(bio, max_sectors_);
    if (bio->op == Op::Flush) {
        // md_flush_request(): the members keep no volatile cache here.
        bio_endio(bio);
        return;
    }
    if (bio->op == Op::Discard) {
        make_discard_request(bio);
        return;
    }
    // md takes this path only when not degraded; here the chunks of healthy
    // members are read directly in degraded mode too.
    if (bio->op == Op::Read) {
        bio = chunk_aligned_read(bio);
        if (!bio) return;
    }
    make_stripe_request(bio);
}

// make_discard_request(): only the whole stripes inside the bio are
// discarded, on every member (data and parity: a discarded chunk reads back
// as zeroes, whose parity is zeroes); the partial stripes at either end are
// left untouched, as md leaves them. md discards stripe head by stripe head
// and the member queues merge them; here each member gets the whole range
// at once. Without devices_handle_discard_safely md sets no discard limit
// (raid5_set_limits) and the block layer fails the bio with EOPNOTSUPP.
void Raid5Device::make_discard_request(Bio* bio) {
    if (!discard_safely_) {
        bio->error = -EOPNOTSUPP;
        bio_endio(bio);
        return;
    }
    sector_t stripe_sectors = sector_t(geometry_.chunk_sectors()) * geometry_.data_disks();
    sector_t first = (bio->sector + stripe_sectors - 1) / stripe_sectors;  // stripes
    sector_t last = bio->end_sector() / stripe_sectors;
    if (first >= last) {
        bio_endio(bio);
        return;
    }
    counters_.discarded_stripes += last - first;
    // The discarded rows no longer hold what the cache holds: handle_stripe_clean_event()
    // drops R5_UPTODATE of R5_Discard pages.
    cache_.forget_pages(first * geometry_.chunk_sectors(), last * geometry_.chunk_sectors());
    Bio* ab = account_bio(bio);
    uint64_t now = layer_.loop().now();
    for (uint32_t d = 0; d < members_.size(); d++) {
        if (failed_mask_ & bit(d)) continue;
        Bio* clone = layer_.bios().alloc();
        clone->op = Op::Discard;
        clone->sector = first * geometry_.chunk_sectors();
        clone->nr_sectors = uint32_t((last - first) * geometry_.chunk_sectors());
        clone->pid = bio->pid;
        clone->dev = members_[d];
        clone->start_ns = now;
        bio_chain(clone, ab);
        trace_remap(clone, first * stripe_sectors);
        layer_.submit_bio_noacct(clone);
    }
    bio_endio(ab);  // drop the submission's reference
}

// chunk_aligned_read(): split at chunk - (sector % chunk), read the front.
// Returns the piece when it must go through the stripe cache.
Bio* Raid5Device::chunk_aligned_read(Bio* bio) {
    uint32_t chunk = geometry_.chunk_sectors();
    uint32_t sectors = chunk - uint32_t(bio->sector & (chunk - 1));
    if (sectors < bio->nr_sectors) bio = layer_.split_and_resubmit(bio, sectors);
    if (!raid5_read_one_chunk(bio)) return bio;
    return nullptr;
}

// raid5_read_one_chunk(): md_account_bio(), clone to the member, trace A,
// submit_bio_noacct(). False when the member is failed.
bool Raid5Device::raid5_read_one_chunk(Bio* bio) {
    Raid5Location loc = geometry_.compute_sector(bio->sector);
    if (failed_mask_ & bit(loc.dd_idx)) return false;
    uint64_t now = layer_.loop().now();
    stats_.start(now);
    counters_.aligned_reads++;
    Bio* clone = layer_.bios().alloc();
    clone->op = bio->op;
    clone->flags = uint16_t(bio->flags & kBioSync);
    clone->sector = loc.member_sector;
    clone->nr_sectors = bio->nr_sectors;
    clone->data = bio->data;
    clone->pid = bio->pid;
    clone->dev = members_[loc.dd_idx];
    clone->start_ns = now;
    clone->private_data = bio;
    clone->end_io = &Raid5Device::align_endio;
    clone->tag = reinterpret_cast<uint64_t>(this);
    trace_remap(clone, bio->sector);
    layer_.submit_bio_noacct(clone);
    return true;
}

// raid5_align_endio() + bio_end_io_acct(). An error marks the member
// Faulty and retries the read through the stripe cache (add_bio_to_retry),
// which rebuilds it; only a failed array fails the read.
void Raid5Device::align_endio(Bio* clone) {
    auto* self = reinterpret_cast<Raid5Device*>(clone->tag);
    auto* orig = static_cast<Bio*>(clone->private_data);
    if (clone->error) {
        self->counters_.member_errors++;
        self->md_error(self->member_index(clone->dev));
        if (!self->array_failed()) {
            self->counters_.read_retries++;
            // The retry is accounted afresh: take this attempt out of flight.
            uint64_t now = self->layer_.loop().now();
            if (--self->stats_.in_flight == 0)
                self->stats_.io_ticks_ns += now - self->stats_.busy_since_ns;
            self->layer_.bios().put(clone);
            self->make_stripe_request(orig);
            return;
        }
    }
    self->stats_.done(orig->op, orig->nr_sectors, clone->start_ns, self->layer_.loop().now(),
                      clone->error != 0);
    if (clone->error && !orig->error) orig->error = clone->error;
    orig->resid += clone->resid;
    self->layer_.bios().put(clone);
    bio_endio(orig);
}

// md_account_bio(): an accounting clone the stripe pieces complete into.
Bio* Raid5Device::account_bio(Bio* bio) {
    uint64_t now = layer_.loop().now();
    stats_.start(now);
    Bio* ab = layer_.bios().copy(bio);
    ab->dev = this;
    ab->start_ns = now;
    ab->private_data = bio;
    ab->end_io = &Raid5Device::stripe_bio_endio;
    ab->tag = reinterpret_cast<uint64_t>(this);
    return ab;
}

void Raid5Device::stripe_bio_endio(Bio* ab) {
    auto* self = reinterpret_cast<Raid5Device*>(ab->tag);
    self->layer_.end_clone(self->stats_, ab);
}

// raid5_make_request() -> make_stripe_request() -> add_stripe_bio(): the
// bio is cut into 4 KiB-aligned pieces, each added to its stripe head
// (bio_inc_remaining per piece); raid5d handles the stripes.
void Raid5Device::make_stripe_request(Bio* bio) {
    Bio* ab = account_bio(bio);
    bool write = bio->op == Op::Write;
    bool sync = bio->flags & kBioSync;
    sector_t end = bio->end_sector();
    for (sector_t s = bio->sector; s < end;) {
        sector_t unit_end = std::min<sector_t>(end, (s | (kRaid5StripeSectors - 1)) + 1);
        Raid5Location loc = geometry_.compute_sector(s);
        WaitingPiece piece;
        piece.row = loc.member_sector & ~sector_t(kRaid5StripeSectors - 1);
        piece.pd_idx = loc.pd_idx;
        piece.write = write;
        piece.sync = sync;
        piece.entry.bio = ab;
        piece.entry.disk = loc.dd_idx;
        piece.entry.offset = uint32_t(loc.member_sector - piece.row);
        piece.entry.sectors = uint32_t(unit_end - s);
        piece.entry.data = bio->data ? bio->data + ((s - bio->sector) << kSectorShift) : nullptr;
        ab->remaining++;
        add_stripe_piece(piece);
        s = unit_end;
    }
    bio_endio(ab);  // drop the submission's reference
}

// raid5_get_active_stripe(): a blocked submitter waits, in order, so once a
// piece waits every later one does too.
void Raid5Device::add_stripe_piece(const WaitingPiece& piece) {
    if (waiting_.empty() && add_stripe_piece_now(piece)) return;
    cache_.counters.waits++;
    cache_.set_blocked(true);  // R5_INACTIVE_BLOCKED
    waiting_.push_back(piece);
}

// find_get_stripe() or get_free_stripe(), then add_stripe_bio(); a REQ_SYNC
// bio makes the stripe STRIPE_PREREAD_ACTIVE (make_stripe_request), so its
// pre-reads are not delayed. False when no head is free.
bool Raid5Device::add_stripe_piece_now(const WaitingPiece& piece) {
    StripeHead* sh = cache_.find_get_stripe(piece.row);
    if (!sh) {
        if (!cache_.can_get_free_stripe(piece.row)) return false;
        sh = cache_.get_free_stripe(piece.row, piece.pd_idx);
    }
    (piece.write ? sh->towrite : sh->toread).push_back(piece.entry);
    sh->delayed = false;  // clear_bit(STRIPE_DELAYED)
    if (piece.sync && !sh->preread_active) {
        sh->preread_active = true;
        cache_.preread_active++;
    }
    queue_stripe(sh);
    return true;
}

// wake_up(&conf->wait_for_stripe): the blocked submitter goes on.
void Raid5Device::wake_stripe_waiters() {
    while (!waiting_.empty() && add_stripe_piece_now(waiting_.front())) waiting_.pop_front();
    if (waiting_.empty()) cache_.set_blocked(false);
}

// The STRIPE_PREREAD_ACTIVE count drops (handle_stripe's dec_preread_active,
// do_release_stripe); below IO_THRESHOLD raid5d activates the delayed stripes.
void Raid5Device::clear_preread_active(StripeHead* sh) {
    if (!sh->preread_active) return;
    sh->preread_active = false;
    if (--cache_.preread_active < Raid5StripeCache::kIoThreshold && cache_.has_delayed())
        wake_raid5d();
}

// do_release_stripe(): delayed, or idle on the inactive list, pages kept.
void Raid5Device::release_stripe(StripeHead* sh) {
    if (sh->forget_when_idle) {
        sh->uptodate = 0;
        sh->forget_when_idle = false;
    }
    if (sh->delayed && !sh->preread_active) {
        cache_.queue_delayed(sh);
        wake_raid5d();
        return;
    }
    clear_preread_active(sh);
    cache_.release_inactive(sh);
    wake_stripe_waiters();
}

// raid5_release_stripe() with STRIPE_HANDLE: onto the handle list.
void Raid5Device::queue_stripe(StripeHead* sh) {
    if (sh->handling) return;
    cache_.queue_handle(sh);
    wake_raid5d();
}

// md_wakeup_thread()
void Raid5Device::wake_raid5d() {
    if (raid5d_scheduled_) return;
    raid5d_scheduled_ = true;
    layer_.loop().defer(&Raid5Device::raid5d_callback, this);
}

void Raid5Device::raid5d_callback(void* arg, uint64_t) { static_cast<Raid5Device*>(arg)->raid5d(); }

// raid5d(): raid5_activate_delayed(), then handle_active_stripes() in
// __get_priority_stripe() order, inside raid5d's own plug, so the 4 KiB
// member bios of neighbouring stripes merge into larger requests.
void Raid5Device::raid5d() {
    raid5d_scheduled_ = false;
    TaskContext* saved = layer_.current();
    layer_.set_current(&raid5d_task_);
    layer_.start_plug(raid5d_task_);
    for (;;) {
        cache_.activate_delayed();
        StripeHead* sh = cache_.get_priority_stripe();
        if (!sh) break;
        handle_stripe(sh);
    }
    layer_.finish_plug(raid5d_task_);
    layer_.set_current(saved);
}

// handle_stripe(): advances the stripe head until it waits for member I/O
// or has nothing left to do.
void Raid5Device::handle_stripe(StripeHead* sh) {
    using Phase = StripeHead::Phase;
    sh->handling = true;
    // A member bio that failed made its member Faulty (stripe_io_endio); while
    // the array survives, the generation is redone without that member.
    auto retry = [&](std::vector<StripeEntry>& from, std::vector<StripeEntry>& to) {
        counters_.stripe_retries++;
        to.insert(to.begin(), from.begin(), from.end());
        from.clear();
        sh->error = 0;
        sh->phase = Phase::Idle;
    };
    while (!sh->pending) {
        if (sh->phase == Phase::DegradedRead) {
            if (sh->error && !array_failed()) {
                retry(sh->reading, sh->toread);
                continue;
            }
            end_degraded_read(sh);
            sh->phase = Phase::Idle;
        } else if (sh->phase == Phase::PreRead) {
            if (sh->error && !array_failed()) {
                retry(sh->writing, sh->towrite);
                continue;
            }
            if (sh->error || array_failed()) {
                if (!sh->error) sh->error = -EIO;
                end_writes(sh);
                sh->phase = Phase::Idle;
            } else {
                sh->phase = Phase::Write;
                reconstruct_and_write(sh);
            }
        } else if (sh->phase == Phase::Write) {
            // A member write failed and the member is Faulty now: its unit
            // lives on in parity, the write succeeded (degraded).
            if (sh->error && !array_failed()) sh->error = 0;
            end_writes(sh);
            sh->phase = Phase::Idle;
        } else if (array_failed() && (!sh->toread.empty() || !sh->towrite.empty())) {
            fail_stripe_requests(sh);
        } else if (!sh->toread.empty()) {
            start_degraded_read(sh);
        } else if (!sh->towrite.empty()) {
            if (!handle_stripe_dirtying(sh)) break;  // STRIPE_DELAYED
        } else {
            break;
        }
    }
    sh->handling = false;
    if (!sh->pending && sh->list == StripeHead::List::None && sh->phase == Phase::Idle)
        release_stripe(sh);
}

// handle_failed_stripe(): more members Faulty than the array survives;
// every request waiting on the stripe fails, and the cached pages go.
void Raid5Device::fail_stripe_requests(StripeHead* sh) {
    sh->uptodate = 0;
    for (auto* list : {&sh->toread, &sh->towrite}) {
        std::vector<StripeEntry> entries;
        entries.swap(*list);
        for (StripeEntry& e : entries) {
            if (!e.bio->error) e.bio->error = -EIO;
            bio_endio(e.bio);
        }
    }
}

// handle_stripe_fill() -> fetch_block(): a wanted unit not R5_UPTODATE is
// read from its member; one on the failed member is computed from all the
// others (ops_run_compute5), reading those not up to date.
void Raid5Device::start_degraded_read(StripeHead* sh) {
    sh->reading.swap(sh->toread);
    sh->toread.clear();
    sh->phase = StripeHead::Phase::DegradedRead;
    sh->skip = failed_mask_;
    uint64_t all = members_.size() == 64 ? ~uint64_t(0) : bit(uint32_t(members_.size())) - 1;
    uint64_t wanted = 0;
    for (const StripeEntry& e : sh->reading) wanted |= bit(e.disk);
    wanted &= ~sh->uptodate;
    uint64_t reads = wanted & ~failed_mask_;
    if (wanted & failed_mask_) {
        counters_.degraded_reads++;
        reads |= all & ~failed_mask_ & ~sh->uptodate;
    }
    if (reads) submit_member_io(sh, Op::Read, reads);
}

// ops_run_compute5() + ops_complete_biofill(): copy the pieces out.
void Raid5Device::end_degraded_read(StripeHead* sh) {
    if (!sh->error) {
        for (const StripeEntry& e : sh->reading) {
            if (sh->uptodate & bit(e.disk)) continue;
            // The failed member's unit: the XOR of the others (all up to date now).
            uint8_t* missing = sh->page(e.disk);
            memset(missing, 0, kRaid5StripeBytes);
            for (uint32_t i = 0; i < members_.size(); i++)
                if (i != e.disk) xor_page(missing, sh->page(i));
            sh->uptodate |= bit(e.disk);
        }
    }
    for (StripeEntry& e : sh->reading) {
        if (sh->error) {
            if (!e.bio->error) e.bio->error = sh->error;
        } else if (e.data) {
            memcpy(e.data, sh->page(e.disk) + (uint64_t(e.offset) << kSectorShift),
                   uint64_t(e.sectors) << kSectorShift);
        }
        bio_endio(e.bio);
    }
    sh->reading.clear();
    sh->error = 0;
}

// handle_stripe_dirtying(): count the units a read-modify-write and a
// reconstruct-write would read, not counting R5_UPTODATE pages (they are in
// the cache); a unit on the failed member cannot be read (2 * disks). md
// prefers reconstruct-write on a tie (rmw_level = PARITY_ENABLE_RMW). A
// stripe that must read but is not STRIPE_PREREAD_ACTIVE is STRIPE_DELAYED
// instead (returns false; its writes stay queued).
bool Raid5Device::handle_stripe_dirtying(StripeHead* sh) {
    using Mode = StripeHead::Mode;
    uint32_t n = uint32_t(members_.size());
    std::vector<uint8_t> cover(n, 0);
    for (const StripeEntry& e : sh->towrite)
        cover[e.disk] |= uint8_t(((1u << e.sectors) - 1) << e.offset);
    uint64_t written = 0, overwritten = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (cover[i]) written |= bit(i);
        if (cover[i] == kFullUnit) overwritten |= bit(i);  // R5_OVERWRITE
    }
    uint64_t all = n == 64 ? ~uint64_t(0) : bit(n) - 1;
    uint64_t parity = bit(sh->pd_idx);
    uint64_t data = all & ~parity;
    uint64_t failed = failed_mask_;  // one member at most: a failed array never gets here

    uint64_t rmw_reads = (written | parity) & ~sh->uptodate;
    uint64_t rcw_reads = data & ~overwritten & ~sh->uptodate;
    auto cost = [&](uint64_t reads) {
        return std::popcount(reads & ~failed) + 2 * int(n) * std::popcount(reads & failed);
    };
    int rmw = cost(rmw_reads), rcw = cost(rcw_reads);
    Mode mode;
    uint64_t reads;
    if (rmw == 0 || rcw == 0) {
        // schedule_reconstruction(sh, s, rcw == 0, 0): nothing to read.
        mode = rcw == 0 ? Mode::Rcw : Mode::Rmw;
        reads = 0;
    } else if (rmw < rcw) {
        mode = Mode::Rmw;
        reads = rmw_reads;
        if (rmw_reads & failed) mode = Mode::RebuildFailed;
    } else {
        mode = Mode::Rcw;
        reads = rcw_reads;
        if (rcw_reads & failed) mode = Mode::RebuildFailed;
    }
    if (mode == Mode::RebuildFailed) {
        // A partly written unit of the failed member, not cached: rebuild
        // its old content from every other member first (fetch_block).
        reads = all & ~failed & ~sh->uptodate;
    }
    if (reads && !sh->preread_active) {
        if (!sh->delayed) counters_.delayed_stripes++;
        sh->delayed = true;
        return false;
    }
    sh->delayed = false;
    sh->writing.swap(sh->towrite);
    sh->towrite.clear();
    sh->phase = StripeHead::Phase::PreRead;
    sh->mode = mode;
    sh->skip = failed;
    if (mode == Mode::Rmw) {
        counters_.rmw++;
    } else if (mode == Mode::Rcw) {
        if ((data & ~overwritten) == 0) {
            // STRIPE_FULL_WRITE: every data unit overwritten.
            counters_.full_stripe_writes++;
            sh->full_write = true;
            cache_.pending_full_writes++;
        } else {
            counters_.rcw++;
        }
    }
    if (failed) counters_.degraded_writes++;
    sh->written = written;
    sh->write_mask = (written | parity) & ~failed;
    if (reads) {
        counters_.preread_reads += uint64_t(std::popcount(reads));
        submit_member_io(sh, Op::Read, reads);
    }
    return true;
}

// ops_run_prexor5() / ops_run_biodrain() / ops_run_reconstruct5(), then
// ops_run_io() for the data and parity units. Every page of the stripe is
// up to date afterwards (a read-modify-write: the units it touched).
void Raid5Device::reconstruct_and_write(StripeHead* sh) {
    using Mode = StripeHead::Mode;
    uint32_t n = uint32_t(members_.size());
    uint8_t* p = sh->page(sh->pd_idx);
    uint64_t all = n == 64 ? ~uint64_t(0) : bit(n) - 1;
    auto biodrain = [&] {
        for (const StripeEntry& e : sh->writing) {
            uint8_t* dst = sh->page(e.disk) + (uint64_t(e.offset) << kSectorShift);
            uint64_t len = uint64_t(e.sectors) << kSectorShift;
            if (e.data)
                memcpy(dst, e.data, len);
            else
                memset(dst, 0, len);
        }
    };
    auto xor_data = [&] {
        memset(p, 0, kRaid5StripeBytes);
        for (uint32_t i = 0; i < n; i++)
            if (i != sh->pd_idx) xor_page(p, sh->page(i));
    };
    switch (sh->mode) {
        case Mode::Rmw:
            for (uint32_t i = 0; i < n; i++)
                if (sh->written & bit(i))
                    xor_page(p, sh->page(i));  // prexor: take the old data out
            biodrain();
            for (uint32_t i = 0; i < n; i++)
                if (sh->written & bit(i)) xor_page(p, sh->page(i));  // put the new data in
            sh->uptodate |= sh->written | bit(sh->pd_idx);
            break;
        case Mode::Rcw:
            biodrain();
            xor_data();
            sh->uptodate = all;
            break;
        case Mode::RebuildFailed: {
            uint32_t skipped = uint32_t(std::countr_zero(sh->skip));
            uint8_t* missing = sh->page(skipped);
            memset(missing, 0, kRaid5StripeBytes);
            for (uint32_t i = 0; i < n; i++)
                if (i != skipped) xor_page(missing, sh->page(i));
            biodrain();
            xor_data();
            sh->uptodate = all;
            break;
        }
    }
    // A member that became Faulty since the pre-reads is not written; the
    // parity computed above covers its unit.
    submit_member_io(sh, Op::Write, sh->write_mask & ~failed_mask_);
}

// handle_stripe_clean_event(): the written bios complete (with the error of
// a failed member bio, if any); a failed array keeps nothing cached.
void Raid5Device::end_writes(StripeHead* sh) {
    if (sh->error) sh->uptodate = 0;
    for (StripeEntry& e : sh->writing) {
        if (sh->error && !e.bio->error) e.bio->error = sh->error;
        bio_endio(e.bio);
    }
    sh->writing.clear();
    sh->error = 0;
    if (sh->full_write) {
        sh->full_write = false;
        if (--cache_.pending_full_writes == 0) wake_raid5d();
    }
    clear_preread_active(sh);
}

// ops_run_io(): one 4 KiB bio per member in the mask, traced as a remap
// from the unit's virtual sector (0 for parity, as raid5_compute_blocknr).
void Raid5Device::submit_member_io(StripeHead* sh, Op op, uint64_t member_mask) {
    const std::vector<StripeEntry>& reqs = sh->writing.empty() ? sh->reading : sh->writing;
    uint32_t pid = reqs.empty() ? 0 : reqs.front().bio->pid;
    sh->pending += uint32_t(std::popcount(member_mask));  // before any can complete
    sh->io_started = true;
    if (op == Op::Read) sh->uptodate &= ~member_mask;  // R5_Wantread: being read
    for (uint32_t i = 0; i < members_.size(); i++) {
        if (!(member_mask & bit(i))) continue;
        Bio* b = layer_.bios().alloc();
        b->op = op;
        b->flags = kBioSync;
        b->sector = sh->sector;
        b->nr_sectors = kRaid5StripeSectors;
        b->data = sh->page(i);
        b->dev = members_[i];
        b->pid = pid;
        b->end_io = &Raid5Device::stripe_io_endio;
        b->private_data = sh;
        sector_t from = geometry_.compute_blocknr(sh->sector, i);
        trace_remap(b, from == Raid5Geometry::kParity ? 0 : from);
        layer_.submit_bio_noacct(b);
    }
}

// raid5_end_read_request() / raid5_end_write_request(): a page read well is
// R5_UPTODATE; a failed read leaves it not up to date.
void Raid5Device::stripe_io_endio(Bio* bio) {
    auto* sh = static_cast<StripeHead*>(bio->private_data);
    Raid5Device* self = sh->conf;
    int32_t error = bio->error ? bio->error : bio->resid ? -EIO : 0;
    uint32_t member = self->member_index(bio->dev);
    if (error) {
        self->counters_.member_errors++;
        self->md_error(member);
        if (!sh->error) sh->error = error;
    } else if (bio->op == Op::Read) {
        sh->uptodate |= bit(member);
    }
    self->layer_.bios().put(bio);
    if (--sh->pending == 0) self->queue_stripe(sh);
}

}  // namespace mdsplit
