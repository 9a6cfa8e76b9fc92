# Every target bootstraps the pinned virtualenv in .venv first (course.py setup), so a fresh
# clone needs nothing but Python 3.11 to 3.13 and make (and npm for the site).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
# What the notebooks run (the site's own builder is not part of it).
SOURCES := $(shell find src -name '*.py' -not -path 'src/course_site/*') \
           $(wildcard assets/data/*.jsonl assets/examples/*/*.tsv)
EXECUTED := build/notebooks/.executed
MATHJAX := build/mathjax/node_modules/mathjax/es5/tex-chtml.js

# One thread per process, two processes: steadier and faster on small CPUs (design §4).
NOTEBOOK_ENV := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 HF_HUB_OFFLINE=1
NBMAKE := $(BIN)/pytest --nbmake --nbmake-kernel=python3 --nbmake-timeout=300 \
          --timeout=900 -n 2 -p no:cacheprovider --overwrite --durations=0
NOTEBOOK_TIMES := build/notebook-times.xml
# Longest first, as the table at the end of make test measured them, so that the short ones
# come last and fill in whichever worker is ahead: both then end within seconds of each
# other (in name order the long appendices start last). pytest-xdist hands each worker two
# to start with (the first two to one, the next two to the other), so the longest is paired
# with the fourth. A notebook not listed runs last.
LONGEST_FIRST := 11 01 07 06 12 14 04 05 13 03 02 09 00 10 08
RANKED := $(foreach n,$(LONGEST_FIRST),$(filter notebooks/$(n)_%,$(NOTEBOOKS)))
NOTEBOOK_ORDER := $(addprefix build/,$(RANKED) $(filter-out $(RANKED),$(NOTEBOOKS)))
# make quick leaves out the tests marked slow: those that start processes (tests/test_markers.py).
# --dist worksteal: a worker that runs out of tests takes half of what the other has left, so the
# longest tests, which the files' order puts last (the training commands, torchrun), are shared.
UNIT_TESTS := OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(BIN)/pytest -n 2 --dist worksteal \
              -p no:cacheprovider --timeout=600 --ignore=tests/site --ignore=tests/student
.PHONY: help setup test quick notebook-times prose-numbers unit mutants-check mutants notebooks student \
        student-kit student-tests site site-student site-tests lab data ladder ladder-check ablation \
        kept-runs bench diff web train train-ddp clean

help:
	@echo "python3 course.py lab   without make (Windows: py course.py lab): set up .venv, write"
	@echo "             student/ and open it in JupyterLab (python3 course.py --help: the rest)"
	@echo "make test    run every test: ruff, unit tests, then every notebook (copies in build/)"
	@echo "make quick   ruff and the unit tests but the slowest (a minute): the inner loop"
	@echo "make unit    ruff, the import contracts and every unit test, notebooks left out"
	@echo "make prose-numbers   after make notebooks: every number the prose states is printed"
	@echo "             beside it, read from a committed result, or declared with its source"
	@echo "make site    execute the notebooks if needed and render the course to site/"
	@echo "             (MODEL=build/train/best.pt: its Try-it page runs your checkpoint)"
	@echo "make web CHECKPOINT=build/train/best.pt   a Try-it page of its own for your model, in"
	@echo "             build/web/ (python -m toolkit.web CHECKPOINT --output DIR, without make)"
	@echo "make site-student   the same without the exercises' answers, in site-student/"
	@echo "make student write student/: the notebooks without the exercise answers, for a class"
	@echo "             (a copy already there is kept: delete it for a fresh one)"
	@echo "make student-kit   build/student-kit/transformer-course.zip: what a student needs on"
	@echo "             their own laptop, without the answers (python3 course.py lab, in it)"
	@echo "make lab     open notebooks/ in JupyterLab: the teacher's edition, with the answers"
	@echo "make data    regenerate the built-in corpus in assets/data/"
	@echo "make mutants plant every classic bug and check a test catches it; writes assets/mutants.json"
	@echo "             (make mutants ONLY=bug04 tries only the mutations whose names contain bug04)"
	@echo "make ladder  retrain every stage on the shared budget, three seeds each; writes assets/ladder.json"
	@echo "make ladder-check   after a code change: rerun seed 0 of every stale rung and ablation"
	@echo "             row; where every number is the same, re-stamp them, else name what moved"
	@echo "make ablation  train stage 07 with and without each of the paper's options, three seeds"
	@echo "             each (about an hour on two cores); writes assets/ablation.json"
	@echo "make kept-runs   train the runs notebooks 10, 12, 13 and 14 read back (about 4 minutes"
	@echo "             on two cores) and copy them into assets/kept-runs/, to commit after a code change"
	@echo "make bench   time stage 07 against torch.nn.Transformer, the real-text pipeline on a"
	@echo "             synthetic million-pair corpus, beam search, the training command's step"
	@echo "             against the CPU's matrix-multiply rate, and the Try-it page in Chromium"
	@echo "             (about 15 minutes; benchmarks/results.json and the README's tables of it)"
	@echo "make train   train stage 07 on one process, evaluating as it goes; Ctrl-C saves, and"
	@echo "             ARGS=--resume goes on (build/train/: last.pt, best.pt, log.csv, chart.png)"
	@echo "             (ARGS=\"--time-limit 30\": as many steps as fit in 30 minutes, planned)"
	@echo "             (make train ARGS=--help lists every option: corpus, BPE, model, device)"
	@echo "make train-ddp NPROC=2   the same training with torchrun + DistributedDataParallel,"
	@echo "             into build/ddp/ (ARGS=... takes the same options)"
	@echo "make diff A=03 B=04   print what stage B changes in stage A (or: make diff 03 04;"
	@echo "             make diff A=03 alone compares stage 03 with stage 04)"
	@echo "make clean   remove build/, site/, site-student/, student/ and the virtualenv"

setup: $(INSTALLED)

# course.py does it, as it does for a student without make: pip installs torch (where pip is
# set up to find its CPU wheel, or where you installed it first: see the README) and uv; uv
# installs the other pins, fetching them side by side: about 10 s where pip took 80 to 150.
# It runs every time and decides by a hash of the pins, not by dates (a kit unzipped over an
# older one dates every file alike): where .venv is current it returns at once.
$(INSTALLED): FORCE
	@$(PYTHON) course.py setup --quiet
FORCE:

# The runs the notebooks read back (course_tools.paper_run: notebook 10's paper run; notebook
# 12's BPE run and notebook 14's stage 08) are committed in assets/kept-runs/ for the code that
# trained them. Where the code has changed since, they train again into build/paper-run/ beside
# the unit tests (the paper run on one thread, the other two one after the other on another), so
# that no notebook spends its budget on them; `make notebooks` then finds them kept (or waits for
# one still training). Logs: build/*-runs.log. `make kept-runs` records them again.
KEPT_RUNS := $(NOTEBOOK_ENV) $(BIN)/python -m course_tools.paper_run
test: $(INSTALLED)
	mkdir -p build
	$(KEPT_RUNS) paper > build/paper-runs.log 2>&1 & paper=$$!; \
	$(KEPT_RUNS) subwords decoder-only > build/other-runs.log 2>&1 & others=$$!; \
	$(MAKE) --no-print-directory unit mutants-check; status=$$?; \
	wait $$paper && wait $$others || { cat build/*-runs.log; exit 1; }; \
	grep -h "final training loss" build/paper-runs.log build/other-runs.log; exit $$status
	$(MAKE) --no-print-directory notebooks prose-numbers student-tests site-tests
	@$(MAKE) --no-print-directory notebook-times

# Every number in the prose of the executed notebooks, the README and docs must be printed by
# an output of the same notebook, or come from a committed results file, or be declared a
# constant with its source in assets/prose-constants.toml (course_tools.prose_numbers).
prose-numbers: $(INSTALLED)
	$(BIN)/python -m course_tools.prose_numbers $(addprefix build/,$(NOTEBOOKS)) README.md docs/*.md

# Each notebook's time in the last run against its budget: a report that fails nothing.
notebook-times: $(INSTALLED)
	@$(BIN)/python -m course_site.notebook_times $(NOTEBOOK_TIMES)

quick: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(UNIT_TESTS) -m "not slow"

unit: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(UNIT_TESTS) --durations=15

# Plant each bug of course_tools/mutations.py in a temporary copy of the code and run the tests
# that import it: every mutation must be killed by a failing assertion. Where the committed
# table was recorded with this very code, tests and data (assets/mutants.code), it stands.
mutants-check: $(INSTALLED)
	$(BIN)/python -m course_tools.mutants --unless-recorded

# The same, then record the table that notebook 09 shows (the whole catalogue only).
ONLY ?=
mutants: $(INSTALLED)
	$(BIN)/python -m course_tools.mutants $(if $(ONLY),$(ONLY),--record)

# Trained afresh here, not copied from a run `make test` trained beside the unit tests, so that
# the committed training times are those of one thread beside one other run. Where the committed
# runs are current, they are found kept and nothing is trained.
kept-runs: $(INSTALLED)
	rm -f build/paper-run/*.pt
	$(KEPT_RUNS) subwords decoder-only & others=$$!; $(KEPT_RUNS) paper && wait $$others
	$(KEPT_RUNS) --record

# Execute copies, never the committed sources: --overwrite writes outputs into build/.
# The kept runs are found kept (in assets/kept-runs/ or build/paper-run/) or trained first, once,
# two at a time: notebooks 10 and 13 both read the paper run back, 12 and 14 theirs, and none
# spends its time budget training.
notebooks: $(INSTALLED)
	rm -rf build/notebooks && mkdir -p build/notebooks
	cp $(NOTEBOOKS) build/notebooks/
	$(KEPT_RUNS) subwords decoder-only & others=$$!; $(KEPT_RUNS) paper && wait $$others
	@echo "executing $(words $(NOTEBOOK_ORDER)) notebooks in build/notebooks/, two at a time (about 5"
	@echo "minutes on two cores); a line names each notebook as it ends, with the share done"
	$(NOTEBOOK_ENV) $(NBMAKE) -v --junitxml=$(NOTEBOOK_TIMES) $(NOTEBOOK_ORDER)
	touch $(EXECUTED)

# The class's copies: every cell tagged `solution` left out, outputs cleared (never committed).
# Copies already in student/ are kept, since they may hold a student's work.
student: $(INSTALLED)
	$(BIN)/python -m course_tools.student

# The zip a class gets: the course without its answers, tests or teacher's guide; a student
# unzips it and runs `python3 course.py lab` (docs/students.md, its README).
student-kit: $(INSTALLED)
	$(BIN)/python -m course_tools.student_kit

# The kit, unzipped outside the repository; its code (PYTHONPATH: this virtualenv, the kit's
# own packages and data) writes the student copies beside it and runs them there: before any
# exercise is solved, each check must fail with its hint. .ci/student-laptop does the same on
# Python 3.13 with the kit's own set-up, as a student's laptop does.
student-tests: $(INSTALLED)
	folder=$$(mktemp -d) && $(BIN)/python -m course_tools.student_kit --to $$folder/kit.zip && \
	$(BIN)/python -m zipfile -e $$folder/kit.zip $$folder && export \
		PYTHONPATH=$$folder/transformer-course/src STUDENT_NOTEBOOKS=$$folder/student && \
	$(BIN)/python -m course_tools.student --to $$folder/student && \
	$(NOTEBOOK_ENV) $(BIN)/pytest tests/student -n 2 -p no:cacheprovider --timeout=900 \
		--durations=0; status=$$?; rm -rf $$folder; exit $$status

$(EXECUTED): $(NOTEBOOKS) $(SOURCES) | $(INSTALLED)
	$(MAKE) notebooks

# MathJax 3 for the offline site: installed from npm at build time, never committed.
$(MATHJAX):
	mkdir -p build/mathjax
	cd build/mathjax && npm install --silent --no-audit --no-fund --no-save mathjax@3.2.2

# MODEL=build/train/best.pt: the Try-it page runs that checkpoint instead of notebook 10's.
site: $(EXECUTED) $(MATHJAX)
	$(BIN)/python -m course_site $(if $(MODEL),--model $(MODEL))

# The same site for a class during the course: answers left out, checks shown unrun.
site-student: $(EXECUTED) $(MATHJAX)
	$(BIN)/python -m course_site --student $(if $(MODEL),--model $(MODEL))

# The site's own tests: offline resources, links, and a real browser when there is one. The
# two sites build side by side (each in its own build/ folder), one per core. The tests run in
# one process: most of their time is one test's 200 translations, which a second process
# would only repeat (measured: 65 s in one process, 67 s in two).
site-tests: $(EXECUTED) $(MATHJAX)
	$(MAKE) --no-print-directory -j 2 site site-student
	REQUIRE_SITE=1 $(BIN)/pytest tests/site -p no:cacheprovider --timeout=600

# Jupyter refuses to start as root without --allow-root: course images and cloud VMs often are.
lab: $(INSTALLED)
	$(BIN)/jupyter lab notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

data: $(INSTALLED)
	$(BIN)/python -m toolkit.text.corpus

BASE ?=
ladder-check: $(INSTALLED)
	$(NOTEBOOK_ENV) $(BIN)/python -m course_tools.ladder_check $(if $(BASE),--base $(BASE),)

ladder: $(INSTALLED)
	$(NOTEBOOK_ENV) $(BIN)/python -m course_tools.recompute ladder

ablation: $(INSTALLED)
	$(NOTEBOOK_ENV) $(BIN)/python -m course_tools.recompute ablation

bench: $(INSTALLED)
	$(BIN)/python benchmarks/bench.py

ARGS ?=
# A Try-it page of its own for a checkpoint (python -m toolkit.web), in build/web/.
CHECKPOINT ?= build/train/best.pt
web: $(INSTALLED)
	$(BIN)/python -m toolkit.web $(CHECKPOINT) --output build/web

train: $(INSTALLED)
	$(BIN)/python -m toolkit.train $(ARGS)

# torchrun starts NPROC processes; gloo on CPU, NCCL on GPUs (NPROC=gpu: one per GPU).
NPROC ?= 2
train-ddp: $(INSTALLED)
	OMP_NUM_THREADS=1 $(BIN)/torchrun --standalone --nproc-per-node=$(NPROC) \
		-m toolkit.train.ddp $(ARGS)

# make diff A=03 B=04, or make diff 03 04; with one stage, what the next one changes in it.
A ?= 01
B ?=
ifeq (diff,$(firstword $(MAKECMDGOALS)))
  DIFF_STAGES := $(wordlist 2,3,$(MAKECMDGOALS))
  $(eval $(DIFF_STAGES):;@:)
endif
diff: $(INSTALLED)
	@$(BIN)/python -m toolkit.figures.stagediff $(or $(DIFF_STAGES),$(A) $(B))

clean:
	rm -rf build site site-student student $(VENV) .pytest_cache .ruff_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
