"""Effective samples per second: the conjugate Gibbs kernel against NUTS on the same posterior.

Linear Bayesian SVM (hinge, gamma = 1, sigma = 1) on seeded synthetic data of (n, d) = (500, 10) and
(5000, 50). Both samplers run 4 chains (``--chains``) vectorised on one device, each timed on its second run
(compiled code), warm-up included; ESS is ArviZ's bulk ESS, the minimum over the coefficients.
Gibbs runs three times: the plain draw (overrelaxation 0), the overrelaxed draw (alpha = -0.9) and the
library's default, the overrelaxed draw with the directional moves that integrate lambda out
(``marginal_moves``); the ratio is that of the default against NUTS. ``conjugate_bound_ratio`` is the
most any kernel with one conjugate draw of the coefficients per sweep could reach against NUTS: the
kept draws per second of the plain sweep (lambda, X' Lambda^-1 X, its Cholesky factor, the draw), as if
every draw were independent. A second table gives the bulk ESS
per draw of ``LinearBSVM()`` at its defaults, with and without the moves, on breast cancer, each class of
iris (one-vs-rest) and a 1000 x 20 two-Gaussian set (standardised features); a third, GP Gibbs with
theta sampled on 150 x 30 rows (one chain): iterations and ESS of theta and f per second for both theta
samplers, with and without the elliptical moves of f; a fourth and a fifth, the bulk ESS per draw of what
the sign and order symmetry of ``MaxMarginProjection`` and ``FactorBSVM`` leaves alone
(:func:`symmetric_model_rows`). The same script runs on a GPU when JAX sees one (``--tag gpu`` keeps the
CPU results).

    python benchmarks/gibbs_vs_nuts.py [--quick] [--chains 4] [--out-dir DIR] [--tag TAG]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
from _common import RESULTS, markdown_table, result_name, write_results
from numpyro.infer import MCMC, NUTS

from bayes_maxmargin.engine.mcmc import run_chains
from bayes_maxmargin.models.linear.gibbs import build_linear_kernel, init_linear, record_linear
from bayes_maxmargin.models.linear.model import LinearData, LinearHyper, linear_bsvm, prior_precision


def synthetic(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    beta = rng.normal(size=d) / np.sqrt(d) * 2.0
    y = np.where(X @ beta + rng.logistic(size=n) * 0.5 > 0, 1.0, -1.0)
    return X, y


def min_ess(draws: np.ndarray) -> float:
    """Minimum bulk ESS over the last axis of (chain, draw, p) draws."""
    return float(np.min(az.ess(az.convert_to_dataset({"w": draws}))["w"].values))


def time_gibbs(X, y, chains, warmup, samples, seed, alpha, moves=False):
    design = jnp.asarray(np.hstack([X, np.ones((len(X), 1))]))
    data = LinearData(design, jnp.asarray(y))
    hyper = LinearHyper(prior_precision(X.shape[1], 1.0, 10.0, True), *map(jnp.asarray, (1.0, 1.0, 1.0, 0.0)),
                        adapt_steps=jnp.asarray(warmup))
    kernel = build_linear_kernel(False, alpha, False, False, moves)
    state = jax.vmap(init_linear, (0, None, None, None, None, None))(
        jnp.zeros((chains, design.shape[1])), data, hyper, False, False, moves)

    def run(key):
        return run_chains(kernel, record_linear, state, key, data, hyper, num_warmup=warmup,
                          num_samples=samples, chunk_size=samples + warmup, progress_bar=False)

    jax.block_until_ready(run(jax.random.PRNGKey(seed)).samples)  # compile
    t0 = time.perf_counter()
    res = run(jax.random.PRNGKey(seed + 1))
    elapsed = time.perf_counter() - t0
    return min_ess(res.samples["coef"]), elapsed


def time_nuts(X, y, chains, warmup, samples, seed):
    kw = dict(sigma=1.0, intercept_scale=10.0, gamma=1.0, gamma0=0.0)
    mcmc = MCMC(NUTS(linear_bsvm), num_warmup=warmup, num_samples=samples, num_chains=chains,
                chain_method="vectorized", progress_bar=False)
    args = (jnp.asarray(X), jnp.asarray(y))
    mcmc.run(jax.random.PRNGKey(seed), *args, **kw)  # compile
    jax.block_until_ready(mcmc.get_samples())
    t0 = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed + 1), *args, **kw)
    s = mcmc.get_samples(group_by_chain=True)
    jax.block_until_ready(s)
    elapsed = time.perf_counter() - t0
    draws = np.concatenate([np.asarray(s["beta"]), np.asarray(s["intercept"])[..., None]], axis=-1)
    return min_ess(draws), elapsed


def mixing_sets() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The data sets of the ESS-per-draw table, standardised, labels +-1 (iris: one class against the rest)."""
    from sklearn.datasets import load_breast_cancer, load_iris
    from sklearn.preprocessing import StandardScaler

    sets = {"breast cancer": load_breast_cancer(return_X_y=True)}
    X, y = load_iris(return_X_y=True)
    sets.update({f"iris class {k}": (X, np.where(y == k, 1, 0)) for k in range(3)})
    rng = np.random.default_rng(0)
    labels = rng.random(1000) < 0.5
    sets["two Gaussians 1000 x 20"] = (rng.normal(size=(1000, 20)) + 0.3 * np.where(labels, 1, -1)[:, None]
                                       * rng.normal(size=20), labels.astype(int))
    return {k: (StandardScaler().fit_transform(X), np.where(y == 1, 1, -1)) for k, (X, y) in sets.items()}


def ess_per_draw_rows(quick: bool) -> list[dict]:
    """Bulk ESS per draw of ``LinearBSVM()`` (4 chains, its default draws) with and without the moves: the
    minimum over the coefficients and the intercept's."""
    import warnings

    from bayes_maxmargin import LinearBSVM
    from bayes_maxmargin.diagnostics import MixingWarning

    rows = []
    for name, (X, y) in mixing_sets().items():
        row = {"data": name}
        for moves in (False, True):
            clf = LinearBSVM(marginal_moves=moves, random_state=0, progress_bar=False,
                             **(dict(num_samples=300, num_warmup=200) if quick else {}))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", MixingWarning)
                clf.fit(X, y)
            draws = clf.num_chains * clf.num_samples
            ess = az.ess(clf.idata_, var_names=["beta", "intercept"])
            tag = "moves" if moves else "no_moves"
            row[f"{tag}_min"] = min(float(ess["beta"].min()), float(ess["intercept"])) / draws
            row[f"{tag}_intercept"] = float(ess["intercept"]) / draws
            row[f"{tag}_warned"] = any(issubclass(w.category, MixingWarning) for w in caught)
        rows.append(row)
        print(row, flush=True)
    return rows


def symmetric_model_rows(quick: bool) -> list[dict]:
    """Bulk ESS per draw and the largest R-hat of what the sign and order symmetry of the latent models leaves
    alone (the quantities their mixing checks judge): ``MaxMarginProjection`` (one component, 4 chains of 5000
    after 500) on breast cancer, two half moons (200 rows) and iris (three classes, two components): A w
    (smallest over its entries), b and sigma; ``FactorBSVM`` (linear classifier, 5 factors, 4 chains of 500
    after 500) on breast cancer: the intercept, f at the training rows (smallest and median), gamma and the
    communalities sum_k a_jk^2 (smallest)."""
    import warnings

    from sklearn.datasets import load_breast_cancer, load_iris, make_moons
    from sklearn.preprocessing import StandardScaler

    from bayes_maxmargin import FactorBSVM, MaxMarginProjection
    from bayes_maxmargin.diagnostics import rank_diagnostics

    def measured(draws: np.ndarray) -> tuple[float, float, float]:
        """(smallest bulk ESS per draw, median, largest R-hat) of draws laid out (chain, draw, ...)."""
        chains, n = draws.shape[:2]
        rhat, ess = rank_diagnostics(draws.reshape(chains, n, -1))
        return float(ess.min()) / (chains * n), float(np.median(ess)) / (chains * n), float(rhat.max())

    sets = {"breast cancer": load_breast_cancer(return_X_y=True), "two half moons": make_moons(200, noise=0.3,
                                                                                                random_state=0),
            "iris": load_iris(return_X_y=True)}
    run = dict(num_chains=2, num_samples=300, num_warmup=100) if quick else dict(num_chains=4, num_samples=5000,
                                                                                  num_warmup=500)
    rows = []
    for name, (X, y) in sets.items():
        X = StandardScaler().fit_transform(X)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the table reports the mixing itself
            post = MaxMarginProjection(random_state=0, **run).fit(X, y).idata_.posterior
        row = {"model": "MaxMarginProjection", "data": name}
        for var in ("coef", "b", "sigma"):
            low, _, rhat = measured(post[var].values)
            row[f"{var}_ess_per_draw"], row[f"{var}_rhat"] = low, rhat
        rows.append(row)
        print(row, flush=True)
    X, y = sets["breast cancer"]
    run = dict(num_chains=2, num_samples=100, num_warmup=100) if quick else dict(num_chains=4, num_samples=500,
                                                                                  num_warmup=500)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = FactorBSVM(n_factors=5, thin=1, random_state=0, **run).fit(StandardScaler().fit_transform(X), y)
    post = clf.idata_.posterior
    f = clf._posterior.draws["f"].reshape(run["num_chains"], run["num_samples"], -1)  # its draws of f (not in idata_)
    row = {"model": "FactorBSVM", "data": "breast cancer"}
    for var, draws in (("intercept", post["intercept"].values), ("gamma", post["gamma"].values),
                       ("communality", (post["A"].values ** 2).sum(-1)), ("f", f)):
        low, median, rhat = measured(draws)
        row[f"{var}_ess_per_draw"], row[f"{var}_rhat"] = low, rhat
        if var == "f":
            row["f_median_ess_per_draw"] = median
    rows.append(row)
    print(row, flush=True)
    return rows


def gp_theta_rows(quick: bool) -> list[dict]:
    """``GPBSVM(inference="gibbs")`` with theta sampled on 150 x 30 synthetic rows, one chain: iterations
    per second of the second (compiled) fit, and ESS per second of log theta and of f for both theta
    samplers, with and without the elliptical moves of f (``marginal_moves``)."""
    import warnings

    from bayes_maxmargin import GPBSVM

    X, y = synthetic(150, 30, seed=1)
    warmup, samples = (100, 200) if quick else (500, 2000)
    rows = []
    for sampler in ("collapsed", "surrogate"):
        for moves in (True, False):
            def fit(seed):
                clf = GPBSVM(inference="gibbs", theta_sampler=sampler, marginal_moves=moves, num_chains=1,
                             num_warmup=warmup, num_samples=samples, random_state=seed, progress_bar=False)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # one chain: the mixing check is not the point here
                    return clf.fit(X, y)

            fit(0)  # compilation
            t0 = time.perf_counter()
            clf = fit(1)
            elapsed = time.perf_counter() - t0
            post = clf.idata_.posterior
            ess = {k: float(np.min(az.ess(clf.idata_, var_names=[k])[k].values)) for k in ("lengthscale", "amplitude", "f")}
            rows.append({"theta_sampler": sampler, "marginal_moves": moves,
                         "iterations_per_s": (warmup + samples) / elapsed,
                         **{f"{k}_ess_per_s": v / elapsed for k, v in ess.items()},
                         "f_ess_per_draw": ess["f"] / post.sizes["draw"]})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer draws (a smoke run)")
    parser.add_argument("--chains", type=int, default=4, help="chains of each sampler, vectorised")
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--tag", default="", help="appended to the result file name (e.g. gpu)")
    args = parser.parse_args()
    chains = args.chains
    g_warm, g_samp = (200, 1000) if args.quick else (1000, 5000)
    n_warm, n_samp = (200, 300) if args.quick else (500, 1000)
    rows = []
    with jax.enable_x64(True):
        for n, d in [(500, 10), (5000, 50)]:
            X, y = synthetic(n, d)
            ess_p, t_p = time_gibbs(X, y, chains, g_warm, g_samp, seed=0, alpha=0.0)
            ess_o, t_o = time_gibbs(X, y, chains, g_warm, g_samp, seed=0, alpha=-0.9)
            ess_g, t_g = time_gibbs(X, y, chains, g_warm, g_samp, seed=0, alpha=-0.9, moves=True)
            ess_n, t_n = time_nuts(X, y, chains, n_warm, n_samp, seed=0)
            bound = chains * g_samp / t_p  # every kept draw of the plain sweep independent (module docstring)
            rows.append({
                "n": n, "d": d,
                "plain_gibbs_ess_per_s": ess_p / t_p, "overrelaxed_ess_per_s": ess_o / t_o,
                "plain_gibbs_s": t_p, "conjugate_bound_ratio": bound / (ess_n / t_n),
                "gibbs_min_ess": ess_g, "gibbs_s": t_g, "gibbs_ess_per_s": ess_g / t_g,
                "nuts_min_ess": ess_n, "nuts_s": t_n, "nuts_ess_per_s": ess_n / t_n,
                "ratio": (ess_g / t_g) / (ess_n / t_n),
            })
            print(rows[-1], flush=True)
    cols = ["n", "d", "plain_gibbs_ess_per_s", "overrelaxed_ess_per_s", "gibbs_min_ess", "gibbs_s", "gibbs_ess_per_s",
            "nuts_min_ess", "nuts_s", "nuts_ess_per_s", "ratio", "plain_gibbs_s", "conjugate_bound_ratio"]
    print(markdown_table(rows, cols))
    mixing = ess_per_draw_rows(args.quick)
    print(markdown_table(mixing, list(mixing[0])))
    gp = gp_theta_rows(args.quick)
    print(markdown_table(gp, list(gp[0])))
    symmetric = symmetric_model_rows(args.quick)
    for model in ("MaxMarginProjection", "FactorBSVM"):
        part = [r for r in symmetric if r["model"] == model]
        print(markdown_table(part, list(part[0])))
    settings = {"chains": chains, "gibbs": [g_warm, g_samp], "nuts": [n_warm, n_samp], "float64": True}
    path = write_results(result_name("gibbs_vs_nuts", args.quick, args.tag),
                         {"settings": settings, "rows": rows, "ess_per_draw": mixing, "gp_theta": gp,
                          "symmetric_models": symmetric,
                          "load1": os.getloadavg()[0]},
                         args.out_dir)
    print(f"written {path}")


if __name__ == "__main__":
    main()
