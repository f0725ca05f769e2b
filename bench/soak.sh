#!/bin/sh
# bench/soak.sh DURATION   (seconds, or with a unit: 90s, 2m, 30m, 1h)
#
# One fio process for DURATION on an 8-member RAID5 of io_uring file members
# (sparse files in a temporary directory), all jobs sharing it (thread=1):
#   randwrite  random writes 4k-256k, md5 verify of every block as it goes
#              (verify_backlog), in the first quarter of the array
#   seqwrite   sequential 1m writes with verify, second quarter, looping
#   randread   random 4k-64k reads over the whole array
#   seqread    sequential 512k reads over the whole array
# Faults: member m2 takes a 5 ms latency spike every 200th request, member m5
# dies half-way (fail_at = DURATION/2); the array must hide both (0 errors,
# 0 verify failures; blocks written before m5 died are verified after, rebuilt
# from parity). Beside it, a passthrough stack with seeded random read
# errors (fail_probability) and continue_on_error: fio must see exactly the
# errors the sidecar says were injected.
#
# Reports I/Os, errors expected vs seen, verify failures and whether fio
# finished on time; exits non-zero on anything unexpected. Its stale-member
# variant (old member copies put back between runs) is bench/soak-stale.sh.
# Engine: $MDSPLIT_ENGINE, else ${MDSPLIT_BUILD_DIR:-build}/libmdsplit.so.
set -eu
dur=${1:?usage: bench/soak.sh DURATION (e.g. 120, 2m, 30m)}
root=$(cd "$(dirname "$0")/.." && pwd)
engine=${MDSPLIT_ENGINE:-${MDSPLIT_BUILD_DIR:-$root/build}/libmdsplit.so}
[ -f "$engine" ] || { echo "soak: no engine at $engine (build first)" >&2; exit 2; }

case $dur in
    *h) secs=$(( ${dur%h} * 3600 )) ;;
    *m) secs=$(( ${dur%m} * 60 )) ;;
    *s) secs=${dur%s} ;;
    *) secs=$dur ;;
esac
[ "$secs" -ge 10 ] || { echo "soak: DURATION must be at least 10 s" >&2; exit 2; }
half_ms=$(( secs * 500 ))

work=$(mktemp -d /tmp/mdsplit-soak.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$work/stats"

{
    printf '[device]\nkind = "raid5"\nchunk = "64k"\nlayout = "left-symmetric"\n'
    for i in 0 1 2 3 4 5 6 7; do
        printf '\n[[members]]\npath = "m%d.img"\nsize = "128m"\nbackend = "io_uring"\n' "$i"
        case $i in
            2) printf '[members.faults]\nlatency_spike = { every = 200, extra = "5ms" }\n' ;;
            5) printf '[members.faults]\nfail_at = "%dms"\n' "$half_ms" ;;
        esac
    done
} > "$work/raid5.toml"
printf '[[members]]\npath = "p0.img"\nsize = "64m"\n[members.faults]\nfail_probability = 0.002\nseed = 11\n' \
    > "$work/errors.toml"

# 8 x 128 MiB: 896 MiB usable; quarters of 224 MiB.
cat > "$work/soak.fio" <<EOF
[global]
ioengine=external:$engine
filename=md0
direct=1
thread=1
time_based=1
runtime=${secs}s
mdsplit_config=raid5.toml
group_reporting=0

[randwrite]
rw=randwrite
offset=0
size=224m
bsrange=4k-256k
iodepth=16
verify=md5
verify_backlog=512
verify_fatal=1
mdsplit_stats=stats/raid5.json

[seqwrite]
rw=write
offset=224m
size=224m
bs=1m
iodepth=8
verify=md5
verify_backlog=64
verify_fatal=1

[randread]
rw=randread
bsrange=4k-64k
iodepth=16

[seqread]
rw=read
bs=512k
iodepth=4

[errors]
mdsplit_config=errors.toml
rw=randread
bs=4k
iodepth=8
rate_iops=2000
continue_on_error=all
mdsplit_stats=stats/errors.json
EOF

echo "soak: ${secs} s, 8-member RAID5 of io_uring files in $work; m2 latency spikes, m5 dies at $(( half_ms / 1000 )) s" >&2
start=$(date +%s)
rc=0
(cd "$work" && exec timeout --kill-after=10 $(( secs + 120 )) fio --output-format=json \
    --output="$work/out.json" "$work/soak.fio" 2>"$work/stderr") || rc=$?
took=$(( $(date +%s) - start ))

status=0
/usr/bin/python3 - "$work" "$rc" "$took" "$secs" <<'PY' || status=$?
import json, sys
work, rc, took, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
problems = []
hang = rc in (124, 137)
if hang:
    problems.append(f"fio did not finish within {secs} + 120 s (hang)")
try:
    text = open(f"{work}/out.json").read()
    jobs = {j["jobname"]: j for j in json.loads(text[text.find("{"):])["jobs"]}
except (OSError, ValueError, KeyError) as e:
    jobs = {}
    problems.append(f"no fio JSON output: {e}")
def sidecar(name):
    try:
        return {d["name"]: d for d in json.load(open(f"{work}/stats/{name}.json"))["devices"]}
    except (OSError, ValueError):
        problems.append(f"no sidecar {name}.json")
        return {}
raid5, errs = sidecar("raid5"), sidecar("errors")
EILSEQ = 84
ios = {n: sum(j[d]["total_ios"] for d in ("read", "write")) for n, j in jobs.items()}
raid5_jobs = [n for n in ("randwrite", "seqwrite", "randread", "seqread") if n in jobs]
verify_failures = sum(1 for n in raid5_jobs if jobs[n]["error"] == EILSEQ)
raid5_errors = sum(jobs[n].get("total_err", 0) + (1 if jobs[n]["error"] else 0) for n in raid5_jobs)
injected = errs.get("m0", {}).get("read", {}).get("errors", -1)
seen = jobs.get("errors", {}).get("total_err", -1)
m5 = raid5.get("m5", {})
m5_errors = m5.get("read", {}).get("errors", 0) + m5.get("write", {}).get("errors", 0)
verified = sum(jobs[n]["read"]["io_bytes"] for n in ("randwrite", "seqwrite") if n in jobs)
print(f"soak: fio exit {rc}, {took} s for a {secs} s run")
print(f"I/Os: raid5 " + ", ".join(f"{n} {ios.get(n, 0)}" for n in raid5_jobs) +
      f" (total {sum(ios.get(n, 0) for n in raid5_jobs)}); passthrough {ios.get('errors', 0)}")
print(f"verified: {verified >> 20} MiB read back and checked (md5)")
print(f"member m5: {m5_errors} failed requests (dead from {secs // 2} s: Faulty, array degraded)")
print(f"errors: raid5 expected 0, seen {raid5_errors}; "
      f"passthrough expected {injected} (injected), seen {seen}")
print(f"verify failures: {verify_failures}")
print(f"hangs: {1 if hang else 0}")
if raid5_errors:
    problems.append(f"{raid5_errors} errors on the RAID5")
if verify_failures:
    problems.append(f"{verify_failures} verify failures")
if injected < 0 or seen != injected:
    problems.append(f"passthrough: {seen} errors seen, {injected} injected")
if injected == 0:
    problems.append("no errors were injected on the passthrough stack")
if m5_errors == 0:
    problems.append("m5 never failed")
if not verified:
    problems.append("nothing was verified")
if rc not in (0,) and not problems:
    problems.append(f"fio exited {rc}")
for p in problems:
    print(f"UNEXPECTED: {p}")
print("result: " + ("FAIL" if problems else "PASS"))
sys.exit(1 if problems else 0)
PY
if [ $status -ne 0 ]; then
    echo "--- fio stderr (last 20 lines)" >&2
    tail -20 "$work/stderr" >&2
fi
exit $status
