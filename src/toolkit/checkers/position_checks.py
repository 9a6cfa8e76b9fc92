"""Checkers of positions: the sinusoids, their rotation property, and stage 08's positions
in a stream that skip the padding."""

from collections.abc import Callable

import torch

from stages import stage04_positional_encoding as stage04
from toolkit.checkers import layer_properties, properties
from toolkit.checkers.verdicts import Hint, exercise, fail_on, in_every_stage, name_of, passed
from toolkit.text.vocab import PAD_ID


# Every stage's sinusoids, and the closed form the check compares with.
@exercise(*in_every_stage("PositionalEncoding"), layer_properties.sinusoids)
def encoding(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise: the sinusoidal encoding, compared with the paper's closed form."""
    sizes = [(60, 32), (10, 4), (128, 64)]  # (max_len, embed_dim)
    for max_len, embed_dim in sizes:
        fail_on(layer_properties.encoding_problem(fn(max_len, embed_dim), max_len, embed_dim),
                f"{name_of(fn)}({max_len}, {embed_dim})")
    passed(name_of(fn), f"{len(sizes)} sizes, up to 128 positions and 64 dimensions")


# The exercise asks for M_k "in closed form", its entries worked out "from the angle-addition
# formulas"; the least-squares cell above it already found M_k numerically. So the check
# refuses the matrix it knows, the tables of encodings M_k could be fitted to (every stage's
# and the check's own formula), and the solvers that fit it, even to a table the learner
# computed by hand.
CLOSED_FORM = ("the exercise asks for M_k in closed form, each 2x2 block worked out from the "
               "angle-addition formulas")
TABLE = f"which gives the table of encodings M_k could be fitted to: {CLOSED_FORM}"
FITTED = f"which fits M_k to a table of encodings, as the least-squares cell did: {CLOSED_FORM}"


@exercise(layer_properties.rotation_matrix, why={
    **{table: TABLE for table in (*in_every_stage("PositionalEncoding"),
                                  layer_properties.sinusoids)},
    **{solver: FITTED for solver in (torch.linalg.lstsq, torch.linalg.pinv, torch.linalg.solve,
                                     torch.pinverse)}})
def rotation(fn: Callable[[int, int], torch.Tensor]) -> None:
    """Exercise: the matrix M_k with PE[pos + k] = M_k @ PE[pos] for every position, built
    from the angle-addition formulas (a fit to a table of encodings is refused)."""
    cases = [(1, 16), (5, 16), (20, 8)]  # (k, embed_dim)
    for k, embed_dim in cases:
        table = stage04.PositionalEncoding(embed_dim, max_seq_len=64).encoding.double()
        fail_on(layer_properties.shift_problem(fn(k, embed_dim), table, k),
                f"{name_of(fn)}({k}, {embed_dim})")
    passed(name_of(fn), f"shifts {', '.join(str(k) for k, _ in cases)} over 64 positions")


# Notebook 14: a decoder-only model's stream, its loss and its sampling.
STREAMS = torch.tensor([[4, 9, 7, 3, 2, 8, 11, 3], [6, 3, PAD_ID, PAD_ID, 2, 9, 3, PAD_ID]])


POSITIONS = ("((stream != PAD_ID).cumsum(dim=1) - 1).clamp(min=0): a running count of the "
             "sentence's real tokens")


@exercise()  # stage 08 counts positions inline, in Transformer.language_model
def stream_positions(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Exercise: each token's place in its own sentence, padding inside the stream skipped."""
    for stream in (STREAMS, STREAMS[:1], STREAMS[1:]):
        case = f"{name_of(fn)} on the stream {stream.tolist()}"
        got = fn(stream)
        fail_on(properties.tensor_problem(got, stream.shape), case)
        words = stream != PAD_ID  # a pad's own position is never used
        expected = (words.cumsum(dim=1) - 1).clamp(min=0)  # (batch, len)
        wrong = (got != expected) & words
        if wrong.any():
            row, column = (int(i) for i in wrong.nonzero()[0])
            counted = torch.arange(stream.size(1)).expand_as(stream)
            why = ("it counts the padding before a token, so a sentence's positions would "
                   "depend on its neighbours'" if torch.equal(got[words], counted[words]) else
                   "a token's position counts the real tokens before it in its own sentence")
            fail_on(Hint(f"the token in row {row}, column {column} is word "
                         f"{int(expected[row, column])} of its sentence (counting from 0), got "
                         f"{int(got[row, column])}", why,
                         f"count only the real tokens: {POSITIONS}"), case)
    passed(name_of(fn), "streams with and without padding inside")
