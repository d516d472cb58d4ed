"""The package's jit: XLA options on top-level programs, plain tracing inside other programs, and no
options where XLA does not know them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayes_maxmargin.core import compilation
from bayes_maxmargin.core.compilation import jit


@pytest.fixture
def fresh_options(monkeypatch):
    """Forget the settled options (and settle them again after the test)."""
    compilation.compiler_options.cache_clear()
    yield monkeypatch
    compilation.compiler_options.cache_clear()


def test_top_level_and_nested_calls_compute_the_same():
    @jit
    def inner(x):
        return jnp.sin(x) * 2.0

    @jit
    def outer(x):
        return inner(x) + 1.0  # inside a trace: JAX refuses options on a nested jit

    x = jnp.arange(4.0)
    np.testing.assert_allclose(inner(x), 2.0 * np.sin(np.arange(4.0)), rtol=1e-6)
    np.testing.assert_allclose(outer(x), 2.0 * np.sin(np.arange(4.0)) + 1.0, rtol=1e-6)
    np.testing.assert_allclose(jax.vmap(inner)(x[:, None]), inner(x)[:, None], rtol=1e-6)
    assert compilation.compiler_options().items() <= compilation.COMPILER_OPTIONS.items()
    assert inner.options == compilation.compiler_options()
    assert inner._cache_size() == 1  # attributes of the jitted function pass through


def test_a_program_without_callbacks_is_inspected_as_the_one_that_runs():
    """A function first called under a progress reporter whose program holds no callback is served
    by that compilation afterwards; ``lower`` and the jitted attributes (``_cache_size``) describe
    that program, not a plain one that never ran."""
    from bayes_maxmargin.core import progress

    f = jit(lambda x: x * 2.0 + 1.0)
    with progress.Progress("test", 1):
        f(jnp.ones(3))
    np.testing.assert_array_equal(f(jnp.ones(3)), np.full(3, 3.0))
    assert f.serving is f._reporting.jitted
    assert f._cache_size() == 1  # one compilation served both calls
    assert "multiply" in f.lower(jnp.ones(3)).as_text()


def test_static_arguments_and_decorator_with_options():
    @jit(static_argnames=("power",))
    def f(x, power):
        return x**power

    assert float(f(3.0, power=2)) == 9.0
    assert float(f(3.0, power=3)) == 27.0
    assert f.__name__ == "f" and f._cache_size() == 2


def test_an_xla_without_the_option_gets_no_options(fresh_options):
    fresh_options.setattr(compilation, "COMPILER_OPTIONS", {"xla_no_such_option_anywhere": True})
    assert compilation.compiler_options() == {}

    @jit
    def g(x):
        return x + 1.0

    assert float(g(1.0)) == 2.0


def test_importing_the_package_starts_no_backend(cache_processes):
    """``jax.distributed.initialize`` and platform settings must still be possible after the import (checked
    in the first process of :func:`cache_processes`, right after its imports)."""
    first = cache_processes[0][0]  # the first process's lines
    assert first[0] == "backends after the import: []", first


def test_programs_can_keep_the_fusion_emitters_or_add_options(fresh_options):
    @jit(fusion_emitters=True)
    def fused(x):
        return x * 2.0

    @jit(compiler_options={"xla_backend_optimization_level": 0})
    def quick(x):
        return x * 3.0

    assert float(fused(1.0)) == 2.0 and float(quick(1.0)) == 3.0
    package = compilation.compiler_options()
    assert fused.options == {k: v for k, v in package.items() if k != "xla_cpu_use_fusion_emitters"}
    assert quick.options == {**package, "xla_backend_optimization_level": 0}
    assert quick.jitted is not quick._nested


def test_the_optimisation_level_follows_jax_disable_most_optimizations(fresh_options):
    """The per-program level would override a process's ``jax_disable_most_optimizations``."""
    if jax.default_backend() != "cpu":
        pytest.skip("the options are XLA:CPU's")
    before = jax.config.read("jax_disable_most_optimizations")
    try:
        for disabled in (False, True):
            jax.config.update("jax_disable_most_optimizations", disabled)
            compilation.compiler_options.cache_clear()
            options = compilation.compiler_options()
            assert options.get("xla_cpu_use_fusion_emitters") is (False if _knows_loop_emitters() else None)
            assert options.get("xla_backend_optimization_level") == (None if disabled else 1)
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


def _knows_loop_emitters() -> bool:
    """Whether this XLA:CPU still has the classic loop emitters (jaxlib 0.10; gone in 0.11)."""
    try:
        jax.jit(lambda x: x, compiler_options={"xla_cpu_use_fusion_emitters": False}).lower(np.float32(0)).compile()
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _knows_loop_emitters(), reason="this XLA:CPU has the fusion emitters only")
def test_the_projection_sampler_keeps_the_fusion_emitters():
    """Its L one-vs-all chains in one program compile twice as long with the loop emitters."""
    from bayes_maxmargin import MaxMarginProjection
    from bayes_maxmargin.engine import mcmc as driver

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), np.repeat([0, 1], 20)
    before = (driver._run_chunk._cache_size(), driver._run_chunk_fusion_emitters._cache_size())
    MaxMarginProjection(n_components=1, num_warmup=4, num_samples=4, random_state=0).fit(X + y[:, None], y)
    assert driver._run_chunk._cache_size() == before[0]
    assert driver._run_chunk_fusion_emitters._cache_size() == before[1] + 1


@pytest.fixture(scope="module")
def cache_processes(tmp_path_factory):
    """Two fresh processes fitting the same small LinearBSVM with use_compilation_cache(folder): the lines
    each printed (the backends started by importing the package and its command line, the fit's
    coefficients, the persistent-cache hits), and the folder. One pair of processes serves
    test_importing_the_package_starts_no_backend and test_library_fits_use_the_persistent_cache_when_asked."""
    import os
    import subprocess
    import sys

    cache = tmp_path_factory.mktemp("persistent") / "cache"
    script = (
        "from jax._src import xla_bridge\nimport bayes_maxmargin, bayes_maxmargin.cli\n"
        "print('backends after the import:', sorted(xla_bridge._backends))\n"
        "import jax, numpy as np, bayes_maxmargin as bmm\n"
        "hits = []\n"
        "jax.monitoring.register_event_listener(lambda e, **k: hits.append(e) if 'cache_hits' in e else None)\n"
        f"assert bmm.use_compilation_cache({str(cache)!r}) is not None\n"
        "rng = np.random.default_rng(0); X = rng.normal(size=(40, 3)); y = (X[:, 0] > 0).astype(int)\n"
        "print(bmm.LinearBSVM('em', max_iter=20).fit(X, y).coef_.tolist())\n"
        "print(len(hits))\n"
    )
    # XLA's expensive optimisation passes off, as in the test processes (both processes alike)
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
    runs = []
    for _ in range(2):
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        runs.append(res.stdout.split("\n"))
    return runs, cache


def test_library_fits_use_the_persistent_cache_when_asked(cache_processes):
    """use_compilation_cache(folder) in a script: the first process fills the folder, a second one
    fitting the same shapes loads its programs from there (cache hits) and fits the same."""
    runs, cache = cache_processes
    runs = [lines[1:] for lines in runs]  # after the line of the import check
    assert any(cache.iterdir())
    assert runs[1][0] == runs[0][0]  # the same fit
    assert int(runs[0][1]) == 0 and int(runs[1][1]) >= 1  # the second process loaded programs


def test_an_unwritable_cache_folder_warns_once_and_fits_go_on_without_the_cache(tmp_path, monkeypatch):
    from bayes_maxmargin import LinearBSVM, use_compilation_cache
    from bayes_maxmargin.core.compilation import CompilationCacheWarning

    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    (tmp_path / "a_file").write_text("")
    before = jax.config.jax_compilation_cache_dir
    with pytest.warns(CompilationCacheWarning, match=r"compilation cache folder .*a_file.*without the cache") as caught:
        assert use_compilation_cache(tmp_path / "a_file" / "cache") is None
    assert len(caught) == 1
    assert jax.config.jax_compilation_cache_dir == before  # the cache settings are left alone
    X = np.random.default_rng(0).normal(size=(30, 2))
    y = (X[:, 0] > 0).astype(int)
    assert LinearBSVM("em", max_iter=5).fit(X, y).score(X, y) > 0.8
