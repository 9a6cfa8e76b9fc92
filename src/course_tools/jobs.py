"""The job that computes every committed row: build a stage from its recipe, train it on one
CPU thread, score it on the test split, and gather the numbers into a `Rung`.

`make ladder` and `make ablation` (`course_tools.recompute`) and `make ladder-check` run every
row through `train_all`, so what this module imports is, by construction, the code a committed
number depends on: `course_tools.staleness` stamps each row with the fingerprint of this
module's import closure and its stage's. Nothing else lives here (the tables, the chart and
the committed files are `course_tools.ladder`'s), so an edit to how the numbers are shown
makes no row stale.
"""

import hashlib
import importlib
import json
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from types import ModuleType

import torch
from torch import nn

from course_tools.numeric_platform import numeric_platform
from toolkit import objectives
from toolkit.batching.batches import endless, loader
from toolkit.batching.data import CourseData, load_data
from toolkit.learning import stream_objectives
from toolkit.learning.recipes import RECIPES, SEEDS, Recipe
from toolkit.learning.training import History, evaluate_loss, train
from toolkit.outline import stage as stage_info
from toolkit.scoring.evaluation import evaluate
from toolkit.scoring.metrics import Report
from toolkit.stage_api import count_parameters


@dataclass(frozen=True)
class Rung:
    """One stage's numbers on the shared budget."""

    stage: int
    title: str
    parameters: int
    steps: int
    batch_size: int
    training_seconds: float
    train_loss: float
    validation_loss: float
    exact_match: float
    bleu: float
    bleu_signature: str
    per_phenomenon: dict[str, float]
    seed: int = 0
    data: dict = field(default_factory=dict)  # load_data's options, when not its defaults
    # What ran, as data: stage, the whole recipe, load_data's options, objective (`job_record`).
    job: dict = field(default_factory=dict)
    # The figures unrounded, with sha256s of the loss history and of the trained weights:
    # what `make ladder-check` compares, bit for bit.
    exact: dict = field(default_factory=dict)
    platform: str = ""  # how the machine that ran it rounds (numeric_platform)
    # The same run's numbers as the same code computed them on other numeric platforms, by
    # platform, each proven by `make ladder-check` there: what a run there must reproduce.
    witnesses: dict = field(default_factory=dict)
    # Stamps (`course_tools.staleness.stamps`): fingerprints of the stage module, of all the
    # code its job imports, of the corpus, and the versions of the libraries that code imports.
    stage_sha256: str = ""
    code_sha256: str = ""
    corpus_sha256: str = ""
    libraries: dict = field(default_factory=dict)


def stage_module(number: int) -> ModuleType:
    return importlib.import_module(f"stages.{stage_info(number).module}")


def rung(
    number: int, model: nn.Module, history: History, validation_loss: float, report: Report,
    recipe: Recipe | None = None, title: str | None = None, data: dict | None = None,
    objective: str | None = None,
) -> Rung:
    """Gather a finished run into its rung of the ladder (or a row of another comparison),
    unstamped (`staleness.stamped` stamps it).

    `data` names the load_data options the run used, when they are not the defaults.
    """
    recipe = recipe or RECIPES[number]
    exact = {"train_loss": history.final_loss(), "validation_loss": validation_loss,
             "exact_match": report.exact_match, "bleu": report.bleu,
             "per_phenomenon": dict(report.per_phenomenon),
             "losses_sha256": hashlib.sha256(repr(history.losses).encode()).hexdigest(),
             "weights_sha256": weights_sha256(model)}
    return Rung(
        stage=number, title=title or stage_info(number).title,
        parameters=count_parameters(model),
        steps=recipe.steps, batch_size=recipe.batch_size,
        training_seconds=round(history.seconds, 1), train_loss=round(history.final_loss(), 4),
        validation_loss=round(validation_loss, 4), exact_match=round(report.exact_match, 2),
        bleu=round(report.bleu, 2), bleu_signature=report.bleu_signature,
        per_phenomenon={k: round(v, 2) for k, v in report.per_phenomenon.items()},
        seed=recipe.seed, data=dict(data or {}),
        job=job_record(number, recipe, data, objective), exact=exact,
        platform=numeric_platform(device_of(model)),
    )


def job_record(number: int, recipe: Recipe, data: dict | None = None,
               objective: str | None = None) -> dict:
    """A job as the data a row stores, exactly as JSON gives it back (tuples as lists)."""
    return json.loads(json.dumps({"stage": number, "recipe": asdict(recipe),
                                  "data": dict(data or {}), "objective": objective}))


def weights_sha256(model: nn.Module) -> str:
    """A sha256 of every parameter and buffer, bit for bit, by name."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(name.encode() + b"\0" + flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def build(number: int, data: CourseData, recipe: Recipe) -> nn.Module:
    """The stage's model as its recipe makes it, from the recipe's seed (ablation knobs too)."""
    stage = stage_module(number)
    torch.manual_seed(recipe.seed)
    model = stage.Transformer(len(data.src_vocab), len(data.tgt_vocab), **recipe.model)
    if recipe.embedding_std is not None:  # tied weights are the same tensor: set once
        for embedding in (model.src_embed, model.tgt_embed):
            nn.init.normal_(embedding.weight, std=recipe.embedding_std)
    if recipe.attention_scale is not None:
        attentions = [m for m in model.modules() if isinstance(m, stage.MultiHeadAttention)]
        if not attentions:
            raise ValueError(f"stage {number:02d} has no scaled multi-head attention to change")
        for attention in attentions:
            attention.scale = recipe.attention_scale
    for part in recipe.without:
        leave_out(model, part)
    return model


class Absent(nn.Module):
    """A sublayer left out: it adds nothing to the residual stream, x + Absent()(x) == x."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)  # (batch, len, embed_dim)


def leave_out(model: nn.Module, part: str) -> None:
    """Build the model without one of its ideas, every copy of it: each feed-forward sublayer
    (`Absent`), or each LayerNorm (`nn.Identity`). The other weights keep the values the seed
    gave them, so the model pairs with the whole one seed by seed."""
    if part not in ("feed_forward", "layer_norm"):
        raise ValueError(f"cannot build a model without {part!r}: name feed_forward or "
                         f"layer_norm")
    replaced = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if part == "feed_forward" and name == "feed_forward":
                setattr(module, name, Absent())
            elif part == "layer_norm" and isinstance(child, nn.LayerNorm):
                setattr(module, name, nn.Identity())
            else:
                continue
            replaced += 1
    if not replaced:
        raise ValueError(f"{type(model).__module__} has no {part} to leave out")


def climb(number: int, data: CourseData, device: torch.device | str = "cpu",
          recipe: Recipe | None = None, title: str | None = None,
          data_options: dict | None = None, objective: str | None = None) -> Rung:
    """Train one stage with its recipe (or another) and score it on the test split.

    `data_options` are the load_data options that made `data`, recorded in the rung;
    `objective` names an objective to train with instead of the stage's own
    (`objective_named`); the validation loss stays the stage's own, so rows compare.
    """
    stage, recipe = stage_module(number), recipe or RECIPES[number]
    model = build(number, data, recipe)
    batches = endless(loader(data.train, recipe.batch_size, seed=recipe.seed))
    trained_on = objective_named(objective) if objective else stage.objective
    history = train(model, trained_on, batches, device=device,
                    description=title or f"stage {number:02d}", **recipe.training())
    validation = loader(data.validation, batch_size=100, shuffle=False)
    validation_loss = evaluate_loss(model, stage.objective, validation, device)
    report, _ = evaluate(model, data, "test", device)
    return rung(number, model, history, validation_loss, report, recipe, title, data_options,
                objective)


def objective_named(name: str) -> Callable:
    """An objective by name: a stage's own (`toolkit.objectives`, stage 02's `last_position`
    given to stage 03, say) or one of stage 08's stream objectives."""
    for module in (objectives, stream_objectives):
        if callable(found := getattr(module, name, None)):
            return found
    raise ValueError(f"no objective is named {name!r} in toolkit.objectives or "
                     f"toolkit.learning.stream_objectives")


# (stage, recipe, title[, load_data options[, objective]]): see `climb`
Job = (tuple[int, Recipe, str | None] | tuple[int, Recipe, str | None, dict]
       | tuple[int, Recipe, str | None, dict, str])


def train_all(jobs: list[Job]) -> list[Rung]:
    """Run (stage, recipe, title[, load_data options[, objective]]) jobs two at a time, one
    thread each."""
    with ProcessPoolExecutor(2) as pool:
        return list(pool.map(_climb_on_one_thread, jobs))


def _climb_on_one_thread(job: Job) -> Rung:
    torch.set_num_threads(1)
    number, recipe, title, *rest = job
    options, objective = rest[0] if rest else {}, rest[1] if len(rest) > 1 else None
    return climb(number, load_data(**options), "cpu", recipe, title, options, objective)


def with_seeds(recipe: Recipe, seeds: Iterable[int] = SEEDS) -> list[Recipe]:
    return [replace(recipe, seed=seed) for seed in seeds]
