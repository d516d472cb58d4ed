"""Where ``GPBSVM()`` loses to the SVC + Platt peer of ``vs_peers.py``: hyperparameters or calibration.

On the splits of ``vs_peers.py`` (the same tasks, seeds and standardisation), per split: test error of
SVC at scikit-learn's defaults (C = 1, gamma = "scale"), of the peer's SVC (C and gamma chosen by
3-fold ``GridSearchCV``, as ``vs_peers.svc_platt``), of ``GPBSVM()`` with and without its learnt link,
of the full-GP ECM with ML-II with and without the link, and of ECM's MAP at the tuned SVC's
hyperparameters (theta = gamma^-1/2, a = C / (2 gamma_hinge), the same objective up to the SVC's free
intercept), with the length-scale and amplitude ML-II chose.

``--inducing M [M ...]`` replaces the full-GP fits by ``GPBSVM(num_inducing=M)`` for each M and S-BSVM at
the tuned SVC's kernel held fixed (the RBF kernel above) with the largest M: whether more inducing points,
or the SVC's hyperparameters, close the gap of the sparse default.

``--loo-grid`` adds ECM's MAP at the SVC grid's point chosen from the training rows alone by the
leave-one-out moments the fit computes anyway (its Gaussian sites divided out): by leave-one-out error
(ties: the probit log predictive), and by the leave-one-out probit log predictive alone.

    python benchmarks/svc_gap.py --task digits_3_vs_rest --splits 4 [--loo-grid]
    python benchmarks/svc_gap.py --task usps_0_vs_rest --splits 3 --inducing 64 256
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _suite import suite_tasks, task_data  # noqa: E402
from vs_peers import split  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="digits_3_vs_rest")
    parser.add_argument("--splits", type=int, default=4)
    parser.add_argument("--loo-grid", action="store_true")
    parser.add_argument("--inducing", type=int, nargs="+", default=None, metavar="M")
    args = parser.parse_args()

    from scipy.stats import norm
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    from bayes_maxmargin import GPBSVM

    tasks, _ = suite_tasks("all", False)
    task = {t.name: t for t in tasks}[args.task]
    X, y = task_data(task, False)
    rows = []
    for s in range(args.splits):
        Xtr, Xte, ytr, yte = split(X, y, s)
        positive = yte == np.unique(ytr)[1]
        d = Xtr.shape[1]

        def error(scores, threshold=0.0):
            return float(np.mean((np.asarray(scores) > threshold) != positive))

        row = {"split": s, "svc_default": error(SVC().fit(Xtr, ytr).decision_function(Xte))}
        grid = {"C": [0.1, 1.0, 10.0], "gamma": [0.25 / d, 1.0 / d, 4.0 / d]}  # vs_peers.svc_platt's grid
        tuned = GridSearchCV(SVC(), grid, cv=3).fit(Xtr, ytr)
        row["svc_tuned"], row["svc_params"] = error(tuned.decision_function(Xte)), tuned.best_params_
        at_svc = {"calibrate": False, "kernel": "rbf", "learn_kernel": False,
                  "kernel_params": {"lengthscale": tuned.best_params_["gamma"] ** -0.5,
                                    "amplitude": tuned.best_params_["C"] / 2.0}}
        if args.inducing:
            fits = [(f"gpbsvm_m{m}", {"num_inducing": m}) for m in args.inducing]
            fits.append((f"svi_at_svc_m{max(args.inducing)}",
                         {"inference": "svi", "num_inducing": max(args.inducing), **at_svc}))
        else:
            fits = [("gpbsvm", {}), ("gpbsvm_no_link", {"calibrate": False}), ("ecm", {"inference": "ecm"}),
                    ("ecm_no_link", {"inference": "ecm", "calibrate": False}),
                    ("ecm_at_svc", {"inference": "ecm", **at_svc})]
        for name, kw in fits:
            clf = GPBSVM(progress_bar=False, random_state=s, **kw).fit(Xtr, ytr)
            row[name] = error(clf.predict_proba(Xte)[:, 1], 0.5)
            if name == "ecm":
                row["ecm_theta"] = clf.kernel_params_
        if args.loo_grid:
            signs = np.where(ytr == np.unique(ytr)[1], 1.0, -1.0)
            scored = []
            for gamma in grid["gamma"]:
                for C in grid["C"]:
                    clf = GPBSVM(inference="ecm", kernel="rbf", learn_kernel=False, calibrate=False, progress_bar=False,
                                 kernel_params={"lengthscale": gamma**-0.5, "amplitude": C / 2.0}).fit(Xtr, ytr)
                    m, v = clf._posterior.loo_latent(Xtr, signs, clf.gamma_, np.float64)
                    scored.append((float(np.mean(np.sign(m) != signs)),
                                   float(np.mean(norm.logcdf(signs * m / np.sqrt(1.0 + v)))),
                                   error(clf.decision_function(Xte)), {"C": C, "gamma": gamma}))
            by_error = min(scored, key=lambda r: (r[0], -r[1]))
            by_logpred = max(scored, key=lambda r: r[1])
            row.update(loo_error_pick=by_error[2], loo_error_params=by_error[3], loo_logpred_pick=by_logpred[2],
                       loo_logpred_params=by_logpred[3])
        print(json.dumps(row), flush=True)
        rows.append(row)
    means = {k: float(np.mean([r[k] for r in rows])) for k in rows[0] if isinstance(rows[0][k], float)}
    print(json.dumps({"task": args.task, "splits": args.splits, "mean_error": means}))


if __name__ == "__main__":
    main()
