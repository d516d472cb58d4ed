"""The stored NUTS reference posteriors (tests/reference): each still belongs to its model program,
a changed program is detected, and a live NUTS run reproduces a stored one."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ._posterior import assert_posteriors_agree
from .reference import PROBLEMS, load_reference, reference_path, run_reference

# the cheapest problem: its live NUTS run keeps run_nuts itself under test in the default suite
LIVE = "linear_synthetic_gamma"


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_stored_reference_matches_its_program(name):
    """Every file exists, its guard draws have the log density the current program gives them, and
    its draws are (chain, draw, ...) arrays of the sizes the tests compare."""
    ref = load_reference(name)
    prob = PROBLEMS[name]
    shape = (prob.nuts["num_chains"], prob.nuts["num_samples"])
    assert ref.draws and all(v.shape[:2] == shape and np.isfinite(v).all() for v in ref.draws.values())
    assert reference_path(name).stat().st_size < 400_000


def test_a_changed_program_makes_the_reference_stale(monkeypatch):
    """A model whose log density moved (here the prior scale of the coefficients, by 0.1 %) fails
    the guard with the regeneration command in the message."""
    prob = PROBLEMS[LIVE]

    def build():
        args, kwargs = prob.build()
        return args, {**kwargs, "sigma": kwargs["sigma"] * 1.001}

    monkeypatch.setitem(PROBLEMS, LIVE, dataclasses.replace(prob, build=build))
    with pytest.raises(AssertionError, match=f"(?s)stale reference .*make_references {LIVE}"):
        load_reference(LIVE)


def _live_agrees(name):
    live, _, stats = run_reference(name)
    ref = load_reference(name)
    # Divergent transitions are rare events of a chaotic trajectory: on another CPU or jaxlib the last
    # bits, and with them which transitions diverge, change, so the counts agree only as counts of the
    # same rate: given n = live + stored divergences, each is Binomial(n, 1/2) when the rates are equal,
    # so |live - stored| <= 4 sqrt(n) (two-sided 6e-5; with none stored, at most 16 live).
    diverging = int(stats["diverging"].sum())
    assert abs(diverging - ref.diverging) <= 4.0 * np.sqrt(diverging + ref.diverging), (diverging, ref.diverging)
    symmetric = PROBLEMS[name].sign_symmetric
    live, draws = ({k: np.abs(v) if k in symmetric else v for k, v in d.items()} for d in (live, ref.draws))
    assert_posteriors_agree(live, draws, list(draws))


@pytest.mark.slow
def test_live_nuts_reproduces_the_stored_reference():
    """run_nuts on the program, with the problem's key and settings, reproduces the stored draws'
    means within 4 MCSE and sds within 10 % (on the machine that made them, the very same draws; on
    another, draws of another path, which agree in distribution)."""
    _live_agrees(LIVE)


@pytest.mark.extended
@pytest.mark.parametrize("name", sorted(set(PROBLEMS) - {LIVE}))
def test_live_nuts_reproduces_every_stored_reference(name):
    _live_agrees(name)
