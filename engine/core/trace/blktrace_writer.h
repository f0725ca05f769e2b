// blktrace output: one file per device in the kernel's binary format, so that
// blkparse and btt read what the emulated layers record.
//
// Format: include/uapi/linux/blktrace_api.h (struct blk_io_trace, version 7,
// host endian) followed by pdu_len payload bytes, big endian, as
// kernel/trace/blktrace.c writes them. The file name blkparse expects is
// `<name>.blktrace.<cpu>`; every record here is on cpu 0, so a writer for
// `DIR/md0.blktrace.0` is read with `blkparse -i DIR/md0`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/trace/trace_event.h"

namespace mdsplit {

// Constants of include/uapi/linux/blktrace_api.h.
namespace blk {

inline constexpr uint32_t kTraceMagic = 0x65617400;  // BLK_IO_TRACE_MAGIC
inline constexpr uint32_t kTraceVersion = 0x07;      // BLK_IO_TRACE_VERSION
inline constexpr unsigned kTcShift = 16;             // BLK_TC_SHIFT

// enum blktrace_cat
inline constexpr uint32_t kTcRead = 1u << 0;
inline constexpr uint32_t kTcWrite = 1u << 1;
inline constexpr uint32_t kTcFlush = 1u << 2;
inline constexpr uint32_t kTcSync = 1u << 3;
inline constexpr uint32_t kTcQueue = 1u << 4;
inline constexpr uint32_t kTcRequeue = 1u << 5;
inline constexpr uint32_t kTcIssue = 1u << 6;
inline constexpr uint32_t kTcComplete = 1u << 7;
inline constexpr uint32_t kTcFs = 1u << 8;
inline constexpr uint32_t kTcPc = 1u << 9;
inline constexpr uint32_t kTcNotify = 1u << 10;
inline constexpr uint32_t kTcAhead = 1u << 11;
inline constexpr uint32_t kTcMeta = 1u << 12;
inline constexpr uint32_t kTcDiscard = 1u << 13;
inline constexpr uint32_t kTcDrvData = 1u << 14;
inline constexpr uint32_t kTcFua = 1u << 15;

constexpr uint32_t tc_act(uint32_t category) { return category << kTcShift; }  // BLK_TC_ACT

// enum blktrace_act
inline constexpr uint32_t kTaQueue = 1;
inline constexpr uint32_t kTaBackmerge = 2;
inline constexpr uint32_t kTaFrontmerge = 3;
inline constexpr uint32_t kTaGetrq = 4;
inline constexpr uint32_t kTaSleeprq = 5;
inline constexpr uint32_t kTaRequeue = 6;
inline constexpr uint32_t kTaIssue = 7;
inline constexpr uint32_t kTaComplete = 8;
inline constexpr uint32_t kTaPlug = 9;
inline constexpr uint32_t kTaUnplugIo = 10;
inline constexpr uint32_t kTaUnplugTimer = 11;
inline constexpr uint32_t kTaInsert = 12;
inline constexpr uint32_t kTaSplit = 13;
inline constexpr uint32_t kTaBounce = 14;
inline constexpr uint32_t kTaRemap = 15;
inline constexpr uint32_t kTaAbort = 16;
inline constexpr uint32_t kTaDrvData = 17;
inline constexpr uint32_t kTaCgroup = 1u << 8;  // __BLK_TA_CGROUP: a u64 cgroup id leads the pdu

// enum blktrace_notify, BLK_TN_PROCESS
inline constexpr uint32_t kTnProcess = 0 | tc_act(kTcNotify);
inline constexpr size_t kTaskCommLen = 16;  // TASK_COMM_LEN: the BLK_TN_PROCESS pdu

// struct blk_io_trace
struct IoTrace {
    uint32_t magic;     // BLK_IO_TRACE_MAGIC | BLK_IO_TRACE_VERSION
    uint32_t sequence;  // event number
    uint64_t time;      // in nanoseconds
    uint64_t sector;    // disk offset
    uint32_t bytes;     // transfer length
    uint32_t action;    // what happened
    uint32_t pid;       // who did it
    uint32_t device;    // device number
    uint32_t cpu;       // on what cpu did it happen
    uint16_t error;     // completion error
    uint16_t pdu_len;   // length of data after this trace
};
static_assert(sizeof(IoTrace) == 48);

// struct blk_io_trace_remap (all fields big endian)
struct IoTraceRemap {
    uint32_t device_from;
    uint32_t device_to;
    uint64_t sector_from;
};
static_assert(sizeof(IoTraceRemap) == 16);

}  // namespace blk

struct BlktraceOptions {
    // A bio-based device (md, dm) traces C from block_bio_complete, without
    // BLK_TC_FS; a request-based one from block_rq_complete, with it.
    bool bio_based = false;
    // comm of the BLK_TN_PROCESS note written for each new pid (<= 15 chars);
    // pid 0 is named "swapper/0", the idle task, as the kernel would.
    std::string process_name = "fio";
};

// The action word __blk_add_trace() computes for an event: __BLK_TA_* with its
// category (BLK_TA_*), BLK_TC_FS for request events (blk_add_trace_rq), and
// READ/WRITE, SYNC and FLUSH from the op. P and U are traced with opf 0, so
// they carry BLK_TC_READ whatever the event's op.
uint32_t blktrace_action(const TraceEvent& event, bool bio_based = false);

// Writes one device's events as `<name>.blktrace.0`. Not thread-safe: the
// device's owner (its event loop) serializes record() and flush().
class BlktraceWriter final : public TraceSink {
public:
    // Creates or truncates `path`; throws std::runtime_error
    // "mdsplit: mdsplit_trace: cannot create <path>: <strerror>".
    explicit BlktraceWriter(const std::string& path, BlktraceOptions options = {});
    ~BlktraceWriter() override;  // flushes; never throws
    BlktraceWriter(const BlktraceWriter&) = delete;
    BlktraceWriter& operator=(const BlktraceWriter&) = delete;

    // Buffers the record (and a BLK_TN_PROCESS note before a pid's first
    // event). Never throws: a write error is kept and reported by flush().
    void record(const TraceEvent& event) override;
    // Writes the buffer out; throws std::runtime_error on a write error
    // (including one that happened during an earlier record()).
    void flush() override;

    const std::string& path() const { return path_; }
    uint64_t events_written() const { return events_; }  // not counting notes

private:
    static constexpr size_t kBufferSize = 64 * 1024;

    void note_process(const TraceEvent& event);
    void write_out() noexcept;

    std::string path_;
    BlktraceOptions options_;
    std::unique_ptr<unsigned char[]> buffer_;
    int fd_ = -1;
    size_t used_ = 0;
    int write_errno_ = 0;
    uint64_t events_ = 0;
    bool have_last_pid_ = false;
    uint32_t last_pid_ = 0;
    std::unordered_set<uint32_t> seen_pids_;
};

// Reads a blktrace file (ours or the kernel's, either byte order) back into
// events: the inverse of BlktraceWriter. Notify records and actions without a
// TraceEvent letter (requeue, sleeprq, bounce, abort, driver data) are
// skipped; UT (timer unplug) reads as Unplug. Throws std::runtime_error on an
// unreadable file, a bad magic/version or a truncated record.
std::vector<TraceEvent> read_blktrace_file(const std::string& path);

}  // namespace mdsplit
