"""A stage notebook's own run beside the ladder, in the learner's words.

How the committed runs are proven (one thread, the numeric platform, witnesses, the gate
that says when a rung is stale) is the maintainer's business, in docs/maintaining.md; a
learner needs one sentence: did my run give the ladder's numbers, and if not, why not.
"""

import pandas as pd

from course_tools import ladder, staleness
from course_tools.jobs import Rung

# What a learner reads for `ladder.WITNESS_ROW`: the committed seed-0 run, as a CPU of the
# learner's kind computes it.
LIKE_YOURS = "seed 0 on a CPU like yours"
# The figures a notebook prints, by their names in a rung.
PRINTED = {"train_loss": "training loss", "validation_loss": "validation loss",
           "exact_match": "exact match", "bleu": "BLEU", "per_phenomenon": "the phenomena"}


def beside_the_ladder(live: Rung, committed: Rung, results: str = "ladder") -> str:
    """One sentence on whether this run gave its committed row's figures, as printed: a
    rung of the ladder, or (`results="ablation"`) a row of the ablation."""
    if staleness.is_stale(committed):
        return (f"The course's code changed after the {results}'s runs were trained, so their "
                f"rows may not be this code's; your run is.")
    like_yours = ladder.on_platform(committed, live.platform) or committed
    differ = [PRINTED[name] for name, _, _ in ladder.differences(live, like_yours)
              if name in PRINTED]
    if not differ:
        return (f"Your run gave the {results}'s seed-{committed.seed} figures, digit for digit "
                f"as printed.")
    return (f"Your run differs from the {results}'s seed-{committed.seed} run in "
            f"{', '.join(differ)}: another kind of CPU, another thread count or another PyTorch "
            "rounds the same sums differently, and training grows the difference. The spread "
            "over seeds shows how far runs of one setting differ anyway.")


def table(runs: list[Rung], live: Rung, up_to: int) -> pd.DataFrame:
    """The ladder up to this stage, with this run beside it and rows named for a learner."""
    frame = ladder.table(runs, live, up_to)
    return frame.rename(index={ladder.WITNESS_ROW: LIKE_YOURS}, level="run")
