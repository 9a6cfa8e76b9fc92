"""Fingerprints of what code does, not of how it is written, for the committed results.

A committed number goes stale when the code that computed it may compute another one. A
hash of the file's bytes says so after any edit, even a comment, and then a recompute of
every rung costs hours for nothing. `code_fingerprint` hashes the syntax tree instead, with
docstrings dropped: comments, blank lines, line breaks, quotes and docstrings never reach
it, while any change to a statement, a name or a constant does.

The tree is written out by `canonical`, a walk of our own, never by `ast.dump`, whose output
changes with the interpreter (3.12 gives every function and class an empty `type_params`;
3.13 leaves empty fields out): node types and their non-empty fields, by field name. So the
same code has the same fingerprint on every Python the course supports.

An import is hashed by the full name of the module it reads, a relative one resolved against
the importing module, and each file under its module's name: `from toolkit.text.vocab import X`
and `from elsewhere.vocab import X` differ. A run of imports is hashed in sorted order (a
linter re-sorts them), unless it binds one name twice, where the last one wins and the order is
behaviour. A module moved to another package is recorded in `MOVED`, new name to the name it
had when the committed results were stamped, and is hashed under its old name: the move
costs no recompute, while its code is hashed as always. Data files are hashed byte for byte
(`file_fingerprint`): there every byte is behaviour.
"""

import ast
import functools
import hashlib
import itertools
from pathlib import Path

# Modules moved since the committed results were stamped: new dotted name -> the old one. Add
# a line when moving a module (or a package: its modules follow), so the move costs nothing.
MOVED: dict[str, str] = {}


def code_fingerprint(paths: list[Path], root: Path) -> str:
    """A sha256 of the files' syntax trees, docstrings left out, each under its module's name
    below `root` (`src/toolkit/text/vocab.py` under `src` is `toolkit.text.vocab`)."""
    modules = {as_stamped(module_name(path, root)): path for path in paths}
    if len(modules) < len(set(paths)):  # a recorded move onto a module that exists again
        names = sorted(module_name(path, root) for path in paths)
        raise ValueError(f"two of these modules are hashed under one name ({MOVED}): "
                         f"{names}; a module now stands where a moved one stood: drop that "
                         f"line of MOVED")
    digest = hashlib.sha256()
    for module in sorted(modules):
        path = modules[module]
        importer = ".".join(path.relative_to(root).with_suffix("").parts)  # pkg.__init__ too
        digest.update(module.encode() + b"\0" + behaviour(path.read_text("utf-8"), importer)
                      .encode() + b"\0")
    return digest.hexdigest()


def file_fingerprint(paths: list[Path]) -> str:
    """A sha256 of the files' bytes, in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def module_name(path: Path, root: Path) -> str:
    """The dotted name a file is imported by when `root` is on the path; a package's
    `__init__.py` is the package."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def as_stamped(module: str, moved: tuple[tuple[str, str], ...] | None = None) -> str:
    """The name a module had when the committed results were stamped (`MOVED`)."""
    for new, old in MOVED.items() if moved is None else moved:
        if module == new or module.startswith(new + "."):
            return old + module[len(new):]
    return module


def resolve(module: str | None, level: int, importer: str) -> str:
    """The absolute name `from <level dots><module> import ...` reads inside `importer` (a
    package's own `__init__` named as `package.__init__`)."""
    if not level:
        return module or ""
    package = importer.split(".")[:-1]
    base = package[:len(package) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def behaviour(source: str, module: str = "") -> str:
    """The source as its syntax tree, without docstrings or positions, imports by their full
    names (`module` is the file's own dotted name, `package.__init__` for a package, to resolve
    its relative imports): what Python runs, written the same way by every interpreter."""
    return _behaviour(source, module, tuple(MOVED.items()))


@functools.lru_cache(maxsize=1024)  # keyed by the text itself, so an edit is never missed
def _behaviour(source: str, module: str, moved: tuple[tuple[str, str], ...]) -> str:
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            node.module = as_stamped(resolve(node.module, node.level or 0, module), moved)
            node.level = 0
        elif isinstance(node, ast.Import):
            for alias in node.names:
                alias.name = as_stamped(alias.name, moved)
    for node in ast.walk(tree):
        if isinstance(getattr(node, "body", None), list):
            node.body = _imports_sorted(node.body)
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and body and _is_docstring(body[0])):
            node.body = body[1:] or [ast.Pass()]
    return canonical(tree)


def canonical(node: object) -> str:
    """A syntax tree as text: each node's type and its non-empty fields, by field name. Fields
    an interpreter adds empty (or leaves out when empty) never show, nor does an f-string's
    empty text; positions are attributes, not fields, and never show either."""
    if isinstance(node, ast.AST):
        fields = sorted(((name, _without_empty_text(node, name, value)) for name in node._fields
                         if (value := getattr(node, name, None)) is not None and value != []),
                        key=lambda field: field[0])
        return f"{type(node).__name__}({', '.join(f'{n}={canonical(v)}' for n, v in fields)})"
    if isinstance(node, list):
        return f"[{', '.join(canonical(item) for item in node)}]"
    return repr(node)


def _without_empty_text(node: ast.AST, name: str, value: object) -> object:
    """An f-string's parts without empty text: 3.12.1 writes `f"{x:<{w}}"`'s format spec with
    a trailing `Constant('')` that 3.11 and 3.13 leave out, and an empty part prints nothing."""
    if isinstance(node, ast.JoinedStr) and name == "values":
        return [part for part in value
                if not (isinstance(part, ast.Constant) and part.value == "")]
    return value


def _imports_sorted(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements with each run of consecutive imports in one fixed order, unless the run
    binds a name twice: then the last binding wins, and the order stays."""
    runs = itertools.groupby(body, key=lambda s: isinstance(s, ast.Import | ast.ImportFrom))
    return [statement for is_import, run in runs
            for statement in (_sorted_if_unambiguous(list(run)) if is_import else run)]


def _sorted_if_unambiguous(imports: list[ast.stmt]) -> list[ast.stmt]:
    bound = [(alias.asname or alias.name).split(".")[0]
             for statement in imports for alias in statement.names]
    return imports if len(bound) != len(set(bound)) else sorted(imports, key=canonical)


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))
