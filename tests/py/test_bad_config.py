"""Bad input stops fio with one `mdsplit:` line naming the key."""
import pytest

from conftest import write_job
from harness import run_fio

GOOD_MEMBER = '''
[[members]]
path = "m0.img"
size = "64m"
'''

CASES = [
    # (id, stack toml, job extra options, text the error line must contain)
    ("unknown-top-key", '[device]\nkind = "passthrough"\n[bogus]\nx = 1\n' + GOOD_MEMBER, "", "bogus"),
    ("unknown-device-key", '[device]\nkind = "passthrough"\ncolour = "red"\n' + GOOD_MEMBER, "",
     "device.colour"),
    ("bad-kind", '[device]\nkind = "raid7"\n' + GOOD_MEMBER, "", "device.kind"),
    ("size-zero", '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\nsize = 0\n', "",
     "members[0].size"),
    ("bad-size", '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\nsize = "12q"\n', "",
     "members[0].size"),
    ("wrong-type", '[device]\nkind = 5\n' + GOOD_MEMBER, "", "device.kind"),
    ("member-is-directory", '[device]\nkind = "passthrough"\n[[members]]\npath = "."\nsize = "1m"\n',
     "", "members[0].path"),
    ("two-members-one-file",
     '[device]\nkind = "raid5"\n' + GOOD_MEMBER + GOOD_MEMBER + GOOD_MEMBER, "", "members[1].path"),
    ("bad-backend", '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\nsize = "1m"\n'
     'backend = "tape"\n', "", "members[0].backend"),
    ("unknown-model", '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\nsize = "1m"\n'
     'model = "floppy"\n', "", "members[0].model"),
    ("bad-max-sectors", '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\n'
     'size = "1m"\nmax_sectors = "1000"\n', "", "members[0].max_sectors"),
    ("no-members", '[device]\nkind = "passthrough"\n', "", "members"),
    ("cpu-cost-range", '[device]\nkind = "passthrough"\n' + GOOD_MEMBER + '[cpu]\nsubmit_bio = "1ms"\n',
     "", "cpu.submit_bio"),
    ("cpu-dispatch-range", '[device]\nkind = "passthrough"\n' + GOOD_MEMBER + '[cpu]\ndispatch = "1ms"\n',
     "", "cpu.dispatch"),
    ("pattern-pair", '[device]\nkind = "passthrough"\n' + GOOD_MEMBER +
     '[bio]\ncontiguity = { pattern = [2, [4, 0]] }\n', "", "bio.contiguity.pattern[1]"),
    ("toml-syntax", '[device\nkind = "passthrough"\n', "", "stack.toml"),
    ("unknown-member-key", '[device]\nkind = "passthrough"\n[[members]]\npath = "m0.img"\n'
     'size = "1m"\nspeed = "fast"\n', "", "members[0].speed"),
    ("missing-config-option", None, "", "mdsplit_config"),
    ("group-weight-range", '[device]\nkind = "passthrough"\n' + GOOD_MEMBER,
     "mdsplit_group_weight=-1", "mdsplit_group_weight"),  # fio 3.33 reads "-1" as a range
    ("group-without-bfq", '[device]\nkind = "passthrough"\n' + GOOD_MEMBER,
     "mdsplit_group=g1", "mdsplit_group"),
]


@pytest.mark.parametrize("case_id,toml,extra,needle", CASES, ids=[c[0] for c in CASES])
def test_bad_configuration_fails_with_one_line(engine, workdir, case_id, toml, extra, needle):
    if toml is not None:
        (workdir / "stack.toml").write_text(toml)
    config_line = "mdsplit_config=stack.toml" if toml is not None else ""
    job = write_job(workdir, "bad.fio", f"""
[bad]
ioengine=external:{engine}
{config_line}
filename=md0
direct=1
rw=read
bs=4k
size=1m
{extra}
""")
    result = run_fio(job, check=False, timeout=60)
    assert result.returncode != 0
    errors = result.mdsplit_errors()
    assert len(errors) == 1, result.stderr
    assert needle in errors[0], errors[0]
    assert "\n" not in errors[0]


@pytest.mark.parametrize("weight", ["0", "5000", "heavy"])
def test_fio_refuses_group_weight_outside_the_table_range(engine, workdir, weight):
    """mdsplit_group_weight outside the options table's 1..1000: fio's own refusal, exit 1."""
    (workdir / "stack.toml").write_text('[device]\nkind = "passthrough"\n' + GOOD_MEMBER)
    job = write_job(workdir, "bad.fio", f"""
[bad]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=read
size=1m
mdsplit_group_weight={weight}
""")
    result = run_fio(job, check=False, timeout=60)
    assert result.returncode != 0
    assert "fio: failed parsing mdsplit_group_weight" in result.stderr, result.stderr
