"""Stage the executed notebooks and the pages around them, then let Sphinx write the site.

`python -m course_site` (what `make site` runs after executing the notebooks) writes `site/`;
`--student` writes `site-student/`, the same site with every exercise's answer left out and
its check shown unrun, for a teacher to publish during the course. Nothing is loaded from
the network: MathJax 3 is copied from the npm package `make site` installs in `build/`,
figures are files beside the pages, and the search index is a script (`searchindex.js`), so
search works from `file://` too.
"""

import copy
import json
import shutil
from pathlib import Path

import torch
from sphinx.cmd.build import build_main

from course_site.pages import (
    DIFFS,
    diff_name,
    diff_page,
    grows_from,
    guide_page,
    index_page,
    stage_number,
    try_page,
)
from course_tools.ladder import CHART_PATH
from course_tools.paper_run import PAPER, RECORDED, RUNS, PaperRun, key, paper_run
from course_tools.student import student_version
from toolkit.learning.checkpoints import CheckpointError, load_checkpoint
from toolkit.paths import PROJECT_ROOT
from toolkit.web.model_script import model_script
from toolkit.web.page import about, copy_code

EXECUTED = PROJECT_ROOT / "build" / "notebooks"
GUIDE = PROJECT_ROOT / "docs" / "teaching.md"
SITE, STUDENT_SITE = PROJECT_ROOT / "site", PROJECT_ROOT / "site-student"
MATHJAX = PROJECT_ROOT / "build" / "mathjax" / "node_modules" / "mathjax" / "es5"
# What tex-chtml.js loads: the component, its input and output jax, the menu, and the
# accessibility explorer with sre, the speech rule engine the menu's explorer needs.
MATHJAX_PARTS = ("tex-chtml.js", "input", "output/chtml", "ui", "a11y", "adaptors", "sre")
HERE = Path(__file__).parent


def copy_mathjax(static: Path, mathjax: Path = MATHJAX) -> None:
    """MathJax from the npm package, beside the pages: the site must typeset without a CDN."""
    if not (mathjax / "tex-chtml.js").exists():
        raise FileNotFoundError(
            f"MathJax 3 is missing at {mathjax}: run `make site`, which installs it with npm")
    for part in MATHJAX_PARTS:
        source, target = mathjax / part, static / "mathjax" / part
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def check_executed(notebook: dict, name: str) -> None:
    """A page is only as good as its outputs: refuse a notebook that was never run."""
    unrun = [cell.get("id") for cell in notebook["cells"] if cell["cell_type"] == "code"
             and "".join(cell["source"]).strip() and cell.get("execution_count") is None]
    if unrun:
        raise ValueError(f"{name} has {len(unrun)} code cells that never ran: the site is built "
                         f"from executed notebooks; run `make notebooks` (or `make site`)")


def as_a_terminal_shows(text: str) -> str:
    """A progress bar rewrites its line with carriage returns; Jupyter shows the last write
    only, and so should the page (else every update of a tqdm bar is a line of its own). A
    line that ends in a carriage return keeps the write before it, as a terminal shows."""
    return "\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in text.split("\n"))


def for_the_site(notebook: dict, name: str, student: bool) -> dict:
    """The page's notebook: no widget state (it would need a CDN), a link to the stage's
    diff, and in the student edition no answers and no check outputs."""
    check_executed(notebook, name)
    notebook = copy.deepcopy(notebook)
    notebook.get("metadata", {}).pop("widgets", None)
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                output["text"] = as_a_terminal_shows("".join(output["text"]))
    if student:
        notebook = student_version(notebook, name, keep_outputs=True)
    number = stage_number(Path(name))
    if number and number > 1 and not student:  # the student site has no diff pages
        old = grows_from(number)
        link = (f"*What stage {number:02d} changes in stage {old:02d}'s code:* "
                f"[the diff]({diff_name(old, number)}.md).")
        notebook["cells"].insert(1, {"cell_type": "markdown", "id": "site-diff-link",
                                     "metadata": {}, "source": link})
    return notebook


def site_run() -> PaperRun:
    """Notebook 10's model, the paper recipe's run on seed 0, as the notebooks kept it: read
    back on one thread, the key they trained it under (make's NOTEBOOK_ENV), never trained
    here, so that the page shows the model the notebooks describe."""
    torch.set_num_threads(1)
    name = f"seed{PAPER.seed}-{key(PAPER, 'cpu')}.pt"
    if not (RUNS / name).exists() and not (RECORDED / name).exists():
        raise SystemExit(f"the site's model {name} is neither in {RECORDED} nor in {RUNS}: run "
                         f"the notebooks first (make site does), so that the page shows "
                         f"notebook 10's model")
    return paper_run()


def trained_model_script(checkpoint: Path | None = None) -> tuple[str, str | None]:
    """Notebook 10's model as the classic script the Try-it page loads, or a checkpoint's
    (its weights as float16, as python -m toolkit.web stores them) with a sentence on it."""
    if checkpoint is None:
        run = site_run()
        return model_script(run.model, run.data.src_vocab, run.data.tgt_vocab), None
    try:
        saved = load_checkpoint(checkpoint)
    except (CheckpointError, FileNotFoundError) as err:
        raise SystemExit(f"MODEL={checkpoint}: {err}") from err
    return (model_script(saved.model, saved.src_vocab, saved.tgt_vocab, "float16"),
            f"{checkpoint}: " + about(saved.model, saved.src_vocab, saved.tgt_vocab, "float16"))


def stage_sources(executed: Path, source: Path, student: bool,
                  model: Path | None = None) -> None:
    """Write what Sphinx reads into a folder of its own, so neither the pages the site adds
    nor the notebooks' changes for it touch the repository's files."""
    paths = sorted(executed.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no executed notebooks in {executed}: run `make site`")
    if source.exists():
        shutil.rmtree(source)
    (source / "_static").mkdir(parents=True)
    shutil.copy2(HERE / "conf.py", source / "conf.py")
    for name in ("course.css", "course.js"):
        shutil.copy2(HERE / "_static" / name, source / "_static" / name)
    copy_code(source / "_static")  # the Try-it page's scripts and styles
    script, described = trained_model_script(model)
    (source / "_static" / "model.js").write_text(script, encoding="utf-8")
    copy_mathjax(source / "_static")
    notebooks = {}
    for path in paths:
        notebook = for_the_site(json.loads(path.read_text(encoding="utf-8")), path.name, student)
        (source / path.name).write_text(json.dumps(notebook, ensure_ascii=False),
                                        encoding="utf-8")
        notebooks[path.name] = notebook
    (source / "index.md").write_text(index_page(notebooks, student), encoding="utf-8")
    # A diff is a stage's own code, which answers exercises: the student edition shows each
    # one only in its notebook, after the exercises (course_tools.student, tag `spoiler`).
    for old, new in [] if student else DIFFS:
        (source / f"{diff_name(old, new)}.md").write_text(diff_page(old, new, list(notebooks)),
                                                           encoding="utf-8")
    (source / "try_it.md").write_text(try_page(described), encoding="utf-8")
    if not student:  # the guide holds hints and advice meant for the teacher
        (source / "teaching.md").write_text(guide_page(GUIDE.read_text(encoding="utf-8")),
                                            encoding="utf-8")
    if CHART_PATH.exists():
        shutil.copy2(CHART_PATH, source / "ladder.png")


def build(executed: Path = EXECUTED, student: bool = False, model: Path | None = None) -> Path:
    """Write the whole site and return its folder; a Sphinx warning fails the build. With
    `model`, a checkpoint, the Try-it page runs it instead of notebook 10's model."""
    out, work = ((STUDENT_SITE, PROJECT_ROOT / "build" / "site-student") if student
                 else (SITE, PROJECT_ROOT / "build" / "site"))
    stage_sources(executed, work / "source", student, model)
    # Sphinx writes into build/ (MyST-NB puts its jupyter_execute/ beside the output), and
    # only a finished site replaces the one in place.
    html = work / "html"
    if html.exists():
        shutil.rmtree(html)
    status = build_main(["-b", "html", "-q", "-W", "--keep-going", "-d", str(work / "doctrees"),
                         str(work / "source"), str(html)])
    if status:
        raise SystemExit(f"sphinx-build failed (status {status}): read the warnings above")
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(html, out)
    return out
