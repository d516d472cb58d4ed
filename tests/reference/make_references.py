"""Regenerate the stored NUTS reference posteriors of ``tests/reference``.

Run from the repository root::

    python -m tests.reference.make_references            # every problem
    python -m tests.reference.make_references NAME ...   # some of them

Each problem of :data:`tests.reference.PROBLEMS` is sampled with :func:`run_nuts` exactly as its test
once did in place (same data, program, key and settings, float64), and written to ``NAME.npz``.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from . import PROBLEMS, load_reference, run_reference, save_reference  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"problems to regenerate (default: all of {sorted(PROBLEMS)})")
    names = parser.parse_args(argv).names or list(PROBLEMS)
    unknown = sorted(set(names) - set(PROBLEMS))
    if unknown:
        parser.error(f"unknown problem(s) {unknown}; known: {sorted(PROBLEMS)}")
    for name in names:
        start = time.perf_counter()
        draws, samples, stats = run_reference(name)
        path = save_reference(name, draws, samples, stats)
        load_reference(name)  # the guard of the new file passes
        print(f"{name}: {path.stat().st_size / 1024:.0f} KiB, {int(stats['diverging'].sum())} divergences, "
              f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
