"""What Windows and macOS do differently, simulated here on Linux: text from a child process
in a code page other than UTF-8, a lock without fcntl, a log.csv that another program holds
open, and an Apple GPU whose work is queued."""

import ast
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from filelock import FileLock, Timeout

from course_tools.paper_run import one_at_a_time
from toolkit.train import run_log, time_budget
from toolkit.train.run_log import RunLog, read_log

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py"),
                  ROOT / "course.py"])
SUBPROCESS_CALLS = {"run", "Popen", "check_output", "check_call", "call"}


def text_calls_without_encoding(path: Path) -> list[str]:
    """subprocess calls that read or write text in the system's code page: on Windows that is
    cp1252, and Node's or torchrun's UTF-8 "schön, groß" comes back as "schÃ¶n, groÃŸ"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in SUBPROCESS_CALLS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"):
            continue
        named = {keyword.arg: keyword.value for keyword in node.keywords}
        texts = any(isinstance(named.get(name), ast.Constant) and named[name].value is True
                    for name in ("text", "universal_newlines"))
        if texts and "encoding" not in named:
            where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            found.append(f"{where}:{node.lineno}")
    return found


def test_every_subprocess_that_reads_text_names_utf8():
    assert [call for path in SOURCES for call in text_calls_without_encoding(path)] == []


def test_the_check_itself_finds_a_call_in_the_code_page(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import subprocess\nsubprocess.run(['node'], capture_output=True, "
                       "text=True)\nsubprocess.run(['node'], text=True, encoding='utf-8')\n",
                       encoding="utf-8")
    assert text_calls_without_encoding(planted) == [f"{planted}:2"]


def test_the_kept_runs_lock_holds_without_fcntl(tmp_path, monkeypatch):
    """On Windows there is no fcntl: the lock must hold there too (fails where the code
    falls back to no lock at all when `import fcntl` fails)."""
    monkeypatch.setitem(sys.modules, "fcntl", None)  # import fcntl now raises ImportError
    lock = tmp_path / "run.lock"
    taken = []
    with one_at_a_time(lock):
        def other_process():
            try:
                FileLock(lock).acquire(timeout=0.2)
                taken.append(True)
            except Timeout:
                taken.append(False)
        thread = threading.Thread(target=other_process)
        thread.start()
        thread.join()
    assert taken == [False]
    with FileLock(lock, timeout=5):  # and it is let go at the end
        pass


def test_a_log_held_open_elsewhere_warns_once_and_training_goes_on(tmp_path, monkeypatch,
                                                                    capsys):
    """Windows refuses os.replace over a file another program has open: the run warns once,
    keeps its rows, and writes them all once the file is free again."""
    log = RunLog(tmp_path)
    real_replace = run_log.os.replace

    def held(source, target):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(run_log.os, "replace", held)
    log.add(step=1, loss=2.0)
    log.add(step=2, loss=1.5)
    log.draw()
    warnings = capsys.readouterr().err
    assert warnings.count("cannot be replaced") == 1 and "open in another program" in warnings
    assert not list(tmp_path.glob("*.partial*"))
    monkeypatch.setattr(run_log.os, "replace", real_replace)
    log.add(step=3, loss=1.0)
    assert [row["step"] for row in read_log(tmp_path / "log.csv")] == [1, 2, 3]


def test_the_clock_waits_for_an_apple_gpu(monkeypatch):
    """MPS queues work as CUDA does: a probe step timed without waiting times the queueing."""
    waited = []
    monkeypatch.setattr(torch.mps, "synchronize", lambda: waited.append("mps"))
    monkeypatch.setattr(time_budget, "now", lambda: 7.0)
    assert time_budget.clock(SimpleNamespace(device=torch.device("mps"))) == 7.0
    assert waited == ["mps"]
    assert time_budget.clock(SimpleNamespace(device=torch.device("cpu"))) == 7.0
    assert waited == ["mps"]


@pytest.mark.slow  # starts a Python to print the text, in Node's place
@pytest.mark.parametrize("text", ["schön, groß", "你好"])
def test_node_reads_back_what_it_was_given_in_utf8(text, tmp_path, monkeypatch):
    """With a cp1252 default (as on Windows), Node's UTF-8 answer must still read as sent."""
    import subprocess

    from toolkit.web import node_runner

    seen = {}
    real_run = subprocess.run

    def windows_run(command, **options):
        seen.update(options)
        done = real_run([sys.executable, "-c", f"print({text!r})"], capture_output=True)
        encoding = options.get("encoding") or "cp1252"
        return subprocess.CompletedProcess(command, 0, done.stdout.decode(
            encoding, errors="replace"), "")

    monkeypatch.setattr(node_runner.subprocess, "run", windows_run)
    monkeypatch.setattr(node_runner.json, "loads", lambda out: out.strip())
    assert node_runner.run_in_node(tmp_path / "model.js", [text], 1) == text
    assert seen["encoding"] == "utf-8"
