#!/bin/sh
# bench/soak-stale.sh DURATION   (seconds, or with a unit: 90s, 2m, 30m, 1h)
#
# The stale-member variant of bench/soak.sh: rounds of fio runs on one
# 4-member RAID5 of io_uring files for DURATION. Each round writes the whole
# array with the round's own byte pattern (verify=pattern, read back), and
# every other round first puts back an old copy of one member (cp -a, so
# its md superblock xattr comes along) taken a round or more before. Then:
#   - a read-only run must kick it ("md: kicking non-fresh ... from
#     array!", md.c super_1_validate) and read the last round's pattern
#     around it (verify=pattern: an old block passes a header verify);
#   - the next run that writes must rebuild it ("recovery of members[i]"),
#     after which the member is byte for byte what it was before the copy
#     went back and every row's parity holds.
# An old copy trusted (its old bytes read, no kick, no rebuild) fails the
# soak. Reports rounds, kicks, rebuilds; exits non-zero on anything
# unexpected. Engine: $MDSPLIT_ENGINE, else ${MDSPLIT_BUILD_DIR:-build}/libmdsplit.so.
set -eu
dur=${1:?usage: bench/soak-stale.sh DURATION (e.g. 120, 2m, 30m)}
root=$(cd "$(dirname "$0")/.." && pwd)
engine=${MDSPLIT_ENGINE:-${MDSPLIT_BUILD_DIR:-$root/build}/libmdsplit.so}
[ -f "$engine" ] || { echo "soak-stale: no engine at $engine (build first)" >&2; exit 2; }

case $dur in
    *h) secs=$(( ${dur%h} * 3600 )) ;;
    *m) secs=$(( ${dur%m} * 60 )) ;;
    *s) secs=${dur%s} ;;
    *) secs=$dur ;;
esac
[ "$secs" -ge 10 ] || { echo "soak-stale: DURATION must be at least 10 s" >&2; exit 2; }

work=$(mktemp -d /tmp/mdsplit-soak-stale.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
exec /usr/bin/python3 - "$root" "$engine" "$work" "$secs" <<'PY'
import json, os, random, subprocess, sys, time
root, engine, work, secs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, root)
from harness.parity_check import check_parity

N, CHUNK = 4, 64 * 1024
members = [os.path.join(work, f"m{i}.img") for i in range(N)]
with open(os.path.join(work, "r5.toml"), "w") as f:
    f.write('[device]\nkind = "raid5"\nchunk = "64k"\n' +
            "".join(f'[[members]]\npath = "m{i}.img"\nsize = "16m"\n' for i in range(N)))
probe = os.path.join(work, "probe")
open(probe, "wb").close()
try:
    os.setxattr(probe, "user.probe", b"1")
except OSError as e:
    print(f"soak-stale: no user xattrs in {work} (md superblocks need them): {e.strerror}",
          file=sys.stderr)
    sys.exit(2)
os.unlink(probe)

problems = []


def fio(name, body):
    path = os.path.join(work, name + ".fio")
    with open(path, "w") as f:
        f.write(f"[global]\nioengine=external:{engine}\nmdsplit_config=r5.toml\nfilename=md0\n"
                f"direct=1\nbs=64k\nmdsplit_stats={name}.json\n[{name}]\n{body}")
    r = subprocess.run(["fio", "--output=/dev/null", path], cwd=work, capture_output=True,
                       text=True, timeout=300)
    try:
        a = json.load(open(os.path.join(work, name + ".json")))["md_assembly"]
    except (OSError, ValueError, KeyError):
        a = {}
    return r, a


def expect(cond, what):
    if not cond:
        problems.append(what)
        print(f"UNEXPECTED: {what}", flush=True)


rng = random.Random(41)
copies = {}  # member -> (round, path) of an old copy
rounds = kicks = rebuilds = 0
start = time.monotonic()
while time.monotonic() - start < secs and not problems:
    rounds += 1
    pat = f"0x{(0x11 * rounds) & 0xff or 0x5a:02x}"
    r, a = fio("w", f"rw=write\nverify=pattern\nverify_pattern={pat}\n")
    expect(r.returncode == 0, f"round {rounds}: write run failed: {r.stderr.strip()[-300:]}")
    victim = rng.randrange(N)
    if rounds % 2 == 1:  # take a copy now, put it back next round
        subprocess.run(["cp", "-a", members[victim], members[victim] + ".old"], check=True)
        copies = {victim: rounds}
        continue
    (old, taken), = copies.items()
    current = open(members[old], "rb").read()
    subprocess.run(["cp", "-a", members[old] + ".old", members[old]], check=True)
    r, a = fio("r", f"rw=read\nverify=pattern\nverify_pattern={pat}\n")
    kicked = f"kicking non-fresh members[{old}]" in r.stderr
    expect(r.returncode == 0, f"round {rounds}: read-only run over the old m{old} (round "
           f"{taken}) failed: {r.stderr.strip()[-300:]}")
    expect(kicked and a.get("kicked") == [old],
           f"round {rounds}: the old copy of m{old} was not kicked: {a}")
    kicks += kicked
    r, a = fio("f", f"rw=write\nsize=64k\nverify=pattern\nverify_pattern={pat}\n")
    rebuilt = a.get("action") == f"recovery of members[{old}]"
    expect(r.returncode == 0 and rebuilt,
           f"round {rounds}: the old m{old} was not rebuilt by the next writer: {a} "
           f"{r.stderr.strip()[-300:]}")
    rebuilds += rebuilt
    expect(open(members[old], "rb").read() == current,
           f"round {rounds}: rebuilt m{old} differs from the member before its copy went back")
    bad = check_parity(members, CHUNK, "left-symmetric")
    expect(bad == [], f"round {rounds}: {len(bad)} rows with bad parity after the rebuild")
    os.unlink(members[old] + ".old")
    copies = {}

print(f"soak-stale: {rounds} rounds in {time.monotonic() - start:.0f} s; "
      f"old copies put back {rounds // 2}, kicked {kicks}, rebuilt {rebuilds}")
if rounds < 2:
    problems.append("fewer than 2 rounds: no old copy was put back")
print("result: " + ("FAIL" if problems else "PASS"))
sys.exit(1 if problems else 0)
PY
