"""How a checker speaks: a pass, or `NotYet` with a hint told in steps, and what every
checker needs.

A hint has three parts. The first failure of a mistake names its symptom only, what is wrong
in the output ("row 3 can see position 5"), so the learner gets to think; the same mistake
again, in the same checker and the same kernel, adds its cause; the third time adds the fix,
the API or the line to use. A different mistake starts its own count.
"""

import functools
import importlib
import pkgutil
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from types import BuiltinFunctionType, FrameType, FunctionType
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
        return ". ".join(parts) + (MORE[step] if more else "")

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


def fail_on(problem: Hint | None, case: str) -> None:
    if problem is not None:
        raise Mistake(case, problem)


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
    module = {"torch._C._nn": "torch.nn.functional"}.get(module, module)
    name = reference.__name__ if isinstance(reference, BuiltinFunctionType) else \
        reference.__qualname__
    return f"{module}.{name}"


class Guard:
    """Refuses an answer that calls one of the references, the function the check compares
    with or its twin: the check would then compare that function with itself."""

    def __init__(self, references: Iterable[object]):
        self.kept = list(references)  # alive, so that no id below is reused
        self.names = {id(ran): _public_name(reference)
                      for reference in self.kept for ran in _runs(reference)}

    def around(self, answer: object) -> object:
        """The answer, watched while it runs: a profile hook sees every call, including one
        through a name the notebook imported itself (`from ... import encode_target`)."""
        if not callable(answer) or not self.names:
            return answer

        @functools.wraps(answer)
        def watched(*args: object, **kwargs: object) -> object:
            called: list[str] = []

            def spy(frame: FrameType, event: str, arg: object) -> None:
                ran = frame.f_code if event == "call" else arg if event == "c_call" else None
                if not called and id(ran) in self.names:
                    called.append(self.names[id(ran)])

            previous = sys.getprofile()
            sys.setprofile(spy)
            try:
                return answer(*args, **kwargs)
            finally:
                sys.setprofile(previous)
                if called:
                    raise Mistake(name_of(answer), Hint(
                        f"it calls {called[0]}, which already does what the exercise asks: "
                        f"write it yourself, the check compares with that function"))
        return watched


Checker = Callable[..., None]


def exercise(*references: object) -> Callable[[Checker], Checker]:
    """Make a checker: its mistakes are told in steps, and an answer that calls one of the
    references is refused (each checker says why it guards what it guards)."""
    guard = Guard(references)

    def make(checker: Checker) -> Checker:
        @functools.wraps(checker)
        def run(*answers: Callable) -> None:
            try:
                checker(*(guard.around(answer) for answer in answers))
            except Mistake as mistake:
                raise _tell(checker.__name__, mistake) from None
        run.refuses = sorted(set(guard.names.values()))  # what this checker refuses, by name
        return run
    return make
