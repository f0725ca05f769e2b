"""What-if estimate (NOT the emulator): seeds 000/002's dd read with a CPU
cost of c us per md chunk submission (md_submit_bio / chunk_aligned_read /
raid5_read_one_chunk / blk_mq_submit_bio), the plug flush points of
blk_add_rq_to_plug, mq-deadline's batch order (deadline_batch from
tests/py/test_raid5_plug_model.py), and each member a serial server:
20 us + bytes / B (+ 100 us after a seek when the previous request was
>= 64 KiB). Prints md0 MiB/s and md0's mean chunk wait (iostat's md0
r_await) for both orders. docs/reproductions/raid5.md, "Why the legacy
rate is outside". Run: python3 docs/raid5_submission_cost_whatif.py"""
import sys, collections
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests" / "py"))
from test_raid5_plug_model import chunk_order, member_of, deadline_batch, CHUNKS_PER_READ
def run(legacy, c_us, B, reads=64):
    order = chunk_order(legacy); t = 0.0
    free = collections.defaultdict(float); last = {}; latest = collections.defaultdict(int)
    waits = []; md_waits = []; tot_bytes = 0
    for r in range(reads):
        start = t; plug = []; sub_time = {}
        done_chunk = {}
        def flush(plug, now):
            batches = {}
            for d, off, kib, chunks in plug: batches.setdefault(d, []).append([off, kib, chunks])
            for d, rqs in batches.items():
                m = {(q[0]): q[2] for q in rqs}
                out, latest[d] = deadline_batch([[q[0], q[1]] for q in rqs], latest[d])
                for off, kib in out:
                    s = max(now, free[d]); seq = last.get(d, (None, 0))
                    cost = 20 + kib * 1024 / B * 1e6 + (100 if (seq[0] != off and seq[1] >= 64) else 0)
                    free[d] = s + cost; last[d] = (off + kib, kib)
                    waits.append(free[d] - now)
                    for o in range(off, off + kib, 64): done_chunk[(d, o)] = free[d]
        now = start
        for i, ch in enumerate(order):
            now += c_us
            d, idx = member_of(ch + r * CHUNKS_PER_READ); off = idx * 64
            sub_time[(d, off)] = now
            cand = None
            if plug: cand = plug[-1] if plug[-1][0] == d else next((q for q in plug if q[0] == d), None)
            if cand and cand[2] + 64 <= 512 and (cand[1] + cand[2] == off or off + 64 == cand[1]):
                if off + 64 == cand[1]: cand[1] = off
                cand[2] += 64; continue
            if plug and (len(plug) >= 64 or plug[0][2] >= 128): flush(plug, now); plug = []
            plug.append([d, off, 64, None])
        flush(plug, now)
        end = max(done_chunk.values()); t = end
        md_waits += [done_chunk[k] - sub_time[k] for k in sub_time]
    mib_s = reads * 4480 / 1024 / (t / 1e6)
    return round(mib_s), round(sum(md_waits) / len(md_waits) / 1000, 3)
for c in (0, 5, 8, 10, 12):
    for B in (1.07e9, 1.3e9, 1.6e9):
        print(c, B, "legacy", run(True, c, B), "fixed", run(False, c, B))
