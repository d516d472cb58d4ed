"""Progress of a fit (bayes_maxmargin.core.progress): "compiling", then iterations, for the
compiled loops too, without changing what they compute."""

from __future__ import annotations

import io

import numpy as np
import pytest

from bayes_maxmargin import GPBSVM, LinearBSVM
from bayes_maxmargin.core import progress


def test_segments_count_restarting_loops():
    """Counters that restart (ECM rounds, vmapped classes reporting the same or a frozen
    iteration) add up per segment; a restart sets the phase's length and what ran before."""
    p = progress.Progress("fit", delay=1e9, file=io.StringIO())
    for i in (1, 2, 2, 1, 3):  # one segment, repeated and stale reports
        p.report(i)
    assert p.n == 3
    p.new_segment()
    p.report(5)
    assert p.n == 8
    p.restart(100, done=40)
    p.report(41)
    assert (p.n, p.total) == (41, 100)


@pytest.fixture
def shown(monkeypatch):
    """Progress shown at once, into a buffer; the counts reported, in a list."""
    buf, counts = io.StringIO(), []
    init, report = progress.Progress.__init__, progress.Progress.report

    def to_buffer(self, desc, total=None, delay=0.0, file=None):
        init(self, desc, total, 0.0, buf)

    def recorded(self, i):
        report(self, i)
        counts.append(self.n)

    monkeypatch.setattr(progress.Progress, "__init__", to_buffer)
    monkeypatch.setattr(progress.Progress, "report", recorded)
    return buf, counts


@pytest.mark.parametrize("make", [
    lambda pb: LinearBSVM(inference="em", progress_bar=pb, random_state=0),
    # the sampler's settings of test_sampler_reports_every_few_sweeps_and_its_total: its reporting program once
    lambda pb: LinearBSVM(num_samples=60, num_warmup=20, num_chains=2, progress_bar=pb, random_state=0),
    lambda pb: GPBSVM(inference="ecm", learn_kernel=False, max_iter=15, progress_bar=pb, random_state=0),
], ids=["linear-em", "linear-gibbs", "gp-ecm"])
def test_fit_reports_compiling_then_iterations_and_computes_the_same(synthetic_binary, shown, make):
    X, y = synthetic_binary
    X, y = X[:60], y[:60]
    buf, counts = shown
    quiet = make(False).fit(X, y)
    assert buf.getvalue() == "" and counts == []
    reported = make(True).fit(X, y)
    assert "compiling" in buf.getvalue()
    # iterations reported one by one from inside the compiled loop, not only at its end
    assert len(set(counts)) > 2 and max(counts) > 2
    # the same fit: the callbacks in the reporting program's loop may change how XLA fuses it, and so
    # the last bits (1e-13 seen with XLA's optimisations off, as in the suite). The sampler's 80 sweeps carry
    # such a difference on through every later draw (its slice moves start each bracket at the current
    # point): up to 3.5e-8 relative seen in the suite's process, against O(1e-2) between two different
    # chains, so 1e-6 still tells the same fit from any other.
    rtol = 1e-6 if isinstance(quiet, LinearBSVM) and quiet.inference == "gibbs" else 1e-10
    np.testing.assert_allclose(reported.predict_proba(X), quiet.predict_proba(X), rtol=rtol, atol=1e-12)


def test_sampler_reports_every_few_sweeps_and_its_total(synthetic_binary, shown):
    """The Gibbs chunk reports its first sweeps one by one, then every TICK_EVERY-th (a callback per
    sweep doubled a short fit's time); the host's report after the chunk brings the count to the total."""
    from bayes_maxmargin.engine.mcmc import TICK_EVERY

    X, y = synthetic_binary
    _, counts = shown
    LinearBSVM(num_samples=60, num_warmup=20, num_chains=2, progress_bar=True, random_state=0).fit(X[:60], y[:60])
    in_loop = list(range(1, TICK_EVERY + 1)) + list(range(2 * TICK_EVERY, 81, TICK_EVERY))
    assert sorted(set(counts)) == sorted(set(in_loop) | {80})
