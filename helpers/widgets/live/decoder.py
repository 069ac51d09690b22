"""The series' decoder-only transformer for the page: ``export_decoder`` writes a model's weights
and configuration as the JSON ``decoder.js``'s ``decoder_forward`` reads, and ``reference``
runs the model itself (PyTorch, float32) the way ``decoder_forward`` is defined, the oracle the
tests compare it with.

Legend: T tokens, N model width, H heads, G key-value heads, V outputs, L layers.
Models: ``helpers.transformer.DecoderLM`` (positions "sinusoidal", "rope" or "none"; per-layer
``window``; ``sink``) and ``helpers.streaming.TinyDecoder`` without latent attention (RoPE,
``window``, ``sink``, ``num_kv_heads``, ``gate``, ``ffn``). ALiBi and T5 biases and latent
attention are refused.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch import nn

from ...multihead import MultiHeadAttention
from ...streaming import TinyDecoder
from ...transformer import DecoderLM
from . import tensor_json

__all__ = ["export_decoder", "reference"]  # (check_policy, kept_weights: its own)

POSITIONS = ("sinusoidal", "rope", "none")
ROPE_POSITIONS = ("original", "cache")


def _linear(layer: nn.Linear) -> dict:
    return {"weight": tensor_json(layer.weight),
            "bias": None if layer.bias is None else tensor_json(layer.bias)}


def _norm(layer: nn.LayerNorm) -> dict:
    return {"weight": tensor_json(layer.weight), "bias": tensor_json(layer.bias)}


def _check_model(model: object) -> None:
    """Raise unless ``model`` is a DecoderLM or a non-latent TinyDecoder the page can run."""
    if not isinstance(model, (DecoderLM, TinyDecoder)):
        raise ValueError(f"model must be a DecoderLM or a TinyDecoder, got {type(model).__name__}")
    if isinstance(model, DecoderLM) and model.positional not in POSITIONS:
        raise ValueError(f"model positional must be one of {POSITIONS} for the page, got "
                         f"{model.positional!r}")
    if isinstance(model, TinyDecoder) and model.latent:
        raise ValueError("model must not use latent attention (TinyDecoder(latent_size=...)): "
                         "the page runs MultiHeadAttention only, got latent_size set")
    dropping = any((isinstance(m, nn.Dropout) and m.p > 0)
                   or (isinstance(m, MultiHeadAttention) and m.dropout > 0)
                   for m in model.modules())
    if model.training and dropping:
        raise ValueError("model must be in eval mode (model.eval()) or have dropout 0: the page "
                         "runs no dropout, got a model in training mode with dropout > 0")
    for m in model.modules():
        if isinstance(m, nn.LayerNorm) and (m.weight is None or m.bias is None):
            raise ValueError("model's LayerNorms must have a weight and a bias (the defaults)")


def export_decoder(model: DecoderLM | TinyDecoder) -> dict:
    """Every weight of ``model`` (float32, as ``tensor_json``) and its configuration, the JSON
    that ``decoder_forward`` (decoder.js) reads:
    ``{"config": {vocab_size, num_outputs, num_hiddens, num_heads, num_kv_heads, num_layers,
    positional, rotary_base, rotary_scale, windows (one int or None per layer), sink, gate,
    activation, eps, max_len (None: no limit)}, "embedding" (V_in, N), "P" (max_len, N) or None,
    "blocks": [{norm1, W_q, W_k, W_v, W_o, W_g or None, sink_logits (H,) or None, norm2 or None,
    ffn {W1, W2} or None}], "norm", "head"}`` (a Linear: {weight (out, in), bias}; a LayerNorm:
    {weight, bias}). The model is not changed."""
    _check_model(model)
    tiny = isinstance(model, TinyDecoder)
    first = model.blocks[0]
    attention = first.attention
    N = model.embedding.weight.shape[1]
    if tiny:
        activation = "gelu"
        ffn_layers = None if first.ffn is None else first.ffn
    else:
        activation = "gelu" if isinstance(first.ffn[1], nn.GELU) else "relu"
        if isinstance(first.ffn[1], nn.GELU) and first.ffn[1].approximate != "none":
            raise ValueError("model's GELU must be exact (approximate='none'), got "
                             f"{first.ffn[1].approximate!r}")
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    eps = {float(m.eps) for m in norms}
    if len(eps) != 1:
        raise ValueError(f"model's LayerNorms must share one eps, got {sorted(eps)}")
    blocks = []
    for block in model.blocks:
        att = block.attention
        if tiny:
            norm1 = block.norm
            norm2, ffn = (None, None) if block.ffn is None else (
                block.ffn[0], {"W1": _linear(block.ffn[1]), "W2": _linear(block.ffn[3])})
        else:
            norm1, norm2 = block.norm1, block.norm2
            ffn = {"W1": _linear(block.ffn[0]), "W2": _linear(block.ffn[2])}
        blocks.append({
            "norm1": _norm(norm1), "W_q": _linear(att.W_q), "W_k": _linear(att.W_k),
            "W_v": _linear(att.W_v), "W_o": _linear(att.W_o),
            "W_g": _linear(att.W_g) if att.gate else None,
            "sink_logits": tensor_json(att.sink_logits) if att.sink else None,
            "norm2": None if norm2 is None else _norm(norm2), "ffn": ffn,
        })
    positional = "rope" if tiny else model.positional
    config = {
        "vocab_size": int(model.vocab_size), "num_outputs": int(model.head.out_features),
        "num_hiddens": int(N), "num_heads": int(attention.num_heads),
        "num_kv_heads": int(attention.num_kv_heads), "num_layers": len(model.blocks),
        "positional": positional, "rotary_base": float(attention.rotary_base),
        "rotary_scale": float(attention.rotary_scale),
        "windows": [b.attention.window for b in model.blocks],
        "sink": bool(attention.sink), "gate": bool(attention.gate), "activation": activation,
        "eps": eps.pop(), "max_len": None if tiny else int(model.max_len),
    }
    return {
        "config": config,
        "embedding": tensor_json(model.embedding.weight),
        "P": tensor_json(model.P) if positional == "sinusoidal" else None,
        "blocks": blocks, "norm": _norm(model.norm), "head": _linear(model.head),
    }


def check_policy(cache: dict | None) -> dict | None:
    """``cache`` (None or {"window": W >= 1, "sinks": S >= 0, "rope_positions": "original" |
    "cache"}) with its defaults filled in; ValueError for anything else."""
    if cache is None:
        return None
    if not isinstance(cache, dict) or set(cache) - {"window", "sinks", "rope_positions"}:
        raise ValueError(f"cache must be None or a dict with keys window, sinks, rope_positions, "
                         f"got {cache!r:.80}")
    policy = {"window": cache.get("window"), "sinks": cache.get("sinks", 0),
              "rope_positions": cache.get("rope_positions", "original")}
    for name, low in (("window", 1), ("sinks", 0)):
        value = policy[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"cache {name} must be an int >= {low}, got {value!r}")
    if policy["rope_positions"] not in ROPE_POSITIONS:
        raise ValueError(f"cache rope_positions must be one of {ROPE_POSITIONS}, got "
                         f"{policy['rope_positions']!r}")
    return policy


def _check_tokens(tokens: object) -> list[int]:
    """Raise unless ``tokens`` is a non-empty list (or tuple) of ints (the model judges their
    range and length)."""
    if (not isinstance(tokens, (list, tuple)) or not tokens
            or not all(isinstance(t, numbers.Integral) and not isinstance(t, (bool, np.bool_))
                       for t in tokens)):
        raise ValueError(f"tokens must be a non-empty list of int token ids, got {tokens!r:.80}")
    return [int(t) for t in tokens]


@contextmanager
def kept_weights(model: DecoderLM | TinyDecoder) -> Iterator[None]:
    """Run the model inside and leave its ``attention_weights`` (the model's and every
    layer's) as they were before: the caller's model is not changed."""
    saved = model.attention_weights, [b.attention.attention_weights for b in model.blocks]
    try:
        yield
    finally:
        model.attention_weights = saved[0]
        for block, weights in zip(model.blocks, saved[1]):
            block.attention.attention_weights = weights


@torch.no_grad()
def reference(model: DecoderLM | TinyDecoder, tokens: list[int],
              cache: dict | None = None) -> dict[str, np.ndarray]:
    """What ``decoder_forward(export_decoder(model), tokens, {cache})`` computes, by the
    model itself, float32: {"logits": (T, V), "weights": (L, H, T, T)}. Without ``cache``, one
    call ``model(tokens[None])`` and its ``attention_weights``. With ``cache`` ({window, sinks,
    rope_positions}), the tokens fed one at a time through ``model.new_cache(...)`` (a
    DecoderLM) or one ``KVCache`` per layer (a TinyDecoder, as ``streaming.stream`` does), each
    step's weights (1, H, 1, n) put at the positions of the keys the cache returned
    (``key_positions``), 0 elsewhere. The model's attention_weights are left as they were."""
    _check_model(model)
    tokens = _check_tokens(tokens)
    policy = check_policy(cache)
    with kept_weights(model):
        return _reference(model, tokens, policy)


def _reference(model: DecoderLM | TinyDecoder, tokens: list[int], policy: dict | None,
               ) -> dict[str, np.ndarray]:
    ids = torch.tensor([list(tokens)], dtype=torch.long, device=model.head.weight.device)  # (1, T)
    if policy is None:
        logits = model(ids)[0]  # (T, V)
        weights = torch.stack([w[0] for w in model.attention_weights])  # (L, H, T, T)
        return {"logits": logits.cpu().numpy(), "weights": weights.cpu().numpy()}
    kwargs = dict(window=policy["window"], sinks=policy["sinks"],
                  rope_positions=policy["rope_positions"])
    caches = model.new_cache(**kwargs)
    T, L = ids.shape[1], len(model.blocks)
    H = model.blocks[0].attention.num_heads
    logits = []
    weights = torch.zeros(L, H, T, T, dtype=model.head.weight.dtype)  # (L, H, T, T)
    for t in range(T):
        logits.append(model(ids[:, t:t + 1], cache=caches)[0, 0])  # (V,)
        for layer, (w, c) in enumerate(zip(model.attention_weights, caches)):
            weights[layer, :, t, c.key_positions.cpu()] = w[0, :, 0].cpu()  # (H, n)
    return {"logits": torch.stack(logits).cpu().numpy(), "weights": weights.numpy()}
