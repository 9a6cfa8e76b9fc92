"""Sphinx settings for the course site; `course_site.build` copies this file next to the
pages it stages, so every path here is relative to that folder."""

project = "The Transformer, stage by stage"
author = "the course's authors"
copyright = "the course's authors"
extensions = ["myst_nb", "sphinx_copybutton"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# The notebooks arrive executed (make test / make site ran them): never run them again.
nb_execution_mode = "off"
nb_merge_streams = True  # one block per cell for tqdm's many writes to stderr
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

# Offline: MathJax 3 from _static (installed with npm at build time), nothing from a CDN.
mathjax_path = "mathjax/tex-chtml.js"
nb_ipywidgets_js = {}  # no widget manager from a CDN, even if a notebook kept widget state
# From file:// a browser refuses the fetch() that would show each result's surrounding text.
html_show_search_summary = False

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["course.css", "try_it.css"]
html_js_files = ["course.js"]
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "use_repository_button": False,
}
copybutton_exclude = ".linenos, .gp, .go"
