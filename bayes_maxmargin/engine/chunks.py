"""Compiled chunks sized by time, so that a run answers Ctrl-C and SIGTERM within seconds.

A compiled program cannot be interrupted, and a checkpointed run can only write a checkpoint
between two chunks. The driver of the chunked runs (:func:`~bayes_maxmargin.engine.driver.drive`, for
:func:`~bayes_maxmargin.engine.mcmc.run_chains` and :func:`~bayes_maxmargin.engine.svi.run_svi`) therefore
times every chunk (compilation excluded, :class:`Stopwatch`) and, when one took more than twice
:data:`CHUNK_SECONDS`, compiles a shorter one for the rest of the run (:func:`shorter_length`): a power of two of units (blocks of ``thin``
iterations, SVI rounds), so that runs of one model share a few programs. Since the random stream
of a unit depends only on its position in the run (``fold_in`` of the iteration, the minibatch
stream), the results do not depend on how the run is cut: they are bit-identical.

The first chunk of a run has the requested length (``chunk_size``, ``rounds_per_chunk``): skipping
the units past a traced count instead (a branch or a loop with a traced trip count, one compilation
for chunks of every length) would change how XLA compiles the loop, and the results in their last
bits. A signal during a long first chunk of a checkpointed run does not wait for its end: the run
waits for every chunk in Python (:meth:`~bayes_maxmargin.engine.checkpoint.StopRequest.wait`), and
stops without the running chunk when it has not finished
:data:`~bayes_maxmargin.engine.checkpoint.STOP_GRACE_S` after the signal, its checkpoint that of
the last finished chunk.
"""

from __future__ import annotations

import threading
import time

import jax

__all__ = ["CHUNK_SECONDS", "Stopwatch", "shorter_length"]

#: Wall time aimed at per chunk, in seconds; a chunk may take twice as long before it is shortened.
CHUNK_SECONDS = 1.0

_COMPILE_EVENTS = "/jax/core/compile/"
_compile_seconds = [0.0]
_listening = threading.Lock()


def _on_event(event: str, seconds: float, **kwargs) -> None:
    if event.startswith(_COMPILE_EVENTS):
        _compile_seconds[0] += seconds


def _listen() -> None:
    """Count JAX's compilation time (registered once)."""
    with _listening:
        if not getattr(_listen, "done", False):
            jax.monitoring.register_event_duration_secs_listener(_on_event)
            _listen.done = True


class Stopwatch:
    """Wall time since :meth:`start` less the time JAX spent compiling meanwhile."""

    def __init__(self) -> None:
        _listen()
        self.start()

    def start(self) -> None:
        self._t0, self._c0 = time.perf_counter(), _compile_seconds[0]

    @property
    def seconds(self) -> float:
        return max(0.0, time.perf_counter() - self._t0 - (_compile_seconds[0] - self._c0))


def shorter_length(length: int, seconds: float, target: float = CHUNK_SECONDS) -> int:
    """The length of the next chunks after a chunk of ``length`` units that ran ``seconds``:
    ``length`` while that is at most twice ``target``, else the largest power of two of units that
    takes at most ``target`` at that rate (at least 1)."""
    if seconds <= 2 * target or length <= 1:
        return length
    fit = max(1, int(target * length / seconds))
    return min(length - 1, 1 << (fit.bit_length() - 1))
