"""Fingerprints of what code does, not of how it is written, for the committed results.

A committed number goes stale when the code that computed it may compute another one. A
hash of the file's bytes says so after any edit, even a comment, and then a recompute of
every rung costs hours for nothing. `code_fingerprint` hashes the syntax tree instead, with
docstrings dropped: comments, blank lines, line breaks, quotes and docstrings never reach
it, while any change to a statement, a name or a constant does. Data files are hashed byte
for byte (`file_fingerprint`): there every byte is behaviour.
"""

import ast
import functools
import hashlib
from pathlib import Path


def code_fingerprint(paths: list[Path]) -> str:
    """A sha256 of the files' syntax trees, docstrings left out, in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode() + b"\0" + behaviour(path.read_text("utf-8")).encode())
    return digest.hexdigest()


def file_fingerprint(paths: list[Path]) -> str:
    """A sha256 of the files' bytes, in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=256)  # keyed by the text itself, so an edit is never missed
def behaviour(source: str) -> str:
    """The source as its syntax tree, without docstrings or positions: what Python runs."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and body and _is_docstring(body[0])):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))
