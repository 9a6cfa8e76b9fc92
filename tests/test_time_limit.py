"""`--time-limit`: the steps that fit, planned from the run's own steps; a run that ends on
time with every file written; a resume that keeps the plan and ends bit for bit where the
same plan, given as options, ends unbroken. And the command's fast path, which must train
to the numbers of stage 07's own code."""

import argparse
import math
import random
import signal
import time

import pytest
import torch
from interruptions import TINY, ddp, differing_parameters, run, saved, single, stop_at

from toolkit.learning.checkpoints import CheckpointError
from toolkit.train import fast_path
from toolkit.train.command import main
from toolkit.train.run_log import read_log
from toolkit.train.run_options import build_parser, parse_options, resolve_precision, run_settings
from toolkit.train.run_state import check_same_run
from toolkit.train.time_budget import (
    AVERAGED_SHARE,
    EVALUATIONS,
    Costs,
    Deadline,
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


def test_the_clock_counts_what_the_step_still_has_to_do_then_one_more_and_the_end():
    """Fails if the clock forgets this step's evaluation or saves, or the end's."""
    plan = Plan(steps=100, warmup_steps=0, eval_every=10, save_every=5, average_last=0,
                costs=Costs(step=1.0, evaluation=3.0, save=0.5))
    end = final_seconds(plan.costs, 0)  # 3 + 3 x 0.5
    now = time.perf_counter()
    assert not Deadline(now + 1 + end + 0.2, plan).no_room_after(3, 1.0)
    assert Deadline(now + 1 + end - 0.2, plan).no_room_after(3, 1.0)
    assert not Deadline(now + 0.5 + 1 + end + 0.2, plan).no_room_after(5, 1.0)  # a save
    assert Deadline(now + 0.5 + 1 + end - 0.2, plan).no_room_after(5, 1.0)
    evaluation = 3.0 + 2 * 0.5 + 0.5  # step 10 evaluates, and saves as scheduled too
    assert not Deadline(now + evaluation + 1 + end + 0.2, plan).no_room_after(10, 1.0)
    assert Deadline(now + evaluation + 1 + end - 0.2, plan).no_room_after(10, 1.0)


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


@pytest.mark.slow
def test_a_short_limit_ends_on_time_with_every_file_written(tmp_path):
    """Fails if the plan forgets what evaluating and saving cost, or the clock lets the
    last steps run over; and if the time limit is not used."""
    limit = 20
    start = time.perf_counter()
    result = run(single("--output", str(tmp_path), "--time-limit", f"{limit}s", *PLANNED))
    took = time.perf_counter() - start
    assert result.returncode == 0, result.stderr
    assert took < limit * 1.1, f"a {limit} s limit took {took:.1f} s"
    rows = read_log(tmp_path / "log.csv")
    planned = saved(tmp_path / "last.pt")["training"]["plan"]
    assert f"{planned['steps']:,} steps fit" in result.stdout
    assert rows[-1]["step"] == planned["steps"] or "out of time after step" in result.stdout
    assert rows[-1]["val_bleu"] is not None  # evaluated at the end
    assert rows[-1]["step"] > 100 and took > 0.5 * limit  # the time was used
    for name in ("last.pt", "best.pt", "averaged.pt", "log.csv", "chart.png"):
        assert (tmp_path / name).exists(), name
    assert len(list(tmp_path.glob("step-*.pt"))) == 3


@pytest.mark.slow
def test_a_time_limited_run_killed_and_resumed_ends_as_its_plan_run_unbroken(tmp_path):
    """The resumed run keeps the plan its checkpoint holds (not a new one from a new
    probe), and the plan given as options trains the same steps, bit for bit."""
    killed_folder, unbroken_folder = tmp_path / "killed", tmp_path / "unbroken"
    # Saves every 7 steps (the plan keeps what the user gave), so the kill finds one.
    options = ["--output", str(killed_folder), *PLANNED, "--save-every", "7"]
    kill_at = random.SystemRandom().randint(150, 250)
    killed = stop_at(single(*options, "--time-limit", "12s"), killed_folder, kill_at,
                     signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    checkpoint = saved(killed_folder / "last.pt")["training"]
    plan, reached = checkpoint["plan"], checkpoint["progress"]["step"]
    assert reached < plan["steps"]
    refused = run(single(*options, "--resume"))
    assert refused.returncode == 2
    assert f"planned by --time-limit for {plan['steps']:,} steps" in refused.stderr
    resumed = run(single(*options, "--resume", "--time-limit", "10m"))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming at step {reached + 1} of {plan['steps']:,}" in resumed.stdout
    assert saved(killed_folder / "last.pt")["training"]["plan"] == plan
    as_options = ["--steps", str(plan["steps"]), "--warmup-steps", str(plan["warmup_steps"]),
                  "--eval-every", str(plan["eval_every"]), "--save-every",
                  str(plan["save_every"]), "--average-last", str(plan["average_last"])]
    unbroken = run(single("--output", str(unbroken_folder), *TINY, *as_options))
    assert unbroken.returncode == 0, unbroken.stderr
    for name in ("last.pt", "averaged.pt"):
        assert differing_parameters(unbroken_folder / name, killed_folder / name) == {}, name
    assert [r["loss"] for r in read_log(killed_folder / "log.csv")] == \
        [r["loss"] for r in read_log(unbroken_folder / "log.csv")]
    # Beyond a finished plan: --steps trains on, with the plan's warm-up kept.
    further = run(single(*options, "--resume", "--steps", str(plan["steps"] + 20)))
    assert further.returncode == 0, further.stderr
    assert saved(killed_folder / "last.pt")["training"]["progress"]["step"] == plan["steps"] + 20


@pytest.mark.slow
def test_two_processes_plan_the_same_steps_and_stop_together(tmp_path):
    """Every process must plan the same steps and end after the same one, or a collective
    waits forever; the replicas end equal (the command compares them)."""
    result = run(ddp(2, "--output", str(tmp_path), "--time-limit", "25s", *PLANNED))
    assert result.returncode == 0, result.stderr
    planned = saved(tmp_path / "last.pt")["training"]["plan"]
    assert f"{planned['steps']:,} steps fit" in result.stdout
    assert "largest parameter difference between replicas: 0.0e+00" in result.stdout
