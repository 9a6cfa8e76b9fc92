"""An answer that calls the function its check compares with (the stage's own, the toolkit's,
or torch's) is refused: the check would compare that function with itself."""

import importlib
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stages import stage03_masking as stage
from stages import stage04_positional_encoding as stage04
from stages import stage05_stacking as stage05
from stages import stage07_multi_head as stage07
from stages import stage08_decoder_only as stage08
from toolkit.batching import encode_target, pad  # as notebook 00 imports them, by name
from toolkit.checkers import check, verdicts
from toolkit.checkers.layer_properties import rotation_matrix, sinusoids
from toolkit.objectives import sequence_loss
from toolkit.search.sampling import truncate
from toolkit.stage_api import count_parameters
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID

REFUSAL = "write it yourself, the check compares with that function"


@pytest.fixture(autouse=True)
def fresh_kernel():
    verdicts.forget()


def attend_with_torch(q, k, v):
    """nn.MultiheadAttention is attention too, whatever its weights."""
    attention = nn.MultiheadAttention(q.size(-1), 1, batch_first=True)
    return attention(q[None], k[None], v[None])[0][0]


def merge(x):
    return x.transpose(1, 2).flatten(2)


REFUSED = [
    ("frame_target", [lambda words, vocab: encode_target(words, vocab)],
     "toolkit.batching.batches.encode_target"),
    ("frame_target", [lambda words, vocab: [BOS_ID, *vocab.encode(words), EOS_ID]],
     "toolkit.text.vocab.Vocab.encode"),
    ("pad_batch", [pad], "toolkit.batching.batches.pad"),
    ("attend", [lambda q, k, v: F.scaled_dot_product_attention(q[None], k[None], v[None],
                                                               scale=1.0)[0]],
     "torch.nn.functional.scaled_dot_product_attention"),
    ("attend", [attend_with_torch], "torch.nn.MultiheadAttention"),
    ("batched_attend", [lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=1.0)],
     "torch.nn.functional.scaled_dot_product_attention"),
    ("causal_mask", [lambda length: stage.causal_mask(length, "cpu")],
     "stages.stage03_masking.causal_mask"),
    ("causal_mask", [lambda length: stage08.causal_mask(length, "cpu")],
     "stages.stage08_decoder_only.causal_mask"),
    ("causal_mask", [lambda length: nn.Transformer.generate_square_subsequent_mask(length) < 0],
     "torch.nn.Transformer.generate_square_subsequent_mask"),
    ("loss", [sequence_loss], "toolkit.objectives.sequence_loss"),
    ("encoding", [lambda max_len, dim: stage04.PositionalEncoding(dim, max_len).encoding],
     "stages.stage04_positional_encoding.PositionalEncoding"),
    ("rotation", [rotation_matrix], "toolkit.checkers.layer_properties.rotation_matrix"),
    ("split_heads", [lambda x, h: stage07.MultiHeadAttention(x.size(-1), h).split_heads(x),
                     merge], "stages.stage07_multi_head.MultiHeadAttention"),
    ("parameters_per_layer", [lambda d: count_parameters(stage05.EncoderLayer(d))
                              + count_parameters(stage05.DecoderLayer(d))],
     "stages.stage05_stacking.EncoderLayer"),
    ("layer_norm", [lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps)],
     "torch.nn.functional.layer_norm"),
    ("layer_norm", [lambda x, w, b, eps: torch.layer_norm(x, x.shape[-1:], w, b, eps)],
     "torch.layer_norm"),
    ("nucleus", [lambda probabilities, p: truncate(probabilities.log(), top_p=p) > -torch.inf],
     "toolkit.search.sampling.truncate"),
]


@pytest.mark.parametrize(("name", "answers", "reference"), REFUSED,
                         ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(REFUSED)])
def test_an_answer_that_calls_the_answer_is_refused(name, answers, reference):
    """Planted: each of these is right (or nearly), and would pass if it were not refused."""
    with pytest.raises(check.NotYet) as caught:
        getattr(check, name)(*answers)
    assert str(caught.value).endswith(f"it calls {reference}, which already does what the "
                                      f"exercise asks: {REFUSAL}"), caught.value


# Where no function of the stages or the toolkit gives the answer alone.
REFUSE_NOTHING = {"prefix_and_target", "hide", "head_padding_mask", "stream_positions",
                  "german_only_targets"}


def test_every_checker_refuses_what_could_answer_it():
    refusing = {checker.__name__ for checker in check.CHECKERS if checker.refuses}
    assert refusing == {checker.__name__ for checker in check.CHECKERS} - REFUSE_NOTHING
    masks = {f"{mask.__module__}.{mask.__qualname__}" for mask in verdicts.in_every_stage(
        "causal_mask")}
    assert len(masks) == 6 and masks <= set(check.causal_mask.refuses), "stages 03 to 08"


def resolve(dotted: str) -> object:
    """The object a refusal names, found the way a learner would write it."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)
        return found
    raise LookupError(dotted)


def test_every_refusal_names_a_real_function_or_class():
    names = {name for checker in check.CHECKERS for name in checker.refuses}
    assert len(names) > 30
    for name in names:
        assert callable(resolve(name)), name


def test_a_legitimate_tool_is_no_refusal(capsys):
    """torch's pad_sequence is a tool, not the toolkit's answer."""
    def pad_with_torch(sequences):
        return nn.utils.rnn.pad_sequence([torch.tensor(s) for s in sequences], batch_first=True,
                                         padding_value=PAD_ID)

    check.pad_batch(pad_with_torch)
    assert capsys.readouterr().out.startswith("\N{CHECK MARK}")


# --- M_k in closed form, not fitted -------------------------------------------------------

def table_by_hand(embed_dim, max_len=64):
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    angle = position / 10000 ** (torch.arange(0, embed_dim, 2) / embed_dim)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1)  # (max_len, embed_dim)


def fitted(make_table, solve=lambda a, b: torch.linalg.lstsq(a, b).solution):
    """M_k fitted to a table of encodings, as notebook 04's least-squares cell does."""
    def rotation(k, embed_dim):
        table = make_table(embed_dim)
        return solve(table[:-k], table[k:]).T  # table[:-k] @ M_k.T = table[k:]
    return rotation


CLOSED_FORM = ("the exercise asks for M_k in closed form, each 2x2 block worked out from the "
               "angle-addition formulas")
FITS = [
    (fitted(lambda d: stage04.PositionalEncoding(d, 64).encoding.double()),
     "stages.stage04_positional_encoding.PositionalEncoding", "which gives the table"),
    (fitted(lambda d: stage07.PositionalEncoding(d, 64).encoding.double()),
     "stages.stage07_multi_head.PositionalEncoding", "which gives the table"),
    (fitted(lambda d: sinusoids(64, d)), "toolkit.checkers.layer_properties.sinusoids",
     "which gives the table"),
    (fitted(table_by_hand), "torch.linalg.lstsq", "which fits M_k to a table"),
    (fitted(table_by_hand, lambda a, b: torch.linalg.pinv(a) @ b), "torch.linalg.pinv",
     "which fits M_k to a table"),
]


@pytest.mark.parametrize(("answer", "reference", "reason"), FITS,
                         ids=["stage04", "stage07", "sinusoids", "lstsq", "pinv"])
def test_a_rotation_fitted_to_a_table_is_refused(answer, reference, reason, capsys):
    """The exercise's words: "work out its four entries ... from the angle-addition formulas",
    "now in closed form"; the fit is the least-squares cell above it. Each would pass."""
    check.rotation.__wrapped__(answer)  # the checker itself, unguarded
    assert capsys.readouterr().out.startswith("\N{CHECK MARK}")
    with pytest.raises(check.NotYet) as caught:
        check.rotation(answer)
    message = str(caught.value)
    assert message.startswith(f"rotation: it calls {reference}, {reason}"), message
    assert message.endswith(CLOSED_FORM), message


def test_the_watch_leaves_a_running_profiler_in_place(capsys):
    def profiler(frame, event, arg):
        pass

    sys.setprofile(profiler)
    try:
        check.causal_mask(lambda length: torch.ones(length, length, dtype=torch.bool).triu(1))
    finally:
        after = sys.getprofile()
        sys.setprofile(None)
    assert after is profiler and capsys.readouterr().out.startswith("\N{CHECK MARK}")


def test_a_refusal_comes_before_the_error_its_call_raised():
    def delegates_then_fails(length):
        stage.causal_mask(length, "cpu")
        raise ValueError("never shown")

    with pytest.raises(check.NotYet, match="it calls stages.stage03_masking.causal_mask"):
        check.causal_mask(delegates_then_fails)
