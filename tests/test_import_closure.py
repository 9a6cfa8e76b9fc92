"""A job's import closure holds every course module that importing it runs, and no other."""

from course_tools.import_closure import closure

LAZY_INIT = '''from toolkit.lazy_exports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {"vocab": ["Vocab"], "other": ["X"]})
'''


def write(root, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root.joinpath(*name.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def test_imports_are_followed_wherever_they_stand_and_however_they_are_written(tmp_path):
    write(tmp_path, {
        "toolkit/__init__.py": "from toolkit import paths\n",
        "toolkit/paths.py": "",
        "toolkit/text/__init__.py": LAZY_INIT,
        "toolkit/text/vocab.py": "import regex\n",
        "toolkit/text/other.py": "",
        "toolkit/text/tokens.py": "",
        "toolkit/text/unused.py": "",
        "toolkit/learning/__init__.py": "",
        "toolkit/learning/loop.py": (
            "import json\n"
            "from typing import TYPE_CHECKING\n"
            "from toolkit.text import Vocab\n"  # lazily exported: its module runs
            "from ..text import tokens\n"  # relative: toolkit.text.tokens
            "if TYPE_CHECKING:\n"
            "    from toolkit.text import unused\n"  # runs nothing
            "def train():\n"
            "    import torch\n"  # inside a function: runs when it is called
            "    from toolkit.learning.late import step\n"),
        "toolkit/learning/late.py": "step = 1\n",
        "toolkit/search/__init__.py": LAZY_INIT.replace('"vocab": ["Vocab"], ', ""),
        "toolkit/search/other.py": "",
        "toolkit/search/caller.py": "import toolkit.search\nX = toolkit.search.X\n",
    })
    found = closure(["toolkit.learning.loop"], tmp_path)
    assert found.modules == {"toolkit", "toolkit.paths", "toolkit.text", "toolkit.text.vocab",
                             "toolkit.text.tokens", "toolkit.learning", "toolkit.learning.loop",
                             "toolkit.learning.late"}
    assert found.libraries == {"regex", "torch"}  # json and typing are the standard library
    # `import package` may read any name the package exports lazily, so all their modules count
    assert closure(["toolkit.search.caller"], tmp_path).modules >= {"toolkit.search.other"}
