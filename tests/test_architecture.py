"""The package's structure: families are pure graders, and no import cycle.

Imports are read from the source (every ``import`` statement, those under ``TYPE_CHECKING``
too): a cycle that only the type checker follows is still a knot a reader must untie.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from verifier.checks import FAMILIES
from verifier.checks.registry import NEEDS
from verifier.config import FAMILY_NAMES, RunConfig

PACKAGE = Path(__file__).resolve().parent.parent / "verifier"


def module_name(path: Path) -> str:
    """The dotted name of a module file of the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """The package modules `name` imports (a name imported from a package counts as its
    submodule when there is one)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in MODULES else source)
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: imports_of(name) for name in MODULES}
FAMILY_MODULES = {f"verifier.checks.{name}" for name in FAMILIES.names()}


def test_the_import_reader_sees_imports() -> None:
    assert "verifier.checks.support.common" in GRAPH["verifier.checks.tool_calling"]
    assert "verifier.protocol.requests" in GRAPH["verifier.run.executor"]
    assert FAMILY_MODULES <= set(MODULES)


def imported_across(package: str, forbidden: tuple[str, ...]) -> set[tuple[str, str]]:
    """The (module, import) pairs where a module of `package` imports one of `forbidden`."""
    return {
        (name, target)
        for name, targets in GRAPH.items()
        if name.startswith(package)
        for target in targets
        if target.startswith(forbidden)
    }


def test_no_module_in_checks_reaches_the_network_the_run_or_the_scorecard() -> None:
    forbidden = ("verifier.endpoint", "verifier.run", "verifier.scorecard")
    assert imported_across("verifier.checks", forbidden) == set()


def test_no_family_imports_another() -> None:
    crossed = {
        (name, target)
        for name in FAMILY_MODULES | {m for m in MODULES if m.startswith("verifier.checks.")}
        for target in GRAPH[name] & FAMILY_MODULES
        if target != name
    }
    assert crossed == set()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: its strongly connected components of two or more (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_has_no_import_cycle() -> None:
    assert cycles(GRAPH) == []


def test_the_plugins_family_names_are_the_registrys() -> None:
    # config holds the names so that the plugin registers markers and options without
    # importing the families (start-up time); the registry is where families are defined.
    # (A plugin's families join the registry during its run; the built-in ones are these.)
    built_in = {f.name for f in FAMILIES if f.run.__module__.startswith("verifier.checks.")}
    assert built_in == set(FAMILY_NAMES)


def string_constants(name: str) -> set[str]:
    """Every string literal in module `name`'s source."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def test_the_run_names_no_family() -> None:
    # What a family needs before, during and after a run it declares in its registration
    # (registry.Family), so the run's modules carry no family's name.
    named = {
        (name, family)
        for name in MODULES
        if name.startswith("verifier.run.")
        for family in string_constants(name) & set(FAMILY_NAMES)
    }
    assert named == set()


def test_the_run_finds_out_at_its_start_what_its_families_need() -> None:
    run = RunConfig(
        endpoint="http://127.0.0.1:9",
        model=None,
        api_key_env="KEY",
        families=FAMILIES.names(),
        repeats=None,
        seed=1,
        timeout=1.0,
        max_retries=0,
        retry_backoff=0.0,
        out_dir=Path("out"),
        resume=False,
        negative=1,
    )
    assert FAMILIES.needs(run) == NEEDS
    # The generated bad requests send an image only when they run.
    assert FAMILIES.needs(dataclasses.replace(run, families=("wire",))) == {"images"}
    assert FAMILIES.needs(dataclasses.replace(run, families=("wire",), negative=0)) == set()


def test_no_module_name_repeats_across_packages() -> None:
    # A name says what a module holds wherever it is read (a traceback, an import line); a
    # command's module is named after its command, a family's after its family.
    allowed = {
        "defects": {"verifier.cli.defects", "verifier.simulator.defects"},
        "profiles": {"verifier.cli.profiles", "verifier.reference.profiles"},
    }
    by_name: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        by_name.setdefault(path.stem, set()).add(module_name(path))
    repeated = {
        stem: modules
        for stem, modules in by_name.items()
        if len(modules) > 1 and stem != "__init__" and allowed.get(stem) != modules
    }
    assert repeated == {}


def test_the_scorecard_is_built_without_the_rooms_that_read_it() -> None:
    # Comparing, rendering and running read scorecards; building one needs none of them.
    readers = ("verifier.compare", "verifier.render", "verifier.run", "verifier.cli")
    assert imported_across("verifier.scorecard", readers) == set()
