// The device stack as described by a TOML file (ARCHITECTURE.md, "The TOML
// shape"). Plain data: the loader (config_loader.h) fills and validates it,
// the core builds devices from it. Sizes are bytes, times nanoseconds.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mdsplit {

enum class DeviceKind { Passthrough, Raid5 };
enum class SplitOrder { Legacy, Fixed };
// Order a plug dispatches its requests in: LIFO before Linux 6.13 ("block:
// don't reorder requests in blk_add_rq_to_plug"), FIFO since.
enum class PlugOrder { Fifo, Lifo };
enum class SchedulerKind { None, Bfq, MqDeadline };
enum class BackendKind { IoUring, Ram, Null };
// md's four RAID5 layouts (drivers/md/raid5.h ALGORITHM_*).
enum class Raid5Layout { LeftAsymmetric, RightAsymmetric, LeftSymmetric, RightSymmetric };
enum class BioPolicy { Original, Align, MaxSectors };
enum class Contiguity { None, Pagemap, Distribution, Pattern };
enum class GroupCounting { Legacy, Fixed };
enum class BufferedVariant { PreC8d317aa, C8d317aa, ForcedRa };

// A timing model: how long a device takes to serve one request
// (timing_model.h has the formula).
struct TimingModelConfig {
    std::string name;
    uint64_t command_ns = 0;         // fixed cost per command
    uint64_t bandwidth_bps = 0;      // transfer bandwidth, bytes/s (0 = infinite)
    uint64_t random_penalty_ns = 0;  // media time lost when a request breaks a sequential stream
    uint64_t random_command_ns = 0;  // extra command time (overlapped) for a non-sequential request
    // random_penalty applies only after a request of at least this size (the
    // drive was prefetching behind a large read); 0 = after any request.
    uint64_t prefetch_threshold_bytes = 0;
    // optional: how far the drive's prefetch reaches past a streaming read
    // (one of at least prefetch_threshold): a read starting at most this
    // many bytes after the previous request ended is served from it, as a
    // sequential read. 0 = no reach (only the next byte is sequential);
    // kPrefetchWindowRequest = the previous request's size.
    uint64_t prefetch_window_bytes = 0;
    static constexpr uint64_t kPrefetchWindowRequest = ~uint64_t(0);
    uint32_t parallelism = 1;          // requests served at once (channels / NCQ)
    uint64_t write_command_ns = 0;     // optional: per-command cost for writes (0 = command_ns)
    uint64_t write_bandwidth_bps = 0;  // optional: write bandwidth (0 = bandwidth_bps)
    // optional: random_penalty for writes (absent = random_penalty_ns)
    uint64_t write_random_penalty_ns = ~uint64_t(0);
    // optional: mean of an exponentially distributed extra command time (a
    // real drive's latency varies: garbage collection, cache flushes, die
    // conflicts); drawn from a fixed-seed generator, so runs repeat.
    uint64_t jitter_ns = 0;
    // optional: which fixed sequence the jitter draws (0 = the default one);
    // a run over several seeds gives a figure's spread over the draws.
    uint64_t jitter_seed = 0;
    // optional: the data is striped over the `parallelism` channels (flash
    // dies) in units of this many bytes, and a request's command phase runs
    // on the die that holds its first byte, waiting if that die is busy
    // (0 = on whichever channel is free first).
    uint64_t die_stripe_bytes = 0;
    std::string description;  // optional free text from the TOML
};

// Faults injected into one member's requests ([members.faults]; the
// semantics are in backends/fault_injector.h).
struct FaultConfig {
    std::vector<uint64_t> fail_nth;                           // request numbers, 1-based
    std::vector<std::pair<uint64_t, uint64_t>> fail_sectors;  // member sectors [start, end)
    double fail_probability = 0;
    uint64_t seed = 1;
    uint64_t spike_every = 0;            // latency_spike.every (0: no spikes)
    uint64_t spike_extra_ns = 0;         // latency_spike.extra
    std::optional<uint64_t> fail_at_ns;  // since the stack was opened
};

struct MemberConfig {
    std::string path;   // absolute after loading (relative resolves against the stack file)
    uint64_t size = 0;  // bytes; 0 = use the existing file/device size
    BackendKind backend = BackendKind::IoUring;
    std::optional<TimingModelConfig> model;
    uint64_t max_sectors_bytes = 512 * 1024;  // the member's own request size limit
    uint32_t queue_depth = 64;                // requests in flight at the backend
    uint32_t logical_block_size = 512;
    bool failed = false;
    bool direct = true;  // open the member with O_DIRECT
    bool grow = false;   // an existing file smaller than `size` may be extended to it
    bool force = false;  // write over a file-system / RAID / LVM signature (device safety)
    std::optional<FaultConfig> faults;  // [members.faults]
};

struct DeviceConfig {
    DeviceKind kind = DeviceKind::Passthrough;
    uint64_t chunk_bytes = 64 * 1024;
    Raid5Layout layout = Raid5Layout::LeftSymmetric;
    uint64_t max_sectors_bytes = 1024 * 1024;  // the virtual device's own limit
    SplitOrder split_order = SplitOrder::Fixed;
    PlugOrder plug_order = PlugOrder::Fifo;
    // Slow motion: every modelled time of the members is multiplied by this
    // (bandwidths divided), so that a stack of fast devices stays model-bound
    // on a small machine. Rates in fio's output are then 1/time_scale of the
    // modelled device's; the sidecar records the factor.
    double time_scale = 1.0;
    // time_scale = "auto": the fio engine picks the smallest factor this host
    // keeps up with at setup (stack/time_scale_auto.h).
    bool time_scale_auto = false;
    SchedulerKind scheduler = SchedulerKind::None;
    // raid5: md's module parameter of that name. Off (md's default), the
    // array takes no discards (EOPNOTSUPP); on, whole stripes are discarded
    // on every member (make_discard_request), trusting discarded chunks to
    // read back as zeroes so that parity stays right.
    bool devices_handle_discard_safely = false;
    // raid5: /sys/block/mdX/md/stripe_cache_size, the number of 4 KiB stripe
    // heads md keeps (NR_STRIPES = 256; raid5_set_cache_size() takes 17..32768).
    uint32_t stripe_cache_size = 256;
};

struct BioConfig {
    BioPolicy policy = BioPolicy::Original;
    uint64_t align_bytes = 256 * 1024;
    Contiguity contiguity = Contiguity::None;
    // Contiguity::Distribution: run lengths in pages with weights.
    std::vector<std::pair<uint32_t, double>> run_pages;
    // Contiguity::Distribution: the generator's seed (contiguity.seed).
    uint64_t run_seed = 1;
    // Contiguity::Pattern: run lengths in pages, repeated from the buffer start.
    std::vector<uint32_t> run_pattern;
};

struct BfqConfig {
    GroupCounting group_counting = GroupCounting::Fixed;
    uint64_t slice_idle_ns = 8'000'000;
    bool low_latency = false;
    bool strict_guarantees = false;
    // bfq_user_max_budget: 0 (the kernel's default) autotunes it from the
    // estimated peak rate (core/block/bfq_peak_rate.h); else user-set.
    uint32_t max_budget_sectors = 0;
    uint64_t timeout_sync_ns = 125'000'000;
};

struct PageCacheConfig {
    uint64_t size_bytes = 1ull << 30;
    uint32_t ra_kb = 128;
    // Large folios (page_cache_ra_order()): readahead allocates folios of
    // this many KiB, and a read bio holds up to BIO_MAX_VECS of them, as
    // iomap_readahead()'s does (one bio_vec per folio). 4 = single pages.
    uint32_t folio_kb = 4;
    bool rasync = true;
    BufferedVariant variant = BufferedVariant::ForcedRa;
};

// Modelled CPU costs of each step of the buffered path ([cpu.buffered]),
// used only on the virtual clock. Real
// runs pay what the steps really cost, and measure_buffered_costs()
// measures them for the virtual clock. The defaults (deterministic; the one
// statement of seed 003's host, [machines.seed003] in jobs/machines.toml
// points here and says where each comes from) are fitted to the seed-003 table (Hao Xu, 5.9-rc8,
// ext4 on NVMe, 4k randread, readahead off), where the submitting thread is the bottleneck at depth
// >= 32:
//   c8d317aa, no rasync (315k): fio 1.0 + lookup 0.1 + alloc 0.3 + punt 1.9       = 3.3 us
//   c8d317aa, rasync    (195k): fio 1.0 + 0.1 + 0.3 + arm 0.1 + 0.1 + readpage 3.0
//                               + task_work 0.2 + 0.1 + copy 0.3 + cqe 0.1        = 5.3 us
//   forced-ra, rasync   (187k): the same steps in another order + readahead 0.2  = 5.5 us
//   forced-ra, no rasync(156k): fio 1.0 + 0.1 + alloc 0.3 + ra 0.2 + readpage 3.0
//                               + punt 1.9                                        = 6.5 us
// (readpage = bio_submit 2.8 + 0.2 per page). At depth 1 the worker path
// adds punt + two wake-ups + copy, ~6 us on ~80 us, as the table's 7%.
struct BufferedCosts {
    uint64_t fio_submit_ns = 700;    // fio's own work per I/O issued (the workload driver)
    uint64_t fio_complete_ns = 300;  // ... per I/O reaped
    uint64_t lookup_ns = 100;        // find_get_page() and the attempt around it, per page
    uint64_t page_alloc_ns = 300;    // page_cache_alloc() + add_to_page_cache_lru()
    uint64_t bio_submit_ns = 2800;   // ->readpage(s)/read_pages(): one bio down to the driver
    uint64_t bio_page_ns = 200;      // ... per page in it
    // One readahead window: page_cache_sync_readahead() ->
    // force_page_cache_readahead() -> __do_page_cache_readahead() and the
    // blk_start_plug()/blk_finish_plug() of read_pages() (mm/readahead.c,
    // 5.9); a plain ->readpage() (generic_file_buffered_read) skips it.
    // Not fitted (only forced-ra opens a window, so a fit on its figures
    // would be a per-variant constant): bounded by the thread's perf
    // profile (1) of forced-ra, whose list stops at 0.65 % of the
    // submitter's 5.3 us with none of the path's ~6 functions in it
    // (page_cache_sync_readahead .. blk_finish_plug): each < 35 ns, the
    // window <= 0.2 us. The centre of [0, 0.2] us; `harness sweep
    // buffered` sweeps the range.
    uint64_t readahead_ns = 100;
    uint64_t copy_4k_ns = 300;     // copy_to_user()/copy_from_user() of 4 KiB
    uint64_t arm_ns = 100;         // io_rw_should_retry(): set up the page-wait callback
    uint64_t task_work_ns = 200;   // io_async_buf_func() -> task_work -> resubmit
    uint64_t punt_ns = 1900;       // io_queue_async_work(): prep + enqueue + wake a worker
    uint64_t wakeup_ns = 2000;     // a sleeping worker running again (not submitter CPU)
    uint64_t cqe_ns = 100;         // io_cqring_add_event()
    uint64_t dirty_page_ns = 100;  // set_page_dirty + balance_dirty_pages accounting
    uint32_t cpus = 16;            // io-wq workers <= min(iodepth, 4 x cpus)
};

// BufferedCosts' fields by their [cpu.buffered] key (a duration each; the
// bindings' costs dicts name them KEY_ns).
struct BufferedCostKey {
    std::string_view key;
    uint64_t BufferedCosts::*field;
};
inline constexpr BufferedCostKey kBufferedCostKeys[] = {
    {"fio_submit", &BufferedCosts::fio_submit_ns},
    {"fio_complete", &BufferedCosts::fio_complete_ns},
    {"lookup", &BufferedCosts::lookup_ns},
    {"page_alloc", &BufferedCosts::page_alloc_ns},
    {"bio_submit", &BufferedCosts::bio_submit_ns},
    {"bio_page", &BufferedCosts::bio_page_ns},
    {"readahead", &BufferedCosts::readahead_ns},
    {"copy_4k", &BufferedCosts::copy_4k_ns},
    {"arm", &BufferedCosts::arm_ns},
    {"task_work", &BufferedCosts::task_work_ns},
    {"punt", &BufferedCosts::punt_ns},
    {"wakeup", &BufferedCosts::wakeup_ns},
    {"cqe", &BufferedCosts::cqe_ns},
    {"dirty_page", &BufferedCosts::dirty_page_ns},
};
// The largest [cpu.buffered] step cost the loader takes (far above any
// step's few us) and the most CPUs (x86-64's CONFIG_NR_CPUS limit; io-wq's
// bound, 4 x cpus, must also fit its 32 bits).
inline constexpr uint64_t kMaxBufferedCostNs = 1'000'000;
inline constexpr uint32_t kMaxBufferedCpus = 8192;

// The submitting host's CPU as the virtual clock models it ([cpu]). Real-
// clock runs pay what the CPU really takes and ignore it.
struct CpuConfig {
    // The submitting task's time per ->submit_bio call of its
    // __submit_bio_noacct loop (md_submit_bio of one piece with its split
    // and clone, blk_mq_submit_bio of one member bio with its plug work):
    // later calls happen later, so lower devices see the bios arrive over
    // time. 0 = every call at one instant. In device time (time_scale
    // stretches it with the devices).
    uint64_t submit_bio_ns = 0;
    // The submitting task's time per request a plug flush hands to a
    // driver (blk_mq_flush_plug_list -> blk_mq_dispatch_list: the
    // elevator's insert, the hardware queue's run and the driver's
    // ->queue_rq): a flush of n requests keeps the task n times this long,
    // and each queue's batch reaches its driver once the task has done the
    // requests before it and the batch's first. 0 = the whole flush at one
    // instant. In device time.
    uint64_t dispatch_ns = 0;
    // [cpu.buffered]: the buffered path's steps, and fio's own work per I/O
    // of every job (fio_submit_ns, fio_complete_ns) on the virtual clock.
    BufferedCosts buffered;
};
// The largest [cpu] cost (submit_bio, dispatch) the loader takes: far above
// any CPU's (a few us).
inline constexpr uint64_t kMaxSubmitBioNs = 100'000;

struct StackConfig {
    std::string source;  // the file it came from (for messages), empty for inline text
    DeviceConfig device;
    std::vector<MemberConfig> members;
    BioConfig bio;
    BfqConfig bfq;
    PageCacheConfig page_cache;
    CpuConfig cpu;
    std::map<std::string, TimingModelConfig> models;  // the file's own [models.NAME]
    // Whether anything takes modelled time: a member's timing model or
    // [cpu]. Without, the real clock has no model to be late against.
    bool models_time() const {
        for (const MemberConfig& m : members)
            if (m.model) return true;
        return cpu.submit_bio_ns || cpu.dispatch_ns;
    }
};

// ---------------------------------------------------------------------------
// Enum names as written in TOML (for the loader, messages, statistics, traces)

template <typename Enum>
struct EnumName {
    std::string_view name;
    Enum value;
};

constexpr EnumName<DeviceKind> kDeviceKinds[] = {
    {"passthrough", DeviceKind::Passthrough},
    {"raid5", DeviceKind::Raid5},
};
constexpr EnumName<PlugOrder> kPlugOrders[] = {
    {"fifo", PlugOrder::Fifo},
    {"lifo", PlugOrder::Lifo},
};
constexpr EnumName<SplitOrder> kSplitOrders[] = {
    {"legacy", SplitOrder::Legacy},
    {"fixed", SplitOrder::Fixed},
};
constexpr EnumName<SchedulerKind> kSchedulers[] = {
    {"none", SchedulerKind::None},
    {"bfq", SchedulerKind::Bfq},
    {"mq-deadline", SchedulerKind::MqDeadline},
};
constexpr EnumName<BackendKind> kBackends[] = {
    {"io_uring", BackendKind::IoUring},
    {"ram", BackendKind::Ram},
    {"null", BackendKind::Null},
};
constexpr EnumName<Raid5Layout> kRaid5Layouts[] = {
    {"left-asymmetric", Raid5Layout::LeftAsymmetric},
    {"right-asymmetric", Raid5Layout::RightAsymmetric},
    {"left-symmetric", Raid5Layout::LeftSymmetric},
    {"right-symmetric", Raid5Layout::RightSymmetric},
};
constexpr EnumName<BioPolicy> kBioPolicies[] = {
    {"original", BioPolicy::Original},
    {"align", BioPolicy::Align},
    {"max_sectors", BioPolicy::MaxSectors},
};
// Contiguity::Distribution is written as a table, not a name.
constexpr EnumName<Contiguity> kContiguityNames[] = {
    {"none", Contiguity::None},
    {"pagemap", Contiguity::Pagemap},
    {"distribution", Contiguity::Distribution},
    {"pattern", Contiguity::Pattern},
};
constexpr EnumName<GroupCounting> kGroupCountings[] = {
    {"legacy", GroupCounting::Legacy},
    {"fixed", GroupCounting::Fixed},
};
constexpr EnumName<BufferedVariant> kBufferedVariants[] = {
    {"pre-c8d317aa", BufferedVariant::PreC8d317aa},
    {"c8d317aa", BufferedVariant::C8d317aa},
    {"forced-ra", BufferedVariant::ForcedRa},
};

template <typename Enum, size_t N>
inline const char* name_of(const EnumName<Enum> (&names)[N], Enum value) {
    for (const auto& entry : names) {
        if (entry.value == value) {
            return entry.name.data();  // the literals are NUL-terminated
        }
    }
    return "?";
}

inline const char* device_kind_name(DeviceKind kind) { return name_of(kDeviceKinds, kind); }
inline const char* split_order_name(SplitOrder order) { return name_of(kSplitOrders, order); }
inline const char* scheduler_name(SchedulerKind scheduler) {
    return name_of(kSchedulers, scheduler);
}
inline const char* backend_name(BackendKind backend) { return name_of(kBackends, backend); }
inline const char* raid5_layout_name(Raid5Layout layout) { return name_of(kRaid5Layouts, layout); }
inline const char* bio_policy_name(BioPolicy policy) { return name_of(kBioPolicies, policy); }
inline const char* contiguity_name(Contiguity contiguity) {
    return name_of(kContiguityNames, contiguity);
}
inline const char* group_counting_name(GroupCounting counting) {
    return name_of(kGroupCountings, counting);
}
inline const char* buffered_variant_name(BufferedVariant variant) {
    return name_of(kBufferedVariants, variant);
}

}  // namespace mdsplit
