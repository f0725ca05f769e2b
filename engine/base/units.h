// Block-layer units and operations shared by every layer.
#pragma once

#include <cstdint>

namespace mdsplit {

using sector_t = uint64_t;
inline constexpr unsigned kSectorShift = 9;
inline constexpr uint64_t kSectorSize = 512;
inline constexpr uint64_t kPageSize = 4096;

// REQ_OP_READ, REQ_OP_WRITE, REQ_OP_FLUSH, REQ_OP_DISCARD. A discard carries
// no data: its bios have a range and no buffer.
enum class Op : uint8_t { Read = 0, Write = 1, Flush = 2, Discard = 3 };

inline constexpr bool is_write(Op op) { return op == Op::Write; }
inline constexpr const char* op_name(Op op) {
    return op == Op::Read    ? "read"
           : op == Op::Write ? "write"
           : op == Op::Flush ? "flush"
                             : "discard";
}

}  // namespace mdsplit
