"""The tasks of ``benchmarks/vs_peers.py``: which data sets run, as which binary or multi-class
problems, how they are loaded, and how many splits each gets.

``--suite nine``: the Raetsch sets breast_cancer, diabetis, flare_solar, german, heart, splice,
waveform, ringnorm of ``BMM_DATA_DIR`` and two half moons, as binary tasks.

``--suite all`` (:func:`suite_tasks`), in this order:

* every binary set of ``BMM_DATA_DIR`` (:func:`bayes_maxmargin.load_dataset`; group and split
  columns are not used, missing cells are filled by :func:`~vs_peers.split`), except those in
  :data:`EXCLUDED`;
* ``wdbc``: scikit-learn's breast cancer data (the library's built-in loader);
* synthetic sets (:data:`SYNTHETIC`): half moons, circles, XOR with irrelevant features, and three
  ``make_classification`` problems (many informative features and clusters; few informative among
  many; one class in ten);
* binary tasks from the multi-class sets (dna, satimage, usps, isolet of ``BMM_DATA_DIR`` and
  scikit-learn's digits, iris and wine): "class k (+1) vs the rest (-1)" for every class of a set
  with at most :data:`OVR_ALL_MAX` classes, and for the largest class only (the first in sorted
  order on a tie) of a set with more, so that no set outweighs the others; plus digits odd (+1)
  vs even (-1);
* the same multi-class sets as multi-class problems (``<set>_multiclass``).

Names of tasks are their data set's name, ``<set>_<k>_vs_rest``, ``digits_odd_even`` and
``<set>_multiclass``. A set of ``BMM_DATA_DIR`` that is not there is left out with a note.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

#: today's nine binary sets (``--suite nine``)
NINE = ("breast_cancer", "diabetis", "flare_solar", "german", "heart", "splice", "waveform", "ringnorm", "moons")
#: binary sets of ``BMM_DATA_DIR`` in ``--suite all``
FILE_BINARY = ("breast_cancer", "diabetis", "flare_solar", "german", "heart", "splice", "waveform", "ringnorm",
               "ionosphere", "sonar", "wisconsin", "crabs", "usps_3vs5", "spambase", "toenail", "acath",
               "p53_proxy", "arcene", "leukemia")
#: multi-class sets of ``BMM_DATA_DIR`` (one-vs-rest binary tasks and multi-class problems)
FILE_MULTICLASS = ("dna", "satimage", "usps", "isolet")
#: scikit-learn's multi-class sets (``sklearn.datasets.load_<name>``)
SKLEARN_MULTICLASS = ("digits", "iris", "wine")
#: sets of ``BMM_DATA_DIR`` left out of ``--suite all``, and why
EXCLUDED = {
    "pima": "the same 768 rows as diabetis (which is pima standardised)",
    "dorothea": "88 119 sparse binary columns: dense they take 0.56 GB, and every peer's kernel and GPJax's "
                "88 119 ARD length-scales cost minutes per fit for one task of 800 rows",
}
#: every class of a multi-class set with at most this many classes becomes a binary task; above it
#: only the largest class does
OVR_ALL_MAX = 3
#: synthetic sets: the generator's arguments (``n`` rows; ``--quick``: :data:`QUICK_ROWS` rows)
SYNTHETIC = {
    "moons": dict(n=2000, noise=0.3),
    "circles": dict(n=1000, noise=0.2, factor=0.5),
    "xor": dict(n=1000, n_irrelevant=4, flip=0.05),
    "classif_informative": dict(n=3000, n_features=40, n_informative=30, n_redundant=5, n_clusters_per_class=3,
                                flip_y=0.03, random_state=0),
    "classif_sparse": dict(n=1000, n_features=50, n_informative=5, n_redundant=0, n_clusters_per_class=2,
                           flip_y=0.05, random_state=1),
    "classif_imbalanced": dict(n=2000, n_features=20, n_informative=10, n_redundant=2, weights=[0.9], flip_y=0.01,
                               random_state=2),
}
QUICK_ROWS = 200


class Task(NamedTuple):
    """One problem of the benchmark.

    Attributes
    ----------
    name : str
        Printed and written name.
    source : str
        The data set it is made from (a name of ``BMM_DATA_DIR``, ``wdbc``, one of
        :data:`SKLEARN_MULTICLASS` or of :data:`SYNTHETIC`).
    kind : {"binary", "multiclass"}
    positive : tuple
        For a binary task made from a multi-class set: the classes that are +1 (the rest are -1);
        empty for a set that is binary already.
    """

    name: str
    source: str
    kind: str
    positive: tuple = ()


def _xor(n: int, n_irrelevant: int, flip: float, random_state: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two features uniform on [-1, 1] with y = sign(x1 x2), ``n_irrelevant`` more uniform features,
    a fraction ``flip`` of the labels flipped at random."""
    rng = np.random.default_rng(random_state)
    X = rng.uniform(-1.0, 1.0, (n, 2 + n_irrelevant))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    return X, np.where(rng.random(n) < flip, -y, y)


def _synthetic(name: str, quick: bool) -> tuple[np.ndarray, np.ndarray]:
    from sklearn import datasets

    kw = dict(SYNTHETIC[name])
    n = QUICK_ROWS if quick else kw.pop("n")
    kw.pop("n", None)
    if name == "moons":
        X, y01 = datasets.make_moons(n_samples=n, random_state=0, **kw)
    elif name == "circles":
        X, y01 = datasets.make_circles(n_samples=n, random_state=0, **kw)
    elif name == "xor":
        return _xor(n, **kw)
    else:
        X, y01 = datasets.make_classification(n_samples=n, **kw)
    return X, np.where(y01 == 1, 1, -1)


@functools.lru_cache(maxsize=8)
def load_source(source: str, quick: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Features (float64, NaN where missing) and labels as stored of one data set (cached: the
    one-vs-rest tasks of a set share one load; do not modify the arrays)."""
    if source in SYNTHETIC:
        X, y = _synthetic(source, quick)
    elif source in SKLEARN_MULTICLASS:
        from sklearn import datasets

        X, y = getattr(datasets, f"load_{source}")(return_X_y=True)
    else:
        from bayes_maxmargin import load_dataset

        ds = load_dataset(source)
        X, y = ds.X, ds.y
    X, y = np.asarray(X, np.float64), np.asarray(y)
    X.flags.writeable = y.flags.writeable = False
    return X, y


def task_data(task: Task, quick: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The task's features and labels: +1 / -1 for a binary task, the classes as stored for a
    multi-class one."""
    X, y = load_source(task.source, quick)
    if task.positive:
        y = np.where(np.isin(y, task.positive), 1, -1)
    return X, y


def one_vs_rest_classes(y: np.ndarray, max_all: int = OVR_ALL_MAX) -> list[Any]:
    """The classes of ``y`` that become "class vs rest" binary tasks: all of them when there are at
    most ``max_all``, else the largest (the first in sorted order on a tie).

    Examples
    --------
    >>> one_vs_rest_classes(np.array([2, 1, 1, 3]))
    [1, 2, 3]
    >>> one_vs_rest_classes(np.array([4, 1, 2, 2, 3, 4]))
    [2]
    """
    classes, counts = np.unique(y, return_counts=True)
    keep = classes if len(classes) <= max_all else classes[[int(np.argmax(counts))]]
    return [c.item() for c in keep]


def _data_dir_has(name: str) -> bool:
    root = os.environ.get("BMM_DATA_DIR", "").strip()
    return bool(root) and (Path(root).expanduser() / name).is_dir()


def suite_tasks(suite: str, quick: bool = False) -> tuple[list[Task], dict[str, str]]:
    """The tasks of ``suite`` ("nine" or "all") and the sets left out, with the reason."""
    if suite == "nine":
        return [Task(name, name, "binary") for name in NINE], {}
    if suite != "all":
        raise ValueError(f"unknown suite {suite!r}; choose 'nine' or 'all'")
    left_out = {name: reason for name, reason in EXCLUDED.items()}
    missing = [s for s in (*FILE_BINARY, *FILE_MULTICLASS) if not _data_dir_has(s)]
    left_out |= {s: "not in BMM_DATA_DIR" for s in missing}
    binary = [Task(s, s, "binary") for s in FILE_BINARY if s not in missing]
    binary += [Task("wdbc", "wdbc", "binary")] + [Task(s, s, "binary") for s in SYNTHETIC]
    multi = [s for s in FILE_MULTICLASS if s not in missing] + list(SKLEARN_MULTICLASS)
    for s in multi:
        _, y = load_source(s, quick)
        binary += [Task(f"{s}_{k}_vs_rest", s, "binary", (k,)) for k in one_vs_rest_classes(y)]
    binary.append(Task("digits_odd_even", "digits", "binary", (1, 3, 5, 7, 9)))
    return binary + [Task(f"{s}_multiclass", s, "multiclass") for s in multi], left_out


def n_splits(n_train: int, splits: int, splits_large: int | None, large_rows: int) -> int:
    """``splits``, or at most ``splits_large`` above ``large_rows`` training rows (None: no cap).

    Examples
    --------
    >>> n_splits(2100, 20, 10, 3000), n_splits(3500, 20, 10, 3000), n_splits(3500, 2, 10, 3000)
    (20, 10, 2)
    """
    return min(splits, splits_large) if splits_large is not None and n_train > large_rows else splits


def scores_multiclass(y: np.ndarray, proba: np.ndarray, classes: np.ndarray) -> dict[str, float]:
    """Error of the most probable class, Brier score (the sum over the classes of the squared
    differences, halved: with two classes it is the binary Brier score), log loss (the probability of
    the true class clipped below at 1e-15, as the binary log loss) and top-label ECE
    (the largest probability against the hit rate, 10 equal-width bins, the binary top-label ECE's
    binning)."""
    from sklearn import metrics as skm

    from bayes_maxmargin.metrics import calibration_bins

    classes = np.asarray(classes)
    pred = classes[np.argmax(proba, axis=1)]
    hit = (pred == y).astype(np.float64)
    conf = np.max(proba, axis=1)
    _, _, counts, gaps = calibration_bins(conf, hit, 10)
    return {"error": float(1.0 - hit.mean()),
            "brier": float(skm.brier_score_loss(y, proba, labels=classes, scale_by_half=True)),
            "log_loss": float(-np.mean(np.log(np.clip(proba[np.arange(len(y)), np.searchsorted(classes, y)],
                                                      1e-15, 1.0)))),
            "ece": float(np.sum(counts * gaps) / len(y))}
