"""Render the executed notebooks, the stage diffs and an index into an offline static site.

`python -m toolkit.website` (what `make site` runs after executing the notebooks) writes
`site/`: one page per notebook, one page per stage diff, the teacher's guide
(docs/teaching.md) and `index.html`. Nothing is
loaded from the network: MathJax 3 is copied once into `site/_static/mathjax/` from the
npm package that `make site` installs in `build/`, and figures are embedded in the pages.
"""

import base64
import html
import re
import shutil
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from toolkit.ladder import CHART_PATH, load_runs, table
from toolkit.outline import STAGES
from toolkit.paths import PROJECT_ROOT
from toolkit.stagediff import stage_diff

EXECUTED = PROJECT_ROOT / "build" / "notebooks"
GUIDE = PROJECT_ROOT / "docs" / "teaching.md"
GUIDE_PAGE = "teaching.html"
SITE = PROJECT_ROOT / "site"
TEMPLATES = PROJECT_ROOT / "templates"
MATHJAX = PROJECT_ROOT / "build" / "mathjax" / "node_modules" / "mathjax" / "es5"
MATHJAX_PARTS = ("tex-chtml.js", "input", "output/chtml", "ui", "a11y", "adaptors")
DIFFS = [(n, n + 1) for n in range(1, 7)] + [(1, 7)]
# One MathJax configuration for every page (the template and the index and diff pages).
MATHJAX_CONFIG = r"""window.MathJax = {
  tex: {inlineMath: [['$', '$'], ['\\(', '\\)']],
        displayMath: [['$$', '$$'], ['\\[', '\\]']],
        processEscapes: true},
  options: {ignoreHtmlClass: 'jp-OutputArea|highlight|course-nav'}
};
"""
MATHJAX_HEAD = """<script src="_static/mathjax-config.js"></script>
<script id="MathJax-script" defer src="_static/mathjax/tex-chtml.js"></script>
<link rel="stylesheet" href="_static/course.css">"""

CSS = """
body { margin: 0; }
.course-nav { display: flex; gap: 1.2em; flex-wrap: wrap; align-items: center;
  font-family: system-ui, sans-serif; font-size: 14px; padding: 0.6em 1.2em;
  background: #eef2f7; border-bottom: 1px solid #d0d7e2; }
.course-nav a { color: #1f4e8c; text-decoration: none; }
.course-nav a:hover { text-decoration: underline; }
.course-nav .here { font-weight: 600; }
.course-page { max-width: 1100px; margin: 1.5em auto; padding: 0 1.2em;
  font-family: system-ui, sans-serif; line-height: 1.5; }
.course-page table.ladder { border-collapse: collapse; font-size: 14px; }
.course-page table.ladder td, .course-page table.ladder th { border: 1px solid #ccc;
  padding: 3px 8px; text-align: right; }
.course-page ol li { margin-bottom: 0.5em; }
.course-page pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; }
.course-page.wide { max-width: 1500px; }
"""


def page_name(notebook: Path) -> str:
    return notebook.with_suffix(".html").name


def diff_name(old: int, new: int) -> str:
    return f"diff_{old:02d}_{new:02d}.html"


def stage_number(notebook: Path) -> int | None:
    """01_naive_attention.ipynb -> 1; the data notebook and appendices have none."""
    number = int(notebook.name[:2])
    return number if any(s.number == number for s in STAGES) else None


def learning_goal(notebook: nbformat.NotebookNode) -> str:
    """The '**Learning goal.**' paragraph of the notebook's first cell, as inline HTML."""
    first = notebook.cells[0].source
    match = re.search(r"\*\*Learning goal\.\*\*\s*(.+?)(\n\s*\n|$)", first, re.S)
    if not match:
        return ""
    rendered = markdown2html_mistune(" ".join(match.group(1).split())).strip()
    return re.sub(r"^<p>|</p>$", "", rendered)


def title(notebook: nbformat.NotebookNode) -> str:
    match = re.search(r"^#\s+(.+)$", notebook.cells[0].source, re.M)
    return match.group(1).strip() if match else "notebook"


def navigation(pages: list[Path], index: int) -> str:
    """Previous / index / next, and the diff that introduced this page's stage."""
    links = []
    if index > 0:
        links.append(f'<a href="{page_name(pages[index - 1])}">← previous</a>')
    links.append('<a href="index.html">course index</a>')
    if index + 1 < len(pages):
        links.append(f'<a href="{page_name(pages[index + 1])}">next →</a>')
    number = stage_number(pages[index])
    if number and number > 1:
        links.append(f'<a href="{diff_name(number - 1, number)}">what changed since stage '
                     f'{number - 1:02d}</a>')
    return f'<nav class="course-nav">{" · ".join(links)}</nav>'


def render_notebooks(pages: list[Path], site: Path) -> None:
    exporter = HTMLExporter(template_name="course", extra_template_basedirs=[str(TEMPLATES)])
    for index, path in enumerate(pages):
        notebook = nbformat.read(path, as_version=4)
        notebook.metadata.pop("widgets", None)  # widget state would need a CDN to render
        body, _ = exporter.from_notebook_node(notebook, resources={
            "navigation": navigation(pages, index), "course_head": MATHJAX_HEAD})
        (site / page_name(path)).write_text(body, encoding="utf-8")


def simple_page(title_text: str, body: str, nav: str, wide: bool = False) -> str:
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{html.escape(title_text)}</title>
{MATHJAX_HEAD}
</head><body>{nav}<main class="course-page{' wide' if wide else ''}">{body}</main></body></html>
"""


def render_diffs(site: Path, pages: list[Path]) -> None:
    by_stage = {stage_number(p): p for p in pages if stage_number(p)}
    for old, new in DIFFS:
        diff = stage_diff(old, new)
        links = ['<a href="index.html">course index</a>']
        links += [f'<a href="{page_name(by_stage[n])}">notebook {n:02d}</a>'
                  for n in (old, new) if n in by_stage]
        body = (f"<h1>Stage {old:02d} → stage {new:02d}</h1>{diff.html()}"
                f"<p><code># New:</code> markers are ignored. In a terminal: "
                f"<code>make diff A={old:02d} B={new:02d}</code>.</p>")
        nav = f'<nav class="course-nav">{" · ".join(links)}</nav>'
        (site / diff_name(old, new)).write_text(
            simple_page(f"Stage {old:02d} → {new:02d}", body, nav, wide=True), encoding="utf-8")


def render_guide(site: Path, guide: Path = GUIDE) -> None:
    """The teacher's guide, with its links to notebooks pointed at their pages."""
    body = markdown2html_mistune(guide.read_text(encoding="utf-8"))
    # In the repository the guide links ../notebooks/NN_name.ipynb; on the site, NN_name.html.
    body = re.sub(r'href="\.\./notebooks/(\d\d_\w+)\.ipynb', r'href="\1.html', body)
    nav = ('<nav class="course-nav"><a href="index.html">course index</a> · '
           '<span class="here">teacher\'s guide</span></nav>')
    (site / GUIDE_PAGE).write_text(simple_page("Teaching with this course", body, nav),
                                   encoding="utf-8")


def ladder_figure() -> str:
    """The chart `make ladder` drew (assets/ladder.png), embedded so the page stays one file."""
    if not CHART_PATH.exists():
        return ""
    encoded = base64.b64encode(CHART_PATH.read_bytes()).decode()
    alt = "The ladder: exact match, held-out exact match and BLEU per stage"
    return f'<img alt="{alt}" src="data:image/png;base64,{encoded}">'


def render_index(site: Path, pages: list[Path]) -> None:
    items = []
    for path in pages:
        notebook = nbformat.read(path, as_version=4)
        number = stage_number(path)
        diff = (f' · <a href="{diff_name(number - 1, number)}">what changed</a>'
                if number and number > 1 else "")
        items.append(f'<li><a href="{page_name(path)}">{html.escape(title(notebook))}</a>'
                     f"{diff}<br>{learning_goal(notebook)}</li>")
    runs = load_runs()
    frame = table(runs).reset_index() if runs else None
    ladder_html = "" if frame is None else frame.to_html(index=False, classes="ladder", border=0)
    body = f"""
<h1>The Transformer, stage by stage</h1>
<p>The Transformer of <a href="https://arxiv.org/abs/1706.03762">Attention Is All You
Need</a>, built in PyTorch one idea at a time. Each page is an executed notebook; each
stage's code is the previous stage's plus exactly one idea, and the
<a href="{diff_name(1, 7)}">whole journey from stage 01 to 07</a> is one diff.</p>
<h2>The course</h2><ol start="0">{"".join(items)}</ol>
<p><strong>Teaching a class?</strong> The <a href="{GUIDE_PAGE}">teacher's guide</a> plans
seven sessions of 90 minutes, and <code>make student</code> writes the notebooks without
their exercise answers.</p>
<h2>The ladder</h2>
<p>Every stage trained on one shared budget and scored on held-out sentences
(<code>assets/ladder.json</code>, written by <code>make ladder</code>).</p>
{ladder_figure()}
{ladder_html}
<h2>Run it yourself</h2>
<pre>git clone &lt;this repository&gt; &amp;&amp; cd &lt;it&gt;
make lab    # the notebooks in JupyterLab
make test   # every test, notebooks included
make site   # this site, in site/</pre>
<p>Everything runs offline on a laptop CPU: the corpus is built in, and this site loads
nothing from the network.</p>
"""
    nav = '<nav class="course-nav"><span class="here">course index</span></nav>'
    (site / "index.html").write_text(simple_page("The Transformer, stage by stage", body, nav),
                                     encoding="utf-8")


def copy_mathjax(site: Path, mathjax: Path = MATHJAX) -> None:
    if not (mathjax / "tex-chtml.js").exists():
        raise FileNotFoundError(
            f"MathJax 3 is missing at {mathjax}: run `make site`, which installs it with npm")
    target = site / "_static" / "mathjax"
    for part in MATHJAX_PARTS:
        source = mathjax / part
        if source.is_dir():
            shutil.copytree(source, target / part, dirs_exist_ok=True)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / part)


def build(executed: Path = EXECUTED, site: Path = SITE) -> list[Path]:
    """Write the whole site; return the pages written."""
    pages = sorted(executed.glob("[0-9][0-9]_*.ipynb"))
    if not pages:
        raise FileNotFoundError(f"no executed notebooks in {executed}: run `make site`")
    if site.exists():
        shutil.rmtree(site)
    (site / "_static").mkdir(parents=True)
    (site / "_static" / "course.css").write_text(CSS)
    (site / "_static" / "mathjax-config.js").write_text(MATHJAX_CONFIG)
    copy_mathjax(site)
    render_notebooks(pages, site)
    render_diffs(site, pages)
    render_guide(site)
    render_index(site, pages)
    return sorted(site.glob("*.html"))


if __name__ == "__main__":
    written = build()
    print(f"wrote {len(written)} pages to {SITE}; open {SITE / 'index.html'}")
