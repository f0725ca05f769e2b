// BufferedIo: the buffered path's owner (construction, shutdown) and its
// statistics; the mechanisms live in the files named after the kernel's
// (see buffered_io.h).
#include "core/io_uring/buffered_io.h"

#include <mutex>

#include "config/stack_config.h"
#include "core/io_uring/io_wq.h"
#include "core/io_uring/kiocb.h"
#include "core/io_uring/submitter_cpu.h"

namespace mdsplit {

BufferedIo::BufferedIo(EventLoop& loop, BlockLayer& layer, BlockDevice& top,
                       std::vector<MemberQueue*> members, const PageCacheConfig& config,
                       bool virtual_time)
    : loop_(loop), config_(config), virtual_time_(virtual_time) {
    cache_ = std::make_unique<PageCache>(config.size_bytes, top.capacity() << kSectorShift,
                                         config.folio_kb / (kCachePageSize / 1024));
    filemap_ = std::make_unique<Filemap>(loop, layer, top, std::move(members), config_, *cache_,
                                         costs_, stats_);
    WritebackClient& client = *this;
    writeback_ = std::make_unique<PageWriteback>(loop, *cache_, *filemap_, stats_, client);
    filemap_->set_writeback(writeback_.get());
    BufferedExec exec = make_buffered_exec(*this, virtual_time);
    cpu_ = std::move(exec.cpu);
    wq_ = std::move(exec.wq);
}

BufferedIo::~BufferedIo() {
    filemap_->stop();  // sleeping workers give up
    wq_->stop();
}

uint64_t BufferedIo::sync() {
    writeback_->sync();
    return writeback_->take_silent_errors();
}

uint64_t BufferedIo::take_silent_errors() { return writeback_->take_silent_errors(); }

void BufferedIo::invalidate() {
    writeback_->sync();
    filemap_->invalidate();
}

void BufferedIo::before_direct_io(uint64_t offset, uint64_t length, bool writes) {
    if (!length) return;
    uint64_t first = offset >> kPageShift, last = (offset + length - 1) >> kPageShift;
    writeback_->write_and_wait_range(first, last);
    if (!writes) return;
    std::lock_guard<std::mutex> lock(cache_->mutex());
    cache_->invalidate_range(first, last);
}

std::vector<BufferedPath> BufferedIo::take_paths() {
    std::vector<BufferedPath> out;
    out.swap(paths_);
    return out;
}

BufferedStats BufferedIo::stats() const {
    BufferedStats s;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        s = stats_;
    }
    s.busy_worker_high_water = wq_->busy_high_water();
    return s;
}

void BufferedIo::write_unused_json(JsonWriter& j, const PageCacheConfig& config) {
    j.begin_object().field("enabled", false).field("size_bytes", config.size_bytes);
    j.field("ra_kb", config.ra_kb)
        .field("folio_kb", config.folio_kb)
        .field("rasync", config.rasync);
    j.field("variant", buffered_variant_name(config.variant)).end_object();
}

void BufferedIo::write_json(JsonWriter& j) const {
    BufferedStats s = stats();
    PageCacheStats c;
    size_t pages, dirty, writeback;
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        c = cache_->stats();
        pages = cache_->nr_pages();
        dirty = cache_->nr_dirty();
        writeback = cache_->nr_writeback();
    }
    uint64_t looks = s.hits + s.misses;
    j.begin_object().field("enabled", used_).field("size_bytes", config_.size_bytes);
    j.field("capacity_pages", cache_->capacity_pages()).field("ra_kb", config_.ra_kb);
    j.field("folio_kb", config_.folio_kb);
    j.field("rasync", config_.rasync).field("variant", buffered_variant_name(config_.variant));
    j.field("virtual_time", virtual_time()).field("max_workers", max_workers());
    j.field("pages", pages).field("dirty", dirty).field("writeback", writeback);
    j.field("high_water_pages", c.high_water).field("pages_added", c.pages_added);
    j.field("evictions", c.evictions).field("evict_skipped", c.evict_skipped);
    j.field("over_limit", c.over_limit).field("memory_bytes", c.data_bytes);
    j.field("reads", s.reads)
        .field("writes", s.writes)
        .field("fsyncs", s.fsyncs)
        .field("sync_file_ranges", s.sync_ranges);
    j.field("read_bytes", s.read_bytes).field("write_bytes", s.write_bytes);
    j.field("hits", s.hits).field("misses", s.misses);
    j.field("hit_ratio", looks ? double(s.hits) / double(looks) : 0.0);
    uint64_t windows = 0, ra_pages = 0;
    for (int k = 0; k < 4; k++) {
        windows += s.ra_windows[k];
        ra_pages += s.ra_pages[k];
    }
    j.key("readahead").begin_object().field("windows", windows).field("pages", ra_pages);
    for (int k = 0; k < 4; k++) {
        j.key(ra_kind_name(RaKind(k))).begin_object().field("windows", s.ra_windows[k]);
        j.field("pages", s.ra_pages[k]).end_object();
    }
    j.key("window_sizes").begin_object();
    for (auto& [size, count] : s.ra_window_sizes) j.field(std::to_string(size), count);
    j.end_object().end_object();
    j.field("pages_read", s.pages_read).field("read_bios", s.read_bios);
    j.field("read_errors", s.read_errors).field("inline_attempts", s.inline_attempts);
    j.field("worker_attempts", s.worker_attempts).field("callbacks_armed", s.callbacks_armed);
    j.field("task_work_runs", s.task_work_runs).field("punts", s.punts);
    j.field("inline_completions", s.inline_completions);
    j.field("task_work_completions", s.task_work_completions);
    j.field("worker_completions", s.worker_completions);
    j.field("submitter_page_reads", s.submitter_page_reads);
    j.field("worker_page_reads", s.worker_page_reads);
    j.field("workers_created", s.workers_created).field("worker_high_water", s.worker_high_water);
    j.field("busy_worker_high_water", s.busy_worker_high_water);
    j.field("worker_sleeps", s.worker_sleeps).field("submitter_blocks", s.submitter_blocks);
    j.field("pages_dirtied", s.pages_dirtied).field("read_for_write", s.read_for_write);
    j.field("write_waits", s.write_waits).field("throttled_writes", s.throttled_writes);
    j.field("writeback_pages", s.writeback_pages).field("writeback_bios", s.writeback_bios);
    j.field("writeback_errors", s.writeback_errors).field("syncs", s.syncs);
    j.field("invalidations", s.invalidations).field("invalidated_pages", s.invalidated_pages);
    j.field("errors", s.errors).field("double_completions", s.double_completions);
    j.end_object();
}

}  // namespace mdsplit
