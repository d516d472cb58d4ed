"""Wenzel et al. (2017): B-BSVM, S-BSVM (Alg. 1), its natural gradient, ML-II, streaming and sharding."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from sklearn.datasets import make_moons

from bayes_maxmargin import GPBSVM, LinearBSVM
from bayes_maxmargin.core.kernels import RBF, SEParams, se
from bayes_maxmargin.core.parameters import to_unconstrained
from bayes_maxmargin.core.predict import probit_predictive
from bayes_maxmargin.engine import natural_gradient as ng
from bayes_maxmargin.engine import svi
from bayes_maxmargin.models.gp import svi as gp_svi
from bayes_maxmargin.models.gp import vi as gp_vi


def _moons(n, seed=0):
    X, y = make_moons(n, noise=0.3, random_state=seed)
    return X, np.where(y == 1, 1.0, -1.0)


def _gp_problem(X, theta, Z, jitter=1e-10):
    spec = gp_svi.GPSpec(se, theta, jitter)
    hyper = {**to_unconstrained(theta), "inducing": jnp.asarray(Z)}
    chol, whiten = gp_svi.gp_factors(hyper, spec)
    return spec, hyper, chol, whiten


def _vech_to_nat(theta, m):
    rows, cols = np.tril_indices(m)
    eta2 = jnp.zeros((m, m)).at[rows, cols].set(theta[m:])
    return ng.NatParams(theta[:m], eta2 + jnp.tril(eta2, -1).T)


def _nat_to_vech(nat, m):
    rows, cols = np.tril_indices(m)
    return jnp.concatenate([nat.eta1, nat.eta2[rows, cols]])


# ----------------------------------------------------------------------------- B-BSVM
def test_batch_vi_elbo_never_decreases_and_converges():
    with jax.enable_x64(True):
        X, y = _moons(60)
        K = se(SEParams(0.7, 1.0), X, X) + 1e-8 * np.eye(60)
        res = gp_vi.batch_vi(jnp.asarray(K), jnp.asarray(y), 1.0, tol=1e-10, max_iter=300)
        n_iter = int(res.n_iter)
        elbo = np.asarray(res.lower_bound[:n_iter])
    assert 3 < n_iter < 300
    assert np.all(np.diff(elbo) >= -1e-9 * np.abs(elbo[1:]))
    assert elbo[-1] > elbo[0] + 1.0


def test_one_svi_step_equals_one_batch_vi_step():
    """Full data as one batch, rho = 1, inducing points at the data: Alg. 1 = Sec. 4.1 (to 1e-6)."""
    with jax.enable_x64(True):
        X, y = _moons(30, seed=1)
        theta = SEParams(0.8, 1.3)
        spec, hyper, chol, whiten = _gp_problem(X, theta, X)
        K = np.asarray(chol @ chol.T)  # K + jitter I, the prior both runs use
        feats = gp_svi.gp_features(hyper, whiten, jnp.asarray(X), spec)

        @jax.jit  # one program (op by op, each operation compiles alone)
        def step(nat):
            nat = jax.tree.map(jnp.add, nat, ng.natural_gradient(nat, feats, jnp.asarray(y), 1.0, 1.0, jnp.eye(30)))
            mu_v, R = ng.moments(nat)
            A = R @ chol.T
            # eq. (8) at the inducing points, for the batch bound
            return nat, chol @ mu_v, jnp.diag(A.T @ A), ng.elbo(nat, feats, jnp.asarray(y), 1.0, 1.0, jnp.eye(30))

        nat = ng.NatParams(jnp.zeros(30), -0.5 * jnp.eye(30))  # q(u) = p(u)
        for sweeps in (1, 2, 3):
            nat, mean, zeta_diag, elbo = step(nat)
            batch = gp_vi.batch_vi(jnp.asarray(K), jnp.asarray(y), 1.0, tol=-np.inf, max_iter=sweeps)
            np.testing.assert_allclose(mean, batch.state.mu, atol=1e-6)
            np.testing.assert_allclose(zeta_diag, batch.state.zeta_diag, atol=1e-6)
            # and the ELBOs agree: eq. (8) at the inducing points = the batch bound
            np.testing.assert_allclose(elbo, batch.lower_bound[sweeps - 1], rtol=1e-7)


# ----------------------------------------------------------------------------- natural gradient
def test_natural_gradient_is_inverse_fisher_times_euclidean_gradient():
    """eq. (9)-(10) = F(eta)^-1 grad_eta L with L the closed-form ELBO of eq. (8) (autodiff)."""
    m, B = 2, 5
    with jax.enable_x64(True):
        rng = np.random.default_rng(0)
        feats = ng.Features(jnp.asarray(rng.normal(size=(B, m))), jnp.asarray(rng.uniform(0.1, 0.5, B)))
        y = jnp.asarray(rng.choice([-1.0, 1.0], B))
        G = rng.normal(size=(m, m))
        P0 = jnp.asarray(G @ G.T + m * np.eye(m))
        H = rng.normal(size=(m, m))
        nat = ng.from_moments(jnp.asarray(rng.normal(size=m)), jnp.asarray(H @ H.T + np.eye(m)))
        scale, gamma = 2.5, 1.3
        flat = _nat_to_vech(nat, m)

        def elbo(theta):
            return ng.elbo(_vech_to_nat(theta, m), feats, y, scale, gamma, P0)

        def log_partition(theta):
            n = _vech_to_nat(theta, m)
            return -0.25 * n.eta1 @ jnp.linalg.solve(n.eta2, n.eta1) - 0.5 * jnp.linalg.slogdet(-2.0 * n.eta2)[1]

        fisher = jax.jit(jax.hessian(log_partition))(flat)
        natural = jnp.linalg.solve(fisher, jax.jit(jax.grad(elbo))(flat))
        closed_form = _nat_to_vech(ng.natural_gradient(nat, feats, y, scale, gamma, P0), m)
    np.testing.assert_allclose(natural, closed_form, rtol=1e-7, atol=1e-9)


def test_elbo_is_maximised_by_the_alpha_update():
    """The closed form of eq. (8) uses the optimal alpha: perturbing q(u) toward the natural-gradient
    target with a small step increases it (ascent direction), a step of 1 on full data lands on the
    coordinate-ascent optimum."""
    with jax.enable_x64(True):
        X, y = _moons(40, seed=2)
        spec, hyper, _, whiten = _gp_problem(X, SEParams(0.6, 1.0), X[::4])
        feats = gp_svi.gp_features(hyper, whiten, jnp.asarray(X), spec)
        eye = jnp.eye(10)
        nat = ng.NatParams(jnp.zeros(10), -0.5 * eye)

        @jax.jit  # one program for every rho (op by op, each operation compiles alone)
        def elbo_after_step(rho):
            g = ng.natural_gradient(nat, feats, jnp.asarray(y), 1.0, 1.0, eye)
            return ng.elbo(jax.tree.map(lambda a, b: a + rho * b, nat, g), feats, jnp.asarray(y), 1.0, 1.0, eye)

        values = [float(elbo_after_step(rho)) for rho in (0.0, 0.1, 0.5, 1.0)]
    assert values[0] < values[1] < values[2] < values[3]


# ----------------------------------------------------------------------------- stochastic runs
def _run(X, y, *, steps=600, batch=20, step_size="robbins_monro", learn=(), devices=1, seed=0, Z=None, lengthscale=0.7):
    theta = SEParams(lengthscale, 1.0)
    Z = X[:: max(1, X.shape[0] // 15)] if Z is None else Z
    return gp_svi.svi_gp(X, y, theta, Z, kernel="rbf", learn=learn, num_steps=steps, batch_size=batch,
                      step_size=step_size, hyper_every=10, seed=seed, devices=devices, jitter=1e-8)


def test_svi_on_minibatches_approaches_the_batch_optimum():
    with jax.enable_x64(True):
        X, y = _moons(100, seed=3)
        # 500 steps: 3e-4 nats below the optimum and the means within 0.004 of it at 300 steps already
        # (3e-5 and 0.001 at 2000), three orders of magnitude inside the bounds below
        res, problem = _run(X, y, steps=500, batch=30, Z=X)
        chol, _ = gp_svi.gp_factors(res.state.hyper, problem.features.spec)
        K = np.asarray(chol @ chol.T)
        batch = gp_vi.batch_vi(jnp.asarray(K), jnp.asarray(y), 1.0, tol=1e-10, max_iter=500)
        best = float(batch.lower_bound[int(batch.n_iter) - 1])
        elbo = svi.full_elbo(res.state, problem, X, y)
        mean, _ = svi.predict_moments(res.state, problem, X, chunk=50)  # chunks of 50 rows
    assert not res.diverged
    assert best - 0.5 < elbo <= best + 1e-6  # a lower bound on the optimum, within 0.5 nats
    np.testing.assert_allclose(mean, batch.state.mu, atol=0.1)


@pytest.fixture(scope="module")
def short_lengthscale_run():
    """300 moons, 1500 steps from the length-scale 0.05 held: the run of
    test_mlii_moves_the_lengthscale_toward_a_better_elbo that test_memory_map_input_gives_the_same_run repeats
    (the number of steps sets the shape of the compiled chunk: one program serves both)."""
    X, y = _moons(300, seed=7)
    with jax.enable_x64(True):
        res, problem = _run(X, y, steps=1500, batch=30, lengthscale=0.05)
    return X, y, res, problem


def test_memory_map_input_gives_the_same_run(short_lengthscale_run, tmp_path):
    X, y, a, _ = short_lengthscale_run
    path = tmp_path / "X.npy"
    np.save(path, X)
    with jax.enable_x64(True):
        b, _ = _run(np.load(path, mmap_mode="r"), y, steps=1500, batch=30, lengthscale=0.05)
    np.testing.assert_array_equal(np.asarray(a.state.nat.eta1), np.asarray(b.state.nat.eta1))
    np.testing.assert_array_equal(a.elbo, b.elbo)


def test_adaptive_step_size_stays_in_unit_interval_and_fits():
    tx = ng.adaptive_rate()
    params = {"a": jnp.zeros(3)}
    state = tx.init(params)
    rng = np.random.default_rng(0)
    for _ in range(50):
        g = {"a": jnp.asarray(1.0 + rng.normal(size=3))}
        upd, state = tx.update(g, state)
        rho = float(upd["a"][0]) / float(g["a"][0])  # rho * g rounded to float32: one rounding of slack
        assert 0.0 < rho <= 1.0 + np.finfo(np.float32).eps
    with jax.enable_x64(True):
        X, y = _moons(200, seed=5)
        res, problem = _run(X, y, steps=1000, step_size="adaptive")
        mean, var = svi.predict_moments(res.state, problem, X)
    assert np.mean(np.sign(mean) != y) < 0.2


def test_divergence_keeps_the_last_finite_state():
    """A step size that turns NaN at step 25 stops the run after its round, at step 20."""
    with jax.enable_x64(True):
        X, y = _moons(100, seed=6)
        theta = SEParams(0.7, 1.0)
        spec, hyper, _, whiten = _gp_problem(X, theta, X[::10])
        tx = ng.natural_gradient_ascent(lambda t: jnp.where(t < 25, 0.5, jnp.nan))
        state = svi.init_state(ng.NatParams(jnp.zeros(10), -0.5 * jnp.eye(10)), hyper, whiten, tx, optax.identity())
        problem = svi.Problem(lambda h, c, Xb: gp_svi.gp_features(h, c, Xb, spec), None, jnp.eye(10))
        with pytest.warns(svi.SVIDivergenceWarning, match="last finite state"):
            res = svi.run_svi(state, problem, X, y, nat_tx=tx, hyper_tx=optax.identity(), batch_size=10,
                              num_steps=100, hyper_every=10)
    assert res.diverged
    assert int(res.state.step) == 20
    assert all(np.all(np.isfinite(np.asarray(a))) for a in jax.tree.leaves(res.state))
    assert res.steps[-1] == 20


def test_classes_run_together_each_as_its_binary_run():
    """Labels of shape (K, N): one vmapped program, class k equal to the binary run with its labels
    and seed; a class that diverges (NaN labels) stops alone, with a warning that names it."""
    X, y = _moons(100, seed=6)
    Y = np.stack([y, -y, np.where(np.arange(100) == 7, np.nan, y)])
    with jax.enable_x64(True):
        with pytest.warns(svi.SVIDivergenceWarning, match=r"diverged \(class 2\)"):
            together = _run(X, Y, steps=100, seed=[3, 4, 5], learn=("lengthscale",))
        apart = [_run(X, Y[k], steps=100, seed=3 + k, learn=("lengthscale",))[0] for k in (0, 1)]
    assert [r.diverged for r, _ in together] == [False, False, True]
    for (res, _), alone in zip(together, apart):
        for a, b in zip(jax.tree.leaves(res.state), jax.tree.leaves(alone.state)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(res.elbo, alone.elbo, rtol=1e-6)
    stopped = together[2][0]
    assert int(stopped.state.step) == 0 and stopped.elbo.size == 0
    assert all(np.all(np.isfinite(np.asarray(a))) for a in jax.tree.leaves(stopped.state))


def test_mlii_moves_the_lengthscale_toward_a_better_elbo(short_lengthscale_run):
    X, y, fixed, problem_f = short_lengthscale_run
    with jax.enable_x64(True):
        learnt, problem_l = _run(X, y, steps=1500, batch=30, lengthscale=0.05, learn=("lengthscale",))
        ell = float(jax.nn.softplus(learnt.state.hyper["lengthscale"]))
        e_fixed = svi.full_elbo(fixed.state, problem_f, X, y)
        e_learnt = svi.full_elbo(learnt.state, problem_l, X, y)
    assert ell > 0.15
    assert e_learnt > e_fixed + 10.0


def test_mlii_objective_is_the_elbo_of_the_remapped_state():
    """eq. (12) holds q(u) fixed: the ML-II objective at new hyperparameters (length-scale, amplitude
    and inducing points moved) equals the ELBO of the state remapped to their K_mm, in value and in
    gradient, and is the ELBO itself at the state's own hyperparameters."""
    m = 8
    with jax.enable_x64(True):
        X, y = _moons(60, seed=3)
        X, y = jnp.asarray(X), jnp.asarray(y)
        spec, hyper, _, whiten = _gp_problem(X, SEParams(0.6, 1.3), X[::8][:m], jitter=1e-8)
        rng = np.random.default_rng(1)
        G = rng.normal(size=(m, m))
        nat = ng.from_moments(jnp.asarray(rng.normal(size=m)), jnp.asarray(G @ G.T + np.eye(m)))
        problem = gp_svi.gp_problem(spec, m, jnp.float64, learn=True)
        q = ng.fixed_q(nat, whiten)
        eye = jnp.eye(m)

        def remapped_elbo(h):
            chol, w = gp_svi.gp_factors(h, spec)
            return ng.elbo(ng.remap(nat, whiten, chol), gp_svi.gp_features(h, w, X, spec), y, 1.7, 0.9, eye)

        def objective(h):
            return ng.mlii_objective(h, q, problem, X, y, 1.7, 0.9)

        at_state = ng.elbo(nat, gp_svi.gp_features(hyper, whiten, X, spec), y, 1.7, 0.9, eye)
        moved = {"lengthscale": hyper["lengthscale"] + 0.3, "amplitude": hyper["amplitude"] - 0.2,
                 "inducing": hyper["inducing"] + 0.1 * jnp.asarray(rng.normal(size=(m, 2)))}
        # compiled, value and gradient in one program each: op by op they take many more small compilations
        value_and_grad, remapped_value_and_grad = (jax.jit(jax.value_and_grad(f)) for f in (objective, remapped_elbo))
        np.testing.assert_allclose(value_and_grad(hyper)[0], at_state, rtol=1e-10)
        for h in (hyper, moved):
            (value, got), (value_remapped, want) = value_and_grad(h), remapped_value_and_grad(h)
            np.testing.assert_allclose(value, value_remapped, rtol=1e-9)
            for k in h:
                np.testing.assert_allclose(got[k], want[k], rtol=1e-7, atol=1e-9, err_msg=k)


def test_full_batch_round_equals_the_round_over_every_minibatch():
    """With |S| = N every minibatch of a round is a permutation of all rows: the round that computes
    the features once and takes the ML-II objective on one minibatch gives the state and the value of
    the general round (features per step, ML-II on all k minibatches), for fixed and learnt
    hyperparameters."""
    m, n, k = 6, 40, 5
    with jax.enable_x64(True):
        X, y = _moons(n, seed=4)
        spec, hyper, _, whiten = _gp_problem(X, SEParams(0.7, 1.2), X[::7][:m], jitter=1e-8)
        rng = np.random.default_rng(2)
        order = np.stack([rng.permutation(n) for _ in range(k)])
        batch = (jnp.asarray(X[order]), jnp.asarray(y[order]), jnp.asarray(True))
        consts = (jnp.eye(m), jnp.asarray(1.0), jnp.asarray(0.8))
        nat_tx = ng.natural_gradient_ascent(ng.robbins_monro())
        for learn in (False, True):
            problem = gp_svi.gp_problem(spec._replace(learn=("lengthscale", "inducing") if learn else ()), m,
                                        jnp.float64, learn=learn)
            hyper_tx = optax.adam(0.05) if learn else optax.set_to_zero()
            state = svi.init_state(ng.NatParams(jnp.zeros(m), -0.5 * jnp.eye(m)), hyper, whiten, nat_tx, hyper_tx)
            carry = (state, jnp.asarray(False))
            rounds = [jax.jit(partial(svi._round, problem, nat_tx, hyper_tx, learn, full)) for full in (True, False)]
            ((full, _), v_full), ((each, _), v_each) = (r(consts, carry, batch) for r in rounds)
            assert np.isfinite(v_full) and int(full.step) == k
            np.testing.assert_allclose(v_full, v_each, rtol=1e-10)
            for a, b in zip(jax.tree.leaves(full), jax.tree.leaves(each)):
                np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


#: The subprocesses compile without XLA's expensive optimisation passes, as the test processes do
#: (tests/conftest.py): their time is mostly compilation.
_UNOPTIMISED = {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}


_HEADER = textwrap.dedent(
    """
    import sys
    import jax
    import numpy as np
    from sklearn.datasets import make_moons
    """
)
#: A GPBSVM and a LinearBSVM svi fit on ``devices`` (None: all): ``fits``, the number of devices the
#: minibatches were split over, and the predictions. GPBSVM with its kernel held and without the learnt link,
#: whose programs would double the compilation time of each process: ML-II on split minibatches is
#: svi_gp's in ``_DATA_PARALLEL`` (the minibatch sums, split over the devices, are the ELBO's and its
#: gradient's alike), and the link's leave-one-out pass runs after the run, on the local device.
_ESTIMATOR_FITS = textwrap.dedent(
    """
    def estimator_fits(devices):
        from bayes_maxmargin import GPBSVM, LinearBSVM
        X, y = make_moons(160, noise=0.3, random_state=0)
        gp = GPBSVM(inference="svi", num_inducing=20, batch_size=40, max_iter=40, precision="float64",
                    learn_kernel=False, calibrate=False, devices=devices, random_state=0).fit(X, y)
        lin = LinearBSVM(inference="svi", batch_size=40, max_iter=40, devices=devices, random_state=0).fit(X, y)
        print("fits", devices or len(jax.devices()), *gp.predict_proba(X)[:, 1], *lin.predict_proba(X)[:, 1])
    """
)
#: svi_gp (one problem) and svi_linear (two classes run together) on 1 and on 4 devices: ``parallel``, the
#: largest relative difference of the results.
_DATA_PARALLEL = textwrap.dedent(
    """
    from bayes_maxmargin.core.kernels import SEParams
    from bayes_maxmargin.models.gp.svi import svi_gp
    from bayes_maxmargin.models.linear.svi import svi_linear
    assert len(jax.devices()) == 4
    X, y = make_moons(160, noise=0.3, random_state=0); y = np.where(y == 1, 1.0, -1.0)
    out = []
    with jax.enable_x64(True):
        for devices in (1, 4):
            res, _ = svi_gp(X, y, SEParams(0.7, 1.0), X[::8], kernel="rbf", learn=("lengthscale",),
                            num_steps=40, batch_size=40, hyper_every=10, devices=devices)
            out.append(np.concatenate([np.asarray(res.state.nat.eta1), np.asarray(res.state.nat.eta2).ravel(),
                                       [float(res.state.hyper["lengthscale"])]]))
            pair = svi_linear(X, np.stack([y, -y]), np.eye(2), [0, 1], num_steps=40, batch_size=40,
                              devices=devices)  # two classes, each minibatch split
            out[-1] = np.concatenate([out[-1], *(np.asarray(r.state.nat.eta1) for r, _ in pair)])
    print("parallel", float(np.max(np.abs(out[0] - out[1]) / (1 + np.abs(out[0])))))
    estimator_fits(1)
    """
)
#: Process ``pid`` of ``nproc`` joined by ``jax.distributed`` (argv: port, nproc, pid): the estimator fits
#: on every device of both.
_DISTRIBUTED_FIT = _HEADER + _ESTIMATOR_FITS + textwrap.dedent(
    """
    port, nproc, pid = sys.argv[1:4]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=int(nproc), process_id=int(pid))
    estimator_fits(None)
    """
)


def _host_devices(count: int) -> dict[str, str]:
    """The environment of a CPU-only subprocess with ``count`` forced host devices."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}".strip()
    return {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu", **_UNOPTIMISED}


def _tagged(stdout: str) -> dict[str, np.ndarray]:
    """The last line of ``stdout`` starting with each tag, as numbers (gloo logs to stdout too)."""
    return {line.split()[0]: np.array(line.split()[1:], float) for line in stdout.splitlines()
            if line.split()[:1] in (["fits"], ["parallel"])}


@pytest.fixture(scope="module")
def four_devices() -> dict[str, np.ndarray]:
    """One process with 4 forced host devices (its time is mostly the import and compilation, so the
    data-parallel runs and the one-device reference fits of the distributed test share it)."""
    out = subprocess.run([sys.executable, "-c", _HEADER + _ESTIMATOR_FITS + _DATA_PARALLEL], env=_host_devices(4),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return _tagged(out.stdout)


@pytest.mark.skipif(sys.platform == "win32", reason="XLA host device flag")
def test_data_parallel_run_equals_single_device(four_devices):
    """4 forced host devices: every minibatch split in 4, the same result to 1e-5 (one problem, and
    two classes run together). A small problem (160 rows, 4 ML-II rounds): the time is compilation."""
    assert float(four_devices["parallel"][0]) < 1e-5


@pytest.mark.skipif(sys.platform == "win32", reason="XLA host device flag")
def test_two_processes_with_jax_distributed_equal_one_device(four_devices):
    """Across hosts: two processes joined by ``jax.distributed`` (CPU collectives over gloo), two
    host devices each, split every minibatch over the four; both processes end with the
    one-device fit's predictions (GPBSVM and LinearBSVM, svi; the one-device fits run in the
    ``four_devices`` process with ``devices=1``)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])
    procs = [subprocess.Popen([sys.executable, "-c", _DISTRIBUTED_FIT, port, "2", str(pid)], env=_host_devices(2),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for pid in (0, 1)]
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-2000:]
            outs.append(_tagged(out)["fits"])
    finally:  # a failed process leaves its peer waiting on the coordinator
        for proc in procs:
            proc.kill()
    (two_a, two_b), one = outs, four_devices["fits"]
    assert two_a[0] == two_b[0] == 4 and one[0] == 1
    np.testing.assert_allclose(two_a[1:], one[1:], atol=1e-8)
    np.testing.assert_array_equal(two_a, two_b)


def test_several_processes_need_every_device(monkeypatch):
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    monkeypatch.setattr(jax, "devices", lambda: [object()] * 4)
    with pytest.raises(ValueError, match="devices: 2 .*None or 4"):
        svi.data_mesh(2, 40)


# ----------------------------------------------------------------------------- step sizes
@pytest.mark.parametrize("step_size", [1.5, 0.0, -0.1, lambda t: 2.0, lambda t: 1.0 / (t - 3.0), "bogus", True, None])
def test_step_size_outside_unit_interval_is_rejected(step_size):
    with pytest.raises(ValueError, match="step_size"):
        svi.step_transform(step_size, 100)


def test_robbins_monro_parameters_are_checked():
    with pytest.raises(ValueError, match="tau"):
        ng.robbins_monro(tau=0.5)
    with pytest.raises(ValueError, match="kappa"):
        ng.robbins_monro(kappa=0.4)
    rho = ng.robbins_monro(tau=1.0, kappa=0.75)
    assert float(rho(0)) == 1.0 and float(rho(15)) == pytest.approx(16 ** -0.75)


# ----------------------------------------------------------------------------- estimators
#: The GPBSVM svi fit of test_gpbsvm_svi_and_vi_predict_like_the_paper_says, the kernel and the inducing points
#: held as in the paper's experiment; test_inducing_posterior_is_q_u_and_specs_are_compilation_keys refits it.
PAPER_SVI = dict(inference="svi", num_inducing=20, batch_size=20, max_iter=400, learn_kernel=False,
                 optimize_inducing=False, calibrate=False, random_state=0)


@pytest.fixture(scope="module")
def paper_svi():
    X, y = _moons(400, seed=8)
    return X, y, GPBSVM(kernel_params={"lengthscale": 0.7}, **PAPER_SVI).fit(X, y)


def test_gpbsvm_svi_and_vi_predict_like_the_paper_says(paper_svi):
    X, y, clf = paper_svi
    Xt, yt = _moons(400, seed=9)
    # 400 steps: test error 0.100 (0.1025 after 1500), half the bound below
    # the kernel held, as in the svi fit (B-BSVM's ML-II: test_calibration.test_predictions_go_through_the_link[vi])
    vi = GPBSVM(inference="vi", kernel_params={"lengthscale": 0.7}, learn_kernel=False, max_iter=100,
                calibrate=False).fit(X[:150], y[:150])
    for model in (clf, vi):
        mean, var = model.predict_latent(Xt)
        assert np.all(var > 0)
        np.testing.assert_allclose(model.predict_proba(Xt)[:, 1], probit_predictive(mean, var))  # Phi(m / sqrt(1 + v))
        assert np.mean(model.predict(Xt) != yt) < 0.2
    assert clf.inducing_points_.shape == (20, 2) and clf.variational_cov_.shape == (20, 20)
    assert np.all(np.linalg.eigvalsh(clf.variational_cov_) > 0)
    assert clf.n_iter_ == 400 and clf.elbo_steps_[-1] == 400
    assert np.all(np.diff(vi.elbo_) >= -1e-8 * np.abs(vi.elbo_[1:]))
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert "u[0]" in az.summary(clf.idata_).index


def test_inducing_posterior_is_q_u_and_specs_are_compilation_keys(paper_svi):
    X, y, clf = paper_svi  # its programs then serve the refit below
    state, problem = clf._posterior
    spec = problem.features.spec
    with jax.enable_x64(True):  # the fit's float64 (and on a GPU no reduced-precision matmul)
        chol, _ = gp_svi.gp_factors(state.hyper, spec)
        mu_v, R = ng.moments(state.nat)  # q(v) = N(mu_v, R'R), u = L v
    chol, mu_v, R = (np.asarray(a, np.float64) for a in (chol, mu_v, R))
    np.testing.assert_allclose(clf.variational_mean_, chol @ mu_v, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(clf.variational_cov_, chol @ R.T @ R @ chol.T, rtol=1e-5, atol=1e-6)
    # specs differing only in the values of the free kernel fields are one static key: a fit from
    # another length-scale reuses every compiled program
    assert spec == gp_svi.GPSpec(RBF(), SEParams(5.0, 2.0), spec.jitter, spec.learn)
    assert hash(spec) == hash(gp_svi.GPSpec(RBF(), SEParams(5.0, 2.0), spec.jitter, spec.learn))
    assert spec != gp_svi.GPSpec(RBF(), SEParams(0.7, 1.0), 10 * spec.jitter)
    clf.predict_proba(X)

    def sizes():
        return gp_svi._gp_start._cache_size(), svi._moments_chunk._cache_size(), len(svi._PROGRAMS)

    # a fit first, so that the programs are in the caches even if the worker released them since the
    # fixture's fit (conftest._release_compiled_programs); the next fit must then add none
    GPBSVM(kernel_params={"lengthscale": 0.9}, **PAPER_SVI).fit(X, y).predict_proba(X)
    before = sizes()
    GPBSVM(kernel_params={"lengthscale": 1.3}, **PAPER_SVI).fit(X, y).predict_proba(X)  # predictions too
    assert sizes() == before


def test_linear_svi_reaches_the_mean_field_fixed_point():
    """Linear SVI (Sec. 4.5) with the full data as one batch and rho = 1 is Luts & Ormerod's
    Algorithm 1; on minibatches with a decreasing step it gets close to the same fixed point."""
    rng = np.random.default_rng(10)
    X = rng.normal(size=(300, 4))
    y = np.where(X @ np.array([1.0, -0.5, 0.0, 0.3]) + 0.3 * rng.normal(size=300) > 0, 1, -1)
    vb = LinearBSVM(inference="vb", accelerate=False, max_iter=2000).fit(X, y)
    full = LinearBSVM(inference="svi", batch_size=300, step_size=1.0, max_iter=500).fit(X, y)
    mini = LinearBSVM(inference="svi", batch_size=30, max_iter=6000, random_state=0).fit(X, y)  # (t + 10)^-0.55
    np.testing.assert_allclose(full.coef_, vb.coef_, atol=1e-4)  # both iterations converge linearly
    np.testing.assert_allclose(full.intercept_, vb.intercept_, atol=1e-4)
    np.testing.assert_allclose(mini.coef_, vb.coef_, atol=0.01)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 101}, "batch_size"),
        ({"num_inducing": 0}, "num_inducing"),
        ({"num_inducing": 101}, "num_inducing"),
        ({"step_size": 1.5}, "step_size"),
        ({"step_size": "fast"}, "step_size"),
        ({"gamma0": 0.1}, "gamma0"),
        ({"devices": 0}, "devices"),
    ],
)
def test_gpbsvm_svi_bad_input(kwargs, match):
    X, y = _moons(100)
    with pytest.raises(ValueError, match=match):
        GPBSVM(inference="svi", max_iter=10, num_inducing=kwargs.pop("num_inducing", 10), **kwargs).fit(X, y)


def test_linear_svi_bad_input():
    X, y = _moons(50)
    for kwargs, match in [({"batch_size": 51}, "batch_size"), ({"step_size": 0.0}, "step_size"),
                          ({"intercept_scale": None}, "intercept_scale")]:
        with pytest.raises(ValueError, match=match):
            LinearBSVM(inference="svi", max_iter=10, **{"batch_size": 10, **kwargs}).fit(X, y)
