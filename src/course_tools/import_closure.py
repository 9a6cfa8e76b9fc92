"""The code a committed number depends on, found the way Python finds it: a job's import closure.

A hand-kept list of "the training code" misses whatever nobody thought to add: the data path,
the module that runs the job, a new helper. Here the course's modules a job runs are found by
following its imports from the job's own modules: every import anywhere in a file (inside
functions too), relative ones resolved, with the packages on the way (their `__init__` runs)
and the names a package exports lazily (`toolkit.lazy_exports`) followed to the module that
holds them. An import under `if TYPE_CHECKING:` runs nothing and is left out. What a job
imports from outside the course and the standard library is kept by its top-level name
(`torch`, `tokenizers`), for the library versions a row is stamped with.
"""

import ast
import functools
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from course_tools.fingerprints import resolve

COURSE = ("stages", "toolkit", "course_tools", "course_site")


@dataclass(frozen=True)
class Closure:
    """The course's modules a job runs, and the other libraries they import."""

    modules: frozenset[str]  # dotted names
    libraries: frozenset[str]  # top-level import names, the standard library left out

    def files(self, src: Path) -> list[Path]:
        return sorted(module_file(module, src) for module in self.modules)


def module_file(module: str, src: Path) -> Path | None:
    """The file a course module is read from under `src`, if there is one."""
    path = src.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def closure(roots: Iterable[str], src: Path, ignore: frozenset[str] = frozenset()) -> Closure:
    """Every course module that importing `roots` (dotted names) runs, however indirectly,
    their packages included; the modules in `ignore` neither count nor are followed."""
    return _follow({".".join(root.split(".")[:i]) for root in roots
                    for i in range(1, len(root.split(".")) + 1)}, src, ignore=ignore)


def closure_of_file(path: Path, src: Path, follow: bool = True,
                    within: tuple[str, ...] = COURSE) -> Closure:
    """The same for a file outside the packages, such as a test: what it imports, followed
    (or, with `follow=False`, only what the file itself imports), through the packages
    `within` only (the others' modules are left out, as libraries are)."""
    modules, libraries = _imports(path.read_text("utf-8"), "", src, within)
    if not follow:
        return Closure(frozenset(modules), frozenset(libraries))
    found = _follow(modules, src, within)
    return Closure(found.modules, found.libraries | libraries)


def _follow(waiting: set[str], src: Path, within: tuple[str, ...] = COURSE,
            ignore: frozenset[str] = frozenset()) -> Closure:
    reached: set[str] = set(ignore)
    waiting = waiting - ignore
    libraries: set[str] = set()
    while waiting:
        module = waiting.pop()
        reached.add(module)
        path = module_file(module, src)
        if path is None:
            raise ModuleNotFoundError(f"no module {module} under {src}")
        importer = f"{module}.__init__" if path.name == "__init__.py" else module
        modules, outside = _imports(path.read_text("utf-8"), importer, src, within)
        waiting |= modules - reached
        libraries |= outside
    return Closure(frozenset(reached - ignore), frozenset(libraries))


def _imports(source: str, importer: str, src: Path,
             within: tuple[str, ...] = COURSE) -> tuple[set[str], set[str]]:
    """The course modules (with their packages) and the outside libraries one file imports."""
    modules: set[str] = set()
    libraries: set[str] = set()
    for name in _imported_names(source, importer, src):
        top = name.split(".")[0]
        if top in within:
            parts = name.split(".")
            modules |= {prefix for i in range(1, len(parts) + 1)
                        if module_file(prefix := ".".join(parts[:i]), src)}
        elif top and top not in COURSE and top not in sys.stdlib_module_names:
            libraries.add(top)
    return modules, libraries


def _imported_names(source: str, importer: str, src: Path) -> Iterator[str]:
    """Each module a file's imports name: `from a import b` names `a`, and `a.b` where that
    is a module or a name `a` exports lazily from one; `import a` names every module `a`
    exports from lazily, since any of them may be read as `a.name`."""
    for module, level, names in _import_statements(source):
        if names is None:  # import a.b.c: any name a.b.c exports lazily may be read from it
            yield module
            yield from (f"{module}.{home}" for home in set(lazy_exports(module, src).values()))
            continue
        base = resolve(module, level, importer)
        yield base
        lazy = lazy_exports(base, src)
        for name in names:
            if module_file(f"{base}.{name}", src):
                yield f"{base}.{name}"
            elif name in lazy:
                yield f"{base}.{lazy[name]}"


@functools.lru_cache(maxsize=1024)  # keyed by the text itself, so an edit is never missed
def _import_statements(source: str) -> tuple[tuple[str, int, tuple[str, ...] | None], ...]:
    """(module, level, imported names) for each `from` import that runs, (module, 0, None) for
    each name of a plain `import`."""
    found = []
    for node in _running_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level or 0,
                          tuple(alias.name for alias in node.names)))
    return tuple(found)


def _running_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node of the tree but those under `if TYPE_CHECKING:`, which never run."""
    yield node
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _running_nodes(other)
        else:
            yield from _running_nodes(child)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def lazy_exports(package: str, src: Path) -> dict[str, str]:
    """The names a package offers through `toolkit.lazy_exports`, each with its module's
    name: `{"Vocab": "vocab"}` for `toolkit.text`."""
    path = module_file(package, src) if package.split(".")[0] in COURSE else None
    if path is None or path.name != "__init__.py":
        return {}
    return _lazy_names(path.read_text("utf-8"))


@functools.lru_cache(maxsize=64)
def _lazy_names(source: str) -> dict[str, str]:
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "lazy_exports"
                and len(node.args) == 2 and isinstance(node.args[1], ast.Dict)):
            by_module = ast.literal_eval(node.args[1])
            return {name: module for module, names in by_module.items() for name in names}
    return {}
