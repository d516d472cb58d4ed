"""Smoke tests of benchmarks/vs_peers.py: ``--quick`` runs in a subprocess (without GPJax) writing
every metric of every model, the SUSY-like run's error records, and the script's small helpers."""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
#: every model of the script but GPJax (an optional peer)
MODELS = ["gpbsvm", "ecm", "fitc", "svi", "vi", "gibbs", "linear", "gpc", "svc_platt", "logreg"]
METRICS = ["error", "brier", "log_loss", "ece", "first_fit_s", "second_fit_s"]


def _script():
    spec = importlib.util.spec_from_file_location("vs_peers", BENCH / "vs_peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(out_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "BMM_GPJAX_PYTHON"}  # GPJax only where gpjax is here
    proc = subprocess.run([sys.executable, str(BENCH / "vs_peers.py"), "--quick", "--out-dir", str(out_dir), *args],
                          capture_output=True, text=True, timeout=1200, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.benchmark
def test_vs_peers_quick_has_every_metric_of_every_model(tmp_path):
    root = Path(os.environ.get("BMM_DATA_DIR", ""))
    if not os.environ.get("BMM_DATA_DIR") or not (root / "flare_solar").is_dir():
        pytest.skip("needs BMM_DATA_DIR with flare_solar")
    proc = _run(tmp_path, "--datasets", "flare_solar", "--splits", "1", "--models", *MODELS)
    out = json.loads((tmp_path / "vs_peers_quick.json").read_text())
    assert {"machine", "config", "versions", "rows", "summary", "skipped"} <= set(out)
    assert out["skipped"] == [] and out["config"]["quick"] is True
    assert [r["model"] for r in out["rows"]] == MODELS
    assert [s["model"] for s in out["summary"]] == MODELS
    for r in out["rows"]:
        assert r["dataset"] == "flare_solar" and r["split"] == 0 and r["n_train"] + r["n_test"] == 144
        assert all(math.isfinite(r[k]) for k in METRICS), r
        assert 0 <= r["error"] <= 1 and 0 <= r["brier"] <= 1 and 0 <= r["ece"] <= 1 and r["log_loss"] > 0, r
        assert r["first_fit_s"] > 0 and r["second_fit_s"] > 0
        assert isinstance(r["warnings"], list) and len(r["warnings"]) <= 5
    # GPBSVM() at its defaults on flare_solar's 100 training rows: ECM, its link cross-fitted
    rows = {r["model"]: r for r in out["rows"]}
    assert rows["gpbsvm"]["inference"] == "ecm" and rows["svi"]["inference"] == "svi"
    assert "## flare_solar" in proc.stdout and "| svc_platt |" in proc.stdout
    # one split: a ratio, no interval
    ratios = {r["metric"]: r for r in out["ratios"]}
    best = min(("gpc", "svc_platt"), key=lambda m: rows[m]["error"])
    assert ratios["error"]["ratio"] == pytest.approx(rows["gpbsvm"]["error"] / rows[best]["error"])
    assert ratios["error"]["low"] is None and ratios["error"]["high"] is None
    assert "## gpbsvm / the best of" in proc.stdout


@pytest.mark.benchmark
def test_vs_peers_susy_quick_records_the_error_along_the_steps(tmp_path):
    proc = _run(tmp_path, "--susy", "1000", "--susy-records", "4", "--models", "svi")
    (row,) = json.loads((tmp_path / "vs_peers_susy_quick.json").read_text())["susy_rows"]
    assert row["model"] == "svi" and row["n_train"] == 1000 and row["steps"] == 200
    steps = [c["steps"] for c in row["curve"]]
    assert len(steps) >= 4 and steps == sorted(steps) and steps[-1] == 200
    assert row["final_error"] == row["curve"][-1]["error"]
    # the records classify by the sign of the latent mean, the fitted estimator through its learnt link
    assert abs(row["final_scores"]["error"] - row["final_error"]) < 0.02
    assert 0 < row["time_to_final_s"] <= row["train_s"] <= row["fit_s"]
    assert "SUSY-like" in proc.stdout


@pytest.mark.benchmark
def test_vs_peers_skips_gpjax_with_a_note_when_it_is_missing(tmp_path):
    if importlib.util.find_spec("gpjax") is not None:
        pytest.skip("gpjax is installed")
    proc = _run(tmp_path, "--datasets", "moons", "--splits", "1", "--models", "gpjax", "logreg")
    assert "gpjax is not available" in proc.stdout and "--gpjax-python" in proc.stdout
    out = json.loads((tmp_path / "vs_peers_quick.json").read_text())
    assert out["skipped"] == ["gpjax"] and [r["model"] for r in out["rows"]] == ["logreg"]
    assert out["rows"][0]["n_train"] == 140


def _rows(table):
    """vs_peers rows from {model: [error of split 0, 1, ...]} of one data set."""
    return [{"dataset": "d", "split": s, "model": m, "error": e} for m, errs in table.items()
            for s, e in enumerate(errs)]


def test_ratio_to_best_peer_is_against_the_best_peer_mean_with_a_paired_interval():
    script = _script()
    # gpc is the best peer on average (0.25 against 0.26); logreg is not a peer
    table = {"gpbsvm": [0.20, 0.32, 0.26], "gpc": [0.30, 0.20, 0.25], "svc_platt": [0.20, 0.32, 0.26],
             "logreg": [0.0, 0.0, 0.0]}
    (r,) = script.ratios_to_best_peer(_rows(table), ("error",))
    assert r["best_peer"] == "gpc" and r["ratio"] == pytest.approx(0.26 / 0.25) and r["splits"] == 3
    # the per-split differences against gpc are -0.10, 0.12, 0.01: mean 0.01, sd 0.11; t(2) at 95 % is 2.920
    half = 2.919986 * 0.11 / 3**0.5
    assert r["low"] == pytest.approx(1 + (0.01 - half) / 0.25, abs=1e-5)
    assert r["high"] == pytest.approx(1 + (0.01 + half) / 0.25, abs=1e-5)
    # paired: ours equal to a peer on every split is exactly 1, however much the splits differ
    (same,) = script.ratios_to_best_peer(_rows({"gpbsvm": [0.1, 0.3, 0.2], "gpjax": [0.1, 0.3, 0.2]}), ("error",))
    assert same["ratio"] == same["low"] == same["high"] == 1.0
    # a wider level gives a wider interval around the same ratio
    (wide,) = script.ratios_to_best_peer(_rows(table), ("error",), level=0.99)
    assert wide["low"] < r["low"] < r["ratio"] < r["high"] < wide["high"]


def test_ratio_to_best_peer_counts_only_the_splits_every_model_has():
    script = _script()
    rows = _rows({"gpbsvm": [0.2, 0.3, 0.4], "gpc": [0.2, 0.3]}) + _rows({"other": [0.5]})
    (r,) = script.ratios_to_best_peer(rows, ("error",))
    assert r["splits"] == 2 and r["ratio"] == pytest.approx(1.0)
    assert script.ratios_to_best_peer(_rows({"gpbsvm": [0.2], "logreg": [0.1]}), ("error",)) == []
    assert script.ratios_to_best_peer(_rows({"gpc": [0.2]}), ("error",)) == []


def test_chunk_length_divides_the_steps():
    worker = _worker()
    assert worker.chunk_length(4000, 40) == 100
    assert worker.chunk_length(1001, 40) == 77  # 1001 = 7 * 11 * 13: the smallest divisor >= 26
    assert worker.chunk_length(7, 40) == 1 and worker.chunk_length(13, 1) == 13


# ---------------------------------------------------------------------------
# the GPJax worker's protocol (without gpjax)
# ---------------------------------------------------------------------------


def _worker():
    _script()  # puts benchmarks/ on sys.path
    import _gpjax_worker as worker

    return worker


def _serve(worker, requests: list[tuple[dict, dict]]) -> list[tuple[dict, dict]]:
    """The answers of :func:`_gpjax_worker.serve` to ``requests``, through in-memory streams."""
    inp, out = io.BytesIO(), io.BytesIO()
    for meta, arrays in requests:
        worker.write_message(inp, worker.encode(meta, arrays))
    inp.seek(0)
    worker.serve(inp, out)
    out.seek(0)
    answers = []
    while True:
        try:
            answers.append(worker.decode(worker.read_message(out)))
        except EOFError:
            return answers


def test_gpjax_worker_messages_round_trip_and_reject_what_they_cannot_carry():
    worker = _worker()
    meta = {"op": "fit", "lengthscale": 0.1 + 0.2, "num_steps": 250, "nested": {"a": [1, None]}}
    arrays = {"X": np.random.default_rng(0).normal(size=(7, 3)), "y": np.array([-1, 1, 1, -1, 1, -1, 1]),
              "empty": np.zeros((0, 4), np.float32)}
    back, got = worker.decode(worker.encode(meta, arrays))
    assert back == meta and back["lengthscale"] == 0.1 + 0.2  # JSON keeps a float64 exactly
    assert set(got) == set(arrays)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and np.array_equal(got[k], v)
    with pytest.raises(ValueError, match="'__meta__'"):
        worker.encode({"op": "echo"}, {"__meta__": np.zeros(1)})
    with pytest.raises(ValueError, match="'bad'"):
        worker.encode({"op": "echo"}, {"bad": np.array([{}], dtype=object)})
    stream = io.BytesIO()
    worker.write_message(stream, b"abc")
    cut = io.BytesIO(stream.getvalue()[:-1])
    with pytest.raises(EOFError, match="2 of 3 bytes"):
        worker.read_message(cut)


def test_gpjax_worker_answers_in_order_reports_errors_and_stops_at_exit():
    worker = _worker()
    answers = _serve(worker, [({"op": "echo", "n": 3}, {"X": np.eye(2)}), ({"op": "nope"}, {}),
                              ({"op": "predict", "id": 5}, {"X": np.eye(2)}), ({"op": "exit"}, {}),
                              ({"op": "echo"}, {})])
    assert len(answers) == 3  # nothing after exit
    (echo, arrays), (unknown, _), (predict, _) = answers
    assert echo == {"op": "echo", "n": 3} and np.array_equal(arrays["X"], np.eye(2))
    assert unknown["error"].startswith("ValueError: unknown op 'nope'")
    assert predict["error"].startswith("KeyError") and "no fitted model 5" in predict["error"]
    # the worker imports no part of the package (its environment has another jax)
    tree = ast.parse(Path(worker.__file__).read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(m.split(".")[0] in ("bayes_maxmargin", "_common", "_suite", "vs_peers") for m in modules)


def test_gpjax_not_available_is_a_note_with_the_setup_and_the_worker_gets_the_threads(monkeypatch):
    script = _script()
    if importlib.util.find_spec("gpjax") is None:  # a worker of this interpreter: gpjax does not import there
        worker, note = script.start_gpjax(sys.executable, 1)
        assert worker is None and "'hello': ModuleNotFoundError: No module named 'gpjax'" in note
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    assert script.gpjax_python(None, {}) is None
    assert script.gpjax_python(None, {"BMM_GPJAX_PYTHON": "/env/python"}) == "/env/python"
    assert script.gpjax_python("/opt/python", {"BMM_GPJAX_PYTHON": "/env/python"}) == "/opt/python"
    worker, note = script.start_gpjax(None, 1)
    assert worker is None and "neither --gpjax-python nor BMM_GPJAX_PYTHON" in note
    assert '"gpjax==1.0.0" "jax<0.11"' in note and note.startswith("note: gpjax is not available")
    worker, note = script.start_gpjax(str(Path("/nonexistent") / "python"), 1)
    assert worker is None and "/nonexistent/python does not run" in note
    env = script.thread_env(1, {"XLA_FLAGS": "--xla_dump_to=/tmp/d", "PATH": "/bin"})
    assert env["PATH"] == "/bin" and env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/d --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    assert script.thread_env(2, {})["MKL_NUM_THREADS"] == "2" and "XLA_FLAGS" not in script.thread_env(2, {})
    with pytest.raises(RuntimeError, match="no GPJax worker is running"):
        script.GPJaxSVGP().fit(np.zeros((4, 2)), np.array([-1, 1, -1, 1]))


def test_reached_is_the_first_record_within_half_a_point():
    script = _script()
    curve = [{"steps": 10, "seconds": 1.0, "error": 0.30}, {"steps": 20, "seconds": 2.0, "error": 0.204},
             {"steps": 30, "seconds": 3.0, "error": 0.19}, {"steps": 40, "seconds": 4.0, "error": 0.20}]
    assert script._reached(curve) == {"final_error": 0.20, "time_to_final_s": 2.0, "steps_to_final": 20,
                                      "train_s": 4.0}


def test_svi_default_steps_are_twenty_epochs_within_bounds():
    """GPJax runs GPBSVM()'s number of steps: 20 epochs, at least 250 with the RBF kernel below 600 rows
    and 1000 with ARD + Constant from 600 rows, at most 100 000; the same as the estimator's fit."""
    script = _script()
    assert [script.svi_default_steps(n, 5) for n in (100, 599, 600, 7000, 200_000, 10**7)] == [
        250, 250, 1000, 1400, 40_000, 100_000]


# ---------------------------------------------------------------------------
# --suite all: the suite, its scores, its ratios, its rows file
# ---------------------------------------------------------------------------


def _suite():
    _script()  # puts benchmarks/ on sys.path, where vs_peers imports _suite from
    import _suite as suite

    return suite


#: (rows, features, classes) of every task of --suite all (meta.json of BMM_DATA_DIR; scikit-learn's
#: sets; the synthetic generators' arguments)
SUITE_SHAPES = {
    "breast_cancer": (263, 9, 2), "diabetis": (768, 8, 2), "flare_solar": (144, 9, 2), "german": (1000, 20, 2),
    "heart": (270, 13, 2), "splice": (2991, 60, 2), "waveform": (5000, 21, 2), "ringnorm": (7400, 20, 2),
    "ionosphere": (351, 34, 2), "sonar": (208, 60, 2), "wisconsin": (683, 9, 2), "crabs": (200, 7, 2),
    "usps_3vs5": (1540, 256, 2), "spambase": (4601, 57, 2), "toenail": (1908, 3, 2), "acath": (3504, 4, 2),
    "p53_proxy": (250, 1000, 2), "arcene": (200, 10000, 2), "leukemia": (72, 7129, 2), "wdbc": (569, 30, 2),
    "moons": (2000, 2, 2), "circles": (1000, 2, 2), "xor": (1000, 6, 2), "classif_informative": (3000, 40, 2),
    "classif_sparse": (1000, 50, 2), "classif_imbalanced": (2000, 20, 2),
    **{f"dna_{k}_vs_rest": (3186, 180, 2) for k in (1, 2, 3)}, "satimage_1_vs_rest": (6435, 36, 2),
    "usps_0_vs_rest": (9298, 256, 2), "isolet_1_vs_rest": (7797, 617, 2), "digits_3_vs_rest": (1797, 64, 2),
    **{f"iris_{k}_vs_rest": (150, 4, 2) for k in range(3)}, **{f"wine_{k}_vs_rest": (178, 13, 2) for k in range(3)},
    "digits_odd_even": (1797, 64, 2), "dna_multiclass": (3186, 180, 3), "satimage_multiclass": (6435, 36, 6),
    "usps_multiclass": (9298, 256, 10), "isolet_multiclass": (7797, 617, 26), "digits_multiclass": (1797, 64, 10),
    "iris_multiclass": (150, 4, 3), "wine_multiclass": (178, 13, 3),
}


def test_suite_all_lists_every_task_with_its_shape():
    suite = _suite()
    tasks, left_out = suite.suite_tasks("all")
    names = [t.name for t in tasks]
    assert len(names) == len(set(names))
    assert {"pima", "dorothea"} <= set(left_out)
    # in this order; without (part of) the data folder only the sets there, the built-in and synthetic ones
    assert names == [k for k in SUITE_SHAPES if k in names]
    builtin = [k for k in SUITE_SHAPES if k.split("_")[0] in ("wdbc", "moons", "circles", "xor", "classif", "digits",
                                                              "iris", "wine")]
    assert set(builtin) <= set(names)
    if "not in BMM_DATA_DIR" not in left_out.values():
        assert len(names) == len(SUITE_SHAPES) >= 25
    _check_shapes(suite, [t for t in tasks if t.source not in WIDE_FILES])
    # the nine sets are today's, binary
    nine, _ = suite.suite_tasks("nine")
    assert [t.name for t in nine] == list(suite.NINE) and {t.kind for t in nine} == {"binary"}


#: the slowest files to read (10 000 and 7 129 columns), checked by the extended test only
WIDE_FILES = ("arcene", "leukemia")


def _check_shapes(suite, tasks):
    for t in tasks:
        X, y = suite.task_data(t)
        n, d, k = SUITE_SHAPES[t.name]
        assert X.shape == (n, d) and y.shape == (n,) and len(set(y.tolist())) == k, t.name
        assert t.kind == ("multiclass" if k > 2 else "binary"), t.name
        if k == 2:
            assert set(y.tolist()) == {-1, 1}, t.name


@pytest.mark.extended
def test_suite_all_wide_sets_load_with_their_shapes():
    suite = _suite()
    tasks = [t for t in suite.suite_tasks("all")[0] if t.source in WIDE_FILES]
    if not tasks:
        pytest.skip("needs BMM_DATA_DIR with arcene and leukemia")
    _check_shapes(suite, tasks)


def test_one_vs_rest_is_every_class_of_up_to_three_else_the_largest():
    suite = _suite()
    assert suite.one_vs_rest_classes(np.array([3, 1, 2, 2])) == [1, 2, 3]
    assert suite.one_vs_rest_classes(np.array([4, 1, 2, 3, 3, 4, 4])) == [4]
    assert suite.one_vs_rest_classes(np.array([4, 1, 2, 3, 3, 4])) == [3]  # a tie: the first in sorted order
    assert suite.n_splits(3000, 20, 10, 3000) == 20 and suite.n_splits(3001, 20, 10, 3000) == 10
    assert suite.n_splits(5000, 20, None, 3000) == 20


def test_multiclass_scores_with_two_classes_are_the_binary_scores():
    script, suite = _script(), _suite()
    rng = np.random.default_rng(0)
    y = rng.choice([-1, 1], 200)
    p = rng.uniform(0.01, 0.99, 200)
    binary = script.scores(y, p)
    multi = suite.scores_multiclass(y, np.column_stack([1 - p, p]), np.array([-1, 1]))
    # the same quantities by two routes: equal up to float64 rounding of sums of 200 terms
    assert multi == pytest.approx(binary, rel=1e-12, abs=1e-14)
    # three classes: a certain right answer scores 0, a certain wrong one the worst Brier score (1)
    proba = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert suite.scores_multiclass(np.array([0, 1]), proba, np.array([0, 1, 2]))["brier"] == 0.0
    worst = suite.scores_multiclass(np.array([2, 2]), proba, np.array([0, 1, 2]))
    assert worst["error"] == 1.0 and worst["brier"] == 1.0 and worst["ece"] == 1.0
    assert worst["log_loss"] == pytest.approx(-np.log(1e-15))


def test_paired_ratio_handles_a_zero_peer_and_time_ratios_pair_the_splits():
    script = _script()
    assert script.paired_ratio(np.zeros(3), np.zeros(3)) == (1.0, 1.0, 1.0)
    assert script.paired_ratio(np.zeros(1), np.zeros(1)) == (1.0, None, None)
    assert script.paired_ratio(np.array([0.1, 0.0]), np.zeros(2)) == (math.inf, None, None)
    rows = [{"dataset": "d", "split": s, "model": m, "first_fit_s": t, "second_fit_s": t / 2}
            for s in range(3) for m, t in (("gpbsvm", 1.0 + s), ("gpc", 2.0 + s), ("gpjax", 4.0))][:-1]
    out = {(r["peer"], r["metric"]): r for r in script.time_ratios(rows)}
    # gpc: 1 s (0.5 s) slower on every split: mean 2 over mean 3, no spread in the paired differences
    # (rel: a few float64 roundings); gpjax: splits 0 and 1 only (its split 2 is missing)
    for metric in ("first_fit_s", "second_fit_s"):
        r = out["gpc", metric]
        assert r["ratio"] == pytest.approx(2 / 3, rel=1e-12) and r["splits"] == 3
        assert r["low"] == pytest.approx(2 / 3, rel=1e-12) and r["high"] == pytest.approx(2 / 3, rel=1e-12)
    assert out["gpjax", "first_fit_s"]["ratio"] == pytest.approx(1.5 / 4) and out["gpjax", "first_fit_s"]["splits"] == 2


def test_ratio_names_the_skipped_peers_and_geometric_means_count_the_intervals():
    script = _script()
    rows = _rows({"gpbsvm": [0.2, 0.3], "svc_platt": [0.1, 0.15]})
    (r,) = script.ratios_to_best_peer(rows, ("error",), skipped={("d", "gpc"): "n_train 5180 > --gpc-max-train 2000"})
    assert r["best_peer"] == "svc_platt" and r["ratio"] == pytest.approx(2.0)
    assert r["without"] == {"gpc": "n_train 5180 > --gpc-max-train 2000", "gpjax": "not run"}
    means = script.geometric_means([{"metric": "error", "ratio": 2.0, "low": 1.5, "high": 2.5},
                                    {"metric": "error", "ratio": 0.5, "low": 0.4, "high": 0.6},
                                    {"metric": "error", "ratio": math.inf, "low": None, "high": None}])
    assert means == {"error": {"geomean": pytest.approx(1.0), "sets": 2, "worse": 1, "better": 1}}
    table = script.ratio_tables([{"name": "d", "n_train": 10, "splits": 2}], [r], [])
    assert "| d (10, 2) | 2.000 [" in table and " svc_platt |" in table and "gpc: n_train 5180" in table


def test_split_fills_missing_cells_from_the_training_part():
    script = _script()
    X = np.column_stack([np.arange(20.0), np.where(np.arange(20) % 4 == 0, np.nan, 1.0 + np.arange(20))])
    y = np.repeat([-1, 1], 10)
    Xtr, Xte, ytr, yte = script.split(X, y, 0)
    # one indicator column for the one column with missing cells; every cell finite; standardised
    assert Xtr.shape == (14, 3) and Xte.shape == (6, 3) and np.isfinite(Xtr).all() and np.isfinite(Xte).all()
    assert np.allclose(Xtr.mean(0), 0.0, atol=1e-12)


def test_rows_file_drops_a_cut_line_and_thread_flags_are_set(tmp_path, monkeypatch):
    script = _script()
    path = tmp_path / "rows.jsonl"
    script.append_row(path, {"header": {"quick": True, "threads": 1}})
    script.append_row(path, {"dataset": "d", "split": 0, "model": "gpc", "error": 0.1})
    path.write_text(path.read_text() + '{"dataset": "d", "spl')
    assert script.read_rows(path) == ({"quick": True, "threads": 1},
                                      [{"dataset": "d", "split": 0, "model": "gpc", "error": 0.1}])
    assert script.threads_from_argv(["--suite", "all", "--threads", "3"]) == 3
    assert script.threads_from_argv(["--threads=2"]) == 2 and script.threads_from_argv(["--threads", "x"]) == 1
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true --xla_dump_to=/tmp/d")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    script.set_thread_env(1)
    assert os.environ["XLA_FLAGS"] == ("--xla_dump_to=/tmp/d --xla_cpu_multi_thread_eigen=false "
                                       "intra_op_parallelism_threads=1")
    assert os.environ["OPENBLAS_NUM_THREADS"] == os.environ["OMP_NUM_THREADS"] == "1"


@pytest.mark.benchmark
def test_vs_peers_suite_all_resumes_where_it_stopped(tmp_path):
    args = ["--suite", "all", "--datasets", "iris_multiclass", "wine_0_vs_rest", "--splits", "2",
            "--models", "gpbsvm", "gpjax", "logreg", "--tag", "t"]
    _run(tmp_path, *args)
    rows_file = tmp_path / "vs_peers_all_quick_t.rows.jsonl"
    lines = rows_file.read_text().splitlines()
    assert len(lines) == 1 + 2 * 2 * 2  # the header, 2 tasks x 2 splits x 2 models (gpjax skipped)
    rows_file.write_text("\n".join(lines[:-3]) + "\n")  # as if stopped during the last split
    proc = _run(tmp_path, *args, "--resume")
    assert "resuming: 5 rows" in proc.stdout and proc.stdout.count(" split ") == 3
    out = json.loads((tmp_path / "vs_peers_all_quick_t.json").read_text())
    assert len(out["rows"]) == 8 and out["config"]["refit"] == "jax" and out["threads"]["threads"] == 1
    assert {(r["dataset"], r["model"]) for r in out["rows"] if r["model"] == "logreg" and r.get("refit") is False}
    multi = [r for r in out["rows"] if r["dataset"] == "iris_multiclass"]
    assert all(r["kind"] == "multiclass" and 0 <= r["error"] <= 1 for r in multi)
    assert any(s["model"] == "gpjax" for s in out["skipped_runs"]) or out["skipped"] == ["gpjax"]


def test_a_failed_fit_is_recorded_and_not_retried_on_resume(tmp_path, monkeypatch):
    script = _script()
    calls = []

    def fake_run_model(name, seed, quick, Xtr, ytr, Xte, yte, refit=True):
        calls.append((name, seed))
        if name == "gpc" and seed == 1:
            raise FloatingPointError("no fit")
        return {"model": name, "error": 0.1, "brier": 0.1, "log_loss": 0.3, "ece": 0.05, "first_fit_s": 1.0,
                "second_fit_s": 1.0, "warnings": []}

    monkeypatch.setattr(script, "run_model", fake_run_model)
    args = ["--suite", "all", "--datasets", "iris_multiclass", "--splits", "2", "--models", "gpc", "logreg",
            "--out-dir", str(tmp_path), "--tag", "f"]
    out = script.main(args)
    assert calls == [("gpc", 0), ("logreg", 0), ("gpc", 1), ("logreg", 1)]
    assert [(r["model"], r["split"]) for r in out["failed_runs"]] == [("gpc", 1)]
    assert out["failed_runs"][0]["failed"] == "FloatingPointError: no fit" and len(out["rows"]) == 3
    # the ratio counts the splits every model has (gpbsvm did not run here: none)
    assert out["ratios"] == []
    calls.clear()
    again = script.main([*args, "--resume"])
    assert calls == [] and len(again["rows"]) == 3 and len(again["failed_runs"]) == 1


def test_report_fits_nothing_and_tables_the_rows_as_they_stand(tmp_path, monkeypatch, capsys):
    script = _script()
    calls = []

    def fake_run_model(name, seed, quick, Xtr, ytr, Xte, yte, refit=True):
        calls.append((name, seed))
        error = 0.1 if name == "gpbsvm" else 0.2
        return {"model": name, "error": error, "brier": error, "log_loss": 0.3, "ece": 0.05, "first_fit_s": 1.0,
                "second_fit_s": 1.0, "warnings": []}

    monkeypatch.setattr(script, "run_model", fake_run_model)
    args = ["--suite", "all", "--datasets", "iris_0_vs_rest", "--splits", "3", "--models", "gpbsvm", "gpc",
            "--out-dir", str(tmp_path), "--tag", "r"]
    with pytest.raises(SystemExit, match="no rows"):
        script.main([*args, "--report"])
    script.main(args)
    rows_file = tmp_path / "vs_peers_all_r.rows.jsonl"
    rows_file.write_text("\n".join(rows_file.read_text().splitlines()[:-2]) + "\n")  # stopped before split 2
    calls.clear()
    capsys.readouterr()
    out = script.main([*args, "--report"])
    assert calls == [] and len(out["rows"]) == 4
    error = next(r for r in out["ratios"] if r["metric"] == "error")
    assert error["splits"] == 2 and error["ratio"] == pytest.approx(0.5)
    # the table names the splits compared, not the splits the run will have
    assert "| iris_0_vs_rest (105, 2) | 0.500" in capsys.readouterr().out


def test_targets_met_measures_every_model_against_the_best_of_the_other_peers():
    script = _script()
    # per split: gpbsvm 4 % above svc_platt, gpc 30 % above it, gpjax level with it
    rows = [{"dataset": "d", "split": s, "model": m, "error": e * base, "brier": e * base}
            for s, base in enumerate([0.10, 0.12, 0.11, 0.09])
            for m, e in (("gpbsvm", 1.04), ("gpc", 1.3), ("gpjax", 1.0), ("svc_platt", 1.0))]
    met = {(r["model"], r["metric"]): r for r in script.targets_met(rows)}
    # a constant per-split ratio has a zero-width interval: the ratio is its own upper bound
    assert met[("gpbsvm", "error")] == {"model": "gpbsvm", "metric": "error", "tasks": 1, "high_met": 1,
                                        "mean_met": 1}
    assert (met[("gpc", "error")]["high_met"], met[("gpc", "error")]["mean_met"]) == (0, 0)
    # each of gpjax and svc_platt is level with the other, the best of its others
    assert met[("gpjax", "brier")]["high_met"] == met[("svc_platt", "brier")]["high_met"] == 1
