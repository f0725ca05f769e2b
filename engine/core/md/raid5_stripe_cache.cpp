#include "core/md/raid5_stripe_cache.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace mdsplit {

Raid5StripeCache::Raid5StripeCache(Raid5Device* conf, uint32_t disks, uint32_t size)
    : conf_(conf), disks_(disks), size_(size) {
    // grow_one_stripe(): stripe k gets hash_lock_index k % NR_STRIPE_HASH_LOCKS.
    for (uint32_t h = 0; h < kHashLocks; h++)
        quota_[h] = size / kHashLocks + (h < size % kHashLocks);
}

Raid5StripeCache::~Raid5StripeCache() {
    for (Raid5StripeHead* sh : all_) {
        free(sh->pages);
        delete sh;
    }
}

size_t Raid5StripeCache::active() const { return all_.size() - inactive_count_; }

void Raid5StripeCache::unlink(Raid5StripeHead* sh) {
    using List = Raid5StripeHead::List;
    switch (sh->list) {
        case List::None:
            return;
        case List::Inactive:
            inactive_[sh->hash].erase(sh);
            inactive_count_--;
            break;
        case List::Handle:
            handle_.erase(sh);
            break;
        case List::Hold:
            hold_.erase(sh);
            break;
        case List::Delayed:
            delayed_.erase(sh);
            break;
    }
    sh->list = List::None;
}

Raid5StripeHead* Raid5StripeCache::find_get_stripe(sector_t sector) {
    auto it = hash_.find(sector);
    if (it == hash_.end()) return nullptr;
    Raid5StripeHead* sh = it->second;
    counters.hits++;
    if (sh->list == Raid5StripeHead::List::Inactive || sh->list == Raid5StripeHead::List::Delayed)
        unlink(sh);
    return sh;
}

const Raid5StripeHead* Raid5StripeCache::lookup(sector_t sector) const {
    auto it = hash_.find(sector);
    return it == hash_.end() ? nullptr : it->second;
}

bool Raid5StripeCache::any_busy(sector_t begin, sector_t end) const {
    for (const auto& [sector, sh] : hash_) {
        if (sector < begin || sector >= end) continue;
        if (sh->phase != Raid5StripeHead::Phase::Idle || sh->pending || sh->handling ||
            !sh->toread.empty() || !sh->towrite.empty() ||
            (sh->list != Raid5StripeHead::List::Inactive &&
             sh->list != Raid5StripeHead::List::None))
            return true;
    }
    return false;
}

bool Raid5StripeCache::can_get_free_stripe(sector_t sector) const {
    uint32_t h = hash_of(sector);
    if (inactive_[h].empty() && allocated_[h] >= quota_[h]) return false;
    // is_inactive_blocked(): once blocked, wait for 3/4 of the heads to go.
    return !blocked_ || active() < size_t(size_) * 3 / 4;
}

Raid5StripeHead* Raid5StripeCache::get_free_stripe(sector_t sector, uint32_t pd_idx) {
    uint32_t h = hash_of(sector);
    Raid5StripeHead* sh;
    if (allocated_[h] < quota_[h]) {
        // A head grow_stripes() made but nobody used yet: first on the list.
        sh = new Raid5StripeHead;
        void* p = nullptr;
        if (posix_memalign(&p, 4096, disks_ * kRaid5StripeBytes)) {
            delete sh;
            throw std::bad_alloc();
        }
        memset(p, 0, disks_ * kRaid5StripeBytes);
        sh->pages = static_cast<uint8_t*>(p);
        sh->conf = conf_;
        sh->hash = h;
        allocated_[h]++;
        all_.push_back(sh);
    } else {
        sh = inactive_[h].front();
        unlink(sh);
        remove_hash(sh);
    }
    counters.misses++;
    // init_stripe(): a new row, no page up to date.
    sh->sector = sector;
    sh->pd_idx = pd_idx;
    sh->uptodate = 0;
    sh->phase = Raid5StripeHead::Phase::Idle;
    sh->pending = 0;
    sh->locked = sh->read_mask = 0;
    sh->error = 0;
    sh->handling = sh->delayed = sh->preread_active = sh->full_write = false;
    sh->io_started = sh->forget_when_idle = false;
    sh->hashed = true;
    hash_.emplace(sector, sh);
    return sh;
}

void Raid5StripeCache::remove_hash(Raid5StripeHead* sh) {
    if (!sh->hashed) return;
    hash_.erase(sh->sector);
    sh->hashed = false;
}

void Raid5StripeCache::release_inactive(Raid5StripeHead* sh) {
    unlink(sh);
    sh->list = Raid5StripeHead::List::Inactive;
    inactive_[sh->hash].push_back(sh);
    inactive_count_++;
}

void Raid5StripeCache::queue_handle(Raid5StripeHead* sh) {
    if (sh->list == Raid5StripeHead::List::Handle || sh->list == Raid5StripeHead::List::Hold)
        return;
    unlink(sh);
    sh->list = Raid5StripeHead::List::Handle;
    handle_.push_back(sh);
}

void Raid5StripeCache::queue_delayed(Raid5StripeHead* sh) {
    unlink(sh);
    sh->list = Raid5StripeHead::List::Delayed;
    delayed_.push_back(sh);
}

void Raid5StripeCache::activate_delayed() {
    if (preread_active >= kIoThreshold) return;
    while (!delayed_.empty()) {
        Raid5StripeHead* sh = delayed_.front();
        unlink(sh);
        sh->delayed = false;
        if (!sh->preread_active) {
            sh->preread_active = true;
            preread_active++;
        }
        sh->list = Raid5StripeHead::List::Hold;
        hold_.push_back(sh);
    }
}

Raid5StripeHead* Raid5StripeCache::get_priority_stripe() {
    Raid5StripeHead* sh = nullptr;
    if (!handle_.empty()) {
        sh = handle_.front();
        if (hold_.empty()) {
            bypass_count_ = 0;
        } else if (!sh->io_started) {
            if (hold_.front() == last_hold_) {
                bypass_count_++;
            } else {
                last_hold_ = hold_.front();
                bypass_count_ = std::max(0, bypass_count_ - kBypassThreshold);
            }
        }
    } else if (!hold_.empty() && (bypass_count_ > kBypassThreshold || pending_full_writes == 0)) {
        sh = hold_.front();
        bypass_count_ = std::max(0, bypass_count_ - kBypassThreshold);
    }
    if (sh) unlink(sh);
    return sh;
}

void Raid5StripeCache::forget_pages(sector_t begin, sector_t end) {
    for (auto& [sector, sh] : hash_) {
        if (sector < begin || sector >= end) continue;
        sh->uptodate = 0;
        if (sh->phase != Raid5StripeHead::Phase::Idle || sh->pending) sh->forget_when_idle = true;
    }
}

}  // namespace mdsplit
