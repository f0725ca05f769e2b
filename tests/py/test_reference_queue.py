"""The loop device's queue attributes the kernel references change
(harness/kernel_fixtures.py: loop_device's max_sectors_kb and read_ahead_kb,
require_bfq's scheduler, the bfq reference's rotational and iosched/*)
are written back before the device is detached: they outlive
`losetup --detach`. On a fake /sys/block with a fake losetup everywhere;
on a real loop device where root and losetup are available."""
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness import kernel_fixtures as K

ROOT = Path(__file__).resolve().parents[2]

QUEUE = {"max_sectors_kb": "1280", "read_ahead_kb": "128", "rotational": "1",
         "scheduler": "none [mq-deadline] kyber", "iosched/slice_idle": "8"}


@pytest.fixture
def fake_sys(tmp_path, monkeypatch):
    """A fake /sys/block/loop9 with QUEUE's attributes, and a fake losetup
    that attaches it and, on --detach, records the queue as it is then.
    Returns (queue directory, the detached queues)."""
    block = tmp_path / "sys" / "block"
    queue = block / "loop9" / "queue"
    (queue / "iosched").mkdir(parents=True)
    (block / "loop9" / "loop").mkdir()
    (block / "loop9" / "dev").write_text("7:9\n")
    (block / "loop9" / "loop" / "dio").write_text("1\n")
    for attr, value in QUEUE.items():
        (queue / attr).write_text(value + "\n")
    detached = []

    def losetup(*args):
        if args[0] == "--detach":
            detached.append({a: (queue / a).read_text().strip() if (queue / a).exists() else None
                             for a in QUEUE})
            return K.subprocess.CompletedProcess(("losetup",) + args, 0, "", "")
        return K.subprocess.CompletedProcess(("losetup",) + args, 0, "/dev/loop9\n", "")

    monkeypatch.setattr(K, "SYS_BLOCK", block)
    monkeypatch.setattr(K, "_losetup", losetup)
    monkeypatch.setattr(K, "require_losetup", lambda: None)
    return queue, detached


def _change_everything(dev):
    """What the references write: limits, the scheduler, rotational, iosched/*."""
    dev.set_queue("scheduler", "kyber")
    dev.set_queue("rotational", 0)
    dev.set_queue("iosched/slice_idle", 0)


def _values(queue: Path) -> dict:
    return {a: (queue / a).read_text().strip() for a in QUEUE}


# QUEUE as restore_queue writes it back: a choice list as its bracketed entry.
WRITTEN_BACK = {**QUEUE, "scheduler": "mq-deadline"}


# --- on a fake /sys/block ----------------------------------------------------------

def test_queue_settings_are_written_back_before_the_detach(fake_sys, tmp_path):
    """Normal exit: every attribute holds its original value when losetup --detach runs."""
    queue, detached = fake_sys
    with K.loop_device(tmp_path / "b.img", 1 << 20, max_sectors_kb=512, ra_kb=0) as dev:
        _change_everything(dev)
        assert _values(queue)["max_sectors_kb"] == "512"
    assert detached == [WRITTEN_BACK]


def test_queue_settings_are_written_back_on_keyboard_interrupt(fake_sys, tmp_path):
    """^C in the body: the attributes are written back, then the device is detached."""
    queue, detached = fake_sys
    with pytest.raises(KeyboardInterrupt):
        with K.loop_device(tmp_path / "b.img", 1 << 20, max_sectors_kb=512, ra_kb=0) as dev:
            _change_everything(dev)
            raise KeyboardInterrupt
    assert detached == [WRITTEN_BACK]


def test_queue_settings_are_written_back_on_an_error(fake_sys, tmp_path):
    """An exception in the body: written back, detached, the exception propagates."""
    queue, detached = fake_sys
    with pytest.raises(ValueError, match="in the body"):
        with K.loop_device(tmp_path / "b.img", 1 << 20, max_sectors_kb=512) as dev:
            _change_everything(dev)
            raise ValueError("in the body")
    assert detached == [WRITTEN_BACK]


def test_queue_settings_are_written_back_on_sigterm_in_a_reference(fake_sys, tmp_path):
    """SIGTERM under sigterm_as_interrupt (the references' set-up): written back, detached."""
    queue, detached = fake_sys
    with pytest.raises(KeyboardInterrupt):
        with K.sigterm_as_interrupt(), \
                K.loop_device(tmp_path / "b.img", 1 << 20, max_sectors_kb=512) as dev:
            _change_everything(dev)
            os.kill(os.getpid(), signal.SIGTERM)
    assert detached == [WRITTEN_BACK]


def test_the_scheduler_is_written_back_as_its_bracketed_entry(fake_sys, tmp_path):
    """'none [mq-deadline] kyber' was selected: 'mq-deadline' is written back."""
    queue, _ = fake_sys
    with K.loop_device(tmp_path / "b.img", 1 << 20) as dev:
        dev.set_queue("scheduler", "kyber")
        assert dev.originals == {"scheduler": "mq-deadline"}
    assert (queue / "scheduler").read_text() == "mq-deadline"


def test_the_last_changed_attribute_is_written_back_first(fake_sys, tmp_path, monkeypatch):
    """iosched/* goes back before the scheduler that owns it."""
    queue, _ = fake_sys
    written = []
    write = K._write
    monkeypatch.setattr(K, "_write", lambda path, value: (written.append(Path(path).name),
                                                          write(path, value)))
    with K.loop_device(tmp_path / "b.img", 1 << 20) as dev:
        _change_everything(dev)
        written.clear()
    assert written == ["slice_idle", "rotational", "scheduler"]


def test_a_second_change_keeps_the_first_original(fake_sys, tmp_path):
    """Setting an attribute twice writes back the value from before the first."""
    queue, detached = fake_sys
    with K.loop_device(tmp_path / "b.img", 1 << 20, max_sectors_kb=512) as dev:
        dev.set_queue("max_sectors_kb", 256)
    assert detached[0]["max_sectors_kb"] == "1280"


def test_a_refused_write_is_not_written_back(fake_sys, tmp_path, monkeypatch):
    """An attribute the kernel refused to change is not among the originals."""
    def refuse(path, value):
        raise PermissionError(13, "Permission denied")

    with K.loop_device(tmp_path / "b.img", 1 << 20) as dev:
        monkeypatch.setattr(K, "_write", refuse)
        with pytest.raises(PermissionError):
            dev.set_queue("rotational", 0)
        assert dev.originals == {}


def test_an_attribute_that_cannot_be_written_back_is_an_error_after_the_detach(fake_sys, tmp_path):
    """Normal exit with an attribute gone: RuntimeError naming it, the device detached all the same."""
    queue, detached = fake_sys
    with pytest.raises(RuntimeError, match="rotational"):
        with K.loop_device(tmp_path / "b.img", 1 << 20, max_sectors_kb=512) as dev:
            dev.set_queue("rotational", 0)
            (queue / "rotational").unlink()
    assert len(detached) == 1 and detached[0]["max_sectors_kb"] == "1280"


# --- a killed run: the settings journal ---------------------------------------------

@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """The temporary directory where journals go, private to the test."""
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _journal_of(pid: int, entries: list, mode: int = 0o700) -> Path:
    d = K.SettingsJournal.directory(pid)
    d.mkdir(mode=mode)
    os.chmod(d, mode)
    (d / "journal.json").write_text(json.dumps(entries))
    return d


def test_each_change_is_journalled_before_it_is_made(fake_sys, private_tmp, tmp_path, monkeypatch):
    """When a queue attribute is written, the journal already holds its value before."""
    queue, _ = fake_sys
    seen = []
    write = K._write
    journal = K.SettingsJournal.directory() / "journal.json"
    monkeypatch.setattr(K, "_write", lambda path, value: (
        seen.append(json.loads(journal.read_text()) if journal.exists() else None),
        write(path, value)))
    with K.loop_device(tmp_path / "b.img", 1 << 20) as dev:
        dev.set_queue("scheduler", "kyber")
        assert seen == [[{"path": str(queue / "scheduler"), "before": "mq-deadline",
                          "set": "kyber"}]]
    assert not K.SettingsJournal.directory().exists(), "the journal outlived the write-back"


def test_a_killed_runs_queue_settings_are_written_back_by_the_next(fake_sys, private_tmp):
    """A journal of a dead pid: each setting still as that run left it goes back."""
    queue, _ = fake_sys
    (queue / "scheduler").write_text("none mq-deadline [kyber]\n")
    (queue / "max_sectors_kb").write_text("512\n")
    d = _journal_of(_dead_pid(), [
        {"path": str(queue / "scheduler"), "before": "mq-deadline", "set": "kyber"},
        {"path": str(queue / "max_sectors_kb"), "before": "1280", "set": "512"}])
    restored = K.SettingsJournal.replay(d)
    assert (queue / "scheduler").read_text() == "mq-deadline"
    assert (queue / "max_sectors_kb").read_text() == "1280"
    assert len(restored) == 2 and not d.exists()


def test_a_setting_changed_since_by_someone_else_is_left_alone(fake_sys, private_tmp):
    """The killed run set 512; someone has set 256 since: 256 stays."""
    queue, _ = fake_sys
    (queue / "max_sectors_kb").write_text("256\n")
    d = _journal_of(_dead_pid(), [
        {"path": str(queue / "max_sectors_kb"), "before": "1280", "set": "512"}])
    assert K.SettingsJournal.replay(d) == []
    assert (queue / "max_sectors_kb").read_text() == "256\n"


def test_a_journal_others_can_write_is_not_replayed(fake_sys, private_tmp):
    """A journal directory of mode 0777 (anyone could have planted it) writes nothing back."""
    queue, _ = fake_sys
    (queue / "max_sectors_kb").write_text("512\n")
    d = _journal_of(_dead_pid(), [
        {"path": str(queue / "max_sectors_kb"), "before": "1280", "set": "512"}], mode=0o777)
    assert K.SettingsJournal.replay(d) == []
    assert (queue / "max_sectors_kb").read_text() == "512\n"


def test_a_journal_naming_another_file_is_not_replayed(fake_sys, private_tmp, tmp_path):
    """Only queue attributes and nr_hugepages are written back, never another file."""
    victim = tmp_path / "victim"
    victim.write_text("planted")
    d = _journal_of(_dead_pid(), [{"path": str(victim), "before": "gone", "set": "planted"}])
    assert K.SettingsJournal.replay(d) == []
    assert victim.read_text() == "planted"


def test_a_refused_second_change_keeps_the_first_in_the_journal(fake_sys, private_tmp, tmp_path,
                                                                monkeypatch):
    """512 was set, 256 refused: the journal still says 1280 -> 512."""
    queue, _ = fake_sys
    with K.loop_device(tmp_path / "b.img", 1 << 20, max_sectors_kb=512) as dev:
        def refuse(path, value):
            raise PermissionError(13, "Permission denied")
        write = K._write
        monkeypatch.setattr(K, "_write", refuse)
        with pytest.raises(PermissionError):
            dev.set_queue("max_sectors_kb", 256)
        journal = json.loads((K.SettingsJournal.directory() / "journal.json").read_text())
        assert journal == [{"path": str(queue / "max_sectors_kb"), "before": "1280", "set": "512"}]
        monkeypatch.setattr(K, "_write", write)


# --- on a real loop device ---------------------------------------------------------

REAL = ("max_sectors_kb", "read_ahead_kb", "rotational", "scheduler")


def _holds(text: str) -> str:
    """A queue attribute's value; of a choice list, the [selected] entry."""
    text = text.strip()
    return text[text.index("[") + 1:text.index("]")] if "[" in text else text


def _real_queues() -> dict:
    """{loopN: {attr: value}} of every loop device there is now."""
    out = {}
    for q in Path("/sys/block").glob("loop*/queue"):
        out[q.parent.name] = {a: _holds((q / a).read_text()) for a in REAL}
    return out


@pytest.fixture
def real_loop():
    """Skips where loop devices cannot be attached here (not root, no losetup, none free)."""
    try:
        K.require_losetup()      # also makes the next free /dev/loopN exist
    except K.ReferenceUnavailable as e:
        pytest.skip(f"no loop device: {e}")


def _change_each(dev, before: dict) -> None:
    """Sets each of REAL to a value other than its value in `before`."""
    line = dev.queue("scheduler")
    others = [c for c in line.replace("[", " ").replace("]", " ").split() if c != before["scheduler"]]
    if not others:
        pytest.skip(f"one I/O scheduler only for {dev.name}: {line}")
    dev.set_queue("scheduler", others[0])
    dev.set_queue("rotational", 1 - int(before["rotational"]))
    dev.set_queue("max_sectors_kb", 256 if before["max_sectors_kb"] == "512" else 512)
    dev.set_queue("read_ahead_kb", 64 if before["read_ahead_kb"] == "0" else 0)


def test_real_loop_device_gets_its_queue_back_after_keyboard_interrupt(real_loop, tmp_path):
    """max_sectors_kb, read_ahead_kb, rotational, scheduler changed: as before the run, after ^C."""
    before = _real_queues()
    seen = {}
    with pytest.raises(KeyboardInterrupt):
        with K.loop_device(tmp_path / "b.img", 16 << 20) as dev:
            seen["name"] = dev.name
            assert dev.name in before, "a loop device created while attaching (another user?)"
            _change_each(dev, before[dev.name])
            seen["changed"] = {a: _holds(dev.queue(a)) for a in REAL}
            raise KeyboardInterrupt
    assert all(seen["changed"][a] != before[seen["name"]][a] for a in REAL)
    assert _real_queues()[seen["name"]] == before[seen["name"]]


def test_real_loop_device_gets_its_queue_back_after_a_normal_run(real_loop, tmp_path):
    """The bio-size reference's max_sectors_kb 512 does not outlive the run."""
    before = _real_queues()
    with K.loop_device(tmp_path / "b.img", 16 << 20, max_sectors_kb=512, ra_kb=0) as dev:
        name = dev.name
        assert dev.queue("max_sectors_kb") == "512"
    assert name in before, "a loop device created while attaching (another user?)"
    assert _real_queues()[name] == before[name]


KILLED_REFERENCE = """
import os, signal, sys
from harness import kernel_fixtures as K
with K.workdir() as d, K.loop_device(d / "b.img", 16 << 20) as dev:
    line = dev.queue("scheduler")
    others = [c for c in line.replace("[", " ").replace("]", " ").split()
              if c != K._selected(line)]
    if others:
        dev.set_queue("scheduler", others[0])
    dev.set_queue("rotational", 1 - int(dev.queue("rotational")))
    dev.set_queue("max_sectors_kb", 256 if dev.queue("max_sectors_kb") == "512" else 512)
    dev.set_queue("read_ahead_kb", 64 if dev.queue("read_ahead_kb") == "0" else 0)
    print(dev.name, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_real_loop_device_gets_its_queue_back_after_sigkill(real_loop):
    """A reference killed by SIGKILL: the next run's cleanup_stale writes its queue back, then detaches."""
    before = _real_queues()
    r = subprocess.run([sys.executable, "-c", KILLED_REFERENCE], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == -signal.SIGKILL, r.stderr
    name = r.stdout.strip()
    assert name in before, "a loop device created while attaching (another user?)"
    changed = _real_queues()[name]
    assert changed != before[name], "the killed run changed nothing"
    removed = K.cleanup_stale()
    assert f"/dev/{name}" in removed
    assert not (Path("/sys/block") / name / "loop" / "backing_file").exists(), "still attached"
    assert _real_queues()[name] == before[name]
