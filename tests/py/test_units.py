"""harness/units.py: a stack TOML's sizes and durations, as size_parse.cpp reads them."""
import pytest

from harness.units import parse_duration_ns, parse_size


def test_size_units_are_powers_of_1024_with_optional_b_or_ib():
    assert [parse_size(v) for v in ("64k", "1m", "4 KiB", "1kb", "2g", "65536", 4096)] == \
        [65536, 1 << 20, 4096, 1024, 2 << 30, 65536, 4096]


def test_size_fraction_must_give_whole_bytes():
    assert parse_size("1.5k") == 1536
    with pytest.raises(ValueError, match="not a whole number of bytes"):
        parse_size("1.0001k")


@pytest.mark.parametrize("bad", ["ib", "x", "4q", "-1k", ""])
def test_size_refuses_what_is_not_a_size(bad):
    with pytest.raises(ValueError, match="e.g. 65536"):
        parse_size(bad)


def test_duration_needs_a_unit_except_zero():
    assert [parse_duration_ns(v) for v in ("8ms", "250us", "1.5s", "7ns", "0")] == \
        [8_000_000, 250_000, 1_500_000_000, 7, 0]
    with pytest.raises(ValueError, match="duration '8'"):
        parse_duration_ns("8")
