"""Your model in a web page: `python -m toolkit.web CHECKPOINT --output DIR` writes a page
that translates with any checkpoint the training command saved, in the browser, offline and
from `file://`, and shows what every head read (the course site's Try-it page is one)."""
