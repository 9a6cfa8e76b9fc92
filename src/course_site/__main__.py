"""`python -m course_site [--student]`: build the offline course site."""

import argparse

from course_site.build import build

parser = argparse.ArgumentParser(prog="python -m course_site", description=__doc__)
parser.add_argument("--student", action="store_true",
                    help="the student edition: answers left out, checks unrun (site-student/)")
site = build(student=parser.parse_args().student)
print(f"wrote {len(list(site.glob('*.html')))} pages to {site}; open {site / 'index.html'}")
