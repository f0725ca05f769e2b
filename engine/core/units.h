// Block-layer units and operations shared by every layer.
#pragma once

#include <cstdint>

namespace mdsplit {

using sector_t = uint64_t;
inline constexpr unsigned kSectorShift = 9;
inline constexpr uint64_t kSectorSize = 512;
inline constexpr uint64_t kPageSize = 4096;

enum class Op : uint8_t { Read = 0, Write = 1, Flush = 2 };

inline constexpr bool is_write(Op op) { return op == Op::Write; }
inline constexpr const char* op_name(Op op) {
    return op == Op::Read ? "read" : op == Op::Write ? "write" : "flush";
}

}  // namespace mdsplit
