"""`--time-limit`: the steps that fit, planned from the run's own steps; a run that ends on
time with every file written; a resume that keeps the plan and ends bit for bit where the
same plan, given as options, ends unbroken. And the command's fast path, which must train
to the numbers of stage 07's own code."""

import argparse
import math
import random
import re
import signal
import subprocess
import tempfile
import time

import pytest
import torch
from interruptions import (
    ENV,
    TINY,
    ddp,
    differing_parameters,
    measured_here,
    run,
    saved,
    single,
    stop_at,
)

from toolkit.learning.checkpoints import CheckpointError
from toolkit.train import fast_path, run_files, time_budget, training_run
from toolkit.train.command import main
from toolkit.train.run_log import read_log
from toolkit.train.run_options import build_parser, parse_options, resolve_precision, run_settings
from toolkit.train.run_state import check_same_run
from toolkit.train.time_budget import (
    AVERAGED_SHARE,
    EVALUATIONS,
    SAFETY,
    Costs,
    Deadline,
    Measured,
    Plan,
    final_seconds,
    parse_duration,
    plan_steps,
)

# TINY without the options a time limit plans (evaluations and saves), averaging 3 saves.
PLANNED = [option for i, option in enumerate(TINY)
           if option not in ("--eval-every", "--save-every")
           and TINY[i - 1] not in ("--eval-every", "--save-every")] + ["--average-last", "3"]


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 1800), ("0.5", 30), ("90s", 90), ("45m", 2700), ("45min", 2700), ("1h30m", 5400),
    ("1.5h", 5400), ("2h", 7200), ("1h 5m 10s", 3910), ("10M", 600)])
def test_a_time_limit_reads_as_minutes_or_hours_minutes_and_seconds(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "30x", "1m30h", "-5", "0", "0m", "inf", "nan"])
def test_a_time_limit_that_is_no_duration_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


def spent(plan, costs: Costs) -> float:
    """The time a plan takes, counted the way the loop acts: every step, each evaluation
    with its last.pt and best.pt, each scheduled save (and its step-N.pt), then the end."""
    seconds = 0.0
    for step in range(1, plan.steps):
        evaluated, scheduled = step % plan.eval_every == 0, step % plan.save_every == 0
        seconds += costs.step + evaluated * costs.evaluation + costs.save * (
            (evaluated or scheduled)  # last.pt
            + evaluated  # best.pt, if it is
            + (scheduled and plan.average_last > 0))  # step-N.pt
    return seconds + costs.step + final_seconds(costs, plan.average_last)


@pytest.mark.parametrize("given", [[], ["--eval-every", "50"], ["--save-every", "20"],
                                   ["--average-last", "5"], ["--warmup-steps", "10"]])
@pytest.mark.parametrize("costs", [Costs(0.1, 5.0, 0.2), Costs(0.02, 30.0, 1.0),
                                   Costs(1.5, 0.5, 0.01)])
def test_a_plan_fills_the_time_and_no_more(given, costs):
    """Fails if the plan leaves out the evaluations, the saves or the end, or leaves time
    for more than a handful of steps unused."""
    args = parse_options(build_parser("t", "", None), ["--time-limit", "20m", *given])
    plan = plan_steps(1200, costs, args, warmup_share=0.08)
    assert spent(plan, costs) <= 1200 + 1e-6  # float sums of the same terms
    # The plan's own arithmetic spreads its fixed costs evenly; the loop's exact count may
    # differ by one evaluation or save, so a few steps more must not fit as well.
    slack = (costs.evaluation + 3 * costs.save) / costs.step + 2
    assert spent(type(plan)(**{**vars(plan), "steps": plan.steps + math.ceil(slack)}),
                 costs) > 1200
    if "--eval-every" not in given:
        assert math.ceil(plan.steps / plan.eval_every) == EVALUATIONS
    if "--warmup-steps" not in given:
        assert plan.warmup_steps == round(0.08 * plan.steps)
    if plan.average_last and "--save-every" not in given:  # the kept saves: the last tenth
        assert plan.save_every * plan.average_last == pytest.approx(
            AVERAGED_SHARE * plan.steps, abs=plan.average_last)


def test_too_short_a_limit_says_what_one_step_and_one_evaluation_take():
    args = parse_options(build_parser("t", "", None), ["--time-limit", "10s"])
    with pytest.raises(ValueError, match="one step takes about 0.50 s, one evaluation 20.0 s"):
        plan_steps(10, Costs(0.5, 20.0, 0.1), args, 0.1)


def test_a_checkpoint_from_before_the_fast_path_resumes_only_without_it(tmp_path):
    """Its settings lack fast_path; it trained the stage's own code, so --no-fast-path goes
    on with it, and the default is refused by name rather than resumed with other masks."""
    args = parse_options(build_parser("t", "", None), ["--no-fast-path"])
    settings = run_settings(args)
    older = {name: value for name, value in settings.items() if name != "fast_path"}
    training = {"settings": older, "world_size": 1, "data": "same"}
    check_same_run(training, settings, "same", 1, tmp_path / "last.pt")
    with pytest.raises(CheckpointError, match="--fast-path: the checkpoint has False"):
        check_same_run(training, {**settings, "fast_path": True}, "same", 1,
                       tmp_path / "last.pt")


def test_the_clock_counts_what_the_step_still_has_to_do_then_one_more_and_the_end(
        monkeypatch):
    """Fails if the clock forgets this step's evaluation or saves, or the end's."""
    monkeypatch.setattr(time_budget, "now", lambda: 100.0)
    plan = Plan(steps=100, warmup_steps=0, eval_every=10, save_every=5, average_last=0,
                costs=Costs(step=1.0, evaluation=3.0, save=0.5))
    end = final_seconds(plan.costs, 0)  # 3 + 3 x 0.5
    at = time_budget.now()
    assert not Deadline(at + 1 + end + 0.2, plan, Measured()).no_room_after(3, 1.0)
    assert Deadline(at + 1 + end - 0.2, plan, Measured()).no_room_after(3, 1.0)
    assert not Deadline(at + 0.5 + 1 + end + 0.2, plan, Measured()).no_room_after(5, 1.0)
    assert Deadline(at + 0.5 + 1 + end - 0.2, plan, Measured()).no_room_after(5, 1.0)
    evaluation = 3.0 + 2 * 0.5 + 0.5  # step 10 evaluates, and saves as scheduled too
    assert not Deadline(at + evaluation + 1 + end + 0.2, plan, Measured()).no_room_after(10, 1)
    assert Deadline(at + evaluation + 1 + end - 0.2, plan, Measured()).no_room_after(10, 1.0)


def test_the_clock_counts_the_end_at_what_evaluations_and_saves_took_if_that_is_more(
        monkeypatch):
    """An evaluation measured 3 s slower than planned: the end is counted at the measured
    time, not the probe's (fails if the Deadline reads the plan's costs alone)."""
    monkeypatch.setattr(time_budget, "now", lambda: 100.0)
    plan = Plan(steps=100, warmup_steps=0, eval_every=10, save_every=5, average_last=0,
                costs=Costs(step=1.0, evaluation=3.0, save=0.5))
    slower = Measured(evaluation=6.0 / SAFETY, save=1.0 / SAFETY)
    end = 6.0 + 3 * 1.0
    assert Deadline(100.0 + 1 + end - 0.2, plan, slower).no_room_after(3, 1.0)
    assert not Deadline(100.0 + 1 + end + 0.2, plan, slower).no_room_after(3, 1.0)
    assert slower.costs(plan.costs) == pytest.approx(Costs(1.0, 6.0, 1.0))
    # steps go at the pace measured since the last revision, slower or faster
    assert Measured(step_seconds=5.0, steps=10).costs(plan.costs).step == 0.5 * SAFETY


def test_a_resumed_run_with_no_time_left_after_its_set_up_trains_nothing_and_says_why(
        monkeypatch):
    monkeypatch.setattr(time_budget, "now", lambda: 100.0)
    plan = Plan(steps=100, warmup_steps=0, eval_every=10, save_every=5, average_last=3,
                costs=Costs(step=1.0, evaluation=3.0, save=0.5))
    assert Deadline(100.0 + 20, plan, Measured()).no_room_for_a_step(20) is None
    why = Deadline(100.0 + 4, plan, Measured()).no_room_for_a_step(4)
    assert why.startswith("only 4 s of this invocation's --time-limit is left")
    assert "nothing was trained" in why and "resume with more time" in why
    assert "only 0 s" in Deadline(100.0 - 115, plan, Measured()).no_room_for_a_step(-115)


def test_no_time_to_train_never_reads_negative_and_names_every_cost():
    """The set-up took more than the limit: "leaving 0 s", never "-1 min 55 s"; and the
    evaluations and saves along the way are named, since they are what used the time."""
    args = parse_options(build_parser("t", "", None), ["--time-limit", "60s",
                                                       "--average-last", "5"])
    with pytest.raises(ValueError) as refused:
        plan_steps(-115, Costs(0.5, 20.0, 0.1), args, 0.1)
    message = str(refused.value)
    assert "the set-up used 2 min 55 s of it, leaving 0 s" in message and "-" not in \
        message.split("--time-limit")[1].split(":")[0] + message.split("leaving")[1][:5]
    assert "4 evaluations along the way at 20.0 s, 50 saves to average at 0.10 s" in message


def test_a_recipe_fills_only_what_the_user_left_out():
    parser = build_parser("t", "", None)
    args = parse_options(parser, ["--recipe", "real-text"])
    assert (args.tokenizer, args.vocab_size, args.shared_vocab, args.max_tokens,
            args.average_last, args.precision, args.tie_embeddings) == \
        ("bpe", 8000, True, 4000, 5, "auto", "all")
    args = parse_options(parser, ["--recipe", "real-text", "--tokenizer", "word",
                                  "--batch-size", "32", "--no-shared-vocab",
                                  "--tie-embeddings", "output", "--average-last", "0"])
    assert (args.tokenizer, args.batch_size, args.max_tokens, args.shared_vocab,
            args.average_last, args.vocab_size) == ("word", 32, None, False, 0, None)
    args = parse_options(parser, [])  # the paper recipe keeps the command's defaults
    assert (args.tokenizer, args.shared_vocab, args.average_last, args.precision) == \
        ("word", False, 0, "float32")


def test_auto_precision_is_bf16_only_where_the_processor_computes_it(monkeypatch):
    cpu = torch.device("cpu")
    for native in (True, False):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda native=native: native)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
        assert resolve_precision("auto", cpu) == ("bf16" if native else "float32")
    assert resolve_precision("float64", cpu) == "float64"


def test_uniform_dropout_keeps_one_minus_p_and_scales_what_it_keeps():
    """Fails if the mask keeps p instead of 1 - p, forgets the 1 / (1 - p) scale, drops in
    eval mode, or draws from another stream than torch's (a resume restores that one)."""
    dropout = fast_path.UniformDropout(0.1).train()
    x = torch.full((1000, 1000), 2.0)
    torch.manual_seed(0)
    out = dropout(x)
    kept = out != 0
    # a million draws: the kept share is 0.9 within 5 standard deviations (0.0003 each)
    assert abs(kept.float().mean().item() - 0.9) < 5 * math.sqrt(0.9 * 0.1 / x.numel())
    assert torch.equal(out[kept], torch.full_like(out[kept], 2.0 / 0.9))
    torch.manual_seed(0)
    assert torch.equal(dropout(x), out)
    assert dropout.eval()(x) is x
    assert fast_path.UniformDropout(0.0).train()(x) is x


def test_the_fast_path_trains_to_the_numbers_of_the_stage_code(tmp_path, capsys):
    """Without dropout, in float64, 30 steps with fused attention end where stage 07's own
    code ends, up to rounding; fails if the fused call scales or masks otherwise."""
    options = ["--recipe", "stage07", "--precision", "float64", "--steps", "30",
               "--batch-size", "16", "--eval-every", "30", "--eval-sentences", "10"]
    for name, switch in (("fast", "--fast-path"), ("stage", "--no-fast-path")):
        assert main([*options, switch, "--output", str(tmp_path / name)]) == 0
    fast = saved(tmp_path / "fast" / "last.pt")["state_dict"]
    stage = saved(tmp_path / "stage" / "last.pt")["state_dict"]
    largest = max((fast[name] - stage[name]).abs().max().item() for name in fast)
    assert largest < 1e-10
    capsys.readouterr()


# --- On a fake clock: a machine that turns slower, and a resume, exactly --------------------

class Killed(BaseException):
    """SIGKILL, in the same process: nothing catches it, nothing is saved."""


class FakeClock:
    """Time that passes only when the run does something: each step, evaluation and saved
    file costs so many seconds, and from step `slower_from` on a step costs twice as many
    (another program took a core). So a run's decisions depend on nothing this machine's
    speed can change, and the same run takes the same decisions twice."""

    def __init__(self, monkeypatch, slower_from: int, kill_at: int | None = None,
                 step: float = 0.25, evaluation: float = 4.0, save: float = 0.5):
        self.time, self.slower_from, self.kill_at = 1000.0, slower_from, kill_at
        self.costs = Costs(step, evaluation, save)
        self.saved_at: dict[int, float] = {}  # step -> the time its last.pt was written
        monkeypatch.setattr(time_budget, "now", lambda: self.time)
        monkeypatch.setattr(training_run, "take_step", self.charged(training_run.take_step))
        for module in (time_budget, training_run, run_files):
            monkeypatch.setattr(module, "save_checkpoint", self.saving(module.save_checkpoint))
        monkeypatch.setattr(time_budget, "validation_loss",
                            self.after(time_budget.validation_loss, evaluation))
        monkeypatch.setattr(training_run, "evaluate_during_training",
                            self.after(training_run.evaluate_during_training, evaluation))
        averaging = training_run.average_kept
        monkeypatch.setattr(training_run, "average_kept", lambda *args: self.after(
            averaging, 2 * args[-1] * save)(*args))

    def after(self, function, seconds: float):
        def timed(*args, **kwargs):
            result = function(*args, **kwargs)
            self.time += seconds
            return result
        return timed

    def charged(self, take_step):
        def step(replica, optimizer, *args, **kwargs):
            number = optimizer.scheduler.last_epoch + 1  # restored on resume, 1 in the probe
            if number == self.kill_at:
                raise Killed
            self.time += self.costs.step * (2 if number >= self.slower_from else 1)
            return take_step(replica, optimizer, *args, **kwargs)
        return step

    def saving(self, save_checkpoint):
        def save(path, *args, **kwargs):
            written = save_checkpoint(path, *args, **kwargs)
            self.time += self.costs.save
            if path.name == "last.pt":
                self.saved_at[args[-1]["progress"]["step"]] = self.time
            return written
        return save


LIMIT = 300  # seconds of fake time: about 900 steps of 0.25 s, some 2x slower
SLOWER_FROM = 250  # after the first evaluation (about step 180): its plan is for twice as many


def limited_run(folder, *options: str) -> list[str]:
    return [*PLANNED, "--output", str(folder), *options]


@pytest.mark.parametrize("save", [0.5, 3.0])  # a saved file: 2 or 12 steps' worth
def test_a_run_that_turns_twice_as_slow_still_evaluates_five_times_and_ends_in_time(
        tmp_path, monkeypatch, capsys, save):
    """Fails if the plan is never revised: the first plan's evaluations, saves and end were
    for steps that take half the time, so it makes 4 evaluations, not 5, and averages saves
    from an earlier part of the run than its last tenth. With saves that take long, the
    saves to average weigh most in the first plan, and the revisions give back what the
    run no longer needs for them."""
    clock = FakeClock(monkeypatch, SLOWER_FROM, save=save)
    started = clock.time
    assert main(limited_run(tmp_path, "--time-limit", f"{LIMIT}s"), started=started) == 0
    out = capsys.readouterr().out
    took = clock.time - started
    first = int(re.search(r"--time-limit 5 min 00 s: ([\d,]+) steps fit", out)[1].replace(",", ""))
    rows = read_log(tmp_path / "log.csv")
    end = rows[-1]["step"]
    evaluated = [row["step"] for row in rows if row["val_bleu"] is not None]
    averaged = [int(step) for step in re.search(r"averaged the checkpoints of steps ([\d, ]+)",
                                                out)[1].split(", ")]
    print(f"planned {first} steps, revised to {end}; evaluated at {evaluated}; averaged "
          f"{averaged}; took {took} of {LIMIT} s")
    if save < 2 * clock.costs.step:  # else the saves to average dominate the first plan
        assert end < 0.8 * first  # it learnt the steps were slower
    assert len(evaluated) == EVALUATIONS and evaluated[-1] == end
    assert min(averaged) >= 0.9 * end and len(averaged) == 3 and averaged[-1] == end
    assert 0.9 * LIMIT < took <= LIMIT  # in time, about the 5% margin left unused
    assert "out of time" not in out  # the revised plan fitted; the clock had no need to stop it


def test_a_revised_plan_killed_and_resumed_ends_bit_for_bit_as_the_run_never_stopped(
        tmp_path, monkeypatch, capsys):
    """The plan and what the run measured go into every checkpoint, so a run resumed with
    the time the unbroken run had left revises its plan as that one did: the same steps,
    evaluations, saves and average (fails if the resume loses the measurements, the
    revised plan, or the count of evaluations made)."""
    clock = FakeClock(monkeypatch, SLOWER_FROM)
    unbroken = main(limited_run(tmp_path / "unbroken", "--time-limit", f"{LIMIT}s"),
                    started=clock.time)
    assert unbroken == 0
    # Killed after a save past SLOWER_FROM, before the second evaluation: the steps since the
    # first are part fast, part slow, and the revision at the second must still see them all.
    evaluated = [row["step"] for row in read_log(tmp_path / "unbroken" / "log.csv")
                 if row["val_bleu"] is not None]
    kill_at = random.SystemRandom().randint(SLOWER_FROM + 40, evaluated[1] - 1)
    print(f"killed at step {kill_at}")  # to replay a failure
    killed = tmp_path / "killed"
    clock = FakeClock(monkeypatch, SLOWER_FROM, kill_at=kill_at)
    started = clock.time
    with pytest.raises(Killed):
        main(limited_run(killed, "--time-limit", f"{LIMIT}s"), started=started)
    checkpoint = saved(killed / "last.pt")["training"]
    reached = checkpoint["progress"]["step"]
    assert reached < kill_at and checkpoint["plan"]["chosen"] == ["steps", "eval_every",
                                                                  "save_every"]
    clock.kill_at = None
    left = started + LIMIT - clock.saved_at[reached]  # what the unbroken run had left there
    assert main(limited_run(killed, "--resume", "--time-limit", f"{left}s"),
                started=clock.time) == 0
    capsys.readouterr()
    for name in ("last.pt", "averaged.pt"):
        assert differing_parameters(tmp_path / "unbroken" / name, killed / name) == {}, name
    rows = [read_log(folder / "log.csv") for folder in (tmp_path / "unbroken", killed)]
    assert [(r["step"], r["loss"], r["val_bleu"]) for r in rows[0]] == \
        [(r["step"], r["loss"], r["val_bleu"]) for r in rows[1]]
    plans = [saved(folder / "last.pt")["training"]["plan"] for folder in (tmp_path / "unbroken",
                                                                          killed)]
    assert plans[0] == plans[1]
    assert sorted(p.name for p in killed.glob("step-*.pt")) == \
        sorted(p.name for p in (tmp_path / "unbroken").glob("step-*.pt"))


def test_averaging_never_takes_two_saves_closer_than_half_the_save_interval(tmp_path,
                                                                            monkeypatch):
    """An early stop saved step 1861 just after the scheduled 1846: averaging 1775, 1846 and
    1861 would weigh one moment twice, so 1846 gives way to the one before it."""
    names = [tmp_path / f"step-{step:08d}.pt" for step in (1562, 1633, 1704, 1775, 1846, 1861)]
    assert [p.name[5:13] for p in run_files.spaced(names, 71 / 2)] == \
        ["00001562", "00001633", "00001704", "00001775", "00001861"]
    assert run_files.spaced(names[:4], 71 / 2) == names[:4]
    for path in names:
        path.touch()
    averaged = []
    monkeypatch.setattr(run_files, "average_checkpoints", lambda paths, _: averaged.extend(paths))
    assert run_files.average_kept(tmp_path, 1861, 71, 5) == averaged == [
        names[0], names[1], names[2], names[3], names[5]]


# --- The real command, with limits sized by what this machine measured ---------------------

@pytest.fixture(scope="module")
def sized_limit():
    """A time limit for a TINY run on this machine as it is now: twice a short run's whole
    time (start-up, corpus, evaluation, saves) plus 400 steps' worth, so the set-up never
    eats the plan however slow the machine, and the run takes a few hundred steps."""
    wall, step = measured_here(single("--output", tempfile.mkdtemp(), *TINY, "--steps", "40"))
    return math.ceil(2 * wall + 400 * step)


@pytest.mark.slow
def test_a_short_limit_ends_on_time_with_every_file_written(tmp_path, sized_limit):
    """Fails if the plan forgets what evaluating and saving cost, or the clock lets the
    last steps run over by half the limit (the fake-clock tests above hold it to the limit
    exactly; here another program may slow any part of the run)."""
    start = time.perf_counter()
    result = run(single("--output", str(tmp_path), "--time-limit", f"{sized_limit}s",
                        *PLANNED))
    took = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    assert took < 1.5 * sized_limit, f"a {sized_limit} s limit took {took:.1f} s"
    rows = read_log(tmp_path / "log.csv")
    planned = saved(tmp_path / "last.pt")["training"]["plan"]
    assert re.search(r"[\d,]+ steps fit, measured", result.stdout)
    assert rows[-1]["step"] == planned["steps"] or "out of time after step" in result.stdout
    assert rows[-1]["val_bleu"] is not None  # evaluated at the end
    assert rows[-1]["step"] > 50  # the time was used for training
    for name in ("last.pt", "best.pt", "averaged.pt", "log.csv", "chart.png"):
        assert (tmp_path / name).exists(), name
    assert len(list(tmp_path.glob("step-*.pt"))) == 4  # the 3 averaged, and one to spare


@pytest.mark.slow
def test_a_time_limited_run_killed_and_resumed_ends_as_its_plan_run_unbroken(
        tmp_path, sized_limit):
    """The resumed run keeps the schedule its checkpoint holds (not a new one from a new
    probe; its revisions move only the last step, since the options give the evaluations
    and saves), and its last plan given as options trains the same steps, bit for bit."""
    killed_folder, unbroken_folder = tmp_path / "killed", tmp_path / "unbroken"
    options = ["--output", str(killed_folder), *PLANNED, "--save-every", "7",
               "--eval-every", "40"]
    command = single(*options, "--time-limit", f"{sized_limit}s")
    process = subprocess.Popen(command, env=ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, encoding="utf-8",
                               start_new_session=True)
    first_line = ""
    while "steps fit" not in first_line and process.poll() is None:
        first_line = process.stdout.readline()
    planned = int(re.search(r"([\d,]+) steps fit", first_line)[1].replace(",", ""))
    kill_at = random.SystemRandom().randint(max(50, planned // 5), max(60, planned * 2 // 5))
    print(f"planned {planned} steps, killed at step {kill_at}")  # to replay a failure
    killed = stop_at(process, killed_folder, kill_at, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    checkpoint = saved(killed_folder / "last.pt")["training"]
    plan, reached = checkpoint["plan"], checkpoint["progress"]["step"]
    assert reached < plan["steps"]
    refused = run(single(*options, "--resume"))
    assert refused.returncode == 2
    assert f"planned by --time-limit for {plan['steps']:,} steps" in refused.stderr
    resumed = run(single(*options, "--resume", "--time-limit", f"{sized_limit}s"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming at step {reached + 1} of {plan['steps']:,}" in resumed.stdout
    plan = saved(killed_folder / "last.pt")["training"]["plan"]
    end = saved(killed_folder / "last.pt")["training"]["progress"]["step"]
    as_options = ["--steps", str(end), "--warmup-steps", str(plan["warmup_steps"]),
                  "--eval-every", "40", "--save-every", "7", "--average-last",
                  str(plan["average_last"])]
    unbroken = run(single("--output", str(unbroken_folder), *TINY, *as_options))
    assert unbroken.returncode == 0, unbroken.stderr
    for name in ("last.pt", "averaged.pt"):
        assert differing_parameters(unbroken_folder / name, killed_folder / name) == {}, name
    assert [r["loss"] for r in read_log(killed_folder / "log.csv")] == \
        [r["loss"] for r in read_log(unbroken_folder / "log.csv")]
    # Beyond a finished plan: --steps trains on, with the plan's warm-up kept.
    further = run(single(*options, "--resume", "--steps", str(end + 20)))
    assert further.returncode == 0, further.stderr
    assert saved(killed_folder / "last.pt")["training"]["progress"]["step"] == end + 20


@pytest.mark.slow
def test_two_processes_plan_the_same_steps_and_stop_together(tmp_path, sized_limit):
    """Every process must plan (and revise) the same steps and end after the same one, or a
    collective waits forever; the replicas end equal (the command compares them). Two
    processes start and set up slower than one: the limit is sized by a two-process run."""
    wall, step = measured_here(ddp(2, "--output", str(tmp_path / "sizing"), *TINY,
                                   "--steps", "40"))
    limit = math.ceil(2 * wall + 400 * step)
    result = run(ddp(2, "--output", str(tmp_path / "run"), "--time-limit", f"{limit}s",
                     *PLANNED))
    assert result.returncode == 0, result.stderr
    assert re.search(r"[\d,]+ steps fit, measured", result.stdout)
    assert "largest parameter difference between replicas: 0.0e+00" in result.stdout
