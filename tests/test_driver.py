"""The run driver: warm-up, thinning, chains, chunking invariance, non-finite states."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.engine.mcmc import NonFiniteStateError, run_chains


class CountState(NamedTuple):
    count: jax.Array
    x: jax.Array


def count_kernel(key, state, data, hyper):
    """Counts iterations and takes a Gaussian random-walk step; blows up after data['limit']."""
    x = state.x + hyper * jax.random.normal(key, state.x.shape)
    count = state.count + 1
    x = jnp.where(count > data["limit"], jnp.nan, x)
    return CountState(count, x), None


def record_count(state):
    return {"count": state.count, "x": state.x}


def _init(chains):
    return CountState(jnp.zeros(chains, jnp.int32), jnp.zeros((chains, 2)))


def test_warmup_thinning_and_layout():
    res = run_chains(
        count_kernel, record_count, _init(3), jax.random.PRNGKey(0), {"limit": 10**6}, 1.0,
        num_warmup=5, num_samples=4, thin=3, progress_bar=False,
    )
    # warm-up rounded up to whole thinning blocks: 2 blocks = 6 iterations, then a draw every 3
    np.testing.assert_array_equal(res.samples["count"], np.tile([9, 12, 15, 18], (3, 1)))
    assert res.samples["x"].shape == (3, 4, 2)
    assert res.num_iterations == 18
    # chains differ
    assert not np.allclose(res.samples["x"][0], res.samples["x"][1])


def test_draws_do_not_depend_on_chunking():
    kwargs = dict(num_warmup=7, num_samples=20, thin=2, progress_bar=False)
    args = (count_kernel, record_count, _init(2), jax.random.PRNGKey(1), {"limit": 10**6}, 0.5)
    whole = run_chains(*args, chunk_size=100, **kwargs)
    from bayes_maxmargin.engine import mcmc as driver

    size = driver._run_chunk._cache_size()
    pieces = run_chains(*args, chunk_size=3, **kwargs)  # 24 blocks: 8 chunks of 3, one program
    assert driver._run_chunk._cache_size() == size + 1
    np.testing.assert_array_equal(whole.samples["x"], pieces.samples["x"])
    np.testing.assert_array_equal(whole.final_state.x, pieces.final_state.x)
    np.testing.assert_array_equal(pieces.final_state.count, 48)  # 4 warm-up blocks + 20 draws, x 2: no extra
    odd = run_chains(*args, chunk_size=5, **kwargs)  # chunks of 5, the last one of 4
    np.testing.assert_array_equal(whole.samples["x"], odd.samples["x"])
    np.testing.assert_array_equal(odd.final_state.count, 48)


def test_accelerator_unrolling_gives_the_same_draws(monkeypatch):
    """The unrolled loops of an accelerator, run here on the CPU: the same draws, the blocks past
    the end of the last chunk discarded (the state counts its iterations)."""
    from bayes_maxmargin.engine import mcmc as driver

    kwargs = dict(num_warmup=7, num_samples=20, thin=2, progress_bar=False)
    args = (count_kernel, record_count, _init(2), jax.random.PRNGKey(1), {"limit": 10**6}, 0.5)
    plain = run_chains(*args, chunk_size=5, **kwargs)
    monkeypatch.setattr(driver, "_unroll", lambda: driver.ACCELERATOR_UNROLL)
    for chunk_size in (5, 100):  # 24 blocks: chunks of 5 (the last one of 4), one chunk of 24
        unrolled = run_chains(*args, chunk_size=chunk_size, **kwargs)
        # the same keys and blocks; the unrolled program may round the float32 normals differently
        np.testing.assert_allclose(unrolled.samples["x"], plain.samples["x"], rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(unrolled.final_state.count, 48)


@pytest.mark.parametrize("blocks, chunk_size, length", [(24, 5, 5), (24, 100, 24), (1001, 1000, 501), (250, 250, 250),
                                                        (251, 250, 126), (1, 250, 1)])
def test_chunks_are_of_equal_length(blocks, chunk_size, length):
    from bayes_maxmargin.engine.mcmc import _chunk_length

    assert _chunk_length(blocks, chunk_size) == length


def test_nonfinite_state_names_chain_iteration_and_variable():
    with pytest.raises(NonFiniteStateError, match=r"chain 0 produced a non-finite value of 'x' at iteration 13"):
        run_chains(
            count_kernel, record_count, _init(2), jax.random.PRNGKey(0), {"limit": 13}, 1.0,
            num_warmup=0, num_samples=40, chunk_size=5, progress_bar=False,
        )


class CountInfo(NamedTuple):
    iteration: jax.Array
    moved_right: jax.Array
    unused: jax.Array | None = None  # a field a kernel leaves None is not recorded


def info_kernel(key, state, data, hyper):
    """:func:`count_kernel` that also reports its iteration number and a per-chain flag as Info."""
    new, _ = count_kernel(key, state, data, hyper)
    return new, CountInfo(new.count, (new.x[0] > state.x[0]).astype(jnp.int32))


def test_kernel_info_is_kept_per_draw():
    """Info (a NamedTuple) of the iteration that produced each kept draw, laid out (chain, draw); chunking
    and thinning do not change it, and a kernel without Info gives an empty dict."""
    kwargs = dict(num_warmup=5, num_samples=4, thin=3, progress_bar=False)
    args = (record_count, _init(3), jax.random.PRNGKey(0), {"limit": 10**6}, 1.0)
    res = run_chains(info_kernel, *args, **kwargs)
    assert set(res.info) == {"iteration", "moved_right"}
    np.testing.assert_array_equal(res.info["iteration"], res.samples["count"])
    assert res.info["moved_right"].shape == (3, 4) and set(np.unique(res.info["moved_right"])) <= {0, 1}
    chunked = run_chains(info_kernel, *args, chunk_size=1, **kwargs)
    np.testing.assert_array_equal(chunked.info["moved_right"], res.info["moved_right"])
    plain = run_chains(count_kernel, *args, **kwargs)
    assert plain.info == {}
    np.testing.assert_array_equal(plain.samples["x"], res.samples["x"])  # Info changes no draw


# ------------------------------------------------------------------ the host loop shared by sampling and SVI
def _drive(total, period, *, done=0, seconds=None, stop_after=None, fail_at=None, monkeypatch=None, exits=None):
    """drive() on a run of ``total`` units whose chunks are recorded; ``seconds(chunk)`` the time a chunk
    reports (through a patched shorter_length), ``stop_after`` the chunk start after which it stops early,
    ``fail_at`` the chunk start at which advance raises."""
    from bayes_maxmargin.engine import driver
    from bayes_maxmargin.engine.checkpoint import StopRequest

    chunks, periods, exits = [], [], [] if exits is None else exits
    if seconds is not None:
        real = driver.shorter_length
        monkeypatch.setattr(driver, "shorter_length", lambda length, _: real(length, seconds(chunks[-1])))

    def advance(chunk):
        if chunk.start == fail_at:
            raise RuntimeError("chunk failed")
        chunks.append(chunk)
        return chunk.start == stop_after

    stop = StopRequest()
    out = driver.drive(advance, stop, total=total, done=done, period=period, unit=3, at_period=periods.append,
                       at_exit=exits.append)
    return out, chunks, periods, exits, stop


def test_drive_cuts_the_run_at_its_periods_and_calls_back_there():
    done, chunks, periods, exits, stop = _drive(10, 4)
    assert [(c.start, c.length, c.size) for c in chunks] == [(0, 4, 4), (4, 4, 4), (8, 4, 2)]
    assert periods == [4, 8, 10] and exits == [10] and done == 10 and stop.resume_at == 30


def test_drive_resumes_from_done_and_counts_periods_from_there():
    done, chunks, periods, exits, _ = _drive(10, 4, done=3)
    assert [(c.start, c.size) for c in chunks] == [(3, 4), (7, 3)] and periods == [7, 10] and exits == [10]


def test_slow_chunks_shorten_without_crossing_a_period(monkeypatch):
    """A chunk that takes 8 target-lengths makes the next ones shorter (a power of two); no chunk crosses a
    multiple of the period, where the checkpoint is written."""
    done, chunks, periods, _, _ = _drive(16, 8, seconds=lambda c: 8.0 if c.start == 0 else 0.1,
                                         monkeypatch=monkeypatch)
    assert [(c.start, c.length, c.size) for c in chunks] == [(0, 8, 8), (8, 1, 1)] + [(s, 1, 1) for s in range(9, 16)]
    assert periods == [8, 16]


def test_an_early_stop_calls_back_once_and_an_error_still_exits():
    done, chunks, periods, exits, _ = _drive(12, 4, stop_after=4)
    assert done == 8 and periods == [4, 8] and exits == [8]
    exits = []
    with pytest.raises(RuntimeError, match="chunk failed"):
        _drive(12, 4, fail_at=8, exits=exits)
    assert exits == [8]  # what a stopped run leaves is written after an error too
