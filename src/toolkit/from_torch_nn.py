"""Load `torch.nn` weights into the hand-written stages, to prove they compute the same thing.

nn.MultiheadAttention keeps W_q, W_k and W_v stacked in one `in_proj_weight` of shape
(3 * embed_dim, embed_dim); the stages keep three separate `nn.Linear`s. Everything else
maps one to one. `WEIGHT_MAP` spells the correspondence out for one layer.
"""

import torch
from torch import nn

WEIGHT_MAP = {  # stage-07 parameter (one layer) -> torch.nn.Transformer parameter
    "self_attn.q_proj": "self_attn.in_proj_weight[0:d], in_proj_bias[0:d]",
    "self_attn.k_proj": "self_attn.in_proj_weight[d:2d], in_proj_bias[d:2d]",
    "self_attn.v_proj": "self_attn.in_proj_weight[2d:3d], in_proj_bias[2d:3d]",
    "self_attn.out_proj": "self_attn.out_proj",
    "cross_attn.* (decoder)": "multihead_attn.* (decoder), split the same way",
    "feed_forward.linear1": "linear1",
    "feed_forward.linear2": "linear2",
    "norm1, norm2, norm3": "norm1, norm2, norm3",
}


@torch.no_grad()
def copy_attention(ours: nn.Module, theirs: nn.MultiheadAttention, query_scale: float = 1.0):
    """Split in_proj into q/k/v; `query_scale` lets an unscaled stage match nn's 1/sqrt(d)."""
    w_q, w_k, w_v = theirs.in_proj_weight.chunk(3)  # each (embed_dim, embed_dim)
    b_q, b_k, b_v = theirs.in_proj_bias.chunk(3)  # each (embed_dim,)
    ours.q_proj.weight.copy_(w_q * query_scale)
    ours.q_proj.bias.copy_(b_q * query_scale)
    ours.k_proj.weight.copy_(w_k)
    ours.k_proj.bias.copy_(b_k)
    ours.v_proj.weight.copy_(w_v)
    ours.v_proj.bias.copy_(b_v)
    ours.out_proj.load_state_dict(theirs.out_proj.state_dict())


@torch.no_grad()
def copy_encoder_layer(ours: nn.Module, theirs: nn.TransformerEncoderLayer,
                       query_scale: float = 1.0) -> None:
    copy_attention(ours.self_attn, theirs.self_attn, query_scale)
    _copy_feed_forward_and_norms(ours, theirs, norms=2)


@torch.no_grad()
def copy_decoder_layer(ours: nn.Module, theirs: nn.TransformerDecoderLayer,
                       query_scale: float = 1.0) -> None:
    copy_attention(ours.self_attn, theirs.self_attn, query_scale)
    copy_attention(ours.cross_attn, theirs.multihead_attn, query_scale)
    _copy_feed_forward_and_norms(ours, theirs, norms=3)


def _copy_feed_forward_and_norms(ours: nn.Module, theirs: nn.Module, norms: int) -> None:
    ours.feed_forward.linear1.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.linear2.load_state_dict(theirs.linear2.state_dict())
    for index in range(1, norms + 1):
        getattr(ours, f"norm{index}").load_state_dict(getattr(theirs, f"norm{index}").state_dict())


def load_nn_transformer(model: nn.Module, reference: nn.Transformer) -> None:
    """Copy every encoder and decoder layer of `reference` into a stage-07 model.

    nn.Transformer also puts a LayerNorm after each whole stack (`encoder.norm`,
    `decoder.norm`), which the paper's post-LN model does not have. Compare against a
    reference whose two final norms are `nn.Identity()`, or the numbers will differ.
    """
    if len(model.encoder_layers) != len(reference.encoder.layers) or len(
            model.decoder_layers) != len(reference.decoder.layers):
        raise ValueError("the two models must have the same numbers of layers")
    for ours, theirs in zip(model.encoder_layers, reference.encoder.layers, strict=True):
        copy_encoder_layer(ours, theirs)
    for ours, theirs in zip(model.decoder_layers, reference.decoder.layers, strict=True):
        copy_decoder_layer(ours, theirs)
