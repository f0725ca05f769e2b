"""fio job files as fio 3.33 reads them (init.c parse_jobs_ini, options.c,
parse.c), for `harness simulate`: sections, [global], `include`, `${ENV}`,
numjobs, stonewall/new_group, and fio's number syntax.

- A line whose first non-blank character is `;` or `#` is a comment
  (is_empty_or_comment); elsewhere a line ends at its first `;` or `#`,
  and trailing blanks go (parse.c strip_blank_end): `bs=4k ; why` is
  bs=4k, and a value cannot hold either character.
- `[global]` options apply to the jobs that follow it; a later `[global]`
  adds to them for the jobs after it.
- `include FILE` (inside a section) reads FILE's options in place; FILE is
  relative to the including file when it does not exist as given.
- `${VAR}` is replaced by the environment's value, or by nothing when VAR is
  unset (fio_option_dup_subs).
- Sizes: a number with an optional suffix, k/m/g/t/p = powers of 1024 (fio's
  default kb_base=1024), kib/mib/... = powers of 1000 under kb_base=1024
  (fio's "opposite units"; __get_mult_bytes), `0x` hex.
- Times (get_mult_time): us/usec, ms/msec, s, m (minutes), h, d; a bare
  number is seconds for runtime/startdelay/ramp_time (is_seconds options)
  and microseconds otherwise.
- `filename=` adds to the files of the job (str_filename_cb): a second one,
  in the section or in [global] before it, gives `a:b`, as fio's two files.
- numjobs=N adds N-1 subjobs with the same options and group, stonewall
  and new_group cleared (init.c add_job), in fio's order: subjob 0, then
  N-1 down to 1; subjob i (1..N-1) writes its sidecar as FILE.i, as the
  engine does.
- groupid: a job with stonewall or new_group opens a new group unless it is
  the first job (init.c add_job: prev_group_jobs).
"""
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path


class JobFileError(ValueError):
    """A job file fio would refuse (one line naming the option)."""


# Options whose bare number means seconds (fio's is_seconds=1).
SECONDS_OPTIONS = {"runtime", "timeout", "startdelay", "ramp_time"}
# Boolean options fio accepts without a value.
ALIASES = {"readwrite": "rw", "timeout": "runtime", "iodepth_batch": "iodepth_batch_submit",
           "ioscheduler": "ioscheduler", "blocksize": "bs", "blocksize_range": "bsrange",
           "ba": "blockalign", "blocksize_split": "bssplit", "offset_align": "offset_align",
           "fileoffset": "offset", "io_limit": "io_size", "rwmixcycle": "rwmixcycle",
           "filesize": "filesize", "time_based": "time_based"}


@dataclass
class Job:
    name: str
    options: dict                 # option -> raw string value (after ${} substitution)
    groupid: int = 0
    subjob: int = 0               # 0 for the job itself, 1..numjobs-1 for its copies
    section: str = ""             # the section it came from
    stonewall: bool = False

    def get(self, key, default=None):
        return self.options.get(key, default)

    def flag(self, key, default=False) -> bool:
        v = self.options.get(key)
        if v is None:
            return default
        return parse_bool(key, v)


@dataclass
class JobFile:
    path: str
    jobs: list = field(default_factory=list)
    files: list = field(default_factory=list)  # the job file and the files it includes


def substitute_env(value: str, env) -> str:
    """fio_option_dup_subs: ${VAR} -> env[VAR] or ''."""
    return re.sub(r"\$\{([^}]+)\}", lambda m: env.get(m.group(1), ""), value)


def _split_option(line: str):
    # parse.c find_option() compares names with strcmp: RW= is not rw=.
    if "=" in line:
        key, value = line.split("=", 1)
        return key.strip(), value.strip()
    return line.strip(), None


MAX_INPUT_BYTES = 1 << 20   # as the engine's stack files (config_loader.cpp)
MAX_JOBS = 4096             # fio.h REAL_MAX_JOBS


def read_input_text(path, what="job file", prog="simulate") -> str:
    """An input file's text: a regular file of at most 1 MiB of UTF-8. A
    device or FIFO (/dev/zero) would be read without end or block. Raises
    JobFileError with one line naming the file (prog: the command it
    starts with, `simulate` or `run`)."""
    path = Path(path)
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise JobFileError(f"{prog}: {what} {path} is not a regular file; allowed: a "
                               "text file")
        if st.st_size > MAX_INPUT_BYTES:
            raise JobFileError(f"{prog}: {what} {path} is {st.st_size} bytes; allowed: a "
                               "text file of at most 1 MiB")
        return path.read_bytes().decode("utf-8")
    except OSError as e:
        raise JobFileError(f"{prog}: cannot read {what} {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise JobFileError(f"{prog}: {what} {path}: byte {e.start} is not UTF-8; allowed: "
                           "a UTF-8 text file") from None


def strip_blank_end(line: str) -> str:
    """parse.c strip_blank_end(): the line up to its first `;`, then up to
    its first `#`, without trailing blanks or control characters."""
    line = line.split(";", 1)[0].split("#", 1)[0]
    return line.rstrip("".join(chr(c) for c in range(33)) + "\x7f")


def include_line(line: str):
    """The file name of an `include FILE` line (stripped as strip_blank_end
    leaves it), or None for any other line."""
    if line.startswith("include") and (len(line) == 7 or line[7] in " \t"):
        return line[7:].strip()
    return None


def include_path(name: str, including: Path, cwd=None) -> Path:
    """Where fio reads `include NAME` from (init.c __parse_jobs_ini): NAME as
    given (relative to fio's working directory cwd, default ours) when it
    exists, else relative to the including file's directory."""
    inc = Path(name)
    if inc.is_absolute() or (Path(cwd or ".") / inc).exists():
        return Path(cwd or ".") / inc
    return Path(including).parent / name


def check_include_cycle(inc: Path, chain: tuple, prog: str) -> None:
    """fio reads `include FILE` recursively (init.c __parse_jobs_ini) and
    has no end for a file that leads back to one including it: one line
    naming the cycle instead. chain: the files being read, outermost first."""
    resolved = [p.resolve() for p in chain]
    if inc.resolve() in resolved:
        cycle = chain[resolved.index(inc.resolve()):] + (inc,)
        raise JobFileError(f"{prog}: {cycle[0]}: a cycle of includes "
                           f"({' -> '.join(str(p) for p in cycle)}); allowed: includes that do "
                           "not lead back to a file that includes them")


def inline_includes(path, cwd=None, prog="run") -> str:
    """The job file's text with each `include FILE` line replaced by FILE's
    lines (FILE found as fio finds it, include_path; nested includes too).
    fio's server cannot read an include: it parses the include's file name
    as job text, so a job file sent to it (--client) must carry them inline.
    A missing or unreadable FILE, or a section in one (fio refuses those),
    raises JobFileError, one line."""
    path = Path(path)

    def lines_of(p: Path, nested: bool, chain: tuple) -> list:
        out = []
        for raw in read_input_text(p, what="included file" if nested else "job file",
                                   prog=prog).splitlines():
            line = strip_blank_end(raw.strip())
            if nested and line.startswith("["):
                raise JobFileError(f"{prog}: {p}: no new sections in included files "
                                   "(fio refuses them); allowed: options only")
            name = include_line(line)
            if name is None:
                out.append(raw)
                continue
            inc = include_path(name, p, cwd)
            if not inc.exists():
                raise JobFileError(f"{prog}: {p}: include {name}: no such file; allowed: a file "
                                   f"as given (from {Path(cwd or '.').absolute()}) or beside "
                                   f"{p.name}")
            check_include_cycle(inc, chain + (p,), prog)
            out.append(f"; {line} (inlined)")
            out.extend(lines_of(inc, True, chain + (p,)))
        return out
    return "\n".join(lines_of(path, False, ())) + "\n"


def _read_lines(path: Path, env, nested=False, cwd=None, files=None, chain=()):
    """(key, value) pairs and section headers of a file, includes expanded
    (found as fio finds them from working directory cwd, include_path);
    `files` gets the path of every file read; `chain`: the files including
    this one, outermost first."""
    text = read_input_text(path)
    if files is not None:
        files.append(str(path))
    return _lines_of_text(text, path, env, nested, cwd, files, chain)


def _lines_of_text(text: str, path: Path, env, nested=False, cwd=None, files=None, chain=()):
    """_read_lines() of a text read from `path` (includes resolve beside it)."""
    out = []
    for number, raw in enumerate(text.splitlines(), 1):
        if "\0" in raw:
            # fio reads a line as a C string: it would end at the NUL, and
            # the option would take what stands before it (another file).
            raise JobFileError(f"simulate: {path}: line {number} ({raw.split(chr(0))[0].strip()}"
                               "...): holds a NUL character; allowed: text lines without NUL")
        # init.c __parse_jobs_ini: is_empty_or_comment(), then strip_blank_end().
        line = strip_blank_end(raw.strip())
        if not line:
            continue
        if line.startswith("["):
            if nested:
                raise JobFileError(f"simulate: {path}: no new sections in included files")
            if not line.endswith("]"):
                raise JobFileError(f"simulate: {path}: bad section header {line!r}")
            out.append(("[", line[1:-1].strip()))
            continue
        name = include_line(line)
        if name is not None:
            inc = include_path(substitute_env(name, env), path, cwd)
            check_include_cycle(inc, chain + (Path(path),), "simulate")
            out.extend(_read_lines(inc, env, nested=True, cwd=cwd, files=files,
                                   chain=chain + (Path(path),)))
            continue
        key, value = _split_option(line)
        out.append((key, None if value is None else substitute_env(value, env)))
    return out


def read_sections(text: str, path="<text>", env=None) -> list:
    """A job file's text as [(section, [(key, value or None)])], in file
    order, [global] kept as a section of its own: fio's line syntax
    (comments, includes, ${ENV}) as parse_job_file() reads it, without
    merging [global] into the jobs (for a job file rewritten for another
    engine, harness/experiments/bfq.py). A bare option's value is None."""
    env = dict(os.environ) if env is None else env
    sections = []
    for key, value in _lines_of_text(text, Path(path), env):
        if key == "[":
            sections.append((value, []))
        elif not sections:
            raise JobFileError(f"simulate: {path}: option {key!r} outside any section")
        else:
            sections[-1][1].append((key, value))
    return sections


def write_sections(sections, header: str = "") -> str:
    """read_sections()'s form back as job-file text, `header` as comments."""
    lines = [f"; {h}" for h in header.splitlines()] if header else []
    for name, opts in sections:
        lines.append(f"[{name}]")
        lines += [k if v is None else f"{k}={v}" for k, v in opts]
        lines.append("")
    return "\n".join(lines)


def last_of(options: dict, *keys):
    """Of options that set one field of fio's (direct and buffered write
    o.odirect; options.c str_rwmix_read_cb / str_rwmix_write_cb set both
    rwmix shares), the one set last, or None."""
    present = [k for k in options if k in keys]
    return present[-1] if present else None


def parse_job_file(path, sections=None, env=None, cwd=None) -> JobFile:
    """The jobs of a job file, in order, with [global] options merged in.
    sections: only these sections run (fio's --section), still in file order;
    a str is one section (it was iterated: sections="fixed" asked for "f",
    "i", ...). cwd: fio's working directory, where includes are looked for
    first (default ours)."""
    if isinstance(sections, str):
        sections = [sections]
    env = dict(os.environ) if env is None else env
    path = Path(path)
    files = []
    lines = _read_lines(path, env, cwd=cwd, files=files)
    global_opts: dict = {}
    raw_jobs = []          # (name, options)
    current = None
    for key, value in lines:
        if key == "[":
            # init.c __parse_jobs_ini(): any section whose name starts with
            # "global" (strncmp, 6) is the global one.
            if value.startswith("global"):
                current = global_opts
            else:
                opts = dict(global_opts)
                raw_jobs.append((value, opts))
                current = opts
            continue
        if current is None:
            raise JobFileError(f"simulate: {path}: option {key!r} outside any section")
        key = ALIASES.get(key, key)
        if key == "filename" and current.get("filename") and value:
            # options.c str_filename_cb: each filename= adds its files to the
            # job's (add_file), after those of [global] or an earlier line.
            current[key] += ":" + value
            continue
        # Re-inserted so the dict's order is the order fio last set each
        # option in: of linked options (direct/buffered, rwmixread/rwmixwrite)
        # the later one wins (see last_of).
        current.pop(key, None)
        if value is None and key not in STR_SET_OPTIONS:
            # parse.c __handle_option(): only a FIO_OPT_STR_SET flag may stand alone.
            raise JobFileError(f"simulate: option {key} requires an argument (fio: "
                               f"\"Option {key} requires an argument\"); allowed: {key}=VALUE")
        current[key] = "1" if value is None else value
    if sections:
        names = {n for n, _ in raw_jobs}
        for s in sections:
            if s not in names:
                raise JobFileError(f"simulate: --section {s}: no such job in {path}")
        raw_jobs = [(n, o) for n, o in raw_jobs if n in sections]
    jf = JobFile(str(path), files=files)
    groupid = 0
    for name, opts in raw_jobs:
        stonewall = parse_bool("stonewall", opts.get("stonewall", "0")) or \
            parse_bool("wait_for_previous", opts.get("wait_for_previous", "0"))
        new_group = parse_bool("new_group", opts.get("new_group", "0"))
        if (stonewall or new_group) and jf.jobs:
            groupid += 1
        numjobs = parse_int("numjobs", opts.get("numjobs", "1"))
        # fio runs at most REAL_MAX_JOBS (4096, fio.h) jobs in all.
        if not 1 <= numjobs <= MAX_JOBS - len(jf.jobs):
            raise JobFileError(f"simulate: numjobs={numjobs}: allowed: 1 to {MAX_JOBS} jobs in "
                               "all (fio's REAL_MAX_JOBS)")
        # init.c add_job(): the job itself, then `while (--numjobs)` adds
        # subjobs numjobs-1 down to 1, so fio's thread_data order (the order
        # its jobs start and are reported in) is 0, N-1, ..., 1.
        for i in [0, *range(numjobs - 1, 0, -1)]:
            jf.jobs.append(Job(name=name, options=dict(opts), groupid=groupid, subjob=i,
                               section=name, stonewall=stonewall and i == 0))
    if not jf.jobs:
        raise JobFileError(f"simulate: {path}: no jobs")
    return jf


# --- fio's number syntax -----------------------------------------------------

_BYTE_SUFFIX = [  # (prefix, power, base) as __get_mult_bytes tests them, in order
    ("pib", 5, 1000), ("tib", 4, 1000), ("gib", 3, 1000), ("mib", 2, 1000), ("kib", 1, 1000),
    ("p", 5, 1024), ("t", 4, 1024), ("g", 3, 1024), ("m", 2, 1024), ("k", 1, 1024),
]


def parse_size_or_percent(key: str, value: str):
    """(bytes, 0) or, for "N%", (0, N): parse.c str_to_decimal() marks a
    percentage as -1ULL - N, which options.c str_offset_cb() /
    str_size_cb() (parse_is_percent: 0 to 100) keep as a percentage of the
    file; "0%" sets none (the option's default)."""
    try:
        return parse_size(key, value), 0
    except _Percent as p:
        if not 0 <= p.n <= 100:
            raise JobFileError(f"simulate: {key}={value}: allowed: 0% to 100%") from None
        return 0, p.n


class _Percent(JobFileError):
    def __init__(self, message, n):
        super().__init__(message)
        self.n = n


def parse_size(key: str, value: str) -> int:
    """A size as fio's str_to_decimal(kilo=1) reads it (kb_base=1024):
    strtoll() in base 16 when "0x" or "0X" appears anywhere in the value,
    else base 10 (so "01m" is 1 MiB and "08k" 8 KiB, no octal), then
    get_mult_bytes() looks for the unit right after the leading signs and
    decimal digits: "0x64" is 100, and "0x64k" too (the 'x' is no unit)."""
    s = value.strip()
    hex_base = "0x" in s or "0X" in s
    m = re.match(r"[+-]?(?:0[xX](?=[0-9a-fA-F]))?[0-9a-fA-F]+" if hex_base else r"[+-]?[0-9]+", s)
    if not m:
        raise JobFileError(f"simulate: {key}={value}: not a size (e.g. 4k, 64m, 2g)")
    n = int(m.group(0), 16 if hex_base else 10)
    # get_mult_bytes(): "1.5g" has no unit there ('.'), so fio reads it as 1 byte.
    rest = s[re.match(r"[+-]*[0-9]*", s).end():].lower()
    rest = re.split(r"[:\-,/]", rest, maxsplit=1)[0]
    if not rest or not rest[0].isalpha() and rest[0] != "%":
        return n
    if rest.startswith("%"):
        raise _Percent(f"simulate: {key}={value}: percentages are not supported in "
                       "virtual time", n)
    for prefix, power, base in _BYTE_SUFFIX:
        if rest.startswith(prefix):
            return n * base ** power
    return n  # fio ignores an unknown suffix (multiplier 1)


def parse_time_us(key: str, value: str) -> int:
    """A time as fio's str_to_decimal(kilo=0) reads it, in microseconds."""
    s = value.strip()
    m = re.match(r"^([+-]?\d+)(.*)$", s)
    if not m:
        raise JobFileError(f"simulate: {key}={value}: not a time (e.g. 250ms, 8s, 100us)")
    n = int(m.group(1))
    rest = m.group(2).strip().lower()
    if not rest or not rest[0].isalpha():
        return n * (1_000_000 if key in SECONDS_OPTIONS else 1)
    if rest.startswith("us") or rest.startswith("usec"):
        mult = 1
    elif rest.startswith("ms") or rest.startswith("msec"):
        mult = 1000
    elif rest == "s":
        mult = 1_000_000
    elif rest == "m":
        mult = 60_000_000
    elif rest == "h":
        mult = 3_600_000_000
    elif rest == "d":
        mult = 86_400_000_000
    else:
        mult = 1  # as get_mult_time: an unknown unit multiplies by 1
    return n * mult


def parse_int(key: str, value: str) -> int:
    """An FIO_OPT_INT as parse.c __handle_option reads it: check_str_bytes(),
    so a unit is allowed (iodepth=1k is 1024); no number is refused."""
    try:
        return int(value.strip(), 0)
    except ValueError:
        pass
    if not re.match(r"^\s*(0[xX][0-9a-fA-F]+|[+-]?\d+)", value) or "%" in value:
        raise JobFileError(f"simulate: {key}={value}: not an integer")
    return parse_size(key, value)


# fio's FIO_OPT_STR_SET options (options.c): any integer, non-zero is true.
# The others simulate reads as flags are FIO_OPT_BOOL: 0 or 1 (option_init).
STR_SET_OPTIONS = {"thread", "time_based", "norandommap", "stonewall", "wait_for_previous",
                   "new_group", "group_reporting", "exitall", "exitall_on_error", "bs_unaligned",
                   "verify_only", "zero_buffers", "refill_buffers"}


def _check_int(value: str):
    """parse.c check_int(): sscanf "%x" when the text holds "0x", else "%u"
    (blanks, a sign, digits, anything after), as a C int; None if no number."""
    hexa = "0x" in value or "0X" in value
    m = re.match(r"\s*([+-]?)(?:0[xX])?([0-9a-fA-F]+)" if hexa else r"\s*([+-]?)(\d+)", value)
    if not m:
        return None
    n = int(m.group(2), 16 if hexa else 10) * (-1 if m.group(1) == "-" else 1)
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n >= 1 << 31 else n


def parse_bool(key: str, value: str) -> bool:
    """A flag as parse.c __handle_option (FIO_OPT_BOOL / FIO_OPT_STR_SET)
    reads it: an integer (check_int; "yes" or "true" fail to parse); a
    FIO_OPT_BOOL's maxval is 1 (option_init: direct=2 is refused), a
    FIO_OPT_STR_SET has no bound (norandommap=2 is true)."""
    n = _check_int(value)
    if key in STR_SET_OPTIONS:
        if n is None:
            raise JobFileError(f"simulate: {key}={value}: not an integer")
        return n != 0
    if n is None or n > 1:
        raise JobFileError(f"simulate: {key}={value}: not a boolean (0 or 1)")
    return n != 0


def parse_size_per_direction(key: str, value: str):
    """fio's per-direction values (parse.c __handle_option, off1..off3):
    "R" for all three, "R,W" (the trim's is W's), or "R,W,T"; an empty W
    keeps R, an empty T keeps W. Returns (read, write, trim)."""
    parts = value.split(",")
    if len(parts) > 3:
        raise JobFileError(f"simulate: {key}={value}: at most read,write,trim values")
    r = parse_size(key, parts[0]) if parts[0] else None
    w = parse_size(key, parts[1]) if len(parts) > 1 and parts[1] else r
    t = parse_size(key, parts[2]) if len(parts) > 2 and parts[2] else w
    return r, w, t


def parse_range(key: str, value: str):
    """bsrange=MIN-MAX[,MIN-MAX[,MIN-MAX]]: [(rmin, rmax), (wmin, wmax),
    (tmin, tmax)]; a missing write range is the read's, a missing trim
    range the write's (parse.c FIO_OPT_RANGE, off1..off6)."""
    out = []
    for part in value.split(",")[:3]:
        if "-" not in part:
            raise JobFileError(f"simulate: {key}={value}: expected MIN-MAX (e.g. 4k-256k)")
        lo, hi = part.split("-", 1)
        a, b = parse_size(key, lo), parse_size(key, hi)
        out.append((min(a, b), max(a, b)))
    while len(out) < 3:
        out.append(out[-1])
    return out


def parse_bssplit(key: str, value: str):
    """bssplit=BS/PCT:BS/PCT[,WRITE...[,TRIM...]]: per direction (read,
    write, trim) a list of (bs, pct); a missing write list is the read's,
    a missing trim list the write's (options.c str_split_parse); entries
    without a percentage share what is left equally (fio's bssplit_ddir)."""
    out = []
    for part in value.split(",")[:3]:
        entries, missing, total = [], 0, 0
        for item in filter(None, part.split(":")):
            if "/" in item:
                bs, pct = item.split("/", 1)
                p = parse_int(key, pct) if pct else None
            else:
                bs, p = item, None
            entries.append([parse_size(key, bs), p])
            if p is None:
                missing += 1
            else:
                total += p
        if total > 100:
            raise JobFileError(f"simulate: {key}={value}: percentages add up to more than 100")
        if missing:
            share = (100 - total) // missing
            for e in entries:
                if e[1] is None:
                    e[1] = share
        out.append([tuple(e) for e in entries])
    while len(out) < 3:
        out.append(out[-1])
    return out
