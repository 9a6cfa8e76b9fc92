"""`python -m course_site [--student] [--model CHECKPOINT]`: build the offline course site."""

import argparse
from pathlib import Path

from course_site.build import build

parser = argparse.ArgumentParser(prog="python -m course_site", description=__doc__)
parser.add_argument("--student", action="store_true",
                    help="the student edition: answers left out, checks unrun (site-student/)")
parser.add_argument("--model", type=Path, help="a checkpoint for the Try-it page to run instead "
                                               "of notebook 10's model (make site MODEL=...)")
args = parser.parse_args()
site = build(student=args.student, model=args.model)
print(f"wrote {len(list(site.glob('*.html')))} pages to {site}; open {site / 'index.html'}")
