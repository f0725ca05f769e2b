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

// One piece of a bio in one stripe head: at most one 4 KiB unit of a member
// (the bio list hanging off sh->dev[i].toread / towrite).
struct Raid5Device::StripeEntry {
    Bio* bio = nullptr;   // the md-accounted bio, holding one reference per entry
    uint32_t disk = 0;    // member the piece lives on
    uint32_t offset = 0;  // sectors into the member's unit
    uint32_t sectors = 0;
    uint8_t* data = nullptr;  // the piece in the bio's buffer (null: no data)
};

// struct stripe_head: one 4 KiB row across all members. It handles one
// generation of requests at a time; requests that arrive meanwhile wait for
// the next one, which serializes writes per stripe.
struct Raid5Device::StripeHead {
    enum class Phase { Idle, DegradedRead, PreRead, Write };
    // How handle_stripe_dirtying() chose to compute the new parity.
    enum class Mode { Rcw, Rmw, NoParity, RebuildFailed };

    sector_t sector = 0;  // member sector of the row (multiple of 8)
    uint32_t pd_idx = 0;
    uint8_t* pages = nullptr;                   // one page per member (sh->dev[i].page)
    std::vector<StripeEntry> toread, towrite;   // waiting for the next generation
    std::vector<StripeEntry> reading, writing;  // the generation being handled
    Phase phase = Phase::Idle;
    Mode mode = Mode::Rcw;
    uint64_t written = 0;     // members with a piece to write in this generation
    uint64_t write_mask = 0;  // members written after the pre-reads
    uint32_t pending = 0;     // member bios in flight
    uint64_t skip = 0;        // members Faulty when this generation started (not read)
    int32_t error = 0;
    bool on_list = false;   // on the handle list
    bool handling = false;  // inside handle_stripe()
    Raid5Device* conf = nullptr;

    uint8_t* page(uint32_t i) { return pages + size_t(i) * kRaid5StripeBytes; }
};

Raid5Device::Raid5Device(BlockLayer& layer, std::string name, uint32_t devt,
                         std::vector<MemberQueue*> members, const std::vector<bool>& failed,
                         const DeviceConfig& config)
    : BlockDevice(std::move(name), devt),
      layer_(layer),
      members_(std::move(members)),
      geometry_(uint32_t(members_.size()), uint32_t(config.chunk_bytes >> kSectorShift),
                config.layout) {
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

Raid5Device::~Raid5Device() {
    for (auto& [sector, sh] : stripes_) free_stripes_.push_back(sh);
    for (StripeHead* sh : free_stripes_) {
        free(sh->pages);
        delete sh;
    }
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
    sector_t end = bio->end_sector();
    for (sector_t s = bio->sector; s < end;) {
        sector_t unit_end = std::min<sector_t>(end, (s | (kRaid5StripeSectors - 1)) + 1);
        Raid5Location loc = geometry_.compute_sector(s);
        sector_t row = loc.member_sector & ~sector_t(kRaid5StripeSectors - 1);
        StripeHead* sh = get_active_stripe(row, loc.pd_idx);
        StripeEntry e;
        e.bio = ab;
        e.disk = loc.dd_idx;
        e.offset = uint32_t(loc.member_sector - row);
        e.sectors = uint32_t(unit_end - s);
        e.data = bio->data ? bio->data + ((s - bio->sector) << kSectorShift) : nullptr;
        (write ? sh->towrite : sh->toread).push_back(e);
        ab->remaining++;
        queue_stripe(sh);
        s = unit_end;
    }
    bio_endio(ab);  // drop the submission's reference
}

// raid5_get_active_stripe(): the stripe head of a row, from the inactive
// list when none is active.
Raid5Device::StripeHead* Raid5Device::get_active_stripe(sector_t sector, uint32_t pd_idx) {
    auto it = stripes_.find(sector);
    if (it != stripes_.end()) return it->second;
    StripeHead* sh;
    if (!free_stripes_.empty()) {
        sh = free_stripes_.back();
        free_stripes_.pop_back();
    } else {
        sh = new StripeHead;
        sh->conf = this;
        void* p = nullptr;
        if (posix_memalign(&p, 4096, members_.size() * kRaid5StripeBytes)) {
            delete sh;
            throw std::bad_alloc();
        }
        memset(p, 0, members_.size() * kRaid5StripeBytes);
        sh->pages = static_cast<uint8_t*>(p);
    }
    sh->sector = sector;
    sh->pd_idx = pd_idx;
    sh->phase = StripeHead::Phase::Idle;
    sh->pending = 0;
    sh->error = 0;
    sh->on_list = sh->handling = false;
    stripes_.emplace(sector, sh);
    return sh;
}

// An idle stripe head with nothing queued goes back to the inactive list.
void Raid5Device::release_stripe(StripeHead* sh) {
    stripes_.erase(sh->sector);
    free_stripes_.push_back(sh);
}

// raid5_release_stripe() with STRIPE_HANDLE: onto the handle list.
void Raid5Device::queue_stripe(StripeHead* sh) {
    if (sh->on_list || sh->handling) return;
    sh->on_list = true;
    handle_list_.push_back(sh);
    wake_raid5d();
}

// md_wakeup_thread()
void Raid5Device::wake_raid5d() {
    if (raid5d_scheduled_) return;
    raid5d_scheduled_ = true;
    layer_.loop().defer(&Raid5Device::raid5d_callback, this);
}

void Raid5Device::raid5d_callback(void* arg, uint64_t) { static_cast<Raid5Device*>(arg)->raid5d(); }

// raid5d(): handles the queued stripes inside its own plug, so the 4 KiB
// member bios of neighbouring stripes merge into larger requests.
void Raid5Device::raid5d() {
    raid5d_scheduled_ = false;
    TaskContext* saved = layer_.current();
    layer_.set_current(&raid5d_task_);
    layer_.start_plug(raid5d_task_);
    while (!handle_list_.empty()) {
        StripeHead* sh = handle_list_.front();
        handle_list_.pop_front();
        sh->on_list = false;
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
            handle_stripe_dirtying(sh);
        } else {
            break;
        }
    }
    sh->handling = false;
    if (!sh->pending && !sh->on_list && sh->phase == Phase::Idle) release_stripe(sh);
}

// handle_failed_stripe(): more members Faulty than the array survives;
// every request waiting on the stripe fails.
void Raid5Device::fail_stripe_requests(StripeHead* sh) {
    for (auto* list : {&sh->toread, &sh->towrite}) {
        std::vector<StripeEntry> entries;
        entries.swap(*list);
        for (StripeEntry& e : entries) {
            if (!e.bio->error) e.bio->error = -EIO;
            bio_endio(e.bio);
        }
    }
}

// handle_stripe_fill() -> fetch_block() for a unit of the failed member:
// read every other member of the row, the missing unit is their XOR.
void Raid5Device::start_degraded_read(StripeHead* sh) {
    sh->reading.swap(sh->toread);
    sh->toread.clear();
    sh->phase = StripeHead::Phase::DegradedRead;
    sh->skip = failed_mask_;
    counters_.degraded_reads++;
    uint64_t all = members_.size() == 64 ? ~uint64_t(0) : bit(uint32_t(members_.size())) - 1;
    submit_member_io(sh, Op::Read, all & ~sh->skip);
}

// ops_run_compute5() + ops_complete_biofill(): copy the pieces out.
void Raid5Device::end_degraded_read(StripeHead* sh) {
    if (!sh->error && sh->skip) {
        uint32_t skipped = uint32_t(std::countr_zero(sh->skip));
        uint8_t* missing = sh->page(skipped);
        memset(missing, 0, kRaid5StripeBytes);
        for (uint32_t i = 0; i < members_.size(); i++)
            if (i != skipped) xor_page(missing, sh->page(i));
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
// reconstruct-write would read; a unit on the failed member cannot be read.
// md prefers reconstruct-write on a tie (rmw_level = PARITY_ENABLE_RMW).
void Raid5Device::handle_stripe_dirtying(StripeHead* sh) {
    using Mode = StripeHead::Mode;
    sh->writing.swap(sh->towrite);
    sh->towrite.clear();
    sh->phase = StripeHead::Phase::PreRead;

    uint32_t n = uint32_t(members_.size());
    std::vector<uint8_t> cover(n, 0);
    for (const StripeEntry& e : sh->writing)
        cover[e.disk] |= uint8_t(((1u << e.sectors) - 1) << e.offset);
    uint64_t written = 0, overwritten = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (cover[i]) written |= bit(i);
        if (cover[i] == kFullUnit) overwritten |= bit(i);
    }
    uint64_t all = n == 64 ? ~uint64_t(0) : bit(n) - 1;
    uint64_t parity = bit(sh->pd_idx);
    uint64_t data = all & ~parity;
    uint64_t failed = failed_mask_;  // one member at most: a failed array never gets here
    sh->skip = failed;

    uint64_t rmw_reads = written | parity;
    uint64_t rcw_reads = data & ~overwritten;
    bool rmw_ok = !(rmw_reads & failed);
    bool rcw_ok = !(rcw_reads & failed);
    int rmw = std::popcount(rmw_reads), rcw = std::popcount(rcw_reads);
    uint64_t reads;
    if (failed & parity) {
        // The parity member is gone: only partly written units need reading.
        sh->mode = Mode::NoParity;
        reads = written & ~overwritten;
    } else if (rmw_ok && (!rcw_ok || rmw < rcw)) {
        sh->mode = Mode::Rmw;
        reads = rmw_reads;
        counters_.rmw++;
    } else if (rcw_ok) {
        sh->mode = Mode::Rcw;
        reads = rcw_reads;
        if (reads)
            counters_.rcw++;
        else
            counters_.full_stripe_writes++;
    } else {
        // A partly written unit of the failed member: rebuild its old
        // content from every other member first.
        sh->mode = Mode::RebuildFailed;
        reads = all & ~failed;
    }
    if (failed) counters_.degraded_writes++;
    sh->written = written;
    sh->write_mask = (written | parity) & ~failed;
    if (reads) submit_member_io(sh, Op::Read, reads);
}

// ops_run_prexor5() / ops_run_biodrain() / ops_run_reconstruct5(), then
// ops_run_io() for the data and parity units.
void Raid5Device::reconstruct_and_write(StripeHead* sh) {
    using Mode = StripeHead::Mode;
    uint32_t n = uint32_t(members_.size());
    uint8_t* p = sh->page(sh->pd_idx);
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
            break;
        case Mode::Rcw:
            biodrain();
            xor_data();
            break;
        case Mode::NoParity:
            biodrain();
            break;
        case Mode::RebuildFailed: {
            uint32_t skipped = uint32_t(std::countr_zero(sh->skip));
            uint8_t* missing = sh->page(skipped);
            memset(missing, 0, kRaid5StripeBytes);
            for (uint32_t i = 0; i < n; i++)
                if (i != skipped) xor_page(missing, sh->page(i));
            biodrain();
            xor_data();
            break;
        }
    }
    // A member that became Faulty since the pre-reads is not written; the
    // parity computed above covers its unit.
    submit_member_io(sh, Op::Write, sh->write_mask & ~failed_mask_);
}

// handle_stripe_clean_event(): the written bios complete (with the error of
// a failed member bio, if any).
void Raid5Device::end_writes(StripeHead* sh) {
    for (StripeEntry& e : sh->writing) {
        if (sh->error && !e.bio->error) e.bio->error = sh->error;
        bio_endio(e.bio);
    }
    sh->writing.clear();
    sh->error = 0;
}

// ops_run_io(): one 4 KiB bio per member in the mask, traced as a remap
// from the unit's virtual sector (0 for parity, as raid5_compute_blocknr).
void Raid5Device::submit_member_io(StripeHead* sh, Op op, uint64_t member_mask) {
    const std::vector<StripeEntry>& reqs = sh->writing.empty() ? sh->reading : sh->writing;
    uint32_t pid = reqs.empty() ? 0 : reqs.front().bio->pid;
    sh->pending += uint32_t(std::popcount(member_mask));  // before any can complete
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

// raid5_end_read_request() / raid5_end_write_request()
void Raid5Device::stripe_io_endio(Bio* bio) {
    auto* sh = static_cast<StripeHead*>(bio->private_data);
    Raid5Device* self = sh->conf;
    int32_t error = bio->error ? bio->error : bio->resid ? -EIO : 0;
    if (error) {
        self->counters_.member_errors++;
        self->md_error(self->member_index(bio->dev));
        if (!sh->error) sh->error = error;
    }
    self->layer_.bios().put(bio);
    if (--sh->pending == 0) self->queue_stripe(sh);
}

}  // namespace mdsplit
