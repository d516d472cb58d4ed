"""Interrupted runs leave a checkpoint and their draws; resumed runs equal uninterrupted ones."""

from __future__ import annotations

import os
import signal

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin import GPBSVM, FactorBSVM, LinearBSVM, MaxMarginProjection
from bayes_maxmargin.engine import mcmc as driver
from bayes_maxmargin.engine import svi
from bayes_maxmargin.engine.checkpoint import CheckpointError, Terminated
from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.models.linear.gibbs import build_linear_kernel, init_linear, record_linear
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper

rng = np.random.default_rng(1)
X = rng.normal(size=(30, 2))
Y = np.where(X[:, 0] + 0.5 * rng.normal(size=30) > 0, 1, -1)
RUN = dict(num_warmup=10, num_samples=25, thin=2, chunk_size=4, progress_bar=False)


def _problem(y=Y):
    design = jnp.column_stack([jnp.ones(30), jnp.asarray(X, jnp.float32)])
    data = LinearData(design, jnp.asarray(y, jnp.float32))
    hyper = LinearHyper(jnp.ones(3), *(jnp.float32(v) for v in (1.0, 2.0, 1.0, 0.0)))  # gamma, a0, b0, gamma0
    state = jax.vmap(init_linear, (0, None, None, None))(jnp.zeros((3, 3)), data, hyper, True)
    return state, data, hyper


def _run(**kw):
    state, data, hyper = _problem(kw.pop("y", Y))
    return run_chains(build_linear_kernel(True), record_linear, state, jax.random.PRNGKey(0), data, hyper, **RUN, **kw)


def _interrupt_after(iterations, exc=KeyboardInterrupt):
    def callback(done):
        if done >= iterations:
            raise exc("stop")
    return callback


def test_resumed_run_equals_uninterrupted_run(tmp_path):
    full = _run()
    with pytest.raises(KeyboardInterrupt):
        _run(checkpoint=tmp_path, callback=_interrupt_after(24))  # 3 chunks of 4 blocks x thin 2
    partial = az.from_netcdf(str(tmp_path / "idata.nc"))
    assert partial.attrs["iterations_done"] == 24 and partial.attrs["complete"] == 0
    # warm-up = 5 blocks; 12 blocks done -> 7 kept draws, equal to the first 7 of the full run
    np.testing.assert_array_equal(partial.posterior["coef"].values, full.samples["coef"][:, :7])
    resumed = _run(resume=tmp_path)
    for k in full.samples:
        np.testing.assert_array_equal(resumed.samples[k], full.samples[k])
    for a, b in zip(resumed.final_state, full.final_state):
        np.testing.assert_array_equal(a, b)
    assert az.from_netcdf(str(tmp_path / "idata.nc")).attrs["complete"] == 1
    again = _run(resume=tmp_path, callback=_interrupt_after(0, RuntimeError))  # complete: nothing runs
    np.testing.assert_array_equal(again.samples["coef"], full.samples["coef"])


def test_sigterm_and_exceptions_leave_a_valid_checkpoint(tmp_path):
    def terminate(done):
        if done >= 16:
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(Terminated, match="stopped by SIGTERM") as stopped:
        _run(checkpoint=tmp_path / "term", callback=terminate)
    assert stopped.value.code == 143 and stopped.value.folder == tmp_path / "term"
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before  # the handlers are restored
    assert az.from_netcdf(str(tmp_path / "term" / "idata.nc")).attrs["iterations_done"] == 16
    with pytest.raises(ValueError, match="stop"):
        _run(checkpoint=tmp_path / "exc", callback=_interrupt_after(8, ValueError))
    full = _run()
    for name in ("term", "exc"):
        np.testing.assert_array_equal(_run(resume=tmp_path / name).samples["coef"], full.samples["coef"])


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _run(checkpoint=tmp_path, callback=_interrupt_after(8))
    with pytest.raises(CheckpointError, match="different run: the data or hyperparameters differ"):
        _run(resume=tmp_path, y=-Y)
    state, data, hyper = _problem()
    with pytest.raises(CheckpointError, match="num_samples = 25 there, 30 now"):
        run_chains(build_linear_kernel(True), record_linear, state, jax.random.PRNGKey(0), data, hyper,
                   **{**RUN, "num_samples": 30}, resume=tmp_path)
    with pytest.raises(CheckpointError, match="does not exist"):
        _run(resume=tmp_path / "nothing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "checkpoint.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        _run(resume=tmp_path / "bad")


@pytest.mark.parametrize("make", [
    lambda: LinearBSVM(num_samples=30, num_warmup=20, num_chains=2, random_state=3, progress_bar=False),
    pytest.param(lambda: GPBSVM(inference="gibbs", learn_kernel=False, num_samples=30, num_warmup=20,
                                num_chains=2, random_state=3, progress_bar=False), marks=pytest.mark.extended, id="gp"),
    # the same driver arguments passed through (extended runs)
    pytest.param(lambda: MaxMarginProjection(n_components=2, kernel="rbf", n_basis=6, spike_slab=True,
                                             num_samples=30, num_warmup=20, random_state=3),
                 marks=pytest.mark.extended, id="projection"),
    pytest.param(lambda: FactorBSVM(n_factors=1, num_samples=15, num_warmup=20, thin=2, random_state=3),
                 marks=pytest.mark.extended, id="factor"),
], ids=["linear", "gp", "projection", "factor"])
def test_estimator_fit_resumes(make, tmp_path, monkeypatch):
    full = make().fit(X, Y)
    calls = []

    def interrupting(real):
        def interrupted(*args, **kwargs):  # Ctrl-C during the second chunk
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        return interrupted

    monkeypatch.setattr(driver, "DEFAULT_CHUNK_SIZE", 20)
    with monkeypatch.context() as patch:  # both chunk programs (the projection's has XLA's fusion emitters on)
        for name in ("_run_chunk", "_run_chunk_fusion_emitters"):
            patch.setattr(driver, name, interrupting(getattr(driver, name)))
        with pytest.raises(KeyboardInterrupt):
            make().fit(X, Y, checkpoint=tmp_path)
    resumed = make().fit(X, Y, resume=tmp_path)
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))


#: Three classes: the one-vs-rest problems of a multi-class fit run in one loop with one checkpoint.
Y3 = np.where(X[:, 1] > 0.5, 2, (Y > 0).astype(int))


@pytest.mark.parametrize("make, y", [
    (lambda: LinearBSVM(inference="svi", batch_size=5, max_iter=200, random_state=2), Y),
    (lambda: LinearBSVM(inference="svi", batch_size=5, max_iter=200, random_state=2), Y3),
    pytest.param(lambda: GPBSVM(inference="svi", num_inducing=5, batch_size=5, max_iter=200, random_state=2), Y,
                 marks=pytest.mark.extended, id="gp"),
], ids=["linear", "linear-3-classes", "gp"])
def test_svi_fit_resumes(make, y, tmp_path, monkeypatch):
    """SVI interrupted after its first chunk and resumed: the same state, ELBO trace and predictions; with
    three classes, every class's state and minibatch stream."""

    monkeypatch.setitem(svi.run_svi.__kwdefaults__, "rounds_per_chunk", 4)  # several chunks
    full = make().fit(X, y)
    real_write = svi.write_progress

    def write_then_stop(*args):  # Ctrl-C right after the first checkpoint
        real_write(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(svi, "write_progress", write_then_stop)
    with pytest.raises(KeyboardInterrupt):
        make().fit(X, y, checkpoint=tmp_path)
    monkeypatch.setattr(svi, "write_progress", real_write)
    resumed = make().fit(X, y, resume=tmp_path)
    np.testing.assert_array_equal(resumed.elbo_, full.elbo_)
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))


def test_a_factor_fit_on_a_folder_another_process_holds_names_the_folder_and_process(tmp_path):
    """Two processes resuming one FactorBSVM checkpoint folder: the second stops at once with a
    CheckpointError (a ValueError) naming the folder and the process that holds it, before anything runs;
    once that process ends, the folder is free."""
    import subprocess
    import sys

    from bayes_maxmargin.engine.checkpoint import _folder_lock

    folder = tmp_path / "ckpt"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from bayes_maxmargin.engine.checkpoint import _folder_lock\n"
         f"with _folder_lock(Path({str(folder)!r})):\n    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        factor = FactorBSVM(n_factors=1, num_samples=5, num_warmup=5, random_state=3)
        with pytest.raises(CheckpointError, match=rf"folder {str(folder)!r} is in use by another fit "
                                                  rf"\(process {holder.pid}\)"):
            factor.fit(X, Y, resume=folder)
    finally:
        holder.communicate("", timeout=60)
    with _folder_lock(folder):  # released with its holder
        pass
