"""A long linear Gibbs fit for the signal tests (``tests/test_signals.py``), run as a subprocess.

Prints ``sampling`` once the first compiled chunk finished, ``done`` at the end, ``stopped <exception>``
and then the exception's message when an exception (KeyboardInterrupt, Terminated) ends the fit,
before it goes on. Options: ``--checkpoint DIR`` / ``--resume DIR`` (passed to ``fit``),
``--kill-in-write`` (the process kills itself with SIGKILL in the middle of writing its first
checkpoint), ``--chunk-size N`` (chunks of N draws, and ``sampling`` printed as soon as the first one
was dispatched, while it computes)."""

from __future__ import annotations

import argparse
import os
import signal

import jax
import numpy as np

from bayes_maxmargin import LinearBSVM
from bayes_maxmargin.engine import checkpoint, mcmc


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--checkpoint")
    p.add_argument("--resume")
    p.add_argument("--kill-in-write", action="store_true")
    p.add_argument("--chunk-size", type=int)
    args = p.parse_args()
    if args.kill_in_write:
        mcmc.DEFAULT_CHUNK_SIZE = 2  # a checkpoint soon
    if args.chunk_size:
        mcmc.DEFAULT_CHUNK_SIZE = args.chunk_size
    real, calls = mcmc._run_chunk, []

    def reporting(*a, **kw):
        out = real(*a, **kw)
        calls.append(1)
        if len(calls) == 1:
            if not args.chunk_size:
                jax.block_until_ready(out)
            print("sampling", flush=True)
        return out

    mcmc._run_chunk = reporting
    if args.kill_in_write:
        def savez(fh, **arrays):
            fh.write(b"PK\x03\x04 partial")
            fh.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        checkpoint.np.savez = savez
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 20))
    y = np.where(X[:, 0] + rng.normal(size=2000) > 0, 1, -1)
    try:
        LinearBSVM(num_samples=100_000, num_warmup=0, num_chains=2, random_state=0, progress_bar=False).fit(
            X, y, checkpoint=args.checkpoint, resume=args.resume)
    except BaseException as err:
        print("stopped", type(err).__name__, flush=True)
        print(err, flush=True)
        raise
    print("done", flush=True)


if __name__ == "__main__":
    main()
