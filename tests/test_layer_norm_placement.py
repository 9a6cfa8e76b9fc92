"""The pre-LN variant is torch.nn's norm_first layer plus final norms; gradient norms are exact."""

import math

import torch
from torch import nn

from stages import stage06_ffn_layernorm as stage
from toolkit.batching.batches import Batch
from toolkit.checkers.from_torch_nn import copy_decoder_layer, copy_encoder_layer
from toolkit.text.vocab import BOS_ID, EOS_ID, PAD_ID
from toolkit.variants.layer_norm_placement import layer_gradient_norms, pre_ln_variant

EMBED_DIM, FF_DIM, VOCAB = 16, 40, 20
SRC = torch.tensor([[4, 9, 7, 12, 5, EOS_ID], [6, 8, EOS_ID, PAD_ID, PAD_ID, PAD_ID]])
TGT = torch.tensor([[BOS_ID, 8, 11, 6, 7], [BOS_ID, 9, 12, PAD_ID, PAD_ID]])


def randomised(module: nn.Module) -> nn.Module:
    """Every parameter random, LayerNorm gains and biases included, so a skipped or swapped
    norm changes the numbers (default gains of 1 and biases of 0 would hide it)."""
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.normal_(0.0, 0.3)
    return module.eval()


def test_pre_ln_variant_equals_norm_first_layers_and_final_norms_by_hand():
    """One layer each: the variant's logits equal a hand computation from nn's norm_first
    layers, a final LayerNorm on the memory and one before out_proj."""
    torch.manual_seed(0)
    model = stage.Transformer(VOCAB, VOCAB, embed_dim=EMBED_DIM, ff_dim=FF_DIM,
                              num_encoder_layers=1, num_decoder_layers=1)
    variant = randomised(pre_ln_variant(model))
    options = dict(nhead=1, dim_feedforward=FF_DIM, dropout=0.0, batch_first=True,
                   norm_first=True)
    enc = randomised(nn.TransformerEncoderLayer(EMBED_DIM, **options))
    dec = randomised(nn.TransformerDecoderLayer(EMBED_DIM, **options))
    scale = 1 / math.sqrt(EMBED_DIM)  # nn.* scales scores; stage 06 does not yet
    copy_encoder_layer(variant.encoder_layers[0], enc, query_scale=scale)
    copy_decoder_layer(variant.decoder_layers[0], dec, query_scale=scale)
    encoder_norm, decoder_norm, out_proj = variant.encoder_norm, *variant.out_proj

    padding = SRC == PAD_ID  # (batch, src_len)
    future = torch.ones(TGT.size(1), TGT.size(1), dtype=torch.bool).triu(1)
    with torch.no_grad():
        x = variant.positions(variant.src_embed(SRC))  # (batch, src_len, embed_dim)
        y = variant.positions(variant.tgt_embed(TGT))  # (batch, tgt_len, embed_dim)
        memory = encoder_norm(enc(x, src_key_padding_mask=padding))
        expected = out_proj(decoder_norm(
            dec(y, memory, tgt_mask=future, memory_key_padding_mask=padding)))
        got = variant(SRC, TGT)  # (batch, tgt_len, vocab)
    assert (got - expected).abs().max() < 1e-5


def test_the_original_model_stays_post_ln():
    torch.manual_seed(0)
    model = stage.Transformer(VOCAB, VOCAB, embed_dim=EMBED_DIM, ff_dim=FF_DIM).eval()
    with torch.no_grad():
        before = model(SRC, TGT)
        variant = pre_ln_variant(model)
        assert torch.equal(model(SRC, TGT), before)
        assert not torch.allclose(variant(SRC, TGT), before, atol=1e-3)


def test_layer_gradient_norms_are_the_norms_autograd_gives_for_the_model_itself():
    """The post-LN numbers come from the stage-06 model as it is, one layer at a time."""
    torch.manual_seed(0)
    model = stage.Transformer(VOCAB, VOCAB, embed_dim=EMBED_DIM, ff_dim=FF_DIM,
                              num_encoder_layers=3, num_decoder_layers=2)
    norms = layer_gradient_norms(model, stage.objective, Batch(SRC, TGT))
    loss = stage.objective(model, Batch(SRC, TGT)).mean()
    for side, layers in (("encoder", model.encoder_layers), ("decoder", model.decoder_layers)):
        expected = []
        for layer in layers:
            grads = torch.autograd.grad(loss, list(layer.parameters()), retain_graph=True)
            expected.append(math.sqrt(sum(g.pow(2).sum().item() for g in grads)))
        assert len(norms[side]) == len(layers)
        assert all(n > 0 for n in norms[side])
        assert torch.allclose(torch.tensor(norms[side]), torch.tensor(expected), rtol=1e-4)
    assert all(p.grad is None for p in model.parameters())  # leaves no gradients behind


def test_deep_post_ln_gradients_grow_toward_the_output_and_pre_ln_ones_do_not():
    """Xiong et al. (2020): at initialisation post-LN gives the layers near the output the
    largest gradients; pre-LN does not. A fixed seed, 12+12 layers, a random batch."""
    torch.manual_seed(0)
    post = stage.Transformer(VOCAB, VOCAB, embed_dim=64, ff_dim=256,
                             num_encoder_layers=12, num_decoder_layers=12)
    pre = pre_ln_variant(post)
    batch = Batch(torch.randint(4, VOCAB, (16, 9)), torch.randint(4, VOCAB, (16, 10)))
    post_norms = layer_gradient_norms(post, stage.objective, batch)["decoder"]
    pre_norms = layer_gradient_norms(pre, stage.objective, batch)["decoder"]
    assert post_norms[-1] > 1.3 * post_norms[0]  # post-LN: the top layer gets the most
    assert pre_norms[-1] < pre_norms[0]  # pre-LN: no growth toward the output
    assert post_norms[-1] > 1.5 * pre_norms[-1]
