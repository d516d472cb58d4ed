"""The package's layers point down only: core <- engine <- models <- estimators <- experiments / cli.

Every import statement of every module, at any depth (imports inside functions count), is checked.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bayes_maxmargin"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The package modules that ``path`` imports (``from a.b import c`` counts as ``a.b`` and ``a.b.c``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; the package uses absolute imports")
    return {name for name in found if name == "bayes_maxmargin" or name.startswith("bayes_maxmargin.")}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


MODULES = {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}

#: What each layer may import from the package, besides itself and ``bayes_maxmargin._version``.
ALLOWED = {
    "core": set(),
    "engine": {"core"},
    "models": {"core", "engine"},
}


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_lower_layers_import_only_below(layer: str) -> None:
    wrong = {
        module: sorted(name for name in imported
                       if _layer(name) not in ALLOWED[layer] | {layer, "_version"} and name != "bayes_maxmargin")
        for module, imported in MODULES.items() if _layer(module) == layer
    }
    wrong = {module: names for module, names in wrong.items() if names}
    assert not wrong, f"{layer} imports from above its layer: {wrong}"


def test_only_the_top_imports_the_package_root() -> None:
    """``from bayes_maxmargin import x`` runs the package's ``__init__``: an upward import below the top."""
    wrong = sorted(module for module, imported in MODULES.items()
                   if "bayes_maxmargin" in imported and _layer(module) not in ("", "experiments", "cli"))
    assert not wrong, f"modules importing the package root: {wrong}"


def test_only_cli_imports_experiments_or_cli() -> None:
    wrong = {
        module: sorted(name for name in imported if _layer(name) in ("experiments", "cli"))
        for module, imported in MODULES.items() if _layer(module) not in ("experiments", "cli")
    }
    wrong = {module: names for module, names in wrong.items() if names}
    assert not wrong, f"modules importing experiments or cli: {wrong}"


def test_the_check_sees_every_layer() -> None:
    layers = {_layer(module) for module in MODULES}
    assert {"core", "engine", "models", "estimators", "data", "experiments", "cli"} <= layers
    assert sum(_layer(m) == "models" for m in MODULES) >= 20


def _module_level_imports(path: Path) -> set[str]:
    """:func:`_imports` of the statements at the top of the module (run when it is imported)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {name for name in found if name.startswith("bayes_maxmargin.")}


def test_no_module_imports_itself_back_when_imported() -> None:
    """No cycle among the imports a module runs when it is imported. ``from a import b`` reads ``a``'s namespace,
    which a cycle could leave half built, so it counts ``a`` as well as ``a.b``."""
    graph = {_module_name(p): _module_level_imports(p) & set(MODULES) for p in sorted(PACKAGE.rglob("*.py"))}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for name in sorted(graph[module] - {module}):
            assert state.get(name) != 1, f"import cycle: {' -> '.join(path[path.index(name):] + [name])}"
            if name not in state:
                visit(name, path + [name])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_no_import_cycle_at_any_depth() -> None:
    """Counting imports inside functions too, no module imports one that imports it back (directly or through
    others): e.g. the kernels and their parameter machinery, where the containers declare their fields and
    the machinery reads the declarations (``core.kernels`` imports ``core.parameters``, never the reverse)."""
    graph = {module: (imported & set(MODULES)) - {module} for module, imported in MODULES.items()}
    reach: dict[str, set[str]] = {}

    def reachable(module: str) -> set[str]:
        if module not in reach:
            reach[module] = set()  # a module reached again while its own set is being built: the cycle below finds it
            found = set(graph[module])
            for name in graph[module]:
                found |= reachable(name)
            reach[module] = found
        return reach[module]

    cycles = sorted(module for module in graph if module in reachable(module))
    assert not cycles, f"modules on an import cycle: {cycles}"
