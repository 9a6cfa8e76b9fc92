"""Load `torch.nn` weights into the hand-written stages, to check they compute the same thing.

nn.MultiheadAttention keeps W_q, W_k and W_v stacked in one `in_proj_weight` of shape
(3 * embed_dim, embed_dim); the stages keep three separate `nn.Linear`s. Everything else
maps one to one. `WEIGHT_MAP` spells the correspondence out for one layer.
"""

from copy import deepcopy

import torch
from torch import nn

from toolkit.text.vocab import PAD_ID

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


class TorchNNTranslator(nn.Module):
    """A stage-07 model's embeddings, positions and output layer around nn.Transformer.

    With `load_nn_transformer(model, translator.transformer)` both compute the same logits;
    the benchmark and notebook 08 use it as PyTorch's own version of our model.
    """

    accepts_batches = True

    def __init__(self, model: nn.Module, num_heads: int, ff_dim: int):
        super().__init__()
        embed_dim = model.src_embed.embedding_dim
        # Copies, not shared modules: training one model must never move the other.
        self.src_embed, self.tgt_embed = deepcopy(model.src_embed), deepcopy(model.tgt_embed)
        self.positions, self.out_proj = deepcopy(model.positions), deepcopy(model.out_proj)
        self.embed_scale = model.embed_scale  # 1, or sqrt(embed_dim) with scale_embeddings
        self.transformer = nn.Transformer(
            embed_dim, num_heads, len(model.encoder_layers), len(model.decoder_layers), ff_dim,
            dropout=0.0, batch_first=True)
        # nn.Transformer normalises each whole stack once more; the paper's model does not.
        self.transformer.encoder.norm = nn.Identity()
        self.transformer.decoder.norm = nn.Identity()

    def encode(self, src: torch.Tensor, src_padding: torch.Tensor) -> torch.Tensor:
        x = self.positions(self.src_embed(src) * self.embed_scale)  # (batch, src_len, embed_dim)
        return self.transformer.encoder(x, src_key_padding_mask=src_padding)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor,
               src_padding: torch.Tensor) -> torch.Tensor:
        y = self.positions(self.tgt_embed(tgt) * self.embed_scale)  # (batch, tgt_len, embed_dim)
        future = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool, device=tgt.device)
        y = self.transformer.decoder(y, memory, tgt_mask=future.triu(1),
                                     memory_key_padding_mask=src_padding)
        return self.out_proj(y)  # (batch, tgt_len, tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_padding = src == PAD_ID  # (batch, src_len)
        return self.decode(tgt, self.encode(src, src_padding), src_padding)
