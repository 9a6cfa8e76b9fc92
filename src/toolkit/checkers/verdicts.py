"""How a checker speaks: a pass, or `NotYet` with a hint told in steps, and what every
checker needs.

A hint has three parts. The first failure of a mistake names its symptom only, what is wrong
in the output ("row 3 can see position 5"), so the learner gets to think; the same mistake
again, in the same checker and the same kernel, adds its cause; the third time adds the fix,
the API or the line to use. A different mistake starts its own count, and so does the untouched
stub's placeholder, wherever a checker recognises it (`fail_on`'s `stub`).

An error raised inside the learner's function, which no checker recognises as a slip it
explains, is shown as theirs (`Raised`): its message and their line, never the checker's frames.
"""

import functools
import importlib
import pkgutil
import sys
import sysconfig
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import BuiltinFunctionType, FrameType, FunctionType, TracebackType
from typing import NamedTuple

import torch

import stages


class NotYet(Exception):
    """A wrong answer, shown as its hint alone: a traceback into the checker would only hide it."""

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return [f"\N{BALLOT X} Not yet: {self}"]


class Cause(NamedTuple):
    """Why an output is wrong (told the second time) and what to write instead (the third)."""

    why: str
    fix: str


# What each step adds at its end while more help is left to give.
MORE = {1: " (run the check again for more help)", 2: " (run it once more for the fix)"}


class Hint(NamedTuple):
    """A wrong output in three parts: its symptom, its cause, and the fix (both may be empty)."""

    symptom: str
    why: str = ""
    fix: str = ""

    def because(self, cause: Cause | None) -> "Hint":
        """The same symptom, explained by a mistake recognised elsewhere (None keeps this one)."""
        return self if cause is None else Hint(self.symptom, *cause)

    @property
    def mistake(self) -> str:
        """What makes two failures the same mistake: its cause, free of the case's numbers."""
        return self.why or self.symptom

    def told(self, step: int) -> str:
        """The hint as the step-th failure of its mistake tells it: 1, 2, then 3 and on."""
        said = [("Why", self.why), ("Fix", self.fix)][: step - 1]
        parts = [self.symptom, *(f"{label}: {text}" for label, text in said if text)]
        more = any([self.why, self.fix][step - 1:])  # what a later step would add
        # A symptom may quote torch's message, which ends with a full stop of its own.
        told = ". ".join([*(part.removesuffix(".") for part in parts[:-1]), parts[-1]])
        return told + (MORE[step] if more else "")

    def __str__(self) -> str:  # the whole hint, as a test's failed assertion shows it
        return self.told(3)


class Mistake(Exception):
    """A failed case inside a checker; `exercise` turns it into `NotYet`, told at its step."""

    def __init__(self, case: str, hint: Hint):
        super().__init__(f"{case}: {hint}")
        self.case, self.hint = case, hint


# (checker, mistake) -> how many times this process has told it.
_TOLD: Counter[tuple[str, str]] = Counter()


def forget() -> None:
    """Tell every mistake from its symptom again, as a fresh kernel would (the tests do)."""
    _TOLD.clear()


def _tell(checker: str, mistake: Mistake) -> NotYet:
    key = (checker, mistake.hint.mistake)
    _TOLD[key] += 1
    return NotYet(f"{mistake.case}: {mistake.hint.told(_TOLD[key])}")


def fail_on(problem: Hint | None, case: str, stub: Cause | None = None) -> None:
    """Raise the problem, if there is one. `stub`: its cause when the output is the untouched
    stub's placeholder, so that the stub's count is its own and a real mistake made after it
    starts from its symptom."""
    if problem is not None:
        raise Mistake(case, problem.because(stub))


def passed(name: str, cases: str) -> None:
    print(f"\N{CHECK MARK} {name}: correct on {cases}.")


def name_of(fn: Callable) -> str:
    return getattr(fn, "__name__", "your function")


def random_tensor(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- answers that call the answer ------------------------------------------------------

def in_every_stage(name: str) -> tuple[object, ...]:
    """A stage's function or class under this name, from every stage that has one: each
    stage is self-contained, so each holds its own copy of the answer."""
    modules = (importlib.import_module(f"stages.{module.name}")
               for module in pkgutil.iter_modules(stages.__path__))
    return tuple(getattr(module, name) for module in modules if hasattr(module, name))


def _runs(reference: object) -> list[object]:
    """What runs when a reference is used: a function's code, the code of a class's methods,
    or a builtin itself (torch's kernels are C functions)."""
    if isinstance(reference, type):
        return [ran for member in vars(reference).values()
                for ran in _runs(getattr(member, "__func__", member))
                if not isinstance(member, type)]
    if isinstance(reference, FunctionType):
        return [reference.__code__]
    return [reference] if isinstance(reference, BuiltinFunctionType) else []


def _public_name(reference: object) -> str:
    """The name a learner would write: torch.nn.MultiheadAttention, not its module's path."""
    module = reference.__module__
    if module.startswith("torch.nn.modules."):
        module = "torch.nn"
    module = {"torch._C._nn": "torch.nn.functional",
              "torch._C._linalg": "torch.linalg"}.get(module, module)
    name = reference.__name__ if isinstance(reference, BuiltinFunctionType) else \
        reference.__qualname__
    if module == "torch.linalg":
        name = name.removeprefix("linalg_")  # torch.linalg.lstsq is named linalg_lstsq
    return f"{module}.{name}"


REFUSED = "which already does what the exercise asks: write it yourself, the check compares " \
    "with that function"


class Guard:
    """Refuses an answer that calls one of the references, the function the check compares
    with or its twin: the check would then compare that function with itself. `why` gives a
    reference another reason to be refused than REFUSED."""

    def __init__(self, references: Iterable[object], why: Mapping[object, str] | None = None):
        self.kept = [*references, *(why or {})]  # alive, so that no id below is reused
        reasons = {id(reference): reason for reference, reason in (why or {}).items()}
        self.names = {id(ran): (_public_name(reference), reasons.get(id(reference), REFUSED))
                      for reference in self.kept for ran in _runs(reference)}

    def around(self, answer: object) -> object:
        """The answer, watched while it runs: a profile hook sees every call, including one
        through a name the notebook imported itself (`from ... import encode_target`). An
        error it raises is marked as the learner's, with the frames of their code."""
        if not callable(answer):
            return answer

        @functools.wraps(answer)
        def watched(*args: object, **kwargs: object) -> object:
            called: list[tuple[str, str]] = []
            watched.calls = 0  # how many calls the answer made: a loop shows as more

            def spy(frame: FrameType, event: str, arg: object) -> None:
                ran = frame.f_code if event == "call" else arg if event == "c_call" else None
                watched.calls += ran is not None
                if not called and id(ran) in self.names:
                    called.append(self.names[id(ran)])

            previous = sys.getprofile()
            if self.names:
                sys.setprofile(spy)
            try:
                return answer(*args, **kwargs)
            except Exception as error:
                _mark(error, name_of(answer), error.__traceback__.tb_next)
                raise
            finally:
                if self.names:
                    sys.setprofile(previous)
                if called:
                    name, reason = called[0]
                    raise Mistake(name_of(answer), Hint(f"it calls {name}, {reason}"))
        return watched


# --- errors raised inside the learner's function ---------------------------------------

# Where code is not the learner's: Python's own, the installed packages', the course's.
LIBRARIES = tuple(str(Path(folder).resolve()) for folder in {
    sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"], Path(torch.__file__).parent, Path(stages.__file__).parent,
    Path(__file__).resolve().parents[1]})  # toolkit


def _mark(error: Exception, name: str, frames: TracebackType | None) -> None:
    """Remember that `error` came out of the learner's function `name`, and from which frames:
    a checker may still catch it and recognise the slip (`Raised.of` reads the mark)."""
    try:
        error._raised_by_answer = (name, frames)
    except AttributeError:  # an exception that takes no attributes stays as it is
        pass


def _yours(filename: str) -> bool:
    return not str(Path(filename).resolve()).startswith(LIBRARIES)


def _place(filename: str) -> str:
    """A notebook cell as IPython names it ("Cell In[4]"), or the file."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    named = getattr(getattr(shell, "compile", None), "format_code_name", lambda name: None)
    label = named(filename)
    return " ".join(label) if label else f'File "{filename}"'


class Raised(NotYet):
    """An error raised inside the learner's function, shown as theirs: its message and the
    line of their code it came from, then the frames from their function down, none of the
    checker's. The error itself is kept as __cause__, its traceback trimmed the same way."""

    def __init__(self, name: str, error: Exception, frames: list[traceback.FrameSummary]):
        self.error, self.frames = error, frames
        own = [frame for frame in frames if _yours(frame.filename)] or frames[:1]
        where = ""
        if own:
            line, function = own[-1], own[-1].name
            of = "" if function == name else f" of {function}"
            text = f": {line.line.strip()}" if line.line else ""
            where = f", at line {line.lineno}{of}{text}"
        super().__init__(f"{name} raised {type(error).__name__}: {error}{where}")

    @classmethod
    def of(cls, error: Exception) -> "Raised | None":
        """The learner's error, if `error` came out of their function."""
        mark = getattr(error, "_raised_by_answer", None)
        if mark is None:
            return None
        name, frames = mark
        error.with_traceback(frames)  # their frames only, as they would see them
        return cls(name, error, traceback.extract_tb(frames))

    def _render_traceback_(self) -> list[str]:
        lines = super()._render_traceback_()
        if len(self.frames) < 2:  # the one line is in the hint already
            return lines
        lines += ["", "Your code, from your function down (most recent call last):"]
        for frame in self.frames:
            lines.append(f"  {_place(frame.filename)}, line {frame.lineno}, in {frame.name}")
            if frame.line:
                lines.append(f"    {frame.line.strip()}")
        return [*lines, *traceback.format_exception_only(self.error)[-1:]]


Checker = Callable[..., None]


def exercise(*references: object, why: Mapping[object, str] | None = None
             ) -> Callable[[Checker], Checker]:
    """Make a checker: its mistakes are told in steps, an answer that calls one of the
    references is refused (each checker says why it guards what it guards; `why` gives a
    reference its own reason), and an error raised inside the answer is shown as the
    learner's own (`Raised`), unless the checker recognised it as a slip it explains."""
    guard = Guard(references, why)

    def make(checker: Checker) -> Checker:
        @functools.wraps(checker)
        def run(*answers: Callable) -> None:
            try:
                checker(*(guard.around(answer) for answer in answers))
            except Mistake as mistake:
                raise _tell(checker.__name__, mistake) from None
            except Exception as error:
                if (raised := Raised.of(error)) is None:
                    raise  # the checker's own error: a bug of the course, shown as it is
                raise raised from error
        # What this checker refuses, by name.
        run.refuses = sorted({name for name, _ in guard.names.values()})
        return run
    return make
