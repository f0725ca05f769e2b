"""harness/jobfile.py: fio job files read as fio 3.33 reads them."""
import pytest

from harness.jobfile import (JobFileError, parse_bssplit, parse_job_file, parse_range,
                             parse_size, parse_size_per_direction, parse_time_us)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_global_options_apply_to_following_jobs(tmp_path):
    p = write(tmp_path, "a.fio", "[global]\nbs=4k\n[one]\nrw=read\n[global]\nbs=8k\n[two]\n")
    jf = parse_job_file(p, env={})
    assert [j.options["bs"] for j in jf.jobs] == ["4k", "8k"]
    assert "rw" not in jf.jobs[1].options


def test_comments_and_flags(tmp_path):
    p = write(tmp_path, "a.fio", "; comment\n# other\n[j]\n  time_based\nbs = 4k\n")
    j = parse_job_file(p, env={}).jobs[0]
    assert j.options == {"time_based": "1", "bs": "4k"}


def test_env_substitution_unset_is_empty(tmp_path):
    p = write(tmp_path, "a.fio", "[j]\nsize=${SZ}\nfilename=x${NOPE}y\n")
    j = parse_job_file(p, env={"SZ": "64m"}).jobs[0]
    assert j.options["size"] == "64m"
    assert j.options["filename"] == "xy"


def test_include_relative_to_including_file(tmp_path):
    (tmp_path / "sub").mkdir()
    write(tmp_path, "sub/common.inc", "bs=16k\niodepth=8\n")
    p = write(tmp_path, "sub/a.fio", "[j]\ninclude common.inc\nrw=write\n")
    j = parse_job_file(p, env={}).jobs[0]
    assert (j.options["bs"], j.options["iodepth"], j.options["rw"]) == ("16k", "8", "write")


def test_include_may_not_open_sections(tmp_path):
    write(tmp_path, "bad.inc", "[x]\n")
    p = write(tmp_path, "a.fio", "[j]\ninclude bad.inc\n")
    with pytest.raises(JobFileError, match="no new sections"):
        parse_job_file(p, env={})


def test_stonewall_and_new_group_open_groups_except_first(tmp_path):
    p = write(tmp_path, "a.fio",
              "[a]\nstonewall\n[b]\n[c]\nstonewall\n[d]\nnew_group\n")
    jf = parse_job_file(p, env={})
    assert [j.groupid for j in jf.jobs] == [0, 0, 1, 2]
    assert [j.stonewall for j in jf.jobs] == [True, False, True, False]


def test_numjobs_expands_subjobs_without_stonewall(tmp_path):
    """In fio's order (init.c add_job: while (--numjobs)): subjob 0, then N-1 .. 1."""
    p = write(tmp_path, "a.fio", "[a]\n[b]\nnumjobs=3\nstonewall\n")
    jf = parse_job_file(p, env={})
    assert [(j.name, j.subjob, j.groupid, j.stonewall) for j in jf.jobs] == [
        ("a", 0, 0, False), ("b", 0, 1, True), ("b", 2, 1, False), ("b", 1, 1, False)]


def test_sections_select_in_file_order(tmp_path):
    p = write(tmp_path, "a.fio", "[a]\n[b]\n[c]\n")
    assert [j.name for j in parse_job_file(p, sections=["c", "a"], env={}).jobs] == ["a", "c"]
    with pytest.raises(JobFileError, match="no such job"):
        parse_job_file(p, sections=["z"], env={})


def test_sizes_are_base_2_and_kib_is_base_10():
    assert parse_size("bs", "4k") == 4096
    assert parse_size("size", "2240m") == 2240 << 20
    assert parse_size("size", "2g") == 2 << 30
    assert parse_size("size", "4KiB") == 4000      # fio's "opposite units" under kb_base=1024
    assert parse_size("size", "0x1000") == 4096
    assert parse_size("size", "512") == 512


def test_times_default_unit_per_option():
    assert parse_time_us("runtime", "8") == 8_000_000          # seconds
    assert parse_time_us("startdelay", "250ms") == 250_000
    assert parse_time_us("thinktime", "100") == 100             # microseconds
    assert parse_time_us("runtime", "2m") == 120_000_000        # minutes
    assert parse_time_us("ramp_time", "1s") == 1_000_000


def test_bsrange_and_bssplit():
    assert parse_range("bsrange", "4k-256k") == [(4096, 262144)] * 3
    split = parse_bssplit("bssplit", "4k/50:64k/")
    assert split[0] == [(4096, 50), (65536, 50)]


def test_trim_values_are_the_third_or_else_the_writes():
    """bs=R,W gives trims W's value, R,W,T gives them T (fio's off3)."""
    assert parse_size_per_direction("bs", "4k") == (4096, 4096, 4096)
    assert parse_size_per_direction("bs", "4k,8k") == (4096, 8192, 8192)
    assert parse_size_per_direction("bs", "4k,8k,1m") == (4096, 8192, 1 << 20)
    assert parse_range("bsrange", "4k-8k,16k-32k")[2] == (16384, 32768)
    assert parse_bssplit("bssplit", "4k/100,8k/100,64k/100")[2] == [(65536, 100)]


def test_bad_size_names_the_option():
    with pytest.raises(JobFileError, match="bs=abc"):
        parse_size("bs", "abc")


def test_trailing_comments_end_the_line_as_in_fio(tmp_path):
    """A `;` or `#` anywhere ends the line, trailing blanks go (parse.c strip_blank_end)."""
    p = write(tmp_path, "a.fio", "[j] ; the job\nmdsplit_config=pt.toml        ; stack\n"
                                 "mdsplit_stats=x.json#c\nbs=4k \t# why\nname=a;b#c\n")
    j = parse_job_file(p, env={}).jobs[0]
    assert j.name == "j"
    assert j.options == {"mdsplit_config": "pt.toml", "mdsplit_stats": "x.json", "bs": "4k",
                         "name": "a"}


def test_integer_options_take_units_as_fio():
    """An FIO_OPT_INT is read by check_str_bytes(): iodepth=1k is 1024."""
    from harness.jobfile import parse_int
    assert parse_int("iodepth", "1k") == 1024
    with pytest.raises(JobFileError, match="not an integer"):
        parse_int("loops", "abc")


def test_a_bare_option_that_is_no_flag_is_refused(tmp_path):
    """`direct` alone: fio's 'Option direct requires an argument' (only FIO_OPT_STR_SET flags
    may stand alone); simulate read it as direct=1."""
    p = tmp_path / "b.fio"
    p.write_text("[a]\ndirect\n")
    with pytest.raises(JobFileError, match="option direct requires an argument"):
        parse_job_file(p)
    p.write_text("[a]\nnorandommap\nthread\n")
    assert parse_job_file(p).jobs[0].options["norandommap"] == "1"


def test_a_section_named_global_anything_is_the_global_one(tmp_path):
    """[global-settings] holds global options, as fio's strncmp(name, "global", 6)."""
    p = tmp_path / "g.fio"
    p.write_text("[global-settings]\nbs=8k\n[a]\n")
    jf = parse_job_file(p)
    assert [j.name for j in jf.jobs] == ["a"] and jf.jobs[0].options["bs"] == "8k"
