"""Signals and concurrent runs: SIGTERM / Ctrl-C stop a fit within seconds (with its checkpoint
when it has one, also while a long chunk computes), a killed run leaves nothing that blocks or
litters the next one, and two processes never share a checkpoint folder. Real fits in subprocesses;
the single cases of the red-team report, in-process, are in ``test_red_team.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.engine import checkpoint, driver, mcmc
from bayes_maxmargin.engine.checkpoint import CheckpointError, call_interruptibly, read_checkpoint
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
# SIGTERM without a checkpoint meets no handler of the library's (the default action kills at once): checked
# in-process by test_red_team.py::test_fits_without_checkpoint_leave_the_signal_handlers_alone, in a fresh
# process with -m extended; SIGINT's end of the running chunk here by default
@pytest.mark.parametrize("signum, status", [
    pytest.param(signal.SIGTERM, -signal.SIGTERM, marks=pytest.mark.extended, id="sigterm"),
    pytest.param(signal.SIGINT, -signal.SIGINT, id="sigint")])
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
    within 5 s without waiting for the chunk, the checkpoint stays in place, resumable); the resumed run
    takes the checkpoint (the same run: a different one would stop with a CheckpointError) and holds the
    folder meanwhile. That a resumed run continues to the draws of the uninterrupted one, with its
    checkpoints: test_checkpoint.py::test_resumed_run_equals_uninterrupted_run."""
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
    # the resumed run holds the folder while it computes; SIGTERM during its long chunk
    proc = _start("--resume", str(folder), "--chunk-size", "60000")
    try:
        with pytest.raises(CheckpointError, match=rf"is in use by another fit \(process {proc.pid}\)"):
            _run(checkpoint=folder)
    except BaseException:
        proc.kill()
        raise
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
    assert not (folder / "checkpoint.owner").exists()  # released: the next run takes the folder


@pytest.mark.slow
def test_a_killed_fit_neither_blocks_nor_litters_its_folder(tmp_path):
    """SIGKILL in the middle of a write leaves a temporary file and the lock file; the next run in
    the folder takes the lock (released by the kernel) and removes the temporary file."""
    folder = tmp_path / "ckpt"
    proc = _start("--checkpoint", str(folder), "--kill-in-write")
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert list(folder.glob(".bmm-*.tmp"))
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
    monkeypatch.setattr(driver, "shorter_length", lambda length, seconds: max(1, length - 1))
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
    monkeypatch.setattr(driver, "shorter_length", lambda length, seconds: max(1, length - 1))  # 4, 3, 2, 1, 1, ...
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


def _held_program(release: threading.Event):
    """A compiled loop whose iterations wait for ``release`` in a host callback: like a program whose
    loops report progress, it runs to its end inside the call that dispatches it."""

    @jax.jit
    def program(x):
        def body(i, a):
            jax.debug.callback(lambda: release.wait(30.0), ordered=False)
            return a + 1.0

        return jax.lax.fori_loop(0, 3, body, x)

    return program


def test_ctrl_c_stops_a_long_compiled_solver_at_once(monkeypatch):
    """A fit's solver (ECM with ML-II, FITC, VI, EM, VB, NUTS) is one compiled program, a minute or more
    on a few thousand rows. Called through call_interruptibly, as the estimators call them, Ctrl-C
    raises KeyboardInterrupt at once, whether the program computes inside its call or not; the program
    is abandoned (an exiting process does not wait for it) and runs on to its end. The call sees the
    caller's JAX settings."""
    monkeypatch.setitem(checkpoint._ABANDONED, "leaves", [])
    release = threading.Event()
    program = _held_program(release)
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            call_interruptibly(program, jnp.zeros(()))
        stopped = time.monotonic() - t0
        [abandoned] = checkpoint._ABANDONED["leaves"]
        assert not abandoned.is_ready()
    finally:
        release.set()
    # the signal comes after 0.5 s and is seen within one pause of the wait (POLL_S = 0.05 s); the rest
    # is thread scheduling on a loaded machine. The program alone waits 3 x 30 s.
    assert stopped < 1.5
    deadline = time.monotonic() + 30
    while not abandoned.is_ready() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert float(abandoned.result()) == 3.0
    with jax.enable_x64(True):
        assert call_interruptibly(jnp.zeros, 2).dtype == jnp.float64


def test_a_chunk_computing_inside_its_call_stops_after_the_grace_time(tmp_path, monkeypatch):
    """A Gibbs chunk whose program reports progress computes inside its call (a GP Gibbs chunk of 250
    draws: minutes): the checkpointed run still stops STOP_GRACE_S after Ctrl-C, with the checkpoint
    of the last finished chunk, and resumes from there to the draws of an uninterrupted run."""
    monkeypatch.setattr(checkpoint, "STOP_GRACE_S", 0.3)
    monkeypatch.setitem(checkpoint._ABANDONED, "leaves", [])
    real, calls, sent, release = mcmc._run_chunk, [], [], threading.Event()

    def chunk(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the second chunk computes inside the call until released
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
            release.wait(30.0)
        return jax.block_until_ready(real(*args, **kwargs))

    monkeypatch.setattr(mcmc, "_run_chunk", chunk)
    try:
        with pytest.raises(KeyboardInterrupt, match="holds the run up to iteration 8: resume="):
            _run(checkpoint=tmp_path)
        waited = time.monotonic() - sent[0]
    finally:
        release.set()
    # the grace time, then at most a pause of the wait and thread scheduling; without the worker
    # thread the run would stop when the call returns, 30 s later
    assert 0.3 <= waited < 2.0
    assert read_checkpoint(tmp_path).done == 4
    monkeypatch.setattr(mcmc, "_run_chunk", real)
    np.testing.assert_array_equal(_run(resume=tmp_path).samples["coef"], _run().samples["coef"])


def _bmm(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from bayes_maxmargin.cli import main; main()", *args], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and text in path.read_text()):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"{text!r} never reached {path}: {proc.communicate()[1][-2000:]}")
        time.sleep(0.2)


def _interrupt(proc: subprocess.Popen) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("bmm did not end within 120 s of Ctrl-C")
    return time.perf_counter() - t0, err


def _stop_after_first_checkpoint(proc: subprocess.Popen, folder: Path) -> None:
    """Ctrl-C to a ``bmm`` job once its first checkpoint is in ``folder``: the job ends within PROMPT_S, with
    SIGINT's status and one line saying where ``resume=`` continues."""
    deadline = time.monotonic() + 300
    while not (folder / "checkpoint.npz").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no checkpoint was written: {proc.communicate()[1][-2000:]}")
        time.sleep(0.1)
    elapsed, err = _interrupt(proc)
    print(f"bmm ended {elapsed:.2f} s after Ctrl-C")
    assert proc.returncode == -signal.SIGINT, err[-2000:]
    assert elapsed < PROMPT_S
    last = err.splitlines()[-1]
    assert last.startswith("bmm: interrupted: stopped by SIGINT; the checkpoint in ") and "continues from there" in last


@pytest.mark.extended
def test_ctrl_c_stops_a_gp_ecm_job_within_seconds(tmp_path):
    """`bmm model=gp inference=ecm data=susy_synthetic data.n=3000`: ECM with ML-II on 2100 rows is one
    compiled program of a minute or more (its ML-II steps alone 10-15 s each, without a progress
    report) without a checkpoint; Ctrl-C while it computes ends the job within PROMPT_S, with SIGINT's status
    and one line. (Before: 20-40 s, the rest of the program.)"""
    out = tmp_path / "run"
    proc = _bmm("model=gp", "inference=ecm", "data=susy_synthetic", "data.n=3000", "plots=false", "checkpoint=false",
                f"hydra.run.dir={out}", "compilation_cache=null", cwd=tmp_path)
    _wait_for(out / "cli.log", "GPBSVM(ecm): started", proc)
    time.sleep(8.0)  # into the program
    elapsed, err = _interrupt(proc)
    print(f"bmm ended {elapsed:.2f} s after Ctrl-C")
    assert proc.returncode == -signal.SIGINT, err[-2000:]
    assert elapsed < PROMPT_S
    assert err.splitlines()[-1] == "bmm: interrupted" and "Traceback" not in err


@pytest.mark.extended
def test_ctrl_c_stops_a_gibbs_job_that_reports_progress_and_it_resumes(tmp_path):
    """`bmm` (linear Gibbs, progress bar on: its chunks compute inside their calls) stopped by Ctrl-C
    after its first checkpoint ends within PROMPT_S with one line saying where it resumes;
    `resume=<run>/checkpoint` then completes the run."""
    out = tmp_path / "run"
    args = ("inference.num_samples=20000", "inference.num_warmup=100", "plots=false", "progress_bar=true",
            "compilation_cache=null")
    proc = _bmm(*args, f"hydra.run.dir={out}", cwd=tmp_path)
    _wait_for(out / "cli.log", "LinearBSVM(gibbs): started", proc)
    _stop_after_first_checkpoint(proc, out / "checkpoint")
    done = read_checkpoint(out / "checkpoint").done
    assert 0 < done < 20100
    again = _bmm(*args, f"resume={out / 'checkpoint'}", f"hydra.run.dir={tmp_path / 'resumed'}", cwd=tmp_path)
    _, err = again.communicate(timeout=1200)
    assert again.returncode == 0, err[-2000:]
    assert az.from_netcdf(str(tmp_path / "resumed" / "idata.nc")).posterior["beta"].shape[:2] == (4, 20000)


@pytest.mark.extended
def test_ctrl_c_stops_a_gp_ecm_job_and_it_resumes_to_the_same_metrics(tmp_path):
    """`bmm model=gp inference=ecm data=susy_synthetic data.n=1000` (ECM with ML-II rounds on 700 rows, tens of
    seconds) stopped by Ctrl-C after its first checkpoint ends within PROMPT_S with one line saying where it
    resumes; `resume=<run>/checkpoint` completes it with the metrics of the run that went through (the same
    chunk program: the same bits)."""
    import json

    args = ("model=gp", "inference=ecm", "data=susy_synthetic", "data.n=1000", "plots=false", "compilation_cache=null")
    proc = _bmm(*args, f"hydra.run.dir={tmp_path / 'stopped'}", cwd=tmp_path)
    _stop_after_first_checkpoint(proc, tmp_path / "stopped" / "checkpoint")
    assert not (tmp_path / "stopped" / "metrics.json").exists()
    resumed = _bmm(*args, f"resume={tmp_path / 'stopped' / 'checkpoint'}", f"hydra.run.dir={tmp_path / 'resumed'}",
                   cwd=tmp_path)
    through = _bmm(*args, f"hydra.run.dir={tmp_path / 'through'}", cwd=tmp_path)
    for job in (resumed, through):
        _, err = job.communicate(timeout=1200)
        assert job.returncode == 0, err[-2000:]
    a, b = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("resumed", "through"))
    for key in ("error", "brier", "log_loss", "auc", "kernel_lengthscale", "kernel_amplitude"):
        assert a[key] == b[key], key
