#include "core/block/mq_deadline.h"

#include "base/device_clock.h"

namespace mdsplit {

// One queued request: its place in the sort tree, the FIFO and the hash,
// and its deadline (rq->fifo_time).
struct MqDeadlineScheduler::Node {
    SortTree::iterator sorted;
    Fifo::iterator fifo;
    std::multimap<sector_t, Request*>::iterator hashed;
    uint64_t fifo_time = 0;
};

MqDeadlineScheduler::MqDeadlineScheduler(EventLoop& loop, const Options& options)
    : loop_(loop), options_(options) {}

MqDeadlineScheduler::~MqDeadlineScheduler() {
    for (Fifo& fifo : fifo_)
        for (Request* rq : fifo) delete node_of(rq);
}

// dd_insert_request(): sort tree, hash, and the FIFO with its deadline.
void MqDeadlineScheduler::insert(Request* rq, const TaskContext*) {
    int dir = dir_of(rq->op);
    auto* node = new Node;
    rq->sched_data = node;
    node->sorted = sort_[dir].emplace(rq->sector, rq);
    node->hashed = hash_.emplace(rq->end_sector(), rq);
    uint64_t expire = dir ? options_.write_expire_ns : options_.read_expire_ns;
    node->fifo_time = loop_.now() + DeviceClock(options_.time_scale).loop_ns(expire);
    node->fifo = fifo_[dir].insert(fifo_[dir].end(), rq);
    queued_++;
    inserted_++;
}

// deadline_remove_request(): out of the sort tree, FIFO and hash.
void MqDeadlineScheduler::remove(Request* rq) {
    Node* node = node_of(rq);
    int dir = dir_of(rq->op);
    sort_[dir].erase(node->sorted);
    fifo_[dir].erase(node->fifo);
    hash_.erase(node->hashed);
    delete node;
    rq->sched_data = nullptr;
    queued_--;
}

void MqDeadlineScheduler::rehash(Request* rq) {
    Node* node = node_of(rq);
    hash_.erase(node->hashed);
    node->hashed = hash_.emplace(rq->end_sector(), rq);
}

Request* MqDeadlineScheduler::queued_ending_at(sector_t sector, Op op) {
    auto [lo, hi] = hash_.equal_range(sector);
    for (auto it = lo; it != hi; ++it)
        if (it->second->op == op && it->second->mergeable()) return it->second;
    return nullptr;
}

Request* MqDeadlineScheduler::queued_starting_at(sector_t sector, Op op) {
    auto [lo, hi] = sort_[dir_of(op)].equal_range(sector);
    for (auto it = lo; it != hi; ++it)
        if (it->second->op == op && it->second->mergeable()) return it->second;
    return nullptr;
}

// elv_merge(): a back merge found by the hash, else dd_request_merge()'s
// front merge found in the sort tree.
Request* MqDeadlineScheduler::find_merge(const Bio* bio, const TaskContext*, bool& front) {
    if (Request* rq = queued_ending_at(bio->sector, bio->op)) {
        front = false;
        return rq;
    }
    if (!options_.front_merges) return nullptr;
    front = true;
    return queued_starting_at(bio->end_sector(), bio->op);
}

// dd_request_merged() (a front merge moved the start: re-sort) and
// elv_merged_request() (the end moved: rehash).
void MqDeadlineScheduler::merged(Request* rq, bool front) {
    Node* node = node_of(rq);
    if (front) {
        front_merges_++;
        sort_[dir_of(rq->op)].erase(node->sorted);
        node->sorted = sort_[dir_of(rq->op)].emplace(rq->sector, rq);
    } else {
        back_merges_++;
    }
    rehash(rq);
}

// dd_merged_requests(): `rq` inherits the earlier deadline and FIFO place
// of `next`, which leaves the scheduler; rq's end moved (rehash).
void MqDeadlineScheduler::requests_merged(Request* rq, Request* next, bool next_queued) {
    insert_merges_ += !next_queued;
    if (next_queued) {
        Node* a = node_of(rq);
        Node* b = node_of(next);
        if (b->fifo_time < a->fifo_time) {
            Fifo& fifo = fifo_[dir_of(rq->op)];
            fifo.splice(b->fifo, fifo, a->fifo);
            a->fifo_time = b->fifo_time;
        }
        remove(next);
    }
    rehash(rq);
}

// deadline_from_pos(): the first request whose start is >= pos.
Request* MqDeadlineScheduler::from_pos(int dir, sector_t pos) const {
    auto it = sort_[dir].lower_bound(pos);
    return it == sort_[dir].end() ? nullptr : it->second;
}

// deadline_check_fifo(): the oldest request's deadline has passed.
bool MqDeadlineScheduler::fifo_expired(int dir) const {
    return !fifo_[dir].empty() && node_of(fifo_[dir].front())->fifo_time <= loop_.now();
}

// __dd_dispatch_request() for one priority level.
Request* MqDeadlineScheduler::pick(int& dir) {
    // Batches are reads XOR writes: continue the batch in sort order.
    Request* rq = from_pos(last_dir_, latest_pos_[last_dir_]);
    if (rq && batching_ < options_.fifo_batch) {
        dir = last_dir_;
        return rq;
    }
    if (!fifo_[0].empty()) {
        dir = 0;
        if (!fifo_[1].empty() && starved_++ >= options_.writes_starved) dir = 1;
    } else if (!fifo_[1].empty()) {
        dir = 1;
    } else {
        return nullptr;
    }
    if (dir == 1) starved_ = 0;
    // Not batching: continue from latest_pos unless a deadline expired or
    // nothing lies above it, then start again from the oldest request.
    Request* next = from_pos(dir, latest_pos_[dir]);
    if (fifo_expired(dir) || !next) {
        expired_picks_ += fifo_expired(dir);
        rq = fifo_[dir].front();
    } else {
        rq = next;
    }
    last_dir_ = dir;
    batching_ = 0;
    return rq;
}

// dd_dispatch_request() -> deadline_move_request() + dd_start_request().
Request* MqDeadlineScheduler::dispatch() {
    int dir = 0;
    Request* rq = pick(dir);
    if (!rq) return nullptr;
    batching_++;
    remove(rq);
    latest_pos_[dir] = rq->sector;
    dispatched_++;
    return rq;
}

void MqDeadlineScheduler::write_json(JsonWriter& j) const {
    j.begin_object().field("inserted", inserted_).field("dispatched", dispatched_);
    j.field("insert_merges", insert_merges_).field("bio_back_merges", back_merges_);
    j.field("bio_front_merges", front_merges_).field("expired_picks", expired_picks_);
    j.end_object();
}

}  // namespace mdsplit
