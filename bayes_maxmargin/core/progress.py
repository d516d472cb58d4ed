"""Progress of a fit, for every inference method: a "compiling" line, then the iterations.

A fit with ``progress_bar=True`` runs inside a :class:`Progress` (:func:`fit_progress`). While one is
active, the package's compiled loops (the Gibbs chunk of :func:`~bayes_maxmargin.engine.mcmc.run_chains`,
the EM / ECM loop, the coordinate-ascent VB / VI loop, the NUTS scans) are traced with a host callback
per iteration (:func:`tick`, ``jax.debug.callback`` with ``ordered=False``), and the host loops (SVI)
report after every chunk. The reporter stays silent for the first :data:`DELAY_S` seconds, so that a fit
of a second or two prints nothing; after that a bar on stderr says "compiling" until the first iteration
arrives, then counts iterations (redrawn at most every :data:`MIN_INTERVAL_S` seconds).

The callbacks change nothing that the loops compute. Programs traced while no reporter is active
have none (:func:`ticks_enabled` is part of how :func:`bayes_maxmargin.core.compilation.jit` caches
its programs), so fits with ``progress_bar=False`` run exactly the programs they ran before.

Loops of one run may restart their counters (the ECM runs of the rounds of ML-II, one per
one-vs-rest class in a vmapped program): a loop's :func:`loop_start` (a callback outside the loop)
opens a new segment, and the count shown is the sum over the segments of the largest iteration
reported in each.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np

__all__ = ["DELAY_S", "MIN_INTERVAL_S", "Progress", "active", "fit_progress", "loop_start", "tick",
           "ticks_enabled"]

log = logging.getLogger(__name__)

#: Seconds a fit runs before its progress shows (shorter fits print nothing).
DELAY_S = 1.0
#: Shortest time between two redraws of the bar.
MIN_INTERVAL_S = 0.25

_STACK: list["Progress"] = []
_LOCK = threading.RLock()
#: Number of :func:`tick` / :func:`loop_start` callbacks inserted into traced programs so far.
inserted = 0


class Progress:
    """The progress report of one fit (thread-safe: the callbacks arrive on XLA's threads).

    Parameters
    ----------
    desc : str
        What runs, e.g. ``"LinearBSVM(inference='ecm')"``.
    total : int, optional
        Iterations of the run when known in advance (MCMC); None for loops that stop at
        convergence (the bar then counts without a percentage).
    delay : float
        Seconds before anything shows.
    file : stream
        Where the bar goes (stderr).
    """

    def __init__(self, desc: str, total: int | None = None, delay: float = DELAY_S, file: Any = None) -> None:
        self.desc, self.total, self.delay = desc, total, delay
        self.file = file if file is not None else sys.stderr
        self.base = 0  # iterations of the finished segments
        self.segment = 0  # largest iteration reported in the current segment
        self.started = time.perf_counter()
        self._bar: Any = None
        self._last_draw = 0.0
        self._timer: threading.Timer | None = None
        self._closed = False

    # -------------------------------------------------------------- counting
    @property
    def n(self) -> int:
        """Iterations reported so far."""
        return self.base + self.segment

    def new_segment(self) -> None:
        with _LOCK:
            self.base += self.segment
            self.segment = 0

    def report(self, i: int) -> None:
        """Iteration ``i`` (1-based, within the current segment) is done."""
        with _LOCK:
            if self._closed or i <= self.segment:
                return
            self.segment = int(i)
            now = time.perf_counter()
            if now - self.started >= self.delay and now - self._last_draw >= MIN_INTERVAL_S:
                self._draw(now)

    def restart(self, total: int | None, done: int = 0) -> None:
        """Count a new phase of the fit (e.g. the sampler after an initial ECM run): ``total``
        iterations of which ``done`` already ran (a resumed run)."""
        with _LOCK:
            self.total, self.base, self.segment = total, 0, int(done)
            if self._bar is not None:
                self._bar.total = total
                self._bar.n = min(self.n, total) if total else self.n
                self._bar.refresh()

    # -------------------------------------------------------------- display
    def _draw(self, now: float) -> None:
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, desc=self.desc, unit="it", leave=False, file=self.file,
                             dynamic_ncols=True, mininterval=MIN_INTERVAL_S)
            self._bar.set_postfix_str("compiling" if self.n == 0 else "", refresh=False)
        elif self.n and self._bar.postfix:
            self._bar.set_postfix_str("", refresh=False)
        self._bar.n = min(self.n, self.total) if self.total else self.n
        self._bar.refresh()
        self._last_draw = now

    def _show(self) -> None:
        with _LOCK:
            if not self._closed:
                self._draw(time.perf_counter())

    def __enter__(self) -> "Progress":
        with _LOCK:
            _STACK.append(self)
        self._timer = threading.Timer(self.delay, self._show)
        self._timer.daemon = True
        self._timer.start()
        log.info("%s: started", self.desc)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with _LOCK:
            self._closed = True
            if self in _STACK:
                _STACK.remove(self)
            if self._bar is not None:
                self._bar.close()
        log.info("%s: %s after %.1f s (%d iterations reported)", self.desc,
                 "stopped" if exc[0] is not None else "done", time.perf_counter() - self.started, self.n)


def active() -> Progress | None:
    """The reporter of the running fit, if any."""
    with _LOCK:
        return _STACK[-1] if _STACK else None


def ticks_enabled() -> bool:
    """Whether programs traced now get progress callbacks: a reporter is active and the backend is
    the CPU (on an accelerator every host callback in a loop costs a device-to-host copy per
    iteration; there the host loops' reports per chunk and the "compiling" line remain)."""
    return bool(_STACK) and jax.default_backend() == "cpu"


@contextlib.contextmanager
def fit_progress(enabled: bool, desc: str, total: int | None = None) -> Iterator[Progress | None]:
    """A :class:`Progress` for a fit when ``enabled`` and none is active yet (the reporter of an
    enclosing fit, e.g. a meta-estimator's, also serves the fits inside it); else None."""
    if not enabled or active() is not None:
        yield active() if enabled else None
        return
    with Progress(desc, total) as progress:
        yield progress


def _report(i: Any) -> None:
    progress = active()
    if progress is not None:
        progress.report(int(np.max(i)) + 1)


def _new_segment() -> None:
    progress = active()
    if progress is not None:
        progress.new_segment()


def tick(i: Any, every: int = 1) -> None:
    """In a loop body being traced: report iteration ``i`` (0-based, traced) to the active
    reporter; with ``every`` > 1 only the first ``every`` iterations and then every ``every``-th
    (a callback costs about half a millisecond, as much as a cheap iteration: for such loops, when
    the host reports the count again after the loop). Inserts nothing unless :func:`ticks_enabled`."""
    global inserted
    if not ticks_enabled():
        return
    inserted += 1

    def report() -> None:
        jax.debug.callback(_report, i, ordered=False)

    if every == 1:
        report()
    else:
        jax.lax.cond((i < every) | (i % every == every - 1), report, lambda: None)


def loop_start() -> None:
    """Before a loop whose :func:`tick` counter starts again at 0 (traced, outside the loop): a new
    segment of the count. Inserts nothing unless :func:`ticks_enabled`."""
    global inserted
    if ticks_enabled():
        inserted += 1
        jax.debug.callback(_new_segment, ordered=False)
