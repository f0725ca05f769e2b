# The compiler's step count as progress: reads cmake --build's output, copies
# every line to LOG, and shows "[ 45%]" with the time elapsed and an estimate
# of the time left (extrapolated from the share of steps done). On a terminal
# (TTY=1) it is one line redrawn in place; elsewhere one plain line per 10 %.
# Prints nothing when nothing is compiled (an up-to-date build).
# Usage: cmd 2>&1 | awk -v LOG=FILE -v TTY=0|1 -f ci/build-progress.awk
function now() { srand(); return srand() }
function fmt(s,  m) { s = int(s + 0.5); m = int(s / 60); return m ":" sprintf("%02d", s % 60) }
BEGIN { t0 = now(); last = -10; shown = 0 }
{
    print > LOG
    if ($0 ~ /(Building|Linking) / && match($0, /^\[ *[0-9]+%\]/)) {
        pct = substr($0, RSTART + 1, RLENGTH - 3) + 0
        el = now() - t0
        eta = pct > 0 ? fmt(el * (100 - pct) / pct) : "unknown"
        line = sprintf("mdsplit: building [%3d%%] (%s elapsed, ETA %s from the step count)", pct, fmt(el), eta)
        if (TTY == 1) { printf "\r%s\033[K", line > "/dev/stderr"; shown = 1 }
        else if (pct >= last + 10) { print line > "/dev/stderr"; last = pct; shown = 1 }
    }
}
END {
    if (shown) {
        if (TTY == 1) printf "\r\033[K" > "/dev/stderr"
        print "mdsplit: build steps done in " fmt(now() - t0) > "/dev/stderr"
    }
}
