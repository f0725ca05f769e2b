"""What one reproduction returns, so that `reproduce`, `history`, `check`,
the report and pytest all read the same thing.

An experiment module (harness/experiments/<name>.py) defines
    NAME = "raid5"                      # the CLI name
    TITLE = "md RAID5 split order"       # one line
    SEEDS = ["000_fa5278d1f568ad45.txt", "002_8e50d1a4837276ef.txt"]
    def run(jobs_dir: Path, out_dir: Path, progress) -> ExperimentResult
where jobs_dir is a fresh copy of jobs/ to run from, out_dir the report
directory for this experiment, and progress(step_text) is called before each
fio run.
"""
from dataclasses import dataclass, field


@dataclass
class ExperimentResult:
    name: str
    # Printed tables, in the thread's layout, ours beside the thread's figures.
    tables: list = field(default_factory=list)          # [str, ...]
    # Flat metrics keyed "variant.metric" (e.g. "fixed.md0_MBps"): what
    # history records and check compares. Numbers only.
    metrics: dict = field(default_factory=dict)
    # Figures written into out_dir: [relative path, ...]
    figures: list = field(default_factory=list)
    # Raw material kept in the report: fio JSON, sidecars (paths relative to out_dir).
    raw: dict = field(default_factory=dict)
    # The experiment's own verdicts on expectations: [(description, passed: bool, detail)]
    checks: list = field(default_factory=list)
