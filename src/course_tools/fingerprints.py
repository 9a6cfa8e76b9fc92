"""Fingerprints of what code does, not of how it is written, for the committed results.

A committed number goes stale when the code that computed it may compute another one. A
hash of the file's bytes says so after any edit, even a comment, and then a recompute of
every rung costs hours for nothing. `code_fingerprint` hashes the syntax tree instead, with
docstrings dropped: comments, blank lines, line breaks, quotes and docstrings never reach
it, while any change to a statement, a name or a constant does. Nor does a move: an import
is hashed by the name of the module it reads (`vocab`, wherever its package puts it), a run
of imports as a set (a linter re-sorts them when their packages change; none of the
course's modules does anything on import that another import could see), and each file by
its name. So moving modules between packages changes no fingerprint, while the moved
modules' own code is hashed as always. Data files are hashed byte for byte
(`file_fingerprint`): there every byte is behaviour.
"""

import ast
import functools
import hashlib
import itertools
from pathlib import Path

import torch
from torch import nn


def code_fingerprint(paths: list[Path]) -> str:
    """A sha256 of the files' syntax trees, docstrings left out, in the order of their names."""
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda path: path.name):
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
    """The source as its syntax tree, without docstrings, positions or the packages that the
    modules it imports live in: what Python runs."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):  # `from ..text.vocab import X` reads `vocab`
            node.module, node.level = (node.module or "").rpartition(".")[2], 0
        elif isinstance(node, ast.Import):  # `import toolkit.text.vocab as v` reads `vocab` too
            for alias in node.names:
                alias.name = alias.name.rpartition(".")[2]
    for node in ast.walk(tree):
        if isinstance(getattr(node, "body", None), list):
            node.body = _imports_sorted(node.body)
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and body and _is_docstring(body[0])):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree, annotate_fields=False, include_attributes=False)


def _imports_sorted(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements with each run of consecutive imports in one fixed order."""
    runs = itertools.groupby(body, key=lambda s: isinstance(s, ast.Import | ast.ImportFrom))
    return [statement for is_import, run in runs
            for statement in (sorted(run, key=ast.dump) if is_import else run)]


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))


def numeric_platform() -> str:
    """A fingerprint of how this machine rounds. The same code and seed give the same bits only
    where it matches: kernels differ with the CPU's vector instructions (AVX2, AVX-512), the
    BLAS and the PyTorch build, and every difference in the last bit grows over a training run.
    It runs a few of the operations training runs, on one thread, and hashes their bits."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(64, 96, generator=generator)  # (rows, features)
        weight = torch.randn(128, 96, generator=generator) / 10
        bias = torch.randn(128, generator=generator)
        y = nn.functional.linear(x, weight, bias)  # (rows, 128)
        heads = y.view(1, 4, 16, 128)  # (batch, heads, len, head_dim)
        results = [y, x @ x.T, y.softmax(-1), y.log_softmax(-1), y.exp().sum(-1),
                   nn.functional.layer_norm(y, (128,)), nn.functional.relu(y).sqrt(),
                   y.sum(0), nn.functional.scaled_dot_product_attention(heads, heads, heads)]
    finally:
        torch.set_num_threads(threads)
    digest = hashlib.sha256(b"".join(r.contiguous().numpy().tobytes() for r in results))
    return (f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
            f"{digest.hexdigest()[:12]}")
