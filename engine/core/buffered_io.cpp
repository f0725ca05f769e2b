// BufferedIo: the buffered path's owner (construction, shutdown) and its
// statistics; the mechanisms live in the files named after the kernel's
// (see buffered_io.h).
#include "core/buffered_io.h"

#include <algorithm>
#include <mutex>

#include "config/config_loader.h"
#include "core/io_wq.h"
#include "core/kiocb.h"

namespace mdsplit {

const char* buffered_where_name(BufferedWhere where) {
    switch (where) {
        case BufferedWhere::None:
            return "none";
        case BufferedWhere::Submitter:
            return "submitter";
        case BufferedWhere::TaskWork:
            return "task_work";
        case BufferedWhere::Worker:
            return "worker";
    }
    return "?";
}

BufferedIo::BufferedIo(EventLoop& loop, BlockLayer& layer, BlockDevice& top,
                       std::vector<MemberQueue*> members, const PageCacheConfig& config)
    : loop_(loop),
      layer_(layer),
      top_(top),
      members_(std::move(members)),
      config_(config),
      virtual_(loop.clock().is_virtual()) {
    cache_ = std::make_unique<PageCache>(config.size_bytes, top.capacity() << kSectorShift);
    wq_ = make_io_wq(*this, virtual_);
    dirty_background_ = std::max<uint64_t>(cache_->capacity_pages() / 10, 8);
    dirty_limit_ = std::max<uint64_t>(cache_->capacity_pages() / 5, 16);
}

BufferedIo::~BufferedIo() {
    {
        std::lock_guard<std::mutex> lock(cache_->mutex());
        stopping_ = true;
    }
    cache_->wake_all();
    wq_->stop();
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

void BufferedIo::write_unused_json(std::ostream& o, const PageCacheConfig& config) {
    o << "{\"enabled\": false, \"size_bytes\": " << config.size_bytes
      << ", \"ra_kb\": " << config.ra_kb << ", \"rasync\": " << (config.rasync ? "true" : "false")
      << ", \"variant\": \"" << buffered_variant_name(config.variant) << "\"}";
}

void BufferedIo::write_json(std::ostream& o) const {
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
    o << "{\"enabled\": " << (used_ ? "true" : "false")
      << ", \"size_bytes\": " << config_.size_bytes
      << ", \"capacity_pages\": " << cache_->capacity_pages() << ", \"ra_kb\": " << config_.ra_kb
      << ", \"rasync\": " << (config_.rasync ? "true" : "false") << ", \"variant\": \""
      << buffered_variant_name(config_.variant)
      << "\", \"virtual_time\": " << (virtual_ ? "true" : "false")
      << ", \"max_workers\": " << max_workers() << ", \"pages\": " << pages
      << ", \"dirty\": " << dirty << ", \"writeback\": " << writeback
      << ", \"high_water_pages\": " << c.high_water << ", \"pages_added\": " << c.pages_added
      << ", \"evictions\": " << c.evictions << ", \"evict_skipped\": " << c.evict_skipped
      << ", \"over_limit\": " << c.over_limit << ", \"memory_bytes\": " << c.data_bytes
      << ", \"reads\": " << s.reads << ", \"writes\": " << s.writes << ", \"fsyncs\": " << s.fsyncs
      << ", \"read_bytes\": " << s.read_bytes << ", \"write_bytes\": " << s.write_bytes
      << ", \"hits\": " << s.hits << ", \"misses\": " << s.misses
      << ", \"hit_ratio\": " << (looks ? double(s.hits) / double(looks) : 0.0)
      << ", \"readahead\": {";
    uint64_t windows = 0, ra_pages = 0;
    for (int k = 0; k < 4; k++) {
        windows += s.ra_windows[k];
        ra_pages += s.ra_pages[k];
    }
    o << "\"windows\": " << windows << ", \"pages\": " << ra_pages;
    for (int k = 0; k < 4; k++)
        o << ", \"" << ra_kind_name(RaKind(k)) << "\": {\"windows\": " << s.ra_windows[k]
          << ", \"pages\": " << s.ra_pages[k] << "}";
    o << ", \"window_sizes\": {";
    bool first = true;
    for (auto& [size, count] : s.ra_window_sizes) {
        o << (first ? "" : ", ") << "\"" << size << "\": " << count;
        first = false;
    }
    o << "}}, \"pages_read\": " << s.pages_read << ", \"read_bios\": " << s.read_bios
      << ", \"read_errors\": " << s.read_errors << ", \"inline_attempts\": " << s.inline_attempts
      << ", \"worker_attempts\": " << s.worker_attempts
      << ", \"callbacks_armed\": " << s.callbacks_armed
      << ", \"task_work_runs\": " << s.task_work_runs << ", \"punts\": " << s.punts
      << ", \"inline_completions\": " << s.inline_completions
      << ", \"task_work_completions\": " << s.task_work_completions
      << ", \"worker_completions\": " << s.worker_completions
      << ", \"submitter_page_reads\": " << s.submitter_page_reads
      << ", \"worker_page_reads\": " << s.worker_page_reads
      << ", \"workers_created\": " << s.workers_created
      << ", \"worker_high_water\": " << s.worker_high_water
      << ", \"busy_worker_high_water\": " << s.busy_worker_high_water
      << ", \"worker_sleeps\": " << s.worker_sleeps
      << ", \"submitter_blocks\": " << s.submitter_blocks
      << ", \"pages_dirtied\": " << s.pages_dirtied << ", \"read_for_write\": " << s.read_for_write
      << ", \"write_waits\": " << s.write_waits << ", \"throttled_writes\": " << s.throttled_writes
      << ", \"writeback_pages\": " << s.writeback_pages
      << ", \"writeback_bios\": " << s.writeback_bios
      << ", \"writeback_errors\": " << s.writeback_errors << ", \"syncs\": " << s.syncs
      << ", \"invalidations\": " << s.invalidations
      << ", \"invalidated_pages\": " << s.invalidated_pages << ", \"errors\": " << s.errors
      << ", \"double_completions\": " << s.double_completions << "}";
}

}  // namespace mdsplit
