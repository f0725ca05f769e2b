"""BFQ's idling and injection decisions on the real 6.12 kernel (QEMU TCG)
beside the emulator's (harness/vm/bfq_decisions.py, issue 39 item 4):
groups of unequal weights make bfq idle (bfq_asymmetric_scenario() ->
bfq_better_to_idle() -> bfq_arm_slice_timer()) on more of the requests
than one group of equal readers, which costs requests per second on the
emulator. The kernel's requests per second under TCG vary too much from
run to run to check a loss there (docs/reproductions/bfq.md). The parser
tests need no VM."""
import pytest

from harness.vm import bfq_decisions as B, machine

REGION = 16 << 20   # groups.py: each job reads 16 MiB of its own


def _line(t, event, rest, comm="fio.real-1"):
    return f"        {comm}     [000] d.h1.    {t:.6f}: {event}: {rest}"


def _issue(t, job, comm="fio.real-1"):
    return _line(t, "block_rq_issue", f"254,0 RS 4096 () {job * REGION // 512 + 8} + 8 be,0,4 [fio]",
                 comm)


def _done(t, job):
    return _line(t, "block_rq_complete", f"254,0 RS () {job * REGION // 512 + 8} + 8 be,0,4 [0]")


ARM = "hrtimer=(____ptrval____) function=bfq_idle_slice_timer [bfq] expires=1 mode=REL"
FIRE = "hrtimer=(____ptrval____) function=bfq_idle_slice_timer [bfq] now=1"


def test_count_trace_attributes_injection_to_the_idle_window():
    """Another job's issue while the in-service job idles is an injection; its own ends the idle."""
    text = "\n".join([
        _issue(1.0, 0), _done(1.1, 0), _line(1.1, "hrtimer_start", ARM),
        _issue(1.2, 1),                 # injected: job 1 while job 0 idles
        _issue(1.3, 0),                 # job 0's next request: the idle ends
        _issue(1.4, 1),                 # not during an idle
        _done(1.5, 0), _line(1.5, "hrtimer_start", ARM),
        _line(1.6, "hrtimer_expire_entry", FIRE),
        _line(1.7, "bfqexp", "(bfq_bfqq_expire+0x4/0xaa0 [bfq]) reason=0"),
        _line(1.8, "hrtimer_start", "hrtimer=(____ptrval____) function=tick_nohz_handler")])
    n = B.count_trace(text, REGION)
    assert (n["issue"], n["arm"], n["inject"], n["idle_fire"]) == (4, 2, 1, 1)
    assert n["expirations"]["too_idle"] == 1


def test_guest_think_time_is_the_fast_tenth_of_completion_to_next_issue():
    """The guest's think time: 10th percentile of a job's completion-to-next-issue gaps."""
    lines = []
    for i in range(10):
        t = 10.0 * i
        lines += [_done(t, 0), _issue(t + (0.0004 if i else 0.0001) + 0.001 * (i > 5), 0)]
    assert B.guest_think_us("\n".join(lines), REGION) == 400


def _bfq(t, pid, msg, comm="fio.real-1"):
    return f"        {comm}     [000] d..1.    {t:.6f}: 254,0   1,0  m   N bfq{pid}S {msg}"


def test_service_split_counts_requests_by_the_queue_in_service():
    """Requests issued while a queue is in service count under that queue's job, by sector."""
    text = "\n".join([
        _issue(0.5, 0, comm="fio.real-10"), _issue(0.6, 1, comm="fio.real-11"),
        _bfq(1.0, 11, "set_in_service_queue, cur-budget = 16384"),
        _issue(1.1, 1, comm="fio.real-11"),
        _issue(1.2, 0, comm="fio.real-10"),          # injected while job 1 is in service
        _bfq(1.5, 11, "expire (4, slow 1, num_disp 1, short_ttime 1)"),
        _issue(1.6, 0, comm="fio.real-10")])          # no queue in service
    got = B.service_split(text, REGION)
    assert got["issued"] == {None: {0: 2, 1: 1}, 1: {1: 1, 0: 1}}
    assert got["seconds"] == {1: pytest.approx(0.5)}


def test_service_split_names_a_merged_queue_shared():
    """A queue bfq merged (bfqSHARED-S) counts its service under "shared"."""
    text = "\n".join([
        _issue(0.5, 1, comm="fio.real-11"),
        _bfq(1.0, "SHARED-", "set_in_service_queue, cur-budget = 16384"),
        _issue(1.1, 1, comm="fio.real-11"), _issue(1.2, 2, comm="fio.real-12"),
        _bfq(1.4, "SHARED-", "expire (1, slow 1, num_disp 0, short_ttime 0)")])
    got = B.service_split(text, REGION)
    assert got["issued"]["shared"] == {1: 1, 2: 1}
    assert got["seconds"] == {"shared": pytest.approx(0.4)}


@pytest.fixture(scope="module")
def decisions(tmp_path_factory, mdsplit_module):
    if why := machine.can_run_qemu():
        pytest.skip(f"this machine cannot run the VM reference: {why}")
    got = B.run(B.CASES, tmp_path_factory.mktemp("bfq-decisions"))
    for d in got:
        print(d.line())
    return {d.case.name: d for d in got}


def _rate(c):
    return c["issue"] / c["seconds"]


def test_kernel_idles_more_per_request_with_asymmetric_groups(decisions):
    """6.12: two groups of weights 100/400 arm the idle timer on > 1.3x the requests one group does."""
    asym, sym = (decisions[c.name].kernel for c in B.CASES)
    assert B.Decisions.per_request(asym, "arm") > 1.3 * B.Decisions.per_request(sym, "arm")


def test_kernel_injects_while_it_idles(decisions):
    """6.12: other queues' requests go in during the in-service queue's idle (>= 0.1 per request)."""
    asym = decisions[B.CASES[0].name].kernel
    assert B.Decisions.per_request(asym, "inject") >= 0.1


def test_emulator_injects_while_it_idles_as_the_kernel_does(decisions):
    """Emulator, asymmetric groups: other queues' requests go in during the idle (>= 0.1 per request)."""
    asym = decisions[B.CASES[0].name].emulator
    assert B.Decisions.per_request(asym, "inject") >= 0.1


def test_emulator_serves_other_queues_out_of_turn_as_the_kernel_within_1_5x(decisions):
    """Asymmetric groups: requests of other jobs than the one in service, per request, within 1.5x of 6.12's."""
    # Out of turn (injection while the in-service queue idles or has its
    # own request in flight) is steady on the emulator over the guest's
    # think times (0.69-0.73 for 350-675 us). The part inside the armed
    # idle alone swings with the think time's phase against the 2 ms
    # service (0.17-0.61 per request), so it is checked only for >= 0.1.
    # The kernel's share is of the requests served while one job's own
    # queue was in service: when 6.12 merges queues (bfq_merge_bfqqs(),
    # which the emulator does not model) their service is neither in nor
    # out of turn. (One heavily loaded run gave 0.077 of all requests
    # against the emulator's 0.72; its split was not kept, so the failure
    # message now prints both sides' decisions.)
    d = decisions[B.CASES[0].name]
    k = B.out_of_turn(d.kernel["split"]) / max(1, B.own_queue_issues(d.kernel["split"]))
    e = B.Decisions.per_request(d.emulator, "out_of_turn")
    assert k / 1.5 <= e <= 1.5 * k, d.line()


def test_out_of_turn_counts_other_jobs_requests_per_queue_in_service():
    """Requests of other jobs than the one in service count; merged queues and no queue do not."""
    split = {"issued": {None: {0: 5}, 1: {1: 3, 0: 2}, 2: {2: 1, 0: 4}, "shared": {0: 7, 3: 1}}}
    assert B.out_of_turn(split) == 6


def test_own_queue_issues_leave_out_merged_queues_and_none():
    """What out_of_turn is a share of: requests while one job's own queue was in service."""
    split = {"issued": {None: {0: 5}, 1: {1: 3, 0: 2}, 2: {2: 1, 0: 4}, "shared": {0: 7, 3: 1}}}
    assert B.own_queue_issues(split) == 10
