// A bio-based virtual device over one member, like dm-linear: it accounts
// each bio, remaps it (trace A) to the member and resubmits it. It does not
// split to its own limit (dm only splits abnormal I/O); the member does.
#pragma once

#include "core/block/block_layer.h"
#include "core/block/member_queue.h"

namespace mdsplit {

class PassthroughDevice final : public BlockDevice {
public:
    PassthroughDevice(BlockLayer& layer, std::string name, uint32_t devt, MemberQueue& member);
    void submit_bio(Bio* bio) override;
    bool stacked() const override { return true; }
    void trace_bio_complete(const Bio* bio) override;

private:
    static void clone_endio(Bio* clone);
    BlockLayer& layer_;
    MemberQueue& member_;
};

}  // namespace mdsplit
