"""The packages keep their promises: a short import loads only what it names, every name a
package offers is really there."""

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ["text", "batching", "learning", "search", "scoring", "figures", "checkers"]


def toolkit_modules_after(statement: str) -> set[str]:
    """The toolkit's modules loaded by `statement` alone, in a new interpreter, so that no
    earlier import hides what it loads."""
    code = (f"import json, sys\n{statement}\n"
            "print(json.dumps([m for m in sys.modules if m.startswith('toolkit')]))")
    return set(json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                         text=True, check=True, cwd=ROOT).stdout))


@pytest.mark.parametrize("package", LIBRARY)
def test_every_name_a_package_offers_is_the_one_in_its_module(package):
    module = importlib.import_module(f"toolkit.{package}")
    assert module.__all__, f"toolkit.{package} offers nothing"
    for name in module.__all__:
        value = getattr(module, name)
        owners = [path.stem for path in Path(module.__file__).parent.glob("[!_]*.py")
                  if getattr(importlib.import_module(f"toolkit.{package}.{path.stem}"), name,
                             None) is value]
        assert owners, f"toolkit.{package}.{name} is in none of its modules"


@pytest.mark.slow  # starts a fresh interpreter
def test_a_short_import_loads_only_the_module_it_names():
    loaded = toolkit_modules_after("from toolkit.text import Vocab")
    assert "toolkit.text.vocab" in loaded
    assert not {"toolkit.text.corpus", "toolkit.text.subwords", "toolkit.text.hub"} & loaded


@pytest.mark.slow  # starts a fresh interpreter
def test_a_stage_loads_no_corpus_reader_and_no_training_loop():
    loaded = toolkit_modules_after("import stages.stage07_multi_head")
    assert not [m for m in loaded if m.startswith(("toolkit.learning", "toolkit.search",
                                                   "toolkit.train", "toolkit.text.corpus"))]


def test_a_package_cannot_offer_a_name_that_is_also_one_of_its_modules():
    from toolkit.lazy_exports import lazy_exports

    with pytest.raises(ValueError, match=r"\['beam_search'\]"):
        lazy_exports("toolkit.search", {"beam_search": ["beam_search"]})
