#include "sim/fio_job_model.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>

#include "core/io_uring/buffered_io.h"
#include "sim/virtual_time.h"

namespace mdsplit {

// stat.c plat_val_to_idx(): exact below 128, then 64 buckets per power of two.
unsigned FioLatency::bucket_of(uint64_t val) {
    unsigned msb = val ? 63u - unsigned(__builtin_clzll(val)) : 0;
    if (msb <= kBits) return unsigned(val);
    unsigned error_bits = msb - kBits;
    unsigned base = (error_bits + 1) << kBits;
    unsigned offset = (kVal - 1) & unsigned(val >> error_bits);
    return std::min(base + offset, kBuckets - 1);
}

void FioLatency::add(uint64_t ns) {
    n++;
    min = std::min(min, ns);
    max = std::max(max, ns);
    sum += double(ns);
    sum_sq += double(ns) * double(ns);
    if (hist.empty()) hist.assign(kBuckets, 0);
    hist[bucket_of(ns)]++;
}

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kSyncCookie = ~uint64_t(0);

// io_u_mark_lat_nsec/usec/msec(): 0..1, 2..3, 4..9, 10..19, 20..49, 50..99,
// 100..249, 250..499, 500..749, 750..999 [, 1000..1999, >= 2000].
unsigned decade_bucket(uint64_t v) {
    static const uint64_t kFloor[] = {750, 500, 250, 100, 50, 20, 10, 4, 2};
    for (unsigned i = 0; i < 9; i++)
        if (v >= kFloor[i]) return 9 - i;
    return 0;
}

void mark_latency(FioDirectionResult& d, uint64_t ns) {
    if (ns < 1000) {
        d.lat_ns[decade_bucket(ns)]++;
    } else if (ns < 1'000'000) {
        d.lat_us[decade_bucket(ns / 1000)]++;
    } else {
        uint64_t ms = ns / 1'000'000;
        d.lat_ms[ms >= 2000 ? 11 : ms >= 1000 ? 10 : decade_bucket(ms)]++;
    }
}

// The verify pattern: each 8-byte word holds a hash of its device offset,
// so overlapping writes leave consistent data (fio writes a header and a
// crc per block; what is checked here is the same: the bytes read back).
uint64_t pattern_word(uint64_t seed, uint64_t byte_offset) {
    uint64_t z = seed ^ (byte_offset * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct AlignedFree {
    void operator()(uint8_t* p) const { free(p); }
};

struct Slot {
    uint64_t offset = 0, length = 0;
    Op op = Op::Read;
    uint64_t start_ns = 0, issue_ns = 0;
    bool verify_read = false;
};

enum class JobState { Waiting, Running, Verifying, Finishing, Done };

struct JobRun {
    const FioJobSpec* spec = nullptr;
    Stack* stack = nullptr;
    TaskContext task;
    JobState state = JobState::Waiting;
    std::vector<std::unique_ptr<uint8_t, AlignedFree>> buffers;
    std::vector<Slot> slots;
    std::vector<uint32_t> free_slots;
    uint32_t busy = 0;
    bool failed = false;  // an error ended the job (ends_job): no more I/O, no verify
    bool terminated =
        false;  // the run was interrupted (fio's td->terminate): no more I/O, no verify
    std::mt19937_64 rng;
    uint64_t region_off = 0, region_len = 0;
    // fio's f->io_size (size=, unclipped by the device's end) and the device's
    // end (f->real_file_size, from region_off): where a pass ends.
    uint64_t file_io_size = 0, dev_left = 0;
    uint32_t passes = 0;           // passes ended (fio's do_io() runs)
    uint64_t unit = 0, units = 0;  // random offsets: grid of the smallest block / blockalign
    std::vector<uint64_t> map;     // random map (fio's axmap): units used this pass
    uint64_t map_used = 0;
    // A sequential position per direction, as fio's f->last_pos[ddir] (io_u.c
    // get_next_seq_offset()): rw=rw reads and writes each walk the region from
    // its start, and a trimwrite job's writes follow its trims over the same blocks.
    std::array<uint64_t, kFioDirections> seq_pos{};
    // trimwrite: the last trim (offset, length, its block size draw), whose
    // write is due next (fio's f->last_start/last_pos[DDIR_TRIM]).
    bool write_after_trim = false;
    uint64_t trim_offset = 0, trim_length = 0, trim_draw = 0;
    bool trim_drew = false;
    uint64_t target_bytes = 0;
    uint64_t issued_bytes = 0, issued_ios = 0, writes_since_sync = 0;
    uint64_t start_ns = 0, stats_from = 0, stop_at = kNever;
    // When the I/O or the verify phase began (fio's td->start).
    uint64_t phase_start = 0;
    uint64_t cpu_free = 0;  // direct jobs: fio's thread is busy until then
    std::vector<uint32_t> batch;
    uint64_t commit_at = 0;
    bool batch_pending = false;
    uint64_t think_until = 0;
    bool think_after_completion = false;
    InstantCounter instant;   // time_based jobs: is virtual time passing?
    bool time_stuck = false;  // it is not: stopped, and the run is refused
    std::vector<std::pair<uint64_t, uint64_t>> written;  // verify log (offset, length)
    size_t verify_next = 0;
    bool sync_in_flight = false, end_sync_sent = false, flush_sent = false;
    // The cleanup's flush: pages failed silently before it, and the page
    // cache's write-back error count when it was sent.
    uint64_t silent_before_flush = 0, wb_errors_at_flush = 0;
    FioJobResult r;
};

uint64_t min_bs(const FioJobSpec& s, int d) {
    uint64_t m = kNever;
    for (const FioBlockSize& b : s.bs[size_t(d)]) m = std::min(m, b.bytes);
    return m == kNever ? 4096 : m;
}

uint64_t max_bs(const FioJobSpec& s, int d) {
    uint64_t m = s.bs_max[size_t(d)];
    for (const FioBlockSize& b : s.bs[size_t(d)]) m = std::max(m, b.bytes);
    return m ? m : 4096;
}

// The directions a job issues (fio's td_read/td_write/td_trim): a trim job's
// rwmixread does not apply; verify reads back what was written.
bool issues(const FioJobSpec& s, int d) {
    switch (d) {
        case kFioRead:
            return (s.trim == FioTrim::None && s.read_pct > 0) || s.verify;
        case kFioWrite:
            return (s.trim == FioTrim::None && s.read_pct < 100) || s.trim == FioTrim::ThenWrite;
        default:
            return s.trim != FioTrim::None;
    }
}

std::string job_where(const FioJobSpec& s) {
    return s.where.empty() ? "simulate: job " + s.name : s.where;
}

// fio.h td_min_bs(): the smallest block size of the three directions.
uint64_t td_min_bs(const FioJobSpec& s) {
    uint64_t bs = kNever;
    for (int d = 0; d < int(kFioDirections); d++) bs = std::min(bs, min_bs(s, d));
    return bs;
}

// filesetup.c get_start_offset(): offset (or offset=N% of the device) plus
// subjob x offset_increment (or offset_increment=N% of the device); a
// percentage in either rounds the sum up to td_min_bs().
uint64_t start_offset(const FioJobSpec& s, uint64_t dev) {
    bool align = s.offset_pct || s.offset_increment_pct;
    uint64_t increment =
        s.offset_increment_pct ? s.offset_increment_pct * dev / 100 : s.offset_increment;
    uint64_t offset =
        (s.offset_pct ? dev * s.offset_pct / 100 : s.offset) + uint64_t(s.subjob) * increment;
    if (align) {
        uint64_t bs = td_min_bs(s);
        offset = (offset / bs + (offset % bs != 0)) * bs;
    }
    return offset;
}

// What fio's setup does before the job's first I/O (setup_files, init_io_u).
void start_job(JobRun& j, Stack& stack, uint64_t now) {
    const FioJobSpec& s = *j.spec;
    j.stack = &stack;
    j.task.pid = s.pid;
    j.task.sched = s.sched;
    j.task.dsync = s.dsync;
    j.task.fadvise = s.fadvise;
    uint64_t dev = stack.size_bytes();
    uint64_t offset = start_offset(s, dev);
    // filesetup.c setup_files(): without size= the region is the rest of the
    // device, and an offset past it fails the job ("you need to specify valid
    // offset="; at the end, "blocksize is larger than data set range"). With
    // size= fio takes the region as given and get_next_offset() stops at the
    // device's end (offset >= real_file_size): past it the job does no I/O.
    if (!s.size && offset >= dev)
        throw std::invalid_argument(job_where(s) + ": offset: " + std::to_string(offset) +
                                    " is past the end of the device (" + std::to_string(dev) +
                                    " bytes); allowed: 0.." + std::to_string(dev - 1));
    bool past_end = offset >= dev;
    j.region_off = offset;
    j.region_len = past_end ? 0 : s.size ? std::min(s.size, dev - offset) : dev - offset;
    if (s.size_pct && s.size_pct != 100 && !past_end) {
        // setup_files(): f->io_size = (file size x size_percent) / 100, at most
        // what is left past file_offset, less its remainder of td_min_bs().
        uint64_t len = std::min(dev * s.size_pct / 100, dev - offset);
        j.region_len = len - len % td_min_bs(s);
    }
    uint64_t smallest = kNever, largest = 0;
    for (int d = 0; d < int(kFioDirections); d++) {
        if (!issues(s, d)) continue;
        uint64_t a = s.align[size_t(d)] ? s.align[size_t(d)] : min_bs(s, d);
        smallest = std::min(smallest, a);
        largest = std::max(largest, max_bs(s, d));
    }
    if (smallest == kNever) smallest = largest = 4096;
    j.file_io_size = s.size ? s.size : j.region_len;
    j.dev_left = past_end ? 0 : dev - offset;
    // setup_files(): "blocksize is larger than data set range" is about
    // size= (o->size < td_min_bs); a region that the device's end cuts short
    // only ends the pass early (fill_io_u), as it does in fio.
    if (!s.size && j.region_len < largest && !past_end)
        throw std::invalid_argument(job_where(s) + ": size: the region (" +
                                    std::to_string(j.region_len) + " bytes from offset " +
                                    std::to_string(offset) + ") is smaller than one block (" +
                                    std::to_string(largest) +
                                    " bytes); allowed: a region (size, offset) of one block "
                                    "or more");
    j.unit = smallest;
    // io_u.c last_block(): blocks of the region up to the device's end
    // (min(f->io_size, real_file_size)), less what the smallest block needs
    // beyond the grid; a pick past the device's end ends the pass.
    {
        uint64_t max_size = std::min(j.file_io_size, j.dev_left + (past_end ? 0 : offset));
        uint64_t minbs = td_min_bs(s);
        if (minbs > smallest) max_size -= std::min(max_size, minbs - smallest);
        j.units = max_size / smallest;
    }
    if (s.random && !s.norandommap) j.map.assign((j.units + 63) / 64, 0);
    uint64_t per_loop = s.io_size ? s.io_size : j.region_len;
    // setup_files(): io_size_percent of the file's io_size becomes the job's size.
    if (s.io_size_pct && s.io_size_pct != 100) per_loop = j.region_len * s.io_size_pct / 100;
    j.target_bytes = s.time_based ? kNever : per_loop * std::max<uint32_t>(1, s.loops);
    if (past_end) j.target_bytes = 0;  // get_next_offset() fails at once: no I/O
    uint32_t depth = std::max<uint32_t>(1, s.iodepth);
    for (uint32_t i = 0; i < depth; i++) {
        void* p = nullptr;
        if (posix_memalign(&p, 4096, largest)) throw std::bad_alloc();
        memset(p, int(0xa5 ^ i), largest);
        j.buffers.emplace_back(static_cast<uint8_t*>(p));
    }
    j.slots.assign(depth, Slot{});
    for (uint32_t i = depth; i > 0; i--) j.free_slots.push_back(i - 1);
    j.rng.seed(s.seed);
    j.start_ns = now;
    j.phase_start = now;
    j.stats_from = now + s.ramp_ns;
    if (s.runtime_ns) j.stop_at = now + s.ramp_ns + s.runtime_ns;
    j.cpu_free = now;
    j.r.start_ns = now;
    if (!s.direct) {
        stack.buffered().set_iodepth(depth);
        if (s.invalidate) stack.invalidate();
    }
    j.state = JobState::Running;
}

// Whether direction d's block size is drawn (a bssplit list or a bsrange),
// as fio's get_next_buflen() draws only when min_bs != max_bs.
bool block_size_is_drawn(const FioJobSpec& s, int d) {
    const auto& list = s.bs[size_t(d)];
    if (list.size() > 1) {
        uint64_t total = 0;
        for (const FioBlockSize& b : list) total += b.weight;
        return total > 0;
    }
    return max_bs(s, d) > min_bs(s, d);
}

// Direction d's block size for the random draw `r` (unused when not drawn).
uint64_t block_size_of(const FioJobSpec& s, int d, uint64_t r) {
    const auto& list = s.bs[size_t(d)];
    if (list.size() > 1) {  // bssplit: weights out of 100
        uint64_t total = 0;
        for (const FioBlockSize& b : list) total += b.weight;
        uint64_t pick = total ? r % total : 0, acc = 0;
        for (const FioBlockSize& b : list) {
            acc += b.weight;
            if (pick < acc) return b.bytes;
        }
        return list.back().bytes;
    }
    uint64_t lo = min_bs(s, d), hi = max_bs(s, d);
    if (hi <= lo) return lo;
    // io_u.c get_next_buflen(): minbs + maxbs x a uniform fraction, rounded
    // down to a multiple of minbs, at most maxbs (blockalign places offsets
    // only; it is no size step).
    uint64_t len = lo + uint64_t(double(hi) * (double(r >> 11) / double(uint64_t(1) << 53)));
    len -= len % lo;
    return std::min(len, hi);
}

// A sequential trimwrite job's write: fio seeds the write and trim block
// size generators alike (init.c td_fill_rand_seeds_internal: "trimwrite is
// special ... we need to generate the same offsets"), so the write draws
// what its trim drew.
uint64_t pick_block_size(JobRun& j, int d) {
    const FioJobSpec& s = *j.spec;
    if (!block_size_is_drawn(s, d)) return block_size_of(s, d, 0);
    bool reuse = s.trim == FioTrim::ThenWrite && d == kFioWrite && j.trim_drew;
    uint64_t r = reuse ? j.trim_draw : j.rng();
    if (d == kFioTrim) {
        j.trim_draw = r;
        j.trim_drew = true;
    }
    return block_size_of(s, d, r);
}

// get_next_rand_offset(): a random unit; with the random map, the next unused
// one at or after it (axmap_next_free; the caller ends the pass when all were used).
uint64_t pick_random_unit(JobRun& j) {
    uint64_t u = j.rng() % j.units;
    if (j.map.empty()) return u;
    for (;;) {
        uint64_t w = u / 64;
        uint64_t bits = ~j.map[w] & (~uint64_t(0) << (u % 64));
        if (w == j.map.size() - 1 && j.units % 64) bits &= (uint64_t(1) << (j.units % 64)) - 1;
        if (bits) return w * 64 + uint64_t(__builtin_ctzll(bits));
        u = (w + 1) * 64;
        if (u >= j.units) u = 0;
    }
}

bool unit_used(const JobRun& j, uint64_t u) { return j.map[u / 64] >> (u % 64) & 1; }

// mark_random_map(): the I/O at unit `first` takes the units it covers while
// they are free (axmap_set_nr stops at the first used one) and is cut to
// them, so a pass writes each unit once and covers the whole region, whatever
// the block sizes. Returns the length.
uint64_t mark_random_map(JobRun& j, uint64_t first, uint64_t len) {
    uint64_t want = (len + j.unit - 1) / j.unit, taken = 0;
    while (taken < want && first + taken < j.units && !unit_used(j, first + taken)) {
        uint64_t u = first + taken++;
        j.map[u / 64] |= uint64_t(1) << (u % 64);
    }
    j.map_used += taken;
    return std::min(len, taken * j.unit);
}

// The end of a pass (fio's do_io() ends when get_io_u() finds no offset:
// the file is done), and whether the job goes on, as backend.c
// keep_running(): while loops are left (or time_based), then with io_size=
// while at least the largest block is left of it; without io_size= the
// done file ends the job. A new pass starts at the region's start with an
// empty random map (fio_file_reset).
bool new_pass(JobRun& j) {
    const FioJobSpec& s = *j.spec;
    j.passes++;
    bool more = s.time_based || j.passes < std::max<uint32_t>(1, s.loops);
    if (!more && (s.io_size || s.io_size_pct)) {
        uint64_t limit = j.target_bytes / std::max<uint32_t>(1, s.loops);
        uint64_t largest = 0;
        for (int d = 0; d < int(kFioDirections); d++) largest = std::max(largest, max_bs(s, d));
        more = j.issued_bytes < limit && limit - j.issued_bytes >= largest;
    }
    if (!more) return false;
    j.seq_pos.fill(0);
    std::fill(j.map.begin(), j.map.end(), 0);
    j.map_used = 0;
    return true;
}

// get_next_offset() and fill_io_u() for one I/O of direction d and length
// `len` (cut to fit when it was drawn, as get_next_buflen()'s io_u_fits);
// false when the pass ends here (io_u.c): a sequential position at or past
// the region's end (offset >= f->io_size), a random map with no free block
// (axmap_next_free), a random block at or past the device's end (offset >=
// real_file_size), a drawn size whose smallest block does not fit in the
// region, or a block that passes the device's end (offset + buflen >
// real_file_size). A fixed-size block may pass the region's end, as in fio.
bool place_io(JobRun& j, int d, uint64_t& len, uint64_t& off) {
    const FioJobSpec& s = *j.spec;
    bool drawn = block_size_is_drawn(s, d);
    if (s.random) {
        if (!j.units || (!j.map.empty() && j.map_used >= j.units)) return false;
        uint64_t u = pick_random_unit(j);
        off = u * j.unit;
        if (off >= j.dev_left) return false;
        if (drawn && off + len > j.file_io_size) {
            if (off + min_bs(s, d) > j.file_io_size) return false;
            len = (j.file_io_size - off) / j.unit * j.unit;  // fio draws a smaller size
        }
        if (off + len > j.dev_left) return false;
        if (!j.map.empty()) len = mark_random_map(j, u, len);
        return true;
    }
    uint64_t& pos = j.seq_pos[size_t(d)];
    if (pos >= j.file_io_size) return false;
    if (drawn && pos + len > j.file_io_size) {
        if (pos + min_bs(s, d) > j.file_io_size) return false;
        len = (j.file_io_size - pos) / min_bs(s, d) * min_bs(s, d);
    }
    if (pos + len > j.dev_left) return false;
    off = pos;
    pos += len;
    return true;
}

// The offset of the next I/O (get_next_offset, fill_io_u), a new pass when
// this one ended; false when the job ends instead.
bool pick_offset(JobRun& j, int d, uint64_t& len, uint64_t& offset) {
    uint64_t off = 0, want = len;
    for (int pass = 0; pass < 2; pass++) {
        len = want;
        if (place_io(j, d, len, off)) {
            offset = j.region_off + off;
            return true;
        }
        if (pass || !new_pass(j)) return false;
    }
    return false;
}

// io_u.c set_rw_ddir(): a trimwrite job trims when its last write was at its
// last trim (f->last_start[DDIR_WRITE] == f->last_start[DDIR_TRIM]), and
// writes otherwise; a trim after each write (get_next_offset() moves
// last_start[DDIR_WRITE] when a random trim repeats the last offset, so
// randtrimwrite alternates too). Other jobs: get_rw_ddir()'s rwmix draw.
int next_direction(JobRun& j) {
    const FioJobSpec& s = *j.spec;
    if (s.trim == FioTrim::Only) return kFioTrim;
    if (s.trim == FioTrim::ThenWrite) return j.write_after_trim ? kFioWrite : kFioTrim;
    return s.read_pct >= 100            ? kFioRead
           : s.read_pct == 0            ? kFioWrite
           : j.rng() % 100 < s.read_pct ? kFioRead
                                        : kFioWrite;
}

// The bytes that end the job (backend.c io_bytes_exceeded()): a trimwrite
// job counts its writes (td_write), so each write's trim comes on top; the
// others count everything they issue.
bool counts_toward_size(const FioJobSpec& s, int d) {
    return s.trim != FioTrim::ThenWrite || d == kFioWrite;
}

// The next I/O of the job's pattern (get_io_u: direction, length, offset);
// length 0 when the job's last pass has ended.
Slot next_io(JobRun& j) {
    const FioJobSpec& s = *j.spec;
    Slot io;
    int d = next_direction(j);
    io.op = d == kFioTrim ? Op::Discard : d == kFioWrite ? Op::Write : Op::Read;
    if (s.trim == FioTrim::ThenWrite && d == kFioWrite && s.random) {
        // get_next_block()/get_next_buflen(): randtrimwrite writes exactly
        // the block it trimmed (f->last_start/last_pos[DDIR_TRIM]), not
        // marked in the random map.
        io.offset = j.trim_offset;
        io.length = j.trim_length;
    } else {
        io.length = pick_block_size(j, d);
        if (j.target_bytes != kNever && j.target_bytes - j.issued_bytes < io.length) {
            uint64_t a = j.unit;
            uint64_t left = (j.target_bytes - j.issued_bytes + a - 1) / a * a;
            io.length = std::min(io.length, left);
        }
        if (!pick_offset(j, d, io.length, io.offset)) {
            io.length = 0;
            return io;
        }
    }
    if (s.trim == FioTrim::ThenWrite) {
        j.write_after_trim = d == kFioTrim;
        if (d == kFioTrim) {
            j.trim_offset = io.offset;
            j.trim_length = io.length;
        }
    }
    if (counts_toward_size(s, d)) j.issued_bytes += io.length;
    if (d == kFioWrite) j.writes_since_sync++;
    return io;
}

void fill_pattern(const FioJobSpec& s, uint8_t* buf, uint64_t offset, uint64_t len) {
    for (uint64_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = pattern_word(s.seed, offset + i);
        memcpy(buf + i, &w, 8);
    }
}

uint64_t count_mismatches(const FioJobSpec& s, const uint8_t* buf, uint64_t offset, uint64_t len) {
    uint64_t bad = 0;
    for (uint64_t i = 0; i + 8 <= len; i += 8) {
        uint64_t w = pattern_word(s.seed, offset + i), got;
        memcpy(&got, buf + i, 8);
        if (got != w) bad += 8;
    }
    return bad;
}

void charge_cpu(JobRun& j, uint64_t now, uint64_t ns) {
    if (!j.spec->direct) {
        j.stack->buffered().charge_submitter(ns);
        return;
    }
    j.cpu_free = std::max(j.cpu_free, now) + ns;
}

// When fio's thread can prepare the next I/O: after its own work and, with a
// modelled submitting CPU ([cpu] submit_bio), after the kernel submission of
// what it committed (the same thread: io_uring_enter / pwrite returns then).
uint64_t cpu_free_at(JobRun& j) {
    if (!j.spec->direct) return j.stack->buffered().submitter_free_at();
    if (j.stack->submitting(j.task)) return kNever;
    return std::max(j.cpu_free, j.task.cpu.busy_until);
}

// fio's td_non_fatal_error() (backend.c) with td_error_type() (fio.h): an
// error ends the job unless continue_on_error names its type (EILSEQ:
// verify; a read; anything else a write) and it is one of __NON_FATAL_ERR
// (EIO, EILSEQ) -- fio's default ignore_error list.
bool ends_job(const FioJobSpec& s, size_t direction, int32_t error) {
    int e = error < 0 ? -error : error;
    uint32_t type = e == EILSEQ             ? kFioErrorVerify
                    : direction == kFioRead ? kFioErrorRead
                                            : kFioErrorWrite;
    return !(s.continue_on_error & type) || (e != EIO && e != EILSEQ);
}

// An I/O (or sync) error: the job's error, which ends it, or one that
// continue_on_error lets pass (fio's update_error_count()).
void note_error(JobRun& j, size_t direction, int32_t error) {
    if (ends_job(*j.spec, direction, error)) {
        j.failed = true;
        if (!j.r.error) j.r.error = error;
        return;
    }
    if (!j.r.total_err++) j.r.first_error = error;
}

// fio's io_completed(): the I/O's latencies into the direction's statistics.
bool reap_completions(JobRun& j, uint64_t now) {
    if (j.task.completions.empty()) return false;
    const FioJobSpec& s = *j.spec;
    for (const IoCompletion& c : j.task.completions) {
        charge_cpu(j, now,
                   s.fio_complete_ns.value_or(j.stack->config().cpu.buffered.fio_complete_ns));
        if (c.cookie == kSyncCookie) {
            j.sync_in_flight = false;
            j.r.syncs++;
            if (j.flush_sent) {  // the cleanup's: its failures are counted, not the job's error
                j.r.silent_writeback_pages =
                    j.silent_before_flush +
                    (j.stack->buffered().stats().writeback_errors - j.wb_errors_at_flush);
                continue;
            }
            if (c.error) note_error(j, kFioWrite, c.error);
            continue;
        }
        uint32_t slot = uint32_t(c.cookie);
        Slot& io = j.slots[slot];
        size_t d = io.op == Op::Discard ? kFioTrim : io.op == Op::Write ? kFioWrite : kFioRead;
        FioDirectionResult& dir = j.r.dir[d];
        if (io.verify_read && !c.error) {
            if (s.verify_compare)
                j.r.verify_errors +=
                    count_mismatches(s, j.buffers[slot].get(), io.offset, io.length);
            else
                j.r.verify_unchecked += io.length - c.resid;
        }
        if (c.error) {
            dir.errors++;
            note_error(j, d, c.error);
        } else if (now >= j.stats_from) {
            dir.ios++;
            dir.bytes += io.length - c.resid;
            dir.slat.add(io.issue_ns - io.start_ns);
            dir.clat.add(now - io.issue_ns);
            dir.lat.add(now - io.start_ns);
            mark_latency(dir, now - io.issue_ns);
        }
        if (io.op == Op::Write && s.verify && !c.error)
            j.written.emplace_back(io.offset, io.length);
        j.busy--;
        j.free_slots.push_back(slot);
        if (j.think_after_completion) {
            j.think_until = now + s.think_ns;
            j.think_after_completion = false;
        }
    }
    j.task.completions.clear();
    return true;
}

void commit_batch(JobRun& j, uint64_t now) {
    const FioJobSpec& s = *j.spec;
    Stack& st = *j.stack;
    st.begin_batch(j.task);
    for (uint32_t slot : j.batch) {
        Slot& io = j.slots[slot];
        io.issue_ns = now;
        uint8_t* buf = j.buffers[slot].get();
        if (s.direct)
            st.queue(j.task, io.op, io.offset, io.length, buf, slot);
        else
            st.queue_buffered(j.task, io.op, io.offset, io.length, buf, slot);
    }
    st.commit(j.task);
    uint64_t before = j.issued_ios - j.batch.size();
    j.batch.clear();
    j.batch_pending = false;
    // handle_thinktime(): after every thinktime_blocks I/Os; with a full
    // queue fio first waits for a completion.
    if (s.think_ns && s.think_blocks && before / s.think_blocks != j.issued_ios / s.think_blocks) {
        if (j.free_slots.empty())
            j.think_after_completion = true;
        else
            j.think_until = now + s.think_ns;
    }
}

void send_sync(JobRun& j) {
    if (j.spec->direct) {  // the engine completes a direct job's fsync at once
        j.r.syncs++;
        return;
    }
    j.stack->begin_batch(j.task);
    j.stack->fsync(j.task, kSyncCookie);
    j.stack->commit(j.task);
    j.sync_in_flight = true;
}

// Prepares one batch (fio's get_io_u + td_io_queue for up to
// iodepth_batch_submit I/Os); committed once fio's CPU work for it is done.
void prepare_batch(JobRun& j, uint64_t now, bool verifying) {
    const FioJobSpec& s = *j.spec;
    uint32_t n = std::max<uint32_t>(1, s.batch);
    uint64_t t = now;
    while (n-- && !j.free_slots.empty()) {
        Slot io;
        if (verifying) {
            if (j.verify_next >= j.written.size()) break;
            io.offset = j.written[j.verify_next].first;
            io.length = j.written[j.verify_next].second;
            j.verify_next++;
            io.op = Op::Read;
            io.verify_read = true;
        } else {
            if (j.issued_bytes >= j.target_bytes) break;
            io = next_io(j);
            if (!io.length) {  // the last pass ended: the job stops issuing
                j.target_bytes = j.issued_bytes;
                break;
            }
        }
        uint32_t slot = j.free_slots.back();
        j.free_slots.pop_back();
        j.busy++;
        j.issued_ios++;
        io.start_ns = t;
        if (io.op == Op::Write && s.verify)
            fill_pattern(s, j.buffers[slot].get(), io.offset, io.length);
        j.slots[slot] = io;
        j.batch.push_back(slot);
        charge_cpu(j, now, s.fio_submit_ns.value_or(j.stack->config().cpu.buffered.fio_submit_ns));
        if (s.direct) t = j.cpu_free;
    }
    if (j.batch.empty()) return;
    j.batch_pending = true;
    // A buffered job's submission work is part of the submitter's CPU model
    // (buffered_io.h), which also runs the inline attempts: queue at once.
    j.commit_at = s.direct ? t : now;
}

// backend.c update_runtime(), at the end of do_io() and of do_verify(): the
// phase's time (from td->start, which the end of ramp_time moves) counts for
// each direction it moved bytes in (the verify phase: reads), so a
// write-then-verify job reports each phase with its own time.
void end_phase(JobRun& j, uint64_t now, bool verify_phase) {
    uint64_t from = std::min(now, std::max(j.phase_start, j.stats_from));
    for (size_t d = 0; d < kFioDirections; d++)
        if (verify_phase ? d == kFioRead : j.r.dir[d].bytes > 0)
            j.r.dir[d].runtime_ns += now - from;
    j.phase_start = now;
}

// One look at the job at `now`; true when it changed something. `wake` is
// lowered to when it next wants to act without a completion.
bool step_job(JobRun& j, uint64_t now, uint64_t& wake) {
    const FioJobSpec& s = *j.spec;
    bool progress = reap_completions(j, now);
    if (j.batch_pending) {
        if (now < j.commit_at) {
            wake = std::min(wake, j.commit_at);
            return progress;
        }
        commit_batch(j, now);
        progress = true;
    }
    if (j.sync_in_flight) return progress;
    if (j.state == JobState::Running) {
        // Past the horizon every job stops; run_fio_jobs() then refuses the run.
        bool stopping = j.issued_bytes >= j.target_bytes || now >= j.stop_at || j.failed ||
                        j.terminated || now >= kTimeHorizonNs;
        if (stopping) {
            if (j.busy) return progress;
            if (s.end_fsync && !j.end_sync_sent) {  // do_io()'s end, before the verify
                j.end_sync_sent = true;
                send_sync(j);
                // ioengines.c td_io_queue(): a sync queued while the job is
                // TD_FSYNCING (backend.c's end_fsync) is not counted in
                // total_io_u[DDIR_SYNC]; sent and reaped as any other.
                j.r.syncs--;
                return true;
            }
            end_phase(j, now, false);
            if (s.verify && !j.written.empty() && !j.failed && !j.terminated) {
                std::stable_sort(j.written.begin(), j.written.end());
                j.state = JobState::Verifying;
            } else {
                j.state = JobState::Finishing;
            }
            return true;
        }
        if (s.fsync_blocks && j.writes_since_sync >= s.fsync_blocks) {
            if (j.busy) return progress;
            j.writes_since_sync = 0;
            send_sync(j);
            return true;
        }
    }
    if (j.state == JobState::Running || j.state == JobState::Verifying) {
        bool verifying = j.state == JobState::Verifying;
        if (verifying && (j.verify_next >= j.written.size() || j.failed || j.terminated)) {
            if (!j.busy) {
                end_phase(j, now, true);
                j.state = JobState::Finishing;
                return true;
            }
            return progress;
        }
        if (j.free_slots.empty()) return progress;
        uint64_t t = std::max(now, cpu_free_at(j));
        if (t == kNever) return progress;  // the submission's own timer wakes the loop
        if (!verifying) {
            t = std::max(t, j.think_until);
            if (s.rate_iops)
                t = std::max<uint64_t>(t,
                                       j.start_ns + j.issued_ios * 1'000'000'000ull / s.rate_iops);
            if (j.stop_at != kNever && t >= j.stop_at && t > now) {
                wake = std::min(wake, j.stop_at);
                return progress;
            }
        }
        if (t > now) {
            wake = std::min(wake, t);
            return progress;
        }
        prepare_batch(j, now, verifying);
        if (!verifying && s.time_based && j.instant.stuck(now, j.batch.size(), j.slots.size())) {
            j.time_stuck = true;
            j.stop_at = now;
        }
        if (j.batch_pending && j.commit_at > now) wake = std::min(wake, j.commit_at);
        return true;
    }
    if (j.state == JobState::Finishing) {
        if (!j.r.end_ns) {
            j.r.end_ns = now;
            uint64_t from = std::min(now, j.stats_from);
            j.r.runtime_ns = now - from;
        }
        // The engine's cleanup: a buffered job's dirty pages are written back
        // (after fio's runtime), before the device's statistics are taken.
        if (!s.direct && !j.flush_sent) {
            j.flush_sent = true;
            BufferedIo& io = j.stack->buffered();
            j.silent_before_flush = io.take_silent_errors();
            j.wb_errors_at_flush = io.stats().writeback_errors;
            send_sync(j);
            j.r.syncs--;  // not one of the job's own fsyncs
            return true;
        }
        j.state = JobState::Done;
        return true;
    }
    return progress;
}

}  // namespace

std::vector<FioJobResult> run_fio_jobs(size_t nr_stacks, VirtualClock& clock,
                                       const std::vector<FioJobSpec>& jobs,
                                       const FioRunHooks& hooks, InterruptPoll interrupt) {
    std::vector<std::unique_ptr<JobRun>> runs;
    std::vector<Stack*> stacks(nr_stacks, nullptr);
    std::vector<size_t> users(nr_stacks, 0);
    size_t phases = 0;
    for (const FioJobSpec& s : jobs) {
        if (s.stack >= nr_stacks) throw std::invalid_argument("simulate: job stack out of range");
        users[s.stack]++;
        phases = std::max(phases, s.phase + 1);
        auto r = std::make_unique<JobRun>();
        r->spec = &s;
        runs.push_back(std::move(r));
    }
    const uint64_t genesis = clock.now_ns();
    size_t phase = 0;
    uint64_t phase_open = genesis;
    uint64_t idle_passes = 0;
    // A job has ended: its stack is closed after its last job.
    auto leave_stack = [&](size_t si) {
        if (--users[si] || !stacks[si]) return;
        stacks[si]->drain();
        if (hooks.stack_done) hooks.stack_done(hooks.ctx, si);
        stacks[si] = nullptr;
    };
    for (;;) {
        for (bool more = true; more;) {
            more = false;
            for (Stack* st : stacks)
                if (st && st->loop().run_ready()) more = true;
        }
        uint64_t now = clock.now_ns();
        uint64_t wake = kNever;
        bool progress = false, all_done = true;
        bool interrupted = interrupt.requested();
        for (auto& rp : runs) {
            JobRun& j = *rp;
            if (j.state == JobState::Done) continue;
            all_done = false;
            j.terminated |= interrupted;
            if (j.terminated && j.state == JobState::Waiting) {
                j.state = JobState::Done;  // never started (fio's jobs not yet forked)
                leave_stack(j.spec->stack);
                progress = true;
                continue;
            }
            if (j.spec->phase > phase) continue;
            if (j.state == JobState::Waiting) {
                uint64_t at = std::max(phase_open, genesis + j.spec->start_delay_ns);
                if (now < at) {
                    wake = std::min(wake, at);
                    continue;
                }
                size_t si = j.spec->stack;
                if (!stacks[si]) stacks[si] = hooks.open_stack(hooks.ctx, si);
                start_job(j, *stacks[si], now);
                progress = true;
            }
            progress |= step_job(j, now, wake);
            if (j.state == JobState::Done) {
                if (j.stack) j.stack->task_exited(j.task);  // fio's job thread ends (bfq_exit_icq)
                leave_stack(j.spec->stack);
            }
        }
        if (all_done) break;
        // stonewall: the next phase opens when every job of this one is done.
        bool phase_done = true;
        for (auto& rp : runs)
            if (rp->spec->phase == phase && rp->state != JobState::Done) phase_done = false;
        if (phase_done && phase + 1 < phases) {
            phase++;
            phase_open = now;
            continue;
        }
        if (progress) {
            idle_passes = 0;
            continue;
        }
        for (Stack* st : stacks)
            if (st) wake = std::min(wake, st->loop().next_deadline());
        // Real I/O due by then is taken first (EventLoop::settle).
        bool settled = false;
        for (Stack* st : stacks)
            if (st && st->loop().must_settle_before(wake)) {
                st->loop().settle(wake == kNever);
                settled = true;
            }
        if (settled) continue;
        if (wake == kNever)
            throw std::runtime_error(
                "simulate: the jobs cannot progress (I/O in flight with nothing pending)");
        if (wake <= now) {
            if (++idle_passes > 10'000'000)
                throw std::runtime_error("simulate: no progress at one instant (internal error)");
            continue;
        }
        idle_passes = 0;
        clock.advance_to(wake);
    }
    // Refused only now: until every job has drained, its buffers were in use.
    interrupt.throw_if_requested();
    for (auto& rp : runs)
        if (rp->time_stuck)
            throw std::invalid_argument(zero_time_message(
                job_where(*rp->spec), "time_based",
                "time_based=False, or fio_submit_ns, fio_complete_ns or think_ns > 0, or a "
                "stack with a timing model"));
    if (clock.now_ns() >= kTimeHorizonNs) throw std::invalid_argument(horizon_message("simulate"));
    std::vector<FioJobResult> out;
    for (auto& rp : runs) out.push_back(rp->r);
    return out;
}

}  // namespace mdsplit
