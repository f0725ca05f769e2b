"""Every row of docs/validation.md, run as written.

Kinds (the doc's "Definitions" section):
  toml        the input is stack TOML for mdsplit.load_stack_text(text, base_dir=TMP):
              it raises ValueError whose text is the message
  toml+root   the same, with a fixture that needs root (a read-only mount)
  toml+loop   the same, with loop devices (root, losetup)
  fio         "STACK: job lines": real fio with the engine; the message is a
              line of fio's stderr ("error=ENAME": fio's job error), and fio
              exits non-zero; "(accepted)": fio succeeds; "(stopped clean)": the
              raid5's members say state=clean and stats.json was written
  fio+loop    the same on loop devices (root, losetup); after each refused
              run the device's bytes are checked unchanged
  io          "STACK: op offset length" through mdsplit.Simulation; the
              message is the completion: an errno name, or "EOF"
  simulate    "STACK ARGS: job lines": `harness simulate` of the fio rows' job
              with ARGS ("after-fio": real fio runs the job first); the
              message is a line of its stderr, and it exits non-zero
              (" (exit 0)" after the message: zero)
  py          a Python expression with `mdsplit` and `tmp` in scope: it
              raises ValueError whose text is the message
"""
import errno
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from conftest import ROOT, losetup_works, write_job
from harness import paths, run_fio

DOC = ROOT / "docs" / "validation.md"
CELL = re.compile(r"(?<!\\)\|")


def parse_rows():
    rows, in_table = [], False
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            in_table = line.strip() == "## Checks"
            continue
        if not in_table or not re.match(r"^\|\s*\d+\s*\|", line):
            continue
        cells = [c.strip().replace("\\|", "|") for c in CELL.split(line.strip())[1:-1]]
        assert len(cells) == 6, line
        num, kind, key, condition, given, message = cells
        rows.append(dict(num=int(num), kind=kind.strip("`"), key=key, condition=condition,
                         input=unquote(given), message=unquote(message)))
    return rows


def unquote(cell):
    cell = cell.strip()
    if cell.startswith("`") and cell.endswith("`"):
        cell = cell[1:-1]
    return cell


ROWS = parse_rows()

# Macros of the "Definitions" section.
MACROS = {
    "{ram}": '[[members]]\nbackend = "ram"\nsize = "1m"\n',
    "{ram4k}": '[[members]]\nbackend = "ram"\nsize = "1m"\nlogical_block_size = 4096\n',
}
STACKS = {
    "pt": '[[members]]\npath = "m0.img"\nsize = "1m"\nlogical_block_size = 4096\n',
    "r5": '[device]\nkind = "raid5"\nchunk = "64k"\n' + "".join(
        f'[[members]]\npath = "r{i}.img"\nsize = "1m"\n' for i in range(3)),
    "ram": MACROS["{ram4k}"],
    "bfq": '[device]\nscheduler = "bfq"\n[[members]]\npath = "m0.img"\nsize = "1m"\n',
    "loop": '[[members]]\npath = "{loop}"\n',
    "loop+force": '[[members]]\npath = "{loop}"\nforce = true\n',
    "self": '[[members]]\npath = "stack.toml"\nsize = "4k"\ngrow = true\n',
    "jobfile": '[[members]]\npath = "row.fio"\nsize = "4k"\ngrow = true\n',
    "bwlog": '[[members]]\npath = "x_bw.1.log"\nsize = "1m"\n',
    "mdmember": '[[members]]\npath = "md.img"\n',
    "mdmember+force": '[[members]]\npath = "md.img"\nforce = true\n',
    "mdstale": '[device]\nkind = "raid5"\nchunk = "64k"\n[[members]]\npath = "s0.img"\n'
               '[[members]]\npath = "s1.img"\nfailed = true\n[[members]]\npath = "s2.img"\n',
    "mdwrap": '[device]\nkind = "raid5"\nchunk = "64k"\n[[members]]\npath = "wrap.img"\n' + "".join(
        f'[[members]]\npath = "r{i}.img"\nsize = "1m"\n' for i in (1, 2)),
    "new": '[[members]]\npath = "new/m.img"\nsize = "1m"\n',
    "loop-small": '[device]\nkind = "raid5"\nchunk = "64k"\n[[members]]\npath = "{loop}"\n' + "".join(
        f'[[members]]\npath = "r{i}.img"\nsize = "1m"\n' for i in (1, 2)),
    "trace-member": '[[members]]\npath = "m0.blktrace.0"\nsize = "1m"\n',
    "loop-file": '[[members]]\npath = "{tmp}/l.img"\n',
    "loop-swapfile": '[[members]]\npath = "{tmp}/swap.img"\n',
    "loop-part-of-backing": '[[members]]\npath = "{part}"\n',
    "loop-and-part": '[device]\nkind = "raid5"\nchunk = "64k"\n[[members]]\npath = "{loop}"\n'
                     '[[members]]\npath = "{part}"\n[[members]]\npath = "r2.img"\nsize = "1m"\n',
}
JOB = """[global]
ioengine=external:{engine}
mdsplit_config=stack.toml
filename=md0
direct=1
rw=read
bs=4k
size=1m
[j]
"""


def job_text(engine, lines):
    """The job template with the row's lines: "opt=value" adds (fio takes the
    last value), "-opt" removes the template's line."""
    job = JOB.format(engine=engine).splitlines()
    for line in lines.splitlines():
        if line.startswith("-"):
            job = [j for j in job if not j.startswith(line[1:] + "=")]
        else:
            job.append(line)
    return "\n".join(job) + "\n"


def line_matches(message, line):
    """Exact, except that {pid} stands for a process id."""
    pattern = re.escape(message).replace(re.escape("{pid}"), r"\d+")
    return re.fullmatch(pattern, line) is not None


def expand(text, subst, escapes=True):
    if escapes:
        text = text.replace("\\n", "\n").replace('\\"', '"')
    for k, v in MACROS.items():
        text = text.replace(k, v)
    for k, v in subst.items():
        text = text.replace(k, v)
    return text


def test_the_table_has_at_least_30_numbered_rows():
    assert len(ROWS) >= 30
    assert [r["num"] for r in ROWS] == list(range(1, len(ROWS) + 1))
    assert {r["kind"] for r in ROWS} <= {"toml", "toml+root", "toml+loop", "fio", "fio+loop",
                                          "io", "simulate", "py"}


# ---------------------------------------------------------------- fixtures

def make_files(tmp):
    (tmp / "dir").mkdir()
    (tmp / "empty.img").write_bytes(b"")
    (tmp / "odd.img").write_bytes(b"\0" * 1000)
    (tmp / "small.img").write_bytes(b"\0" * 16384)
    (tmp / "m0.img").write_bytes(b"\0" * 1048576)
    (tmp / "afile").write_text("not a directory\n")
    (tmp / "md.img").write_bytes(b"\0" * 1048576)
    (tmp / "wrap.img").write_bytes(b"\0" * 1048576)
    try:  # md superblocks (md_superblock.h); rows on them skip where xattrs are missing
        os.setxattr(tmp / "md.img", "user.mdsplit.md", MD_MEMBER)
        os.setxattr(tmp / "wrap.img", "user.mdsplit.md",
                    MD_MEMBER.replace(b"disks=3", b"disks=4294967297").replace(b"role=1", b"role=0"))
        for i, events in enumerate((2, 4, 4)):  # s0.img an old copy (events behind)
            (tmp / f"s{i}.img").write_bytes(b"\0" * 1048576)
            os.setxattr(tmp / f"s{i}.img", "user.mdsplit.md", MD_MEMBER.replace(
                b"role=1", b"role=%d" % i).replace(b"state=clean", b"state=clean events=%d" % events))
    except OSError:
        pass


# The md superblock of md.img: member 1 of a 3-member raid5.
MD_MEMBER = (b"mdsplit-md 1 uuid=0123456789abcdef0123456789abcdef disks=3 chunk=65536 "
             b"layout=2 role=1 state=clean faulty=-")


class Loops:
    """Loop devices this test attaches (and detaches, by name)."""

    def __init__(self, tmp):
        self.tmp, self.devices, self.mounts, self.holder = tmp, [], [], None
        self.swaps = []

    def attach(self, name, size=4 << 20, partitioned=False, sector_size=512):
        backing = self.tmp / name
        with open(backing, "wb") as f:
            f.truncate(size)
            if partitioned:  # an MBR with one Linux partition from sector 2048 to the end
                entry = bytes([0, 0xFE, 0xFF, 0xFF, 0x83, 0xFE, 0xFF, 0xFF]) + \
                    (2048).to_bytes(4, "little") + (size // 512 - 2048).to_bytes(4, "little")
                f.seek(446)
                f.write(entry)
                f.seek(510)
                f.write(b"\x55\xaa")
        dev = subprocess.run(["losetup", "-f", "--show", "-b", str(sector_size)] +
                             (["-P"] if partitioned else []) +
                             [str(backing)], check=True, capture_output=True,
                             text=True).stdout.strip()
        self.devices.append(dev)
        return dev

    def mount(self, dev, where):
        where.mkdir(exist_ok=True)
        subprocess.run(["mount", dev, str(where)], check=True, capture_output=True)
        self.mounts.append(where)

    def close(self):
        if self.holder:
            self.holder.kill()
            self.holder.wait()
        for m in reversed(self.mounts):
            subprocess.run(["umount", str(m)], capture_output=True)
        for d in self.swaps:
            subprocess.run(["swapoff", d], capture_output=True)
        for d in reversed(self.devices):  # a loop on top of another first
            # The read-only flag outlives the loop device's detach.
            subprocess.run(["blockdev", "--setrw", d], capture_output=True)
            subprocess.run(["losetup", "-d", d], capture_output=True)


# No lazy initialisation: a mounted test file system must not write in the
# background while the test checks that a refused job left it unchanged.
MKFS_EXT4 = ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"]


def digest(dev):
    """The device's bytes, hashed."""
    with open(dev, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def poke(dev, offset, magic):
    with open(dev, "r+b") as f:
        f.seek(offset)
        f.write(magic)
        f.flush()
        os.fsync(f.fileno())


SIGNATURES = {
    "ext4": (1080, b"\x53\xef"), "xfs": (0, b"XFSB"), "btrfs": (65600, b"_BHRfS_M"),
    "swap": (4086, b"SWAPSPACE2"), "mbr": (510, b"\x55\xaa"), "gpt": (512, b"EFI PART"),
}


def loop_fixture(row, tmp, loops):
    """Sets up what a +loop row names in its input ("loop-ext4: ..."); returns the
    substitutions for {loop}, {part}, {alias}, {devno}."""
    head = row["input"].split(":", 1)[0].removesuffix("+force")
    subst = {}
    if head in ("loop-mounted", "loop-part-mounted") and not shutil.which("mkfs.ext4"):
        pytest.skip("needs mkfs.ext4")
    if head == "loop-minix" and not shutil.which("mkfs.minix"):
        pytest.skip("needs mkfs.minix (util-linux)")
    if head == "loop-mounted":
        dev = loops.attach("lm.img")
        subprocess.run(MKFS_EXT4 + [dev], check=True, capture_output=True)
        loops.mount(dev, tmp / "mnt")
        subst["{loop}"] = dev
    elif head in ("loop-part-mounted", "loop-and-part", "loop-part-of-backing"):
        dev = loops.attach("lp.img", 8 << 20, partitioned=True)
        part = dev + "p1"
        if not os.path.exists(part) and shutil.which("partx"):
            subprocess.run(["partx", "-a", dev], capture_output=True)  # when the scan lags
        for _ in range(100):  # devtmpfs creates the node; udev may not run here
            if os.path.exists(part):
                break
            time.sleep(0.05)
        if not os.path.exists(part):
            pytest.skip(f"{part} did not appear")
        if head == "loop-part-mounted":
            subprocess.run(MKFS_EXT4 + [part], check=True, capture_output=True)
            loops.mount(part, tmp / "mnt")
        if head == "loop-part-of-backing":  # a loop device over the whole disk, at p1's start
            upper = subprocess.run(["losetup", "-f", "--show", "-o", str(2048 * 512), dev],
                                   check=True, capture_output=True, text=True).stdout.strip()
            loops.devices.append(upper)
            st = os.stat(upper)
            subst["{upperdevno}"] = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
            st = os.stat(dev)
            subst["{devno}"] = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        st = os.stat(part)
        subst.update({"{loop}": dev, "{part}": part,
                      "{partdevno}": f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"})
    else:
        kind = head.split("-", 1)[1] if "-" in head else ""
        dev = loops.attach("l.img", size={"empty": 0, "small": 32768}.get(kind, 4 << 20),
                           sector_size=4096 if kind == "4k" else 512)
        if kind in SIGNATURES:
            poke(dev, *SIGNATURES[kind])
        elif kind == "minix":
            subprocess.run(["mkfs.minix", dev], check=True, capture_output=True)
        elif kind == "swapon":  # in use as swap space
            if not shutil.which("swapon"):
                pytest.skip("needs swapon (util-linux)")
            subprocess.run(["mkswap", dev], check=True, capture_output=True)
            r = subprocess.run(["swapon", dev], capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip(f"swapon {dev} failed here: {r.stderr.strip()}")
            loops.swaps.append(dev)
        elif kind == "twin":  # a second loop device over the same file
            twin = subprocess.run(["losetup", "-f", "--show", str(tmp / "l.img")], check=True,
                                  capture_output=True, text=True).stdout.strip()
            loops.devices.append(twin)
            st = os.stat(twin)
            subst["{twindevno}"] = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        elif kind == "backing":  # the backing device of another loop device
            upper = subprocess.run(["losetup", "-f", "--show", dev], check=True,
                                   capture_output=True, text=True).stdout.strip()
            loops.devices.append(upper)
            st = os.stat(upper)
            subst["{upperdevno}"] = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        elif kind == "swapfile":  # a regular file in use as swap space
            if not shutil.which("swapon"):
                pytest.skip("needs swapon (util-linux)")
            swapfile = tmp / "swap.img"
            swapfile.write_bytes(b"\0" * (1 << 20))  # no holes: swapon refuses them
            swapfile.chmod(0o600)
            subprocess.run(["mkswap", str(swapfile)], check=True, capture_output=True)
            r = subprocess.run(["swapon", str(swapfile)], capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip(f"swapon {swapfile} failed here: {r.stderr.strip()}")
            loops.swaps.append(str(swapfile))
        elif kind == "ro":
            subprocess.run(["blockdev", "--setro", dev], check=True, capture_output=True)
        elif kind == "excl":  # another program holding the device open with O_EXCL
            loops.holder = subprocess.Popen(
                ["/usr/bin/python3", "-c", "import os, sys, time\n"
                 f"os.open({dev!r}, os.O_RDONLY | os.O_EXCL); print(flush=True); time.sleep(120)"],
                stdout=subprocess.PIPE)
            loops.holder.stdout.readline()
        st = os.stat(dev)
        alias = tmp / "alias"
        os.mknod(alias, 0o600 | 0o060000, st.st_rdev)  # S_IFBLK
        subst.update({"{loop}": dev, "{alias}": str(alias),
                      "{devno}": f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"})
    return subst


# ---------------------------------------------------------------- the rows

@pytest.mark.parametrize("row", ROWS, ids=[f"{r['num']}-{r['kind']}" for r in ROWS])
def test_row(row, tmp_path, mdsplit_module, engine):
    kind = row["kind"]
    if kind.endswith("+root") or kind.endswith("+loop"):
        if os.geteuid() != 0:
            pytest.skip("needs root")
    if kind.endswith("+loop"):
        reason = losetup_works()
        if reason:
            pytest.skip(reason)
    tmp = tmp_path
    make_files(tmp)
    subst = {"{tmp}": str(tmp)}
    loops = Loops(tmp)
    ro = None
    try:
        if kind == "toml+root":
            ro = tmp / "ro"
            ro.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)],
                           check=True, capture_output=True)
        if kind.endswith("+loop"):
            subst.update(loop_fixture(row, tmp, loops))
        message = expand(row["message"], subst, escapes=False)
        if kind.startswith("toml"):
            text = row["input"]
            if kind == "toml+loop":
                text = text.split(":", 1)[1].strip()
            with pytest.raises(ValueError) as e:
                mdsplit_module.load_stack_text(expand(text, subst), str(tmp))
            assert str(e.value) == message
        elif kind.startswith("fio"):
            stack, _, lines = row["input"].partition(":")
            stack_name = stack.strip()
            if stack_name.startswith("loop") and stack_name not in STACKS:
                stack_name = "loop+force" if stack_name.endswith("+force") else "loop"
            stack_text = STACKS[stack_name]
            if stack_name.startswith("mdmember") or stack_name in ("mdwrap", "mdstale"):
                try:
                    os.getxattr(tmp / "md.img", "user.mdsplit.md")
                except OSError as e:
                    pytest.skip(f"no user xattrs in {tmp}: {e.strerror}")
            (tmp / "stack.toml").write_text(expand(stack_text, subst))
            job = write_job(tmp, "row.fio", job_text(engine, expand(lines.strip(), subst)))
            before = digest(subst["{loop}"]) if kind == "fio+loop" else None
            result = run_fio(job, check=False, timeout=60)
            if before is not None and message != "(accepted)":
                assert digest(subst["{loop}"]) == before, "a refused job changed the device"
            if message == "(accepted)":
                assert result.returncode == 0, result.stderr
            elif message == "(stopped clean)":  # md's clean stop, whatever fio's exit
                members = sorted(tmp.glob("r*.img"))
                assert members and all(b" state=clean " in os.getxattr(m, "user.mdsplit.md")
                                       for m in members), result.stderr
                assert (tmp / "stats.json").exists(), result.stderr
            elif message.startswith("error="):  # fio's job error (JSON output has no line)
                assert result.returncode != 0
                assert result.jobs[0]["error"] == getattr(errno, message[6:]), result.stderr
            else:
                assert result.returncode != 0
                assert any(line_matches(message, l) for l in result.stderr.splitlines()), \
                    result.stderr
        elif kind == "io":
            stack, _, op = row["input"].partition(":")
            name = stack.strip()
            sim = mdsplit_module.Simulation(expand(STACKS[name.removesuffix("+cut")], subst),
                                            str(tmp))
            if name.endswith("+cut"):  # the member file cut to 0 bytes while the stack has it
                os.truncate(tmp / "m0.img", 0)
            name, offset, length = op.split()
            sim.submit(name, int(offset), int(length))
            [done] = sim.run()
            if message.startswith("EOF"):
                assert done["error"] == 0 and done["resid"] == int(length), done
            else:
                assert done["error"] == -getattr(errno, message), done
        elif kind == "simulate":
            run_simulate_row(row, message, tmp, subst, engine)
        elif kind == "py":
            with pytest.raises(ValueError) as e:
                eval(row["input"], {"mdsplit": mdsplit_module, "tmp": str(tmp)})
            assert str(e.value) == message
        else:
            raise AssertionError(f"unknown kind {kind}")
    finally:
        loops.close()
        if ro is not None:
            subprocess.run(["umount", str(ro)], capture_output=True)


def run_simulate_row(row, message, tmp, subst, engine):
    """`harness simulate` of the row's job (the fio rows' template and lines)
    with the row's arguments; "after-fio" runs real fio on it first."""
    head, _, lines = row["input"].partition(":")
    stack_name, *args = head.split()
    (tmp / "stack.toml").write_text(expand(STACKS[stack_name], subst))
    job = write_job(tmp, "row.fio", job_text(engine, expand(lines.strip(), subst)))
    if "after-fio" in args:
        args.remove("after-fio")
        fio = run_fio(job, check=False, timeout=60)
        assert fio.returncode == 0, fio.stderr
    run = subprocess.run([sys.executable, "-m", "harness", "simulate", str(job), *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    succeeds = message.endswith(" (exit 0)")
    message = message.removesuffix(" (exit 0)")
    assert (run.returncode == 0) == succeeds, run.stderr
    assert any(line_matches(message, line) for line in run.stderr.splitlines()), run.stderr


# docs/stack-toml.md's example is a stack file the loader takes, key for key
# (its one member thrice, as a raid5 needs three).
def test_the_stack_toml_reference_loads(mdsplit_module, tmp_path):
    readme = (ROOT / "docs" / "stack-toml.md").read_text()
    start = readme.index("```toml\n") + len("```toml\n")
    block = readme[start:readme.index("```", start)]
    member = re.search(r"\[\[members\]\].*?(?=\n\[bio\])", block, re.S).group(0)
    three = "\n".join(member.replace('"work/m0.img"', f'"work/m{i}.img"') for i in range(3))
    assert mdsplit_module.load_stack_text(block.replace(member, three), str(tmp_path)) is True
