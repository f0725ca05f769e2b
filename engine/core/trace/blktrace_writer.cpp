#include "core/trace/blktrace_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace mdsplit {

namespace {

constexpr uint32_t kMagicWord = blk::kTraceMagic | blk::kTraceVersion;

constexpr uint16_t bswap(uint16_t v) { return __builtin_bswap16(v); }
constexpr uint32_t bswap(uint32_t v) { return __builtin_bswap32(v); }
constexpr uint64_t bswap(uint64_t v) { return __builtin_bswap64(v); }

// cpu_to_be32 / cpu_to_be64 and back.
template <typename T>
constexpr T to_be(T v) {
    if constexpr (std::endian::native == std::endian::little) {
        return bswap(v);
    } else {
        return v;
    }
}
template <typename T>
constexpr T from_be(T v) {
    return to_be(v);
}

constexpr std::string_view kIdleComm = "swapper/0";  // comm of pid 0 on cpu 0

std::string errno_text(int err) { return std::strerror(err); }

// The pdu __blk_add_trace() attaches: blk_add_trace_split (__be64 new
// sector), blk_add_trace_bio_remap (struct blk_io_trace_remap) and
// blk_add_trace_unplug (__be64 depth). Returns the pdu length.
size_t encode_pdu(const TraceEvent& e, unsigned char* out) {
    switch (e.action) {
        case TraceAction::Split: {
            const uint64_t rpdu = to_be<uint64_t>(e.new_sector);
            std::memcpy(out, &rpdu, sizeof(rpdu));
            return sizeof(rpdu);
        }
        case TraceAction::Remap: {
            blk::IoTraceRemap r;
            r.device_from = to_be<uint32_t>(e.from_device);
            r.device_to = to_be<uint32_t>(e.device);  // bio_dev(bio): the traced device
            r.sector_from = to_be<uint64_t>(e.from_sector);
            std::memcpy(out, &r, sizeof(r));
            return sizeof(r);
        }
        case TraceAction::Unplug: {
            const uint64_t rpdu = to_be<uint64_t>(e.depth);
            std::memcpy(out, &rpdu, sizeof(rpdu));
            return sizeof(rpdu);
        }
        default:
            return 0;
    }
}

}  // namespace

// kernel/trace/blktrace.c: the BLK_TA_* passed by each blk_add_trace_*()
// probe, then what __blk_add_trace() ORs in from the request flags.
uint32_t blktrace_action(const TraceEvent& e, bool bio_based) {
    using namespace blk;
    uint32_t what = 0;
    switch (e.action) {
        case TraceAction::Queue:  // blk_add_trace_bio_queue
            what = kTaQueue | tc_act(kTcQueue);
            break;
        case TraceAction::BackMerge:  // blk_add_trace_bio_backmerge
            what = kTaBackmerge | tc_act(kTcQueue);
            break;
        case TraceAction::FrontMerge:  // blk_add_trace_bio_frontmerge
            what = kTaFrontmerge | tc_act(kTcQueue);
            break;
        case TraceAction::GetRq:  // blk_add_trace_getrq
            what = kTaGetrq | tc_act(kTcQueue);
            break;
        case TraceAction::Plug:  // blk_add_trace_plug: opf 0
            return kTaPlug | tc_act(kTcQueue) | tc_act(kTcRead);
        case TraceAction::Unplug:  // blk_add_trace_unplug (explicit): opf 0
            return kTaUnplugIo | tc_act(kTcQueue) | tc_act(kTcRead);
        case TraceAction::Insert:  // blk_add_trace_rq_insert via blk_add_trace_rq
            what = kTaInsert | tc_act(kTcQueue) | tc_act(kTcFs);
            break;
        case TraceAction::Issue:  // blk_add_trace_rq_issue via blk_add_trace_rq
            what = kTaIssue | tc_act(kTcIssue) | tc_act(kTcFs);
            break;
        case TraceAction::Complete:  // blk_add_trace_rq_complete / _bio_complete
            what = kTaComplete | tc_act(kTcComplete) | (bio_based ? 0 : tc_act(kTcFs));
            break;
        case TraceAction::Split:  // blk_add_trace_split: BLK_TA_SPLIT has no category
            what = kTaSplit;
            break;
        case TraceAction::Remap:  // blk_add_trace_bio_remap
            what = kTaRemap | tc_act(kTcQueue);
            break;
    }
    // ddir_act[op_is_write(op)]; an emulated flush is a REQ_OP_WRITE |
    // REQ_PREFLUSH bio (blkdev_issue_flush), so it is W plus BLK_TC_FLUSH.
    // REQ_OP_DISCARD is a write op (op_is_write: odd) with BLK_TC_DISCARD.
    bool write_op = is_write(e.op) || e.op == Op::Flush || e.op == Op::Discard;
    what |= write_op ? tc_act(kTcWrite) : tc_act(kTcRead);
    if (e.op == Op::Flush) what |= tc_act(kTcFlush);      // MASK_TC_BIT(opf, PREFLUSH)
    if (e.op == Op::Discard) what |= tc_act(kTcDiscard);  // __blk_add_trace(): REQ_OP_DISCARD
    if (e.sync) what |= tc_act(kTcSync);                  // MASK_TC_BIT(opf, SYNC)
    return what;
}

BlktraceWriter::BlktraceWriter(const std::string& path, BlktraceOptions options)
    : path_(path),
      options_(std::move(options)),
      buffer_(std::make_unique_for_overwrite<unsigned char[]>(kBufferSize)) {
    // A trace replaces a file, never what a link or a name points at
    // otherwise (a block device, a FIFO): that would be written through.
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
        throw std::runtime_error("mdsplit: mdsplit_trace: " + path +
                                 " exists and is not a regular file; allowed: a directory "
                                 "whose trace files are regular files or absent");
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) {
        const int err = errno;
        throw std::runtime_error("mdsplit: mdsplit_trace: cannot create " + path + ": " +
                                 errno_text(err));
    }
}

BlktraceWriter::~BlktraceWriter() {
    write_out();
    ::close(fd_);
}

// kernel/trace/blktrace.c: trace_note_tsk() -> trace_note(BLK_TN_PROCESS),
// sent before a task's first event; sequence 0, sector 0, bytes 0.
void BlktraceWriter::note_process(const TraceEvent& e) {
    constexpr size_t kLen = sizeof(blk::IoTrace) + blk::kTaskCommLen;
    if (used_ + kLen > kBufferSize) write_out();
    blk::IoTrace t{};
    t.magic = kMagicWord;
    t.time = e.time_ns;
    t.action = blk::kTnProcess;
    t.pid = e.pid;
    t.device = e.device;
    t.pdu_len = blk::kTaskCommLen;
    // pid 0 is the idle task (a completion traced from interrupt context).
    const std::string_view name = e.pid == 0 ? kIdleComm : options_.process_name;
    char comm[blk::kTaskCommLen] = {};
    std::memcpy(comm, name.data(), std::min(name.size(), blk::kTaskCommLen - 1));
    unsigned char* out = buffer_.get() + used_;
    std::memcpy(out, &t, sizeof(t));
    std::memcpy(out + sizeof(t), comm, sizeof(comm));
    used_ += kLen;
}

// kernel/trace/blktrace.c: __blk_add_trace() -> relay_blktrace_event() ->
// record_blktrace_event().
void BlktraceWriter::record(const TraceEvent& e) {
    if (!have_last_pid_ || e.pid != last_pid_) {
        if (seen_pids_.insert(e.pid).second) note_process(e);
        have_last_pid_ = true;
        last_pid_ = e.pid;
    }
    constexpr size_t kMaxLen = sizeof(blk::IoTrace) + sizeof(blk::IoTraceRemap);
    if (used_ + kMaxLen > kBufferSize) write_out();

    unsigned char* out = buffer_.get() + used_;
    const size_t pdu_len = encode_pdu(e, out + sizeof(blk::IoTrace));
    blk::IoTrace t;
    t.magic = kMagicWord;
    t.sequence = static_cast<uint32_t>(e.sequence);
    t.time = e.time_ns;
    t.sector = e.sector;
    t.bytes = e.bytes;
    t.action = blktrace_action(e, options_.bio_based);
    t.pid = e.pid;
    t.device = e.device;
    t.cpu = 0;
    t.error = static_cast<uint16_t>(e.error);  // __u16 error = blk_status_to_errno()
    t.pdu_len = static_cast<uint16_t>(pdu_len);
    std::memcpy(out, &t, sizeof(t));
    used_ += sizeof(t) + pdu_len;
    ++events_;
}

void BlktraceWriter::write_out() noexcept {
    const unsigned char* p = buffer_.get();
    size_t left = used_;
    used_ = 0;
    if (write_errno_ != 0) return;  // the file is already incomplete: drop
    while (left > 0) {
        const ssize_t n = ::write(fd_, p, left);
        if (n < 0) {
            if (errno == EINTR) continue;
            write_errno_ = errno;
            return;
        }
        p += n;
        left -= static_cast<size_t>(n);
    }
}

void BlktraceWriter::flush() {
    write_out();
    if (write_errno_ != 0) {
        throw std::runtime_error("mdsplit: mdsplit_trace: cannot write " + path_ + ": " +
                                 errno_text(write_errno_));
    }
}

namespace {

// A trace is a regular file: a device or FIFO would be read without end
// (/dev/zero) or block; a NUL would open the path's prefix.
std::vector<unsigned char> read_whole_file(const std::string& path) {
    struct stat st;
    if (path.find('\0') != std::string::npos)
        throw std::runtime_error(
            "mdsplit: the trace path holds a NUL character; allowed: a "
            "blktrace file's path");
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        throw std::runtime_error("mdsplit: " + path +
                                 " is not a regular file; allowed: a blktrace file");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        throw std::runtime_error("mdsplit: cannot open " + path + ": " + errno_text(err));
    }
    std::vector<unsigned char> data;
    unsigned char chunk[65536];
    for (;;) {
        const ssize_t n = ::read(fd, chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            throw std::runtime_error("mdsplit: cannot read " + path + ": " + errno_text(err));
        }
        if (n == 0) break;
        data.insert(data.end(), chunk, chunk + n);
    }
    ::close(fd);
    return data;
}

// Inverse of the probe table in blktrace_action(); false for actions that
// have no TraceEvent letter.
bool decode_action(uint32_t act, TraceAction& out) {
    switch (act) {
        case blk::kTaQueue:
            out = TraceAction::Queue;
            return true;
        case blk::kTaBackmerge:
            out = TraceAction::BackMerge;
            return true;
        case blk::kTaFrontmerge:
            out = TraceAction::FrontMerge;
            return true;
        case blk::kTaGetrq:
            out = TraceAction::GetRq;
            return true;
        case blk::kTaIssue:
            out = TraceAction::Issue;
            return true;
        case blk::kTaComplete:
            out = TraceAction::Complete;
            return true;
        case blk::kTaPlug:
            out = TraceAction::Plug;
            return true;
        case blk::kTaUnplugIo:
        case blk::kTaUnplugTimer:
            out = TraceAction::Unplug;
            return true;
        case blk::kTaInsert:
            out = TraceAction::Insert;
            return true;
        case blk::kTaSplit:
            out = TraceAction::Split;
            return true;
        case blk::kTaRemap:
            out = TraceAction::Remap;
            return true;
        default:
            return false;
    }
}

uint64_t load_be64(const unsigned char* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof(v));
    return from_be(v);
}

uint32_t load_be32(const unsigned char* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof(v));
    return from_be(v);
}

}  // namespace

// blkparse's read_events()/handle_notify() in reverse: the header is in the
// tracing host's byte order (told by the magic), payloads are big endian.
std::vector<TraceEvent> read_blktrace_file(const std::string& path) {
    using namespace blk;
    const std::vector<unsigned char> data = read_whole_file(path);
    std::vector<TraceEvent> events;
    events.reserve(data.size() / sizeof(IoTrace));
    size_t off = 0;
    while (off < data.size()) {
        if (data.size() - off < sizeof(IoTrace)) {
            throw std::runtime_error("mdsplit: " + path + ": truncated blktrace record at offset " +
                                     std::to_string(off));
        }
        IoTrace t;
        std::memcpy(&t, data.data() + off, sizeof(t));
        if ((t.magic & 0xffffff00u) != kTraceMagic) {
            if ((bswap(t.magic) & 0xffffff00u) != kTraceMagic) {
                throw std::runtime_error("mdsplit: " + path + ": bad blktrace magic at offset " +
                                         std::to_string(off));
            }
            t.magic = bswap(t.magic);
            t.sequence = bswap(t.sequence);
            t.time = bswap(t.time);
            t.sector = bswap(t.sector);
            t.bytes = bswap(t.bytes);
            t.action = bswap(t.action);
            t.pid = bswap(t.pid);
            t.device = bswap(t.device);
            t.cpu = bswap(t.cpu);
            t.error = bswap(t.error);
            t.pdu_len = bswap(t.pdu_len);
        }
        if ((t.magic & 0xffu) != kTraceVersion) {
            throw std::runtime_error("mdsplit: " + path + ": unsupported blktrace version " +
                                     std::to_string(t.magic & 0xffu) + " at offset " +
                                     std::to_string(off));
        }
        const size_t rec_len = sizeof(IoTrace) + t.pdu_len;
        if (data.size() - off < rec_len) {
            throw std::runtime_error("mdsplit: " + path +
                                     ": truncated blktrace payload at offset " +
                                     std::to_string(off));
        }
        const unsigned char* pdu = data.data() + off + sizeof(IoTrace);
        size_t pdu_len = t.pdu_len;
        off += rec_len;

        if (t.action & tc_act(kTcNotify)) continue;  // BLK_TN_*: process, timestamp, message
        if (t.action & kTaCgroup) {                  // a u64 cgroup id leads the pdu
            const size_t skip = std::min<size_t>(pdu_len, sizeof(uint64_t));
            pdu += skip;
            pdu_len -= skip;
        }
        TraceEvent e;
        if (!decode_action(t.action & 0xffu, e.action)) continue;
        e.sequence = t.sequence;
        e.time_ns = t.time;
        e.device = t.device;
        e.sector = t.sector;
        e.bytes = t.bytes;
        e.pid = t.pid;
        e.error = static_cast<int16_t>(t.error);
        const uint32_t tc = t.action >> kTcShift;
        e.op = (tc & kTcDiscard) ? Op::Discard
               : (tc & kTcFlush) ? Op::Flush
               : (tc & kTcWrite) ? Op::Write
                                 : Op::Read;
        e.sync = (tc & kTcSync) != 0;
        switch (e.action) {
            case TraceAction::Split:
                if (pdu_len >= sizeof(uint64_t)) e.new_sector = load_be64(pdu);
                break;
            case TraceAction::Remap:
                if (pdu_len >= sizeof(IoTraceRemap)) {
                    e.from_device = load_be32(pdu + offsetof(IoTraceRemap, device_from));
                    e.from_sector = load_be64(pdu + offsetof(IoTraceRemap, sector_from));
                }
                break;
            case TraceAction::Unplug:
                if (pdu_len >= sizeof(uint64_t)) {
                    e.depth = static_cast<uint32_t>(load_be64(pdu));
                }
                break;
            default:
                break;
        }
        events.push_back(e);
    }
    return events;
}

}  // namespace mdsplit
