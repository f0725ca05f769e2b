"""Sidecars stay parseable JSON whatever the user names things: bfq group
names and the device label with quotes, backslashes, control characters and
UTF-8 round-trip through json.load."""
import json
import subprocess

import pytest

from conftest import stack_job

NAMES = ['g"q', "back\\slash", "tab\there", "ünïcødé-gruppe"]


@pytest.mark.parametrize("name", NAMES, ids=["quote", "backslash", "control", "utf8"])
def test_group_name_round_trips(tmp_path, engine, name):
    """A bfq group named `name` appears under that exact name in the sidecar."""
    stack = ('[device]\nscheduler = "bfq"\n'
             f'[[members]]\npath = "{tmp_path}/m.img"\nsize = "4m"\n')
    jobfile = stack_job(tmp_path, engine, stack,
                        f"bs=4k\nsize=256k\n[w]\nrw=randwrite\nmdsplit_group={name}\n"
                        "mdsplit_stats=s.json\n")
    # fio's normal output: its own JSON dumps the job's options unescaped (a
    # tab in an option's value makes fio's JSON unparseable; not ours to fix).
    result = subprocess.run(["fio", "--output=/dev/null", str(jobfile)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    sidecar = json.loads((tmp_path / "s.json").read_text(encoding="utf-8"))
    member = next(d for d in sidecar["devices"] if d["role"] == "member")
    assert name in [g["name"] for g in member["bfq"]["groups"]]
    assert {q["group"] for q in member["bfq"]["queues"]} == {name}
