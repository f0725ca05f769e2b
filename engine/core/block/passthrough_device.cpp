#include "core/block/passthrough_device.h"

namespace mdsplit {

PassthroughDevice::PassthroughDevice(BlockLayer& layer, std::string name, uint32_t devt,
                                     MemberQueue& member)
    : BlockDevice(std::move(name), devt), layer_(layer), member_(member) {
    capacity_ = member.capacity();
    max_sectors_ = member.max_sectors();  // blk_stack_limits()
    logical_block_size_ = member.logical_block_size();
}

void PassthroughDevice::trace_bio_complete(const Bio* bio) {
    layer_.trace_bio(TraceAction::Complete, this, bio);
}

// dm's clone_and_map: a clone per bio, completing into the original after
// bio-based accounting (bio_start_io_acct / bio_end_io_acct).
void PassthroughDevice::submit_bio(Bio* bio) {
    uint64_t now = layer_.loop().now();
    stats_.start(now);
    Bio* clone = layer_.bios().copy(bio);
    clone->dev = &member_;
    clone->start_ns = now;
    clone->private_data = bio;
    clone->end_io = &PassthroughDevice::clone_endio;
    clone->tag = reinterpret_cast<uint64_t>(this);
    layer_.trace_remap(clone, devt_, bio->sector);
    layer_.submit_bio_noacct(clone);
}

void PassthroughDevice::clone_endio(Bio* clone) {
    auto* self = reinterpret_cast<PassthroughDevice*>(clone->tag);
    self->layer_.end_clone(self->stats_, clone);
}

}  // namespace mdsplit
