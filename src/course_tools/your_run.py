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


def beside_the_ladder(live: Rung, committed: Rung) -> str:
    """One sentence on whether this run gave the ladder's seed-0 figures, as printed."""
    if staleness.is_stale(committed):
        return ("The course's code changed after the ladder below was trained, so its rows may "
                "not be this code's; your run is.")
    like_yours = ladder.on_platform(committed, live.platform) or committed
    differ = [PRINTED[name] for name, _, _ in ladder.differences(live, like_yours)
              if name in PRINTED]
    if not differ:
        return "Your run gave the ladder's seed-0 figures, digit for digit as printed."
    return (f"Your run differs from the ladder's seed-0 run in {', '.join(differ)}: another "
            "kind of CPU, another thread count or another PyTorch rounds the same sums "
            "differently, and training grows the difference. The spread over seeds below shows "
            "how far runs of one stage differ anyway.")


def table(runs: list[Rung], live: Rung, up_to: int) -> pd.DataFrame:
    """The ladder up to this stage, with this run beside it and rows named for a learner."""
    frame = ladder.table(runs, live, up_to)
    return frame.rename(index={ladder.WITNESS_ROW: LIKE_YOURS}, level="run")
