"""Signals and concurrent runs: SIGTERM / Ctrl-C stop a fit within seconds (with its checkpoint
when it has one, also while a long chunk computes), a killed run leaves nothing that blocks or
litters the next one, and two processes never share a checkpoint folder. Real fits in subprocesses;
the single cases of the red-team report, in-process, are in ``test_red_team.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.engine import mcmc
from bayes_maxmargin.engine.checkpoint import CheckpointError, read_checkpoint
from bayes_maxmargin.engine.chunks import shorter_length
from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.models.linear.gibbs import build_linear_kernel, init_linear, record_linear
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper

# Python's SIGINT / SIGTERM handlers in this process, whatever an earlier test left: a subprocess started
# while SIGINT is ignored inherits that and never sees Ctrl-C.
pytestmark = pytest.mark.usefixtures("python_signal_defaults")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).with_name("_long_fit.py")
#: Most seconds from the signal to the end of the fit (the interpreter's shutdown comes on top).
PROMPT_S = 5.0

rng = np.random.default_rng(1)
X = rng.normal(size=(30, 2))
Y = np.where(X[:, 0] + 0.5 * rng.normal(size=30) > 0, 1, -1)


def _run(**kw):
    design = jnp.column_stack([jnp.ones(30), jnp.asarray(X, jnp.float32)])
    data = LinearData(design, jnp.asarray(Y, jnp.float32))
    hyper = LinearHyper(jnp.ones(3), *(jnp.float32(v) for v in (1.0, 2.0, 1.0, 0.0)))
    state = jax.vmap(init_linear, (0, None, None, None))(jnp.zeros((3, 3)), data, hyper, True)
    args = {"num_warmup": 10, "num_samples": 25, "thin": 2, "chunk_size": 4, "progress_bar": False}
    return run_chains(build_linear_kernel(True), record_linear, state, jax.random.PRNGKey(0), data, hyper,
                      **{**args, **kw})


def _start(*args: str) -> subprocess.Popen:
    """The long fit in a subprocess, returned once it is sampling."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    line = proc.stdout.readline()
    if line.strip() != "sampling":
        proc.kill()
        pytest.fail(f"the fit did not start: {line!r} {proc.communicate()[1][-2000:]}")
    return proc


def _signal_and_wait(proc: subprocess.Popen, signum: int) -> tuple[float, str, str]:
    """Send ``signum``; the seconds until the fit stopped (its exception reached the script, or the
    process died), the line the script printed then, and its stderr. The end of the process comes
    later by the interpreter's shutdown, printed with the others; the exception's message is in
    ``proc.message``."""
    t0 = time.perf_counter()
    proc.send_signal(signum)
    line = proc.stdout.readline().strip()  # "stopped ..." or "" when the process died
    stopped = time.perf_counter() - t0
    proc.message = proc.stdout.readline().strip() if line else ""
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the fit did not end within 120 s")
    proc.ended = time.perf_counter() - t0
    print(f"{signal.Signals(signum).name}: the fit stopped {stopped:.2f} s after the signal ({line or 'killed'}), "
          f"the process ended after {proc.ended:.2f} s with status {proc.returncode}")
    return stopped, line, err


@pytest.mark.slow
@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)],
                         ids=["sigterm", "sigint"])
def test_a_fit_without_checkpoint_stops_promptly(signum, status):
    """No handler of the library's: SIGTERM kills at once, Ctrl-C interrupts at the end of the
    running chunk (shortened to about a second after the first one)."""
    proc = _start()
    elapsed, line, err = _signal_and_wait(proc, signum)
    assert proc.returncode == status, err[-2000:]
    assert elapsed < PROMPT_S
    assert line == ("stopped KeyboardInterrupt" if signum == signal.SIGINT else "")


@pytest.mark.slow
def test_sigterm_writes_the_checkpoint_and_exits_with_143(tmp_path):
    """SIGTERM: status 143 with the checkpoint of the last finished chunk, also while a chunk of half a
    minute or more computes (the first chunk of a resumed run keeps its length: the process ends
    within 5 s without waiting for the chunk, the checkpoint stays in place, resumable); the same
    run then continues from there and holds the folder meanwhile."""
    folder = tmp_path / "ckpt"
    proc = _start("--checkpoint", str(folder))
    elapsed, line, err = _signal_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert line == "stopped Terminated" and "Traceback" not in err
    assert elapsed < PROMPT_S
    first = read_checkpoint(folder)
    assert first.done >= 1 and first.kept["coef"].shape[:2] == (first.done, 2)
    assert proc.message.endswith(f"holds the run up to iteration {first.done}: resume={str(folder)!r} continues "
                                 "from there")
    assert az.from_netcdf(str(folder / "idata.nc")).attrs["iterations_done"] == first.done
    assert not (folder / "checkpoint.owner").exists()
    # SIGTERM during a long chunk of the resumed run
    proc = _start("--resume", str(folder), "--chunk-size", "60000")
    time.sleep(1.0)  # into the chunk
    _, line, err = _signal_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == 143, err[-2000:]
    assert line == "stopped Terminated" and "Traceback" not in err
    assert proc.ended < PROMPT_S
    assert proc.message.endswith(f"holds the run up to iteration {first.done}: resume={str(folder)!r} continues "
                                 "from there")
    kept = read_checkpoint(folder)
    assert kept.done == first.done
    np.testing.assert_array_equal(kept.kept["coef"], first.kept["coef"])
    # the same run continues from there (a different run would stop with a CheckpointError), and
    # holds the folder meanwhile
    proc = _start("--resume", str(folder))
    try:
        with pytest.raises(CheckpointError, match=rf"is in use by another fit \(process {proc.pid}\)"):
            _run(checkpoint=folder)
    except BaseException:
        proc.kill()
        raise
    elapsed, line, err = _signal_and_wait(proc, signal.SIGTERM)
    assert proc.returncode == 143 and elapsed < PROMPT_S, err[-2000:]
    again = read_checkpoint(folder)
    assert again.done > first.done
    np.testing.assert_array_equal(again.kept["coef"][: first.done], first.kept["coef"])


@pytest.mark.slow
def test_a_killed_fit_neither_blocks_nor_litters_its_folder(tmp_path):
    """SIGKILL in the middle of a write leaves a temporary file and the lock file; the next run in
    the folder takes the lock (released by the kernel) and removes the temporary file."""
    folder = tmp_path / "ckpt"
    proc = _start("--checkpoint", str(folder), "--kill-in-write")
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert list(folder.glob(".checkpoint.npz.*.tmp"))
    done = _run(checkpoint=folder)
    assert not list(folder.glob(".*.tmp"))
    assert read_checkpoint(folder).done == 30
    np.testing.assert_array_equal(done.samples["coef"], _run().samples["coef"])


def test_ctrl_c_in_a_checkpointed_run_stops_at_the_end_of_the_chunk(tmp_path):
    """In-process: the first SIGINT is acted upon after the chunk (checkpoint written,
    KeyboardInterrupt); a second one interrupts at once."""
    def interrupt(done):
        if done >= 8:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt, match="stopped by SIGINT"):
        _run(checkpoint=tmp_path / "once", callback=interrupt)
    assert read_checkpoint(tmp_path / "once").done == 4

    def twice(done):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        raise AssertionError("the second SIGINT did not interrupt")

    with pytest.raises(KeyboardInterrupt) as info:
        _run(checkpoint=tmp_path / "twice", callback=twice)
    assert "stopped by SIGINT" not in str(info.value)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("length, seconds, expected", [
    (250, 2.0, 250),  # at most twice the target: unchanged
    (250, 10.0, 16),  # 25 blocks a second: the power of two below
    (250, 500.0, 1),  # at least one
    (2, 30.0, 1),
    (1, 30.0, 1),
])
def test_slow_chunks_are_shortened(length, seconds, expected):
    assert shorter_length(length, seconds) == expected


def test_draws_do_not_depend_on_shortened_chunks(monkeypatch):
    """Chunks shortened after every chunk (lengths 4, 3, 2, 1, 1, ...) give the same draws."""
    full = _run()
    monkeypatch.setattr(mcmc, "shorter_length", lambda length, seconds: max(1, length - 1))
    cut = _run()
    for k in full.samples:
        np.testing.assert_array_equal(cut.samples[k], full.samples[k])


def test_svi_stops_on_sigterm_and_does_not_depend_on_its_chunks(tmp_path, monkeypatch):
    """SVI: the result is the same whatever the chunk lengths; SIGTERM after the first checkpoint
    stops the fit at the end of the chunk with Terminated, and the resumed fit equals the full one."""
    from bayes_maxmargin import LinearBSVM
    from bayes_maxmargin.engine import svi
    from bayes_maxmargin.engine.checkpoint import Terminated

    def make():
        return LinearBSVM(inference="svi", batch_size=5, max_iter=200, random_state=2)

    monkeypatch.setitem(svi.run_svi.__kwdefaults__, "rounds_per_chunk", 4)
    full = make().fit(X, Y)
    monkeypatch.setattr(svi, "shorter_length", lambda length, seconds: max(1, length - 1))  # 4, 3, 2, 1, 1, ...
    cut = make().fit(X, Y)
    np.testing.assert_array_equal(cut.elbo_, full.elbo_)
    np.testing.assert_array_equal(cut.decision_function(X), full.decision_function(X))
    real_write = svi.write_progress

    def write_then_terminate(*args):
        real_write(*args)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(svi, "write_progress", write_then_terminate)
    with pytest.raises(Terminated):
        make().fit(X, Y, checkpoint=tmp_path)
    monkeypatch.setattr(svi, "write_progress", real_write)
    assert read_checkpoint(tmp_path).done == 4
    resumed = make().fit(X, Y, resume=tmp_path)
    np.testing.assert_array_equal(resumed.elbo_, full.elbo_)
    np.testing.assert_array_equal(resumed.decision_function(X), full.decision_function(X))
