"""Exercise checkers: run a learner's function on several cases and explain the first failure.

A notebook calls, for example, `check.causal_mask(my_causal_mask)`. It prints a pass, or
raises `NotYet` with a hint told in steps: the first failure names the symptom ("row 3 can
see position 5"), the same mistake again adds its cause ("the mask lets the future
through"), and the third time the fix. Where a test asserts the same property (the masks,
padding, positions, heads, scaling, the loss and the stack) the hint comes from
`toolkit.checkers.properties`, the function that test asserts, so the two cannot disagree.
The other checkers compare with the stage's own module or with torch and name the classic
mistakes they recognise. An answer that calls the function the check compares with (the
stage's own, the toolkit's, or torch's) is refused: it would prove nothing.

An error raised *inside* the learner's function is shown as theirs (`verdicts.Raised`): its
message and the line of their code it came from, and in IPython the frames from their
function down, none of the checker's; the error itself stays its __cause__. The few slips a
checker recognises by the very error they raise get a hint in steps instead (`vocab.stoi[word]`
on an unknown word, a padding mask that hides rows, an unflattened cross-entropy, a transpose
that moves the batch dimension before torch.bmm).

The checkers live by what they check (`data_and_loss_checks`, `attention_checks`,
`position_checks`, `layer_checks`, `sampling_checks`; `verdicts` says pass or `NotYet`);
this module gathers them under the one name the notebooks use.
"""

from toolkit.checkers.attention_checks import (
    attend,
    batched_attend,
    causal_mask,
    head_padding_mask,
    hide,
    scaled_scores,
    split_heads,
)
from toolkit.checkers.data_and_loss_checks import (
    VOCAB,
    frame_target,
    german_only_targets,
    loss,
    pad_batch,
    prefix_and_target,
)
from toolkit.checkers.layer_checks import add_and_norm, layer_norm, parameters_per_layer, stack
from toolkit.checkers.position_checks import encoding, rotation, stream_positions
from toolkit.checkers.sampling_checks import nucleus
from toolkit.checkers.verdicts import NotYet

# Every exercise checker, in the order the notebooks use them.
CHECKERS = (frame_target, pad_batch, attend, prefix_and_target, batched_attend, loss, causal_mask,
            hide, encoding, rotation, stack, parameters_per_layer, add_and_norm, layer_norm,
            split_heads, scaled_scores, head_padding_mask, stream_positions, german_only_targets,
            nucleus)
__all__ = ["CHECKERS", "VOCAB", "NotYet", *(checker.__name__ for checker in CHECKERS)]
