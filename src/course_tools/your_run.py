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
    """One sentence on whether this run gave its committed row's figures: exactly, down to
    the trained weights, where both keep their unrounded figures, else as printed; the row is
    a rung of the ladder, or (`results="ablation"`) a row of the ablation."""
    if staleness.is_stale(committed):
        return (f"The course's code changed after the {results}'s runs were trained, so their "
                f"rows may not be this code's; your run is.")
    witnessed = ladder.on_platform(committed, live.platform)
    like_yours = witnessed or committed
    differ = printed_differences(live, like_yours)
    # Where another CPU computed the committed row's figures, the run is compared with the
    # row a CPU of this kind computed, which the table shows as its own: say which.
    which = (f"seed-{committed.seed} figures as a CPU like yours computes them (the row "
             f"{LIKE_YOURS!r}; the committed row is another kind of CPU's, which rounds "
             f"differently)" if witnessed and printed_differences(witnessed, committed)
             else f"seed-{committed.seed} figures")
    if not differ and like_yours.exact and live.exact and not ladder.differences(live,
                                                                           like_yours):
        return (f"Your run gave the {results}'s {which} exactly: every figure to its last "
                "digit, and the same trained weights, bit for bit.")
    if not differ:
        return f"Your run gave the {results}'s {which}, digit for digit as printed."
    return (f"Your run differs from the {results}'s {which} in {', '.join(differ)}: another "
            "kind of CPU, another thread count or another PyTorch rounds the same sums "
            "differently, and training grows the difference. The spread over seeds shows how far "
            "runs of one setting differ anyway.")


def printed_differences(run: Rung, other: Rung) -> list[str]:
    """The figures a notebook prints that differ between two runs, by their printed names."""
    return [PRINTED[name] for name, _, _ in ladder.differences(run, other) if name in PRINTED]


def table(runs: list[Rung], live: Rung, up_to: int) -> pd.DataFrame:
    """The ladder up to this stage, with this run beside it and rows named for a learner."""
    frame = ladder.table(runs, live, up_to)
    return frame.rename(index={ladder.WITNESS_ROW: LIKE_YOURS}, level="run")
