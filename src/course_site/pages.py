"""The pages the site adds to the notebooks, written as MyST Markdown for Sphinx: the index
(outline and ladder), one page per stage diff, and the teacher's guide."""

import re
from pathlib import Path

from course_tools.ladder import CHART_PATH, load_runs, table
from toolkit.figures.stagediff import stage_diff
from toolkit.outline import APPENDIX_STAGES, STAGES
from toolkit.web.page import EXAMPLE, try_it_form

# Each stage against the one before it, the whole journey from the first to the last, and
# each appendix stage against stage 07, which it grows from.
DIFFS = ([(s.number - 1, s.number) for s in STAGES[1:]] + [(STAGES[0].number, STAGES[-1].number)]
         + [(STAGES[-1].number, s.number) for s in APPENDIX_STAGES])


def diff_name(old: int, new: int) -> str:
    return f"diff_{old:02d}_{new:02d}"


def stage_number(notebook: Path) -> int | None:
    """The stage a notebook explains, by the name they share: 01_naive_attention.ipynb -> 1,
    14_decoder_only.ipynb -> 8 (stage08_decoder_only); the data notebook and the other
    appendices have none."""
    return next((s.number for s in STAGES + APPENDIX_STAGES
                 if s.module.split("_", 1)[1] == notebook.stem.split("_", 1)[1]), None)


def grows_from(number: int) -> int:
    """The stage a stage's diff starts from: the one before, or stage 07 for an appendix."""
    return STAGES[-1].number if any(s.number == number for s in APPENDIX_STAGES) else number - 1


def title(notebook: dict) -> str:
    match = re.search(r"^#\s+(.+)$", "".join(notebook["cells"][0]["source"]), re.M)
    return match.group(1).strip() if match else "notebook"


def learning_goal(notebook: dict) -> str:
    """The '**Learning goal.**' paragraph of the notebook's first cell, on one line."""
    first = "".join(notebook["cells"][0]["source"])
    match = re.search(r"\*\*Learning goal\.\*\*\s*(.+?)(\n\s*\n|$)", first, re.S)
    return " ".join(match.group(1).split()) if match else ""


def toctree(caption: str, documents: list[str]) -> str:
    return "\n".join(["```{toctree}", f":caption: {caption}", ":hidden:", "", *documents, "```"])


def index_page(notebooks: dict[str, dict], student: bool) -> str:
    """The course outline, the ladder, and every page in the sidebar, in course order."""
    items = []
    for name, notebook in notebooks.items():
        number = stage_number(Path(name))
        changed = (f" · [what changed]({diff_name(grows_from(number), number)}.md)"
                   if number and number > 1 and not student else "")
        items.append(f"{int(name[:2])}. [{title(notebook)}]({name}){changed}  \n"
                     f"   {learning_goal(notebook)}")
    runs = load_runs()
    ladder = "" if not runs else table(runs).reset_index().to_html(
        index=False, classes="ladder", border=0)
    edition = ("\n:::{note}\nThe student edition: every exercise's answer is left out, and "
               "its check is shown unrun.\n:::\n" if student else "")
    teaching = "" if student else (
        "**Teaching a class?** The [teacher's guide](teaching.md) plans seven sessions of 90 "
        "minutes, `make student-kit` writes what students set up on their own laptops, without "
        "the exercises' answers, and `make site-student` this site without them.")
    chart = "![The ladder: exact match, held-out exact match and BLEU per stage](ladder.png)" \
        if CHART_PATH.exists() else ""
    stems = [Path(name).stem for name in notebooks]
    journey = ("" if student else
               f", and the [whole journey from stage 01 to 07]({diff_name(1, 7)}.md) is one diff")
    return f"""# The Transformer, stage by stage
{edition}
The Transformer of [Attention Is All You Need](https://arxiv.org/abs/1706.03762), built in
PyTorch one idea at a time. Each page is an executed notebook; each stage's code is the
previous stage's plus exactly one idea{journey}.

## The course

{chr(10).join(items)}

{teaching}
## The ladder

Every stage trained on one shared budget and scored on held-out sentences
(`assets/ladder.json`, written by `make ladder`).

{chart}

```{{raw}} html
{ladder}
```

## Run it yourself

{RUN_IT_STUDENT if student else RUN_IT}

Everything runs offline on a laptop CPU: the corpus is built in, and this site loads nothing
from the network; its search works from the files alone, and so does [the trained model,
live in your browser](try_it.md).

{toctree("The course", stems)}

{"" if student else toctree("What each stage changes", [diff_name(*pair) for pair in DIFFS])}

{toctree("Try it", ["try_it"])}

{"" if student else toctree("Teaching", ["teaching"])}
"""


RUN_IT = """In a copy of the course's repository:

```bash
make lab    # the notebooks in JupyterLab
make test   # every test, notebooks included
make site   # the course site, in site/
```"""

RUN_IT_STUDENT = """In the course folder your teacher gave you, one command sets it up the
first time (a few minutes) and opens your own copies of the notebooks in JupyterLab:

```bash
python3 course.py lab    # Windows: py course.py lab; Linux without an NVIDIA GPU: add --cpu
```

Run each notebook from the top. Each exercise has a stub to complete and a check cell under
it: run the check, and it prints ✓ or a hint that says what is wrong. The folder's README
says more."""


def diff_page(old: int, new: int, notebooks: list[str]) -> str:
    """A diff has no sections to list: its page gives the contents column to the code, and
    links back to the notebooks that explain each stage it spans."""
    explained = [name for name in notebooks
                 if (stage_number(Path(name)) or 0) in range(old + 1, new + 1)]
    links = ", ".join(f"[{Path(name).stem[:2]}]({name})" for name in explained)
    return f"""---
html_theme.sidebar_secondary.remove: true
---
# Stage {old:02d} → stage {new:02d}

Explained in notebook{"s" * (len(explained) > 1)} {links}.

```{{raw}} html
<div class="diff-page">{stage_diff(old, new).html()}</div>
```

Each stage marks what it adds with trailing `# New:` comments; they are left out of the
comparison. In a terminal: `make diff A={old:02d} B={new:02d}`.
"""


SITE_EXAMPLE = ("Today the small dog does not see the red cars because the cat sleeps "
                "behind the car.")


def try_page(model: str | None = None) -> str:
    """The trained model in the browser: its scripts load from _static like any file. With
    `model`, a sentence on another model (`make site MODEL=...`), the page runs that one."""
    if model is None:
        return TRY_PAGE.format(title="the trained model", intro=SITE_INTRO,
                               form=try_it_form(SITE_EXAMPLE), how=SITE_HOW)
    return TRY_PAGE.format(title="your model", intro=model, form=try_it_form(EXAMPLE),
                           how=MODEL_HOW)


TRY_PAGE = """---
html_theme.sidebar_secondary.remove: true
---
# Try it: {title} in your browser

{intro}

```{{raw}} html
{form}```

{how}
"""
SITE_INTRO = """\
Type an English sentence from the course's world (the dog, the cat, the teacher, numbers up
to ninety-nine in words, adjectives, negation, "because" and "when"; capitals count, so "Dog"
is unknown): the stage-07 model of notebook 10 translates it here, in your browser, from the
files of this site alone. Choose greedy decoding or the paper's beam search (beam 4, length
penalty α), then pick which attention to look at: the encoder's, the decoder's own, or the
decoder reading the source, for any layer and head. Hover a row to see what that token
read."""
SITE_HOW = """\
How it works: `toolkit/web/model_script.py` writes the trained weights into `model.js`, a
classic script (Chromium refuses `fetch()` from `file://`, but every browser runs a
`<script>`), and `translator.js` computes stage 07's forward pass in plain JavaScript, in a
worker, so that typing never waits for it. The course's tests hold this page to PyTorch in
Chromium (CI always; `make test` wherever Chromium is installed): the same tokens on 200
test sentences, greedy and beam 4 with α = 0.6, and the same attention weights on 20 of
them. Notebook 08 shows how. Your own model gets a page like this one with
`python -m toolkit.web build/train/best.pt --output build/web`."""
MODEL_HOW = """\
How it works: `toolkit/web/model_script.py` wrote this checkpoint's weights into `model.js`
as float16, and `translator.js` runs its forward pass in plain JavaScript, in a worker. The
course's tests hold that code to PyTorch, token for token, on models of their own (stage 07
with words and with subwords, stage 08), not on this checkpoint; notebook 08 shows how."""


def guide_page(guide: str) -> str:
    """The teacher's guide, its links to ../notebooks/ pointed at the pages beside it."""
    return re.sub(r"\]\(\.\./notebooks/(\d\d_\w+\.ipynb)\)", r"](\1)", guide)
