"""Where the project's committed artefacts live, for code that runs from anywhere."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SRC = PROJECT_ROOT / "src"  # the packages: stages, toolkit, course_site
BENCHMARK_RESULTS = PROJECT_ROOT / "benchmarks" / "results.json"  # written by `make bench`
EXAMPLES = PROJECT_ROOT / "assets" / "examples"  # small corpora written for the course
