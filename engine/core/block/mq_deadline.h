// mq-deadline (block/mq-deadline.c, Linux 6.12..6.17): the default elevator
// of single-queue SCSI/SATA disks, hence of the `sd*` members in seeds
// 000/002.
//
// What it does to md's member requests (docs/reproductions/raid5.md):
//  - insert (dd_insert_request -> blk_mq_sched_try_insert_merge ->
//    elv_attempt_insert_merge): a request leaving the plug first tries to
//    join the back of a queued request that ends where it starts
//    (elv_rqhash_find), repeatedly, so a plug batch issued out of order
//    (chunks 2, 0, 1) becomes one request (0..2). The merge itself, with
//    the size and segment limits, is the member queue's (attempt_merge).
//  - bio merges (dd_bio_merge -> elv_merge): back merge onto a queued
//    request ending at the bio (hash), front merge onto one starting at
//    its end (dd_request_merge, front_merges = 1).
//  - dispatch (__dd_dispatch_request): while batching (< fifo_batch = 16),
//    the first request at or above latest_pos (the start of the last one
//    dispatched, deadline_from_pos); otherwise the same unless the oldest
//    request's deadline expired (read_expire 500 ms, write_expire 5 s) or
//    nothing lies above latest_pos, then the FIFO head. Reads are
//    preferred; writes get their turn after writes_starved = 2 read picks.
// Left out: I/O priority classes (all requests are best-effort here, one
// per_prio) and prio aging, zoned devices, the at-head dispatch list
// (passthrough/flush requests, which the emulation does not produce).
#pragma once

#include <cstdint>
#include <list>
#include <map>

#include "base/event_loop.h"
#include "core/block/io_scheduler.h"

namespace mdsplit {

class MqDeadlineScheduler final : public IoScheduler {
public:
    struct Options {
        uint32_t fifo_batch = 16;                  // dd->fifo_batch
        uint64_t read_expire_ns = 500'000'000;     // HZ / 2
        uint64_t write_expire_ns = 5'000'000'000;  // 5 * HZ
        uint32_t writes_starved = 2;               // dd->writes_starved
        bool front_merges = true;                  // dd->front_merges
        double time_scale = 1.0;                   // slow motion: deadlines in device time
    };

    MqDeadlineScheduler(EventLoop& loop, const Options& options);
    explicit MqDeadlineScheduler(EventLoop& loop) : MqDeadlineScheduler(loop, Options{}) {}
    ~MqDeadlineScheduler() override;

    const char* name() const override { return "mq-deadline"; }
    Request* find_merge(const Bio* bio, const TaskContext* task, bool& front) override;
    void merged(Request* rq, bool front) override;
    void insert(Request* rq, const TaskContext* task) override;
    Request* dispatch() override;
    bool has_work() const override { return queued_ != 0; }
    void completed(Request*) override {}
    Request* queued_ending_at(sector_t sector, Op op) override;
    Request* queued_starting_at(sector_t sector, Op op) override;
    void requests_merged(Request* rq, Request* next, bool next_queued) override;
    bool runs_queue_at_unplug() const override { return true; }
    void write_json(JsonWriter& j) const override;

    uint64_t insert_merges() const { return insert_merges_; }

private:
    struct Node;
    using SortTree = std::multimap<sector_t, Request*>;  // per_prio->sort_list
    using Fifo = std::list<Request*>;                    // per_prio->fifo_list

    static int dir_of(Op op) { return op == Op::Read ? 0 : 1; }  // DD_READ / DD_WRITE
    static Node* node_of(const Request* rq) { return static_cast<Node*>(rq->sched_data); }
    Request* from_pos(int dir, sector_t pos) const;  // deadline_from_pos()
    bool fifo_expired(int dir) const;                // deadline_check_fifo()
    Request* pick(int& dir);                         // __dd_dispatch_request()
    void remove(Request* rq);                        // deadline_remove_request()
    void rehash(Request* rq);                        // elv_rqhash_reposition()

    EventLoop& loop_;
    Options options_;
    SortTree sort_[2];
    std::multimap<sector_t, Request*> hash_;  // by end sector (q->elevator->hash)
    Fifo fifo_[2];
    sector_t latest_pos_[2] = {0, 0};
    int last_dir_ = 0;
    uint32_t batching_ = 0;
    uint32_t starved_ = 0;
    uint64_t queued_ = 0;
    // Statistics.
    uint64_t inserted_ = 0, dispatched_ = 0, insert_merges_ = 0, back_merges_ = 0,
             front_merges_ = 0, expired_picks_ = 0;
};

}  // namespace mdsplit
