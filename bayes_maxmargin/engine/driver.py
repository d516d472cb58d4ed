"""The host loop of the chunked runs: sampling (:func:`~bayes_maxmargin.engine.mcmc.run_chains`) and
streaming VI (:func:`~bayes_maxmargin.engine.svi.run_svi`).

Both runs are a sequence of compiled chunks of *units* (blocks of ``thin`` iterations of a Markov
kernel; rounds of ``hyper_every`` natural-gradient steps). :func:`drive` cuts the run into chunks and
owns what is common to both:

* chunk lengths: the first chunks have the requested length ``period``; one that takes more than twice
  :data:`~bayes_maxmargin.engine.chunks.CHUNK_SECONDS` (compilation excluded) makes the rest shorter
  (:func:`~bayes_maxmargin.engine.chunks.shorter_length`), and no chunk crosses a multiple of ``period``
  units past where the run started. The results do not depend on the cut (:mod:`~bayes_maxmargin.engine.chunks`);
* progress: the active reporter (:mod:`bayes_maxmargin.core.progress`) counts the run's iterations;
* checkpoints and callbacks: at every multiple of ``period`` units, at the end and when the run stops
  early, ``at_period`` writes the checkpoint and calls the user's callback; ``at_exit`` writes what a
  stopped or finished run leaves (the last checkpoint, the draws), also after an error;
* signals: the chunk runs through the run's :class:`~bayes_maxmargin.engine.checkpoint.StopRequest`
  (``stop.call``), whose ``resume_at`` the driver keeps up to date, and SIGINT / SIGTERM are raised
  between chunks and after the last writes.

What a chunk computes, and what a checkpoint holds, stay with the run (``advance``, ``at_period``,
``at_exit``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from bayes_maxmargin.engine.checkpoint import StopRequest
from bayes_maxmargin.engine.chunks import Stopwatch, shorter_length

__all__ = ["Chunk", "drive"]


class Chunk(NamedTuple):
    """One chunk of a run.

    Attributes
    ----------
    start : int
        Units done before it.
    length : int
        Units of its compiled program (one program per length).
    size : int
        Units it keeps (at most ``length``; the program computes the others and they are discarded).
    """

    start: int
    length: int
    size: int


def drive(
    advance: Callable[[Chunk], bool],
    stop: StopRequest,
    *,
    total: int,
    done: int = 0,
    period: int,
    unit: int = 1,
    bar: Any = None,
    at_period: Callable[[int], None] | None = None,
    at_exit: Callable[[int], None] | None = None,
) -> int:
    """Run ``advance`` on the chunks of a run until ``total`` units are done.

    Parameters
    ----------
    advance : callable
        ``advance(chunk) -> stopping``: runs the chunk (its compiled program through ``stop.call``) and
        keeps its results; True stops the run after it (e.g. every SVI problem diverged).
    stop : StopRequest
        The run's, from :func:`~bayes_maxmargin.engine.checkpoint.checkpoint_session`.
    total, done : int
        Units of the whole run, and those done before (a resumed run).
    period : int
        Units of the first chunks, and between checkpoints and callbacks.
    unit : int
        Iterations (SVI: steps) per unit: what the progress reporter and ``stop.resume_at`` count.
    bar : Progress, optional
        The progress reporter.
    at_period : callable, optional
        ``at_period(done)`` at every multiple of ``period`` units past ``done``, at the end, and after a
        chunk that stops the run.
    at_exit : callable, optional
        ``at_exit(done)`` when the loop ends, by completion, an early stop, a signal or an error.

    Returns
    -------
    int
        The units done.
    """
    if bar is not None:  # the count of this run (also with the reporter of an enclosing fit)
        bar.restart(total * unit, done * unit)
    origin, length = done, period
    try:
        while done < total:
            size = min(length, period - (done - origin) % period, total - done)
            watch = Stopwatch()
            stopping = advance(Chunk(done, length, size))
            done += size
            length = shorter_length(length, watch.seconds)
            stop.resume_at = done * unit  # a stop from now on leaves the run at this point
            if bar is not None:
                bar.report(done * unit)
            if at_period is not None and ((done - origin) % period == 0 or done >= total or stopping):
                at_period(done)
            if stopping:
                break
            stop.raise_if_requested()
    finally:
        if at_exit is not None:
            at_exit(done)
    stop.raise_if_requested()  # a signal during the last writes
    return done
