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
    failed_at_start_ = failed_mask_;
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
    j.field("delayed_stripes", c.delayed_stripes)
        .field("overlap_waits", c.overlap_waits)
        .field("degraded_reads", c.degraded_reads);
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
    if (member_failed_hook_) member_failed_hook_(member);
}

void Raid5Device::assemble_failed(uint32_t member) {
    if (member >= members_.size()) return;
    failed_mask_ |= bit(member);
    failed_at_start_ |= bit(member);
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
// at once. md waits on a head that still has requests queued (R5_Overlap)
// and the discard is ordered behind the head's member I/O (R5_LOCKED); here
// the discard waits until no cached head of its rows holds a request or
// I/O, and requests to its rows wait until it completed. Without
// devices_handle_discard_safely md sets no discard limit (raid5_set_limits)
// and the block layer fails the bio with EOPNOTSUPP.
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
    DiscardRange d{account_bio(bio), first * geometry_.chunk_sectors(),
                   last * geometry_.chunk_sectors(), 0};
    if (waiting_discards_.empty() && discard_may_start(d)) {
        start_discard(d);
    } else {
        counters_.overlap_waits++;
        waiting_discards_.push_back(d);
    }
}

// No cached head of the discard's rows holds a request or member I/O.
bool Raid5Device::discard_may_start(const DiscardRange& d) const {
    return !cache_.any_busy(d.begin, d.end);
}

void Raid5Device::start_discard(DiscardRange d) {
    // The discarded rows no longer hold what the cache holds: handle_stripe_clean_event()
    // drops R5_UPTODATE of R5_Discard pages.
    cache_.forget_pages(d.begin, d.end);
    d.pending = 1;  // the submission's reference
    for (uint32_t i = 0; i < members_.size(); i++) d.pending += !(failed_mask_ & bit(i));
    discards_.push_back(d);
    uint64_t now = layer_.loop().now();
    for (uint32_t i = 0; i < members_.size(); i++) {
        if (failed_mask_ & bit(i)) continue;
        Bio* clone = layer_.bios().alloc();
        clone->op = Op::Discard;
        clone->sector = d.begin;
        clone->nr_sectors = uint32_t(d.end - d.begin);
        clone->pid = d.bio->pid;
        clone->dev = members_[i];
        clone->start_ns = now;
        clone->private_data = d.bio;
        clone->end_io = &Raid5Device::discard_endio;
        clone->tag = reinterpret_cast<uint64_t>(this);
        trace_remap(clone, d.begin * geometry_.data_disks());
        layer_.submit_bio_noacct(clone);
    }
    end_discard(d.bio);
}

// A member discard completed (bio_chain_endio: the first error wins).
void Raid5Device::discard_endio(Bio* clone) {
    auto* self = reinterpret_cast<Raid5Device*>(clone->tag);
    auto* ab = static_cast<Bio*>(clone->private_data);
    if (clone->error && !ab->error) ab->error = clone->error;
    self->layer_.bios().put(clone);
    self->end_discard(ab);
}

// The last reference: the discard completes and its rows take requests again.
void Raid5Device::end_discard(Bio* ab) {
    for (size_t i = 0; i < discards_.size(); i++) {
        if (discards_[i].bio != ab) continue;
        if (--discards_[i].pending) return;
        discards_.erase(discards_.begin() + long(i));
        break;
    }
    bio_endio(ab);
    wake_stripe_waiters();
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

// raid5_bio_lowest_chunk_sector(): when the bio reaches the next data
// member's chunk of the same chunk-stripe, the walk starts at that chunk's
// start (the row with the lowest chunk offset), else at the bio's first row.
sector_t Raid5Device::raid5_bio_lowest_chunk_sector(const Bio* bio) const {
    uint32_t chunk = geometry_.chunk_sectors();
    sector_t r_sector = bio->sector & ~sector_t(kRaid5StripeSectors - 1);
    Raid5Location loc = geometry_.compute_sector(r_sector);
    uint32_t chunk_offset = uint32_t(loc.member_sector & (chunk - 1));
    if (chunk - chunk_offset >= bio->nr_sectors) return r_sector;
    uint32_t dd_idx = loc.dd_idx + 1;
    if (dd_idx == loc.pd_idx) dd_idx++;
    if (dd_idx >= members_.size()) return r_sector;
    return r_sector + chunk - chunk_offset;
}

// raid5_make_request() -> make_stripe_request() -> add_all_stripe_bios():
// the bio is walked stripe head by stripe head (4 KiB rows), from the row
// raid5_bio_lowest_chunk_sector() picks, each row taking every piece of the
// bio it holds, on all data members, at once (bio_inc_remaining per piece);
// sectors_to_do marks the rows still to add and the walk wraps around
// (find_next_bit_wrap). A row whose head is not free waits for one
// (raid5_get_active_stripe), the rows added so far stay on their heads, so
// a bio covering whole stripes makes full-stripe writes whatever the cache
// size. raid5d handles the stripes.
void Raid5Device::make_stripe_request(Bio* bio) {
    Bio* ab = account_bio(bio);
    bool write = bio->op == Op::Write;
    bool sync = bio->flags & kBioSync;
    sector_t first = bio->sector & ~sector_t(kRaid5StripeSectors - 1);  // ctx.first_sector
    sector_t last = bio->end_sector();                                  // ctx.last_sector
    size_t stripe_cnt = size_t((last - first + kRaid5StripeSectors - 1) / kRaid5StripeSectors);
    std::vector<bool> to_do(stripe_cnt, true);  // ctx.sectors_to_do
    size_t s = size_t((raid5_bio_lowest_chunk_sector(bio) - first) / kRaid5StripeSectors);
    for (;;) {
        Raid5Location loc = geometry_.compute_sector(first + s * kRaid5StripeSectors);
        StripeRequest req{loc.member_sector, loc.pd_idx, bio->pid, write, sync, {}};
        for (uint32_t d = 0; d < members_.size(); d++) {
            if (d == loc.pd_idx) continue;
            sector_t dev_sector = geometry_.compute_blocknr(loc.member_sector, d);
            if (dev_sector < first || dev_sector >= last) continue;
            sector_t from = std::max(dev_sector, bio->sector);
            sector_t to = std::min(dev_sector + kRaid5StripeSectors, last);
            StripeEntry e;
            e.bio = ab;
            e.disk = d;
            e.offset = uint32_t(from - dev_sector);
            e.sectors = uint32_t(to - from);
            e.data = bio->data ? bio->data + ((from - bio->sector) << kSectorShift) : nullptr;
            req.entries.push_back(e);
            to_do[size_t((dev_sector - first) / kRaid5StripeSectors)] = false;
            ab->remaining++;
        }
        add_stripe_request(std::move(req));
        // find_next_bit_wrap()
        size_t next = s;
        while (next < stripe_cnt && !to_do[next]) next++;
        if (next == stripe_cnt) {
            next = 0;
            while (next < s && !to_do[next]) next++;
            if (next == s) break;
        }
        s = next;
    }
    bio_endio(ab);  // drop the submission's reference
}

// raid5_get_active_stripe() / wait_on_bit(R5_Overlap): a blocked submitter
// sleeps in the walk, so once one of its requests waits, its later ones
// (the rest of the bio, its next bios) wait behind it, in order; other
// submitters go on (they too find no free head while R5_INACTIVE_BLOCKED).
void Raid5Device::add_stripe_request(StripeRequest&& req) {
    AddResult r = waiting_pids_.count(req.pid) ? AddResult::Behind : add_all_stripe_bios(req);
    if (r == AddResult::Added) return;
    if (r == AddResult::Overlap)
        counters_.overlap_waits++;
    else
        cache_.counters.waits++;
    waiting_pids_[req.pid]++;
    waiting_.push_back(std::move(req));
}

// stripe_bio_overlaps(): a piece overlapping one still queued on the same
// member (dev->towrite / toread, not yet drained into the stripe's pages)
// waits (R5_Overlap) until the stripe takes that one on; so does any
// request to rows a discard is being applied to.
bool Raid5Device::stripe_bio_overlaps(const StripeHead* sh, const StripeRequest& req) const {
    const std::vector<StripeEntry>& queued = req.write ? sh->towrite : sh->toread;
    for (const StripeEntry& e : req.entries)
        for (const StripeEntry& q : queued)
            if (q.disk == e.disk && q.offset < e.offset + e.sectors &&
                e.offset < q.offset + q.sectors)
                return true;
    return false;
}

// find_get_stripe() or get_free_stripe(), then add_all_stripe_bios(); a
// REQ_SYNC bio makes the stripe STRIPE_PREREAD_ACTIVE (make_stripe_request),
// so its pre-reads are not delayed. False when the request must wait.
Raid5Device::AddResult Raid5Device::add_all_stripe_bios(const StripeRequest& req) {
    for (const DiscardRange& d : discards_)
        if (req.row >= d.begin && req.row < d.end) return AddResult::Overlap;
    if (const StripeHead* cached = cache_.lookup(req.row);
        cached && stripe_bio_overlaps(cached, req))
        return AddResult::Overlap;
    StripeHead* sh = cache_.find_get_stripe(req.row);
    if (!sh) {
        if (!cache_.can_get_free_stripe(req.row)) {
            cache_.set_blocked(true);  // R5_INACTIVE_BLOCKED
            return AddResult::NoHead;
        }
        sh = cache_.get_free_stripe(req.row, req.pd_idx);
    }
    std::vector<StripeEntry>& queue = req.write ? sh->towrite : sh->toread;
    queue.insert(queue.end(), req.entries.begin(), req.entries.end());
    sh->delayed = false;  // clear_bit(STRIPE_DELAYED)
    if (req.sync && !sh->preread_active) {
        sh->preread_active = true;
        cache_.preread_active++;
    }
    queue_stripe(sh);
    return AddResult::Added;
}

// wake_up(&conf->wait_for_stripe) / wake_up_bit(R5_Overlap): each blocked
// submitter retries its first waiting request and goes on while they are
// taken; then the discards waiting for busy stripes. Not re-entered: a wake
// from inside (a discard completing at once) makes the loop run again.
void Raid5Device::wake_stripe_waiters() {
    if (waiting_.empty() && waiting_discards_.empty()) {
        cache_.set_blocked(false);
        return;
    }
    if (waking_) {
        wake_again_ = true;
        return;
    }
    waking_ = true;
    do {
        wake_again_ = false;
        bool no_head = false;
        std::unordered_map<uint32_t, bool> stuck;  // submitters whose first request still waits
        for (auto it = waiting_.begin();
             it != waiting_.end() && stuck.size() < waiting_pids_.size();) {
            if (stuck.count(it->pid)) {
                ++it;
                continue;
            }
            AddResult r = add_all_stripe_bios(*it);
            if (r != AddResult::Added) {
                no_head |= r == AddResult::NoHead;
                stuck[it->pid] = true;
                ++it;
                continue;
            }
            if (--waiting_pids_[it->pid] == 0) waiting_pids_.erase(it->pid);
            it = waiting_.erase(it);
        }
        cache_.set_blocked(no_head);
        while (!waiting_discards_.empty() && discard_may_start(waiting_discards_.front())) {
            DiscardRange d = waiting_discards_.front();
            waiting_discards_.pop_front();
            start_discard(d);
        }
    } while (wake_again_);
    waking_ = false;
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
// or has nothing left to do. Writes queued while the head pre-reads join
// the pending write (they stay on dev->towrite until ops_run_biodrain).
void Raid5Device::handle_stripe(StripeHead* sh) {
    using Phase = StripeHead::Phase;
    sh->handling = true;
    if (sh->phase == Phase::PreRead && sh->pending && !sh->error && !array_failed())
        handle_stripe_dirtying(sh);  // what the new writes need read, beside the reads in flight
    while (!sh->pending) {
        if (sh->phase == Phase::DegradedRead) {
            // A member bio that failed made its member Faulty (stripe_io_endio); while
            // the array survives, the read is redone without that member.
            if (sh->error && !array_failed()) {
                counters_.stripe_retries++;
                sh->toread.insert(sh->toread.begin(), sh->reading.begin(), sh->reading.end());
                sh->reading.clear();
                sh->error = 0;
                sh->phase = Phase::Idle;
                continue;
            }
            end_degraded_read(sh);
            sh->phase = Phase::Idle;
        } else if (sh->phase == Phase::PreRead) {
            // The pre-reads are done: decide again with every write queued now.
            if (sh->error && !array_failed()) counters_.stripe_retries++;
            if (!array_failed()) sh->error = 0;
            sh->phase = Phase::Idle;
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
// the cache) nor units being read (R5_LOCKED); a unit on the failed member
// cannot be read (2 * disks). md prefers reconstruct-write on a tie
// (rmw_level = PARITY_ENABLE_RMW). The reads start at once when the stripe
// is STRIPE_PREREAD_ACTIVE; otherwise it is STRIPE_DELAYED (returns false;
// its writes stay queued). With nothing to read and nothing being read,
// schedule_reconstruction(). When the choice needs the failed member's old
// unit, every other unit is read and the missing one computed from them
// (fetch_block, ops_run_compute5).
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

    uint64_t rmw_reads = (written | parity) & ~sh->uptodate & ~sh->locked;
    uint64_t rcw_reads = data & ~overwritten & ~sh->uptodate & ~sh->locked;
    auto cost = [&](uint64_t reads) {
        return std::popcount(reads & ~failed) + 2 * int(n) * std::popcount(reads & failed);
    };
    int rmw = cost(rmw_reads), rcw = cost(rcw_reads);
    if (rmw != 0 && rcw != 0) {
        uint64_t reads = rmw < rcw ? rmw_reads : rcw_reads;
        if (reads & failed) {
            reads = all & ~failed & ~sh->uptodate & ~sh->locked;
            if (!reads && !sh->locked) {
                compute_failed_unit(sh);
                return true;  // decide again, the failed unit up to date
            }
        }
        if (!reads) return true;  // wait for the units being read
        // Only writes without REQ_SYNC (writeback) get here: O_DIRECT writes made
        // the stripe PREREAD_ACTIVE, and it stays so until its reconstruction
        // starts, so writes joining it are not delayed either. (A model that
        // froze a head's writes when its pre-reads started delayed every such
        // follower once per row: delayed_stripes equalled the misses.)
        if (!sh->preread_active) {
            if (!sh->delayed) counters_.delayed_stripes++;
            sh->delayed = true;
            return false;
        }
        sh->delayed = false;
        sh->phase = StripeHead::Phase::PreRead;
        sh->read_mask |= reads;
        counters_.preread_reads += uint64_t(std::popcount(reads));
        submit_member_io(sh, Op::Read, reads);
        return true;
    }
    if (sh->locked) return true;  // s->locked == 0: the pre-reads must be back
    // schedule_reconstruction(sh, s, rcw == 0, 0)
    sh->delayed = false;
    sh->mode = rcw == 0 ? Mode::Rcw : Mode::Rmw;
    if (sh->mode == Mode::Rmw) {
        counters_.rmw++;
    } else if ((data & ~overwritten) == 0 && !sh->read_mask) {
        // STRIPE_FULL_WRITE: every data unit overwritten, nothing read.
        counters_.full_stripe_writes++;
        sh->full_write = true;
        cache_.pending_full_writes++;
    } else {
        counters_.rcw++;
    }
    if (failed) counters_.degraded_writes++;
    sh->read_mask = 0;
    sh->written = written;
    sh->write_mask = (written | parity) & ~failed;
    sh->writing.swap(sh->towrite);
    sh->towrite.clear();
    sh->phase = StripeHead::Phase::Write;
    reconstruct_and_write(sh);
    return true;
}

// ops_run_compute5(): the failed member's unit as the XOR of all the others.
void Raid5Device::compute_failed_unit(StripeHead* sh) {
    uint32_t missing = uint32_t(std::countr_zero(failed_mask_));
    uint8_t* page = sh->page(missing);
    memset(page, 0, kRaid5StripeBytes);
    for (uint32_t i = 0; i < members_.size(); i++)
        if (i != missing) xor_page(page, sh->page(i));
    sh->uptodate |= bit(missing);
}

// ops_run_prexor5() / ops_run_biodrain() / ops_run_reconstruct5(), then
// ops_run_io() for the data and parity units. Every page of the stripe is
// up to date afterwards (a read-modify-write: the units it touched). The
// writes being drained, requests that overlapped them may queue (R5_Overlap
// cleared) and the stripe stops being STRIPE_PREREAD_ACTIVE (handle_stripe,
// once the reconstruction is done: later writes need their own pre-read).
void Raid5Device::reconstruct_and_write(StripeHead* sh) {
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
    if (sh->mode == StripeHead::Mode::Rmw) {
        for (uint32_t i = 0; i < n; i++)
            if (sh->written & bit(i)) xor_page(p, sh->page(i));  // prexor: take the old data out
        biodrain();
        for (uint32_t i = 0; i < n; i++)
            if (sh->written & bit(i)) xor_page(p, sh->page(i));  // put the new data in
        sh->uptodate |= sh->written | bit(sh->pd_idx);
    } else {
        biodrain();
        memset(p, 0, kRaid5StripeBytes);
        for (uint32_t i = 0; i < n; i++)
            if (i != sh->pd_idx) xor_page(p, sh->page(i));
        sh->uptodate = all;
    }
    clear_preread_active(sh);
    submit_member_io(sh, Op::Write, sh->write_mask & ~failed_mask_);
    wake_stripe_waiters();
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
}

// ops_run_io(): one 4 KiB bio per member in the mask, traced as a remap
// from the unit's virtual sector (0 for parity, as raid5_compute_blocknr).
void Raid5Device::submit_member_io(StripeHead* sh, Op op, uint64_t member_mask) {
    uint32_t pid = 0;
    for (const auto* reqs : {&sh->writing, &sh->reading, &sh->towrite})
        if (!reqs->empty()) {
            pid = reqs->front().bio->pid;
            break;
        }
    sh->pending += uint32_t(std::popcount(member_mask));  // before any can complete
    sh->locked |= member_mask;                            // R5_LOCKED
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
    sh->locked &= ~bit(member);
    self->layer_.bios().put(bio);
    if (--sh->pending == 0) self->queue_stripe(sh);
}

}  // namespace mdsplit
