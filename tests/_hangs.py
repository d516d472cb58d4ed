"""Runs of ``benchmarks/lapack_deadlock.py`` in a subprocess that tell a hang from a slow run, for
``test_lapack_deadlock.py`` and ``test_red_team.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "lapack_deadlock.py"
#: a run whose CPU time stays flat this long is a hang (a deadlocked pool uses no CPU at all)
STALL_S = 30.0


def _cpu_ticks(pid: int) -> int | None:
    """User + system CPU time of a process (all its threads), in clock ticks; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields[11]) + int(fields[12])


def run_until_done_or_hung(args: list[str], limit_s: float = 900.0) -> tuple[bool, str]:
    """Run the benchmark script with ``args``; ``(finished, output)``. A run counts as hung when its CPU
    time stops moving for :data:`STALL_S` seconds (on Linux) or it outlives ``limit_s``; it is then killed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    start = last_change = time.monotonic()
    last = None
    while proc.poll() is None:
        time.sleep(1.0)
        ticks, now = _cpu_ticks(proc.pid), time.monotonic()
        if ticks != last:
            last, last_change = ticks, now
        if now - last_change > STALL_S or now - start > limit_s:
            proc.kill()
            proc.wait()
            return False, proc.stdout.read()
    out = proc.stdout.read()
    return proc.returncode == 0 and "done" in out, out
