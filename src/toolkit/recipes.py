"""How each stage is trained, in its notebook and in the ladder: one place, one budget.

Every stage sees the same training pairs in the same order (`STEPS` x `BATCH_SIZE`, seed
`SEED`), so the ladder compares ideas, not budgets. Budgets are optimiser steps, never
seconds, so they mean the same on every machine.
"""

from dataclasses import dataclass, field

STEPS, BATCH_SIZE, SEED = 2000, 32, 0


@dataclass(frozen=True)
class Recipe:
    """A stage's model size and optimiser settings; the budget is shared by all stages."""

    model: dict = field(default_factory=dict)  # keyword arguments for stage.Transformer
    lr: float = 2e-3  # peak learning rate, reached after the warm-up
    warmup_steps: int = 100
    steps: int = STEPS
    batch_size: int = BATCH_SIZE
    seed: int = SEED


RECIPES = {
    1: Recipe(model={"embed_dim": 64}),
    2: Recipe(model={"embed_dim": 64}),
    3: Recipe(model={"embed_dim": 64}),
    4: Recipe(model={"embed_dim": 64}),
    5: Recipe(model={"embed_dim": 64, "num_encoder_layers": 2, "num_decoder_layers": 2}),
    6: Recipe(model={"embed_dim": 64, "num_encoder_layers": 2, "num_decoder_layers": 2,
                     "ff_dim": 256, "dropout": 0.0}),
    7: Recipe(model={"embed_dim": 64, "num_heads": 2, "num_encoder_layers": 2,
                     "num_decoder_layers": 2, "ff_dim": 256, "dropout": 0.0}),
}
