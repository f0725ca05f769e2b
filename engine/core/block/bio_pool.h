// Allocation of bios (bio_alloc / bio_put / bio_split).
#pragma once

#include "base/object_pool.h"
#include "core/block/bio.h"
#include "core/block/block_device.h"

namespace mdsplit {

class BioPool {
public:
    Bio* alloc() {
        Bio* b = pool_.get();
        *b = Bio{};
        b->pool = this;
        return b;
    }
    void put(Bio* b) { pool_.put(b); }
    size_t outstanding() const { return pool_.outstanding(); }

    // bio_split(): returns a new bio for the first `sectors` of `bio`,
    // chained to it; `bio` is advanced past them. The caller traces X.
    Bio* split(Bio* bio, uint32_t sectors) {
        Bio* front = alloc();
        front->op = bio->op;
        // bio_split() keeps BIO_TRACE_COMPLETION on the front: no second Q.
        front->flags = uint16_t(bio->flags & ~kBioAccounted);
        front->sector = bio->sector;
        front->nr_sectors = sectors;
        front->dev = bio->dev;
        front->data = bio->data;
        front->pid = bio->pid;
        bio->sector += sectors;
        bio->nr_sectors -= sectors;
        if (bio->data) bio->data += uint64_t(sectors) << kSectorShift;
        bio_chain(front, bio);
        return front;
    }

    // bio_alloc_clone() without chaining: same range, data, op and submitter;
    // the caller sets where it goes and how it completes.
    Bio* copy(const Bio* src) {
        Bio* c = alloc();
        c->op = src->op;
        c->flags = uint16_t(src->flags & kBioSync);
        c->sector = src->sector;
        c->nr_sectors = src->nr_sectors;
        c->dev = src->dev;
        c->data = src->data;
        c->pid = src->pid;
        return c;
    }

    // bio_alloc_clone() + bio_chain(): a clone that completes into `parent`.
    Bio* clone(Bio* parent) {
        Bio* c = copy(parent);
        bio_chain(c, parent);
        return c;
    }

private:
    ObjectPool<Bio> pool_;
};

// bio_endio(): completes a bio once its own I/O and all chained children are
// done, walking up the chain; chained children are returned to their pool.
inline void bio_endio(Bio* bio) {
    for (;;) {
        if (--bio->remaining > 0) return;
        if ((bio->flags & kBioTraced) && bio->dev) {
            bio->flags &= uint16_t(~kBioTraced);
            bio->dev->trace_bio_complete(bio);
        }
        Bio* parent = bio->parent;
        if (!parent) {
            if (bio->end_io) bio->end_io(bio);
            return;
        }
        // bio_chain_endio(): the first error wins; resid adds up.
        if (bio->error && !parent->error) parent->error = bio->error;
        parent->resid += bio->resid;
        if (bio->end_io)
            bio->end_io(bio);  // a clone's own hook, if any
        else if (bio->pool)
            bio->pool->put(bio);
        bio = parent;
    }
}

}  // namespace mdsplit
