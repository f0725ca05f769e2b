"""Sizes and durations as a stack TOML gives them, the Python twin of
engine/config/size_parse.cpp (parse_size, parse_duration_ns): a decimal
number, then a unit after optional blanks, case-insensitive. Sizes: none
or b (bytes), k/m/g/t with an optional b or ib (powers of 1024; "64k",
"1m", "1.5k" when the product is whole bytes). Durations: ns, us, ms, s
(a unit is required except for 0). A job file's numbers are fio's own
syntax (str_to_decimal): harness/jobfile.py parse_size, parse_time_us.
"""
import re

_NUMBER = re.compile(r"^\s*(\d+)(?:\.(\d+))?\s*(.*?)\s*$")
_SIZE_UNITS = {"": 1, "b": 1}
for _power, _prefix in enumerate("kmgt", start=1):
    for _tail in ("", "b", "ib"):
        _SIZE_UNITS[_prefix + _tail] = 1 << (10 * _power)
_DURATION_NS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def _scaled(value, units: dict, what: str, example: str, allow_bare_zero=False) -> int:
    """value's number x its unit's multiplier, exactly; ValueError naming
    `value` otherwise."""
    m = _NUMBER.match(str(value))
    unit = m.group(3).lower() if m else None
    if m and not unit and allow_bare_zero and not m.group(1).strip("0") \
            and not (m.group(2) or "").strip("0"):
        return 0
    if not m or unit not in units:
        raise ValueError(f"{what} {value!r}: e.g. {example}")
    fraction = m.group(2) or ""
    scaled = int(m.group(1) + fraction) * units[unit]
    if scaled % 10 ** len(fraction):
        raise ValueError(f"{what} {value!r} is not a whole number of "
                         f"{'bytes' if units is _SIZE_UNITS else 'nanoseconds'}")
    return scaled // 10 ** len(fraction)


def parse_size(value) -> int:
    """A stack file's size in bytes: an int as is, or text ("64k", "1m")."""
    if isinstance(value, int):
        return value
    return _scaled(value, _SIZE_UNITS, "size", '65536, "64k", "1m"')


def parse_duration_ns(value) -> int:
    """A stack file's duration ("8ms", "250us", "1.5s") in nanoseconds."""
    return _scaled(value, _DURATION_NS, "duration", '"8ms", "250us", "1s"',
                   allow_bare_zero=True)
