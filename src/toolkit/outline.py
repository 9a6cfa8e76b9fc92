"""The course outline in one place: each stage's number, module, title and the idea it adds."""

from typing import NamedTuple


class Stage(NamedTuple):
    number: int
    module: str
    title: str
    idea: str


STAGES = (
    Stage(1, "stage01_naive_attention", "Naive attention",
          "queries, keys and values: one attention module used three times"),
    Stage(2, "stage02_batching", "Batching",
          "padded batches of sentences, and the padding leak they create"),
    Stage(3, "stage03_masking", "Masking",
          "key-padding and causal masks, and teacher forcing on the whole target"),
    Stage(4, "stage04_positional_encoding", "Positional encoding",
          "sinusoidal positions, so word order matters"),
    Stage(5, "stage05_stacking", "Stacking layers",
          "N encoder and N decoder layers; every decoder layer reads the final encoder output"),
    Stage(6, "stage06_ffn_layernorm", "Feed-forward + LayerNorm",
          "the sublayer block: output projection, position-wise FFN, Add & Norm"),
    Stage(7, "stage07_multi_head", "Multi-head attention",
          "several heads on slices of the embedding, scaled by 1/sqrt(head_dim)"),
)


# Appendix stages grow from stage 07 after the course: the same rules, not on the ladder.
APPENDIX_STAGES = (
    Stage(8, "stage08_decoder_only", "Decoder-only",
          "one stream, English then German, through one causal stack, in place of the encoder "
          "and the cross-attention"),
)


def stage(number: int) -> Stage:
    """Look a stage up by its number, with a clear error for numbers that name none."""
    for entry in STAGES + APPENDIX_STAGES:
        if entry.number == number:
            return entry
    raise ValueError(f"there is no stage {number}: stages run from 1 to {len(STAGES)}, and "
                     f"the appendix has {', '.join(str(s.number) for s in APPENDIX_STAGES)}")
