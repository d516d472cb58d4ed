"""Checkpoints and resume of the solvers compiled as one program (:mod:`bayes_maxmargin.engine.resumable`):
interrupted after a few chunks and resumed, a fit gives the result of the uninterrupted one."""

from __future__ import annotations

import os
import platform
import signal
from functools import partial

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin import GPBSVM, FactorBSVM, LinearBSVM
from bayes_maxmargin.core.compilation import jit
from bayes_maxmargin.engine import resumable
from bayes_maxmargin.engine.checkpoint import CheckpointError, Terminated, read_checkpoint
from bayes_maxmargin.engine.fixed_point import cavi_loop, ecm_loop
from bayes_maxmargin.engine.resumable import run_resumable

#: Bit-identical results are promised for the same program on the same device; the tests that compare
#: bits run where they were checked.
SAME_BITS = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64", "arm64", "aarch64"),
                               reason="bit-identical results checked on x86-64 and ARM64 CPUs")

rng = np.random.default_rng(1)
X = rng.normal(size=(40, 2))
Y = np.where(X[:, 0] + 0.5 * rng.normal(size=40) > 0, 1, -1)


@partial(jit, static_argnames=("max_iter",))
def _two_loops(a, tol, *, max_iter):
    """Two resumable loops one after the other: Newton's iteration for sqrt(a) (an EM-like loop), then a
    coordinate ascent from its result, and what follows them."""
    x, _, _, trace, n_iter = ecm_loop(lambda x, g: ((x + a / x) / 2.0, g, None), lambda x, g: -((x * x - a) ** 2),
                                      jnp.ones_like(a), jnp.asarray(1.0, a.dtype), None, tol, max_iter)
    vb = cavi_loop(lambda s: s * 0.5 + x, lambda s: -jnp.sum((s - 2.0 * x) ** 2), jnp.zeros(3, a.dtype), tol, max_iter)
    return x, trace, n_iter, vb.state, vb.lower_bound, vb.n_iter


def _toy(**kw):
    return run_resumable(_two_loops, jnp.asarray(7.0), jnp.asarray(1e-14), max_iter=60, **kw)


def _interrupt_after(chunks):
    seen = []

    def after(done):
        seen.append(done)
        if len(seen) == chunks:
            raise KeyboardInterrupt

    return after


@SAME_BITS
def test_two_loops_resume_bit_for_bit(tmp_path):
    """In chunks of any length, interrupted and resumed: the result of the single program."""
    full = _two_loops(jnp.asarray(7.0), jnp.asarray(1e-14), max_iter=60)
    chunks = []
    np.testing.assert_array_equal(jax.tree.leaves(_toy(after_chunk=chunks.append))[0], full[0])
    assert len(chunks) > 2 and chunks == sorted(chunks)
    for k in (1, 3, 5):  # stopped in the first loop, between them, in the second
        folder = tmp_path / str(k)
        with pytest.raises(KeyboardInterrupt):
            _toy(checkpoint=folder, after_chunk=_interrupt_after(k))
        assert read_checkpoint(folder).done == chunks[k - 1]
        for got, want in zip(_toy(resume=folder), full):
            np.testing.assert_array_equal(got, want)
        after = []
        again = _toy(resume=folder, after_chunk=after.append)  # complete: one chunk of no iteration
        np.testing.assert_array_equal(again[3], full[3])
        assert after == [chunks[-1]]


@SAME_BITS
@pytest.mark.usefixtures("python_signal_defaults")
def test_sigterm_between_chunks_leaves_the_checkpoint_and_exits_143(tmp_path):
    """SIGTERM during a checkpointed run: it stops after the running chunk with Terminated (status 143),
    its checkpoint written, the signal handlers restored; resume= completes it."""
    def terminate(done):
        if done >= 3:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated, match="stopped by SIGTERM; the checkpoint in .* holds the run up to iteration"):
        _toy(checkpoint=tmp_path, after_chunk=terminate)
    assert signal.getsignal(signal.SIGTERM) == before
    full = _two_loops(jnp.asarray(7.0), jnp.asarray(1e-14), max_iter=60)
    np.testing.assert_array_equal(_toy(resume=tmp_path)[3], full[3])


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _toy(checkpoint=tmp_path, after_chunk=_interrupt_after(2))
    with pytest.raises(CheckpointError, match="different run: the data or hyperparameters differ"):
        run_resumable(_two_loops, jnp.asarray(5.0), jnp.asarray(1e-14), max_iter=60, resume=tmp_path)
    with pytest.raises(CheckpointError, match="different run: max_iter = 60 there, 70 now"):
        run_resumable(_two_loops, jnp.asarray(7.0), jnp.asarray(1e-14), max_iter=70, resume=tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        _toy(resume=tmp_path / "nothing")


def _gp(inference, **kw):
    return GPBSVM(inference=inference, max_iter=40, mlii_every=10, num_inducing=6, random_state=0, progress_bar=False,
                  **kw)


def _fit_interrupted(make, folder, monkeypatch, writes=3, data=(X, Y)):
    """``make().fit(*data)`` with a checkpoint in ``folder``, stopped by Ctrl-C right after its ``writes``-th
    checkpoint."""
    real, count = resumable.write_progress, []

    def write_then_stop(*args):
        real(*args)
        count.append(1)
        if len(count) == writes:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(resumable, "write_progress", write_then_stop)
        with pytest.raises(KeyboardInterrupt):
            make().fit(*data, checkpoint=folder)


@SAME_BITS
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
# ECM by default (the rounds of the default GP job of bmm); FITC, the same rounds with inducing points, extended
@pytest.mark.parametrize("inference", ["ecm", pytest.param("fitc", marks=pytest.mark.extended)])
def test_gp_ecm_fit_resumes(inference, tmp_path, monkeypatch):
    """ECM / FITC with ML-II stopped after three chunks (ECM + ML-II rounds, then chunks of the final run)
    and resumed: bit for bit the fit with a checkpoint that ran through, and the fit without one to
    rounding. Without a checkpoint the rounds are one ``lax.scan`` in a single program; in chunks, one
    ``while_loop`` (the same round body) in another program, whose operations XLA may round otherwise: the
    ML-II steps amplify that (L-BFGS from a point 1e-16 away ends 1e-10 away in theta here, measured
    4e-10 on the decision function of FITC and 0 for ECM on this CPU). 1e-7 is a bound with room for
    another CPU's rounding, far below any change of the fit (its decision function varies by 1e-2 from
    one ECM iteration to the next at the start of the final run)."""
    make = partial(_gp, inference)
    full = make().fit(X, Y)
    through = make().fit(X, Y, checkpoint=tmp_path / "through")
    _fit_interrupted(make, tmp_path / "stopped", monkeypatch)
    assert 0 < read_checkpoint(tmp_path / "stopped").done
    resumed = make().fit(X, Y, resume=tmp_path / "stopped")
    np.testing.assert_array_equal(resumed.decision_function(X), through.decision_function(X))
    np.testing.assert_array_equal(resumed.objective_, through.objective_)
    assert resumed.kernel_params_ == through.kernel_params_
    np.testing.assert_allclose(resumed.decision_function(X), full.decision_function(X), rtol=0, atol=1e-7)
    with pytest.raises(CheckpointError, match="different run: max_iter = 40 there, 50 now"):
        make().set_params(max_iter=50).fit(X, Y, resume=tmp_path / "stopped")
    with pytest.raises(CheckpointError, match="different run: the data or hyperparameters differ"):
        make().fit(X, -Y, resume=tmp_path / "stopped")


@SAME_BITS
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_multiclass_ecm_fit_resumes(tmp_path, monkeypatch):
    """Three one-vs-rest ECM problems, one program (``vmap``) with one checkpoint, stopped after three chunks and
    resumed: bit for bit the fit that ran through with a checkpoint. Their loops end at different iterations:
    each class keeps its own carry from its last iteration on, so every class equals the fit without a
    checkpoint (the one-vs-rest problems vmapped in one program) to its rounding, 1e-7 as for the binary fit
    (:func:`test_gp_ecm_fit_resumes`; measured 2e-14)."""
    y3 = np.where(X[:, 1] > 0.5, 2, (Y > 0).astype(int))
    make = partial(_gp, "ecm", tol=1e-6)
    full = make().fit(X, y3)
    assert len({sub.n_iter_ for sub in full.estimators_}) > 1  # the classes' loops end apart
    through = make().fit(X, y3, checkpoint=tmp_path / "through")
    _fit_interrupted(make, tmp_path / "stopped", monkeypatch, data=(X, y3))
    resumed = make().fit(X, y3, resume=tmp_path / "stopped")
    np.testing.assert_array_equal(resumed.decision_function(X), through.decision_function(X))
    np.testing.assert_array_equal(resumed.n_iter_, full.n_iter_)
    np.testing.assert_allclose(resumed.decision_function(X), full.decision_function(X), rtol=0, atol=1e-7)
    with pytest.raises(CheckpointError, match="different run: the data or hyperparameters differ"):
        make().fit(X, y3[::-1], resume=tmp_path / "stopped")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("make", [
    lambda: LinearBSVM(inference="vb", random_state=0, progress_bar=False),
    pytest.param(lambda: LinearBSVM(inference="em", random_state=0, progress_bar=False),
                 marks=pytest.mark.extended, id="em-interior-point"),
    pytest.param(lambda: LinearBSVM(inference="em", gamma_prior=(2.0, 1.0), random_state=0, progress_bar=False),
                 marks=pytest.mark.extended, id="em"),
    pytest.param(lambda: LinearBSVM(inference="vb", prior="laplace_zero", random_state=0, progress_bar=False),
                 marks=pytest.mark.extended, id="luts-laplace-zero"),
    pytest.param(lambda: LinearBSVM(inference="vb", prior="penalty", missing="model", random_state=0,
                                    progress_bar=False), marks=pytest.mark.extended, id="luts-missing"),
    pytest.param(lambda: GPBSVM(inference="vi", random_state=0, progress_bar=False),
                 marks=pytest.mark.extended, id="gp-vi"),
], ids=["vb", "em-interior-point", "em", "luts-laplace-zero", "luts-missing", "gp-vi"])
def test_fixed_point_fit_resumes(make, tmp_path, monkeypatch):
    """EM, the interior-point MAP, coordinate-ascent VB and batch VI stopped after two chunks and resumed:
    the fit that ran through with a checkpoint, bit for bit, and the fit without one to 1e-12 (the loop
    body is the same; the chunk program adds the carry's selects and the iteration bound around it, and
    computes what precedes and follows the loop in another program: equal on this CPU, 1e-12 leaves room
    for another CPU's rounding of those, far below the change of the last iteration, tol = 1e-10 of the
    objective)."""
    Xm = X.copy()
    if make().get_params().get("missing") == "model":
        Xm[3, 1] = Xm[7, 0] = np.nan
    full = make().fit(Xm, Y)
    through = make().fit(Xm, Y, checkpoint=tmp_path / "through")
    _fit_interrupted(make, tmp_path / "stopped", monkeypatch, writes=2, data=(Xm, Y))
    resumed = make().fit(Xm, Y, resume=tmp_path / "stopped")
    np.testing.assert_array_equal(resumed.decision_function(X), through.decision_function(X))
    np.testing.assert_allclose(resumed.decision_function(X), full.decision_function(X), rtol=0, atol=1e-12)


@SAME_BITS
@pytest.mark.extended
@pytest.mark.filterwarnings("ignore::bayes_maxmargin.diagnostics.MixingWarning")
def test_nuts_fit_resumes(tmp_path, monkeypatch):
    """NUTS stopped during its draws (the checkpoint after warm-up written) and resumed: the draws of the
    run with a checkpoint that ran through, bit for bit, and those of the single program to rounding: the
    chains start alike and follow the same trajectories (measured 3e-10 apart after 70 iterations);
    1e-6 leaves room for the growth of that difference along the trajectories and still tells the same
    chains from any other (a different draw differs by the posterior sd, 0.3 here)."""
    make = partial(GPBSVM, inference="nuts", learn_kernel=False, num_warmup=30, num_samples=40, num_chains=2,
                   random_state=0, progress_bar=False)
    data = (X[:20], Y[:20])
    full = make().fit(*data)
    through = make().fit(*data, checkpoint=tmp_path / "through")
    _fit_interrupted(make, tmp_path / "stopped", monkeypatch, writes=6, data=data)
    partial_draws = az.from_netcdf(str(tmp_path / "stopped" / "idata.nc")).posterior["f"].values
    assert 0 < partial_draws.shape[1] < 40
    np.testing.assert_array_equal(partial_draws, through.idata_.posterior["f"].values[:, : partial_draws.shape[1]])
    resumed = make().fit(*data, resume=tmp_path / "stopped")
    for group, name in (("posterior", "f"), ("sample_stats", "log_joint"), ("sample_stats", "diverging")):
        np.testing.assert_array_equal(resumed.idata_[group][name].values, through.idata_[group][name].values)
    np.testing.assert_allclose(resumed.idata_.posterior["f"].values, full.idata_.posterior["f"].values, rtol=0,
                               atol=1e-6)


@pytest.mark.extended
def test_factor_vbem_fit_resumes(tmp_path, monkeypatch):
    """FactorBSVM's VBEM stopped after two chunks and resumed: bit for bit the fit that ran through with a
    checkpoint; without one the iterations are programs of their own, called from Python, and in chunks one
    loop of the same iteration: its operations rounded otherwise (measured 2e-16 on the decision function
    after 12 iterations), 1e-12 with room for another CPU and far below the change of an iteration."""
    make = partial(FactorBSVM, n_factors=1, inference="vbem", max_iter=12, random_state=0)
    full = make().fit(X, Y)
    through = make().fit(X, Y, checkpoint=tmp_path / "through")
    _fit_interrupted(make, tmp_path / "stopped", monkeypatch, writes=2)
    resumed = make().fit(X, Y, resume=tmp_path / "stopped")
    np.testing.assert_array_equal(resumed.decision_function(X), through.decision_function(X))
    np.testing.assert_array_equal(resumed.bound_, through.bound_)
    np.testing.assert_allclose(resumed.decision_function(X), full.decision_function(X), rtol=0, atol=1e-12)
