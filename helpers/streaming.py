"""Streaming attention (流式注意力), notebook 11: two toy tasks, a tiny decoder to train on
them, and the ways to run it on a stream (a KV cache with a policy, or recomputation per window).

Legend: B batch, T tokens, V vocabulary (outputs), N num_hiddens, H heads, L layers, O offsets,
W window, S sinks, d_c latent size, d_r decoupled RoPE size.
Targets hold ``IGNORE`` (-100, ``cross_entropy``'s ignore_index) where there is nothing to
predict. Masks inside the attention layers: True = takes part (``causal_mask``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .checks import (
    check_bool, check_generator, check_holds_data, check_int, check_positive_int, check_rank,
    check_real, check_seed, check_trainable,
)
from .kv_cache import ROPE_POSITIONS, KVCache
from .latent_attention import LatentCache, MultiHeadLatentAttention
from .multihead import MultiHeadAttention
from .relative_task import _adam_loop

__all__ = ["IGNORE", "BackcopyTask", "offsets_sample", "TinyDecoder", "from_pool", "train",
           "stream", "recompute", "position_loss", "accuracy_by_offset"]

IGNORE = -100


# ------------------------------------------------------------------------------ the tasks
class BackcopyTask:
    """Bigram-backcopy data (Guo et al. 2024, "Active-dormant attention heads"): BOS, then a
    bigram Markov chain over V regular tokens, except that right after a *trigger* (a token
    id < ``num_triggers``) the next token copies the token before the trigger.

    ``BackcopyTask(vocab_size=16, num_triggers=6, alpha=0.1, seed=0, bos=True)``: the rows of
    ``transitions`` (V, V) float64 are drawn from Dirichlet(alpha) with NumPy's generator seeded
    with ``seed`` (small alpha: each token has a few likely successors). ``bos_token`` = V,
    ``num_tokens`` = V + 1 (the model's vocabulary, BOS included). With ``bos`` every sequence
    starts with BOS, then a uniform token; without, with the uniform token. A trigger copies only
    when the token before it is a regular one (not BOS); otherwise the chain goes on.
    Most positions need no earlier token than the current one: a head with nothing to do parks
    its attention somewhere, the first token (BOS) when it can, which is how sinks form.
    """

    def __init__(self, vocab_size: int = 16, num_triggers: int = 6, alpha: float = 0.1,
                 seed: int = 0, bos: bool = True) -> None:
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.num_triggers = check_int("num_triggers", num_triggers, 0)
        if self.num_triggers > self.vocab_size:
            raise ValueError(f"num_triggers must be at most vocab_size={self.vocab_size}, "
                             f"got {num_triggers}")
        self.alpha = check_real("alpha", alpha, above=0.0)
        if not 1e-3 <= self.alpha <= 1e6:
            raise ValueError(f"alpha must be in [1e-3, 1e6] (smaller: rows of zeros in float64), "
                             f"got {alpha!r}")
        self.seed = check_seed(seed)
        check_bool("bos", bos)
        self.bos = bool(bos)
        self.bos_token = self.vocab_size
        self.num_tokens = self.vocab_size + 1
        rng = np.random.default_rng(self.seed % 2**64)
        rows = rng.dirichlet(np.full(self.vocab_size, self.alpha), size=self.vocab_size)
        self.transitions = torch.from_numpy(rows / rows.sum(-1, keepdims=True))  # (V, V) float64

    def sample(self, batch_size: int, length: int, generator: torch.Generator | None = None,
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``batch_size`` sequences of ``length`` tokens: (tokens (B, T) long, targets (B, T) long,
        is_copy (B, T) bool). targets[:, t] = tokens[:, t + 1], ``IGNORE`` at t = T − 1;
        is_copy[:, t]: that target is a copy (tokens[:, t] is a trigger). One uniform draw per
        token, all drawn at once; the chain steps through T, vectorised over B."""
        B = check_positive_int("batch_size", batch_size)
        T = check_positive_int("length", length)
        generator = check_generator("generator", generator)
        V, first = self.vocab_size, int(self.bos)  # first: the first regular position
        cdf = self.transitions.cumsum(-1)  # (V, V)
        u = torch.rand(B, T, dtype=torch.float64, generator=generator)  # (B, T)
        tokens = torch.empty(B, T, dtype=torch.long)
        copied = torch.zeros(B, T, dtype=torch.bool)  # token t is a copy
        if self.bos:
            tokens[:, 0] = self.bos_token
        if T > first:
            tokens[:, first] = (u[:, first] * V).long().clamp(max=V - 1)  # uniform
        for t in range(first, T - 1):
            cur = tokens[:, t]  # (B,)
            nxt = (cdf[cur] < u[:, t + 1, None]).sum(-1).clamp(max=V - 1)  # (B,): inverse CDF
            if t > first:  # the token before is regular
                copy = cur < self.num_triggers  # (B,)
                nxt = torch.where(copy, tokens[:, t - 1], nxt)
                copied[:, t + 1] = copy
            tokens[:, t + 1] = nxt
        targets = torch.full_like(tokens, IGNORE)  # (B, T)
        targets[:, :-1] = tokens[:, 1:]
        is_copy = torch.zeros_like(copied)
        is_copy[:, :-1] = copied[:, 1:]
        return tokens, targets, is_copy


def offsets_sample(batch_size: int, length: int, *, vocab_size: int = 8, max_offset: int = 7,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform tokens (B, T) long in [0, vocab_size) and targets (B, T, O) long, O = max_offset:
    targets[:, t, o − 1] = tokens[:, t − o] (the token o places back), ``IGNORE`` where
    t < o."""
    B = check_positive_int("batch_size", batch_size)
    T = check_positive_int("length", length)
    V = check_positive_int("vocab_size", vocab_size)
    O = check_positive_int("max_offset", max_offset)
    generator = check_generator("generator", generator)
    tokens = torch.randint(0, V, (B, T), generator=generator)  # (B, T)
    targets = torch.full((B, T, O), IGNORE, dtype=torch.long)  # (B, T, O)
    for o in range(1, min(O, T - 1) + 1):
        targets[:, o:, o - 1] = tokens[:, :-o]
    return tokens, targets


# ------------------------------------------------------------------------------ the model
class _Block(nn.Module):
    """X + attention(LayerNorm(X)) (+ X + FFN(LayerNorm(X)) with ``ffn``)."""

    def __init__(self, attention: nn.Module, num_hiddens: int, ffn: bool) -> None:
        super().__init__()
        self.norm, self.attention = nn.LayerNorm(num_hiddens), attention
        N = num_hiddens
        self.ffn = nn.Sequential(nn.LayerNorm(N), nn.Linear(N, 4 * N), nn.GELU(),
                                 nn.Linear(4 * N, N)) if ffn else None

    def forward(self, X: torch.Tensor, cache: KVCache | LatentCache | None) -> torch.Tensor:
        Y = self.norm(X)  # (B, T, N)
        if isinstance(self.attention, MultiHeadLatentAttention):
            X = X + self.attention(Y, causal=True, cache=cache)  # (B, T, N)
        else:
            X = X + self.attention(Y, Y, Y, causal=True, cache=cache)  # (B, T, N)
        return X if self.ffn is None else X + self.ffn(X)


def _check_tokens(tokens: object, vocab_size: int) -> torch.Tensor:
    check_rank("tokens", tokens, 2, "(B, T)")
    check_holds_data("tokens", tokens)
    if tokens.dtype != torch.long:
        raise ValueError(f"tokens must be a long tensor of token ids, got dtype {tokens.dtype}")
    if tokens.numel() == 0:
        raise ValueError(f"tokens must hold at least one token per sequence, got shape "
                         f"{tuple(tokens.shape)}")
    lo, hi = int(tokens.min()), int(tokens.max())
    if lo < 0 or hi >= vocab_size:
        raise ValueError(f"tokens must be ids in [0, vocab_size) = [0, {vocab_size}), got values "
                         f"from {lo} to {hi}")
    return tokens


class TinyDecoder(nn.Module):
    """A small pre-norm decoder for notebook 11: token embedding, L blocks
    X + attention(LayerNorm(X)) (+ a GELU feed-forward with ``ffn``), LayerNorm, Linear to
    ``num_outputs`` (default vocab_size). No position embedding: RoPE inside attention.

    Attention: ``MultiHeadAttention(N, H, bias=True, rotary=True, window=window, sink=sink,
    num_kv_heads=num_kv_heads, gate=gate)`` (G = ``num_kv_heads`` key-value heads, None: H;
    ``gate``: a sigmoid gate on every head's output), its ``sink_logits`` (H,) filled with
    ``sink_init``; or, with ``latent_size`` = d_c,
    ``MultiHeadLatentAttention(N, H, d_c, rope_size=d_r, bias=True)`` (d_r = ``rope_size``,
    4 when None; window, sink, num_kv_heads and gate are refused with MLA). ``forward(tokens (B, T) long, *,
    cache=None)`` → logits (B, T, num_outputs); ``attention_weights``: the (B, H, T, K) weights
    of each layer's last call. ``cache``: ``new_cache(...)``'s list, one per layer.
    On the bigram-backcopy task (notebook 11, 150 steps) ``sink=True, sink_init=3.0`` lets the
    idle heads give their weight to nobody (no larger learning rate for the logit): evicting the
    first token then costs at most 0.01 in loss in seeds 0-2, up to 0.05 in seeds 3-6 (where a
    head may still give the first token 0.3-0.5 of its weight). Started at 0 the
    logits barely move in those steps, and a head may still park its weight on the first token.
    """

    def __init__(self, vocab_size: int, num_hiddens: int, num_heads: int, num_layers: int, *,
                 num_outputs: int | None = None, window: int | None = None, sink: bool = False,
                 sink_init: float = 0.0, latent_size: int | None = None,
                 rope_size: int | None = None, ffn: bool = False, num_kv_heads: int | None = None,
                 gate: bool = False) -> None:
        super().__init__()
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        N = check_positive_int("num_hiddens", num_hiddens)
        H = check_positive_int("num_heads", num_heads)
        L = check_positive_int("num_layers", num_layers)
        self.num_outputs = self.vocab_size if num_outputs is None else check_positive_int(
            "num_outputs", num_outputs)
        check_bool("sink", sink)
        check_bool("ffn", ffn)
        check_bool("gate", gate)
        sink_init = check_real("sink_init", sink_init)
        if sink_init != 0.0 and not sink:
            raise ValueError(f"sink_init must be 0.0 without sink (it starts the sink logits), "
                             f"got sink_init={sink_init!r} with sink=False")
        if latent_size is None:
            if rope_size is not None:
                raise ValueError(f"rope_size must be None without latent_size (MHA rotates the "
                                 f"whole head), got rope_size={rope_size!r}")
            if N % H or (N // H) % 2:
                raise ValueError(f"num_hiddens must be divisible by num_heads into an even head "
                                 f"size (RoPE), got num_hiddens={N}, num_heads={H}")
            if num_kv_heads is not None:
                G = check_positive_int("num_kv_heads", num_kv_heads)
                if H % G:
                    raise ValueError(f"num_kv_heads must divide num_heads={H}, got {num_kv_heads}")
            make = lambda: MultiHeadAttention(N, H, bias=True, rotary=True,  # noqa: E731
                                              window=window, sink=sink,
                                              num_kv_heads=num_kv_heads, gate=gate)
        else:
            d_c = check_positive_int("latent_size", latent_size)
            d_r = 4 if rope_size is None else check_int("rope_size", rope_size, 0)
            if d_r % 2:
                raise ValueError(f"rope_size must be an even int >= 0 or None, got {rope_size!r}")
            if window is not None or sink or num_kv_heads is not None or gate:
                raise ValueError(f"latent_size must be None with window, sink, num_kv_heads or "
                                 f"gate (MLA here has none of them), got latent_size="
                                 f"{latent_size!r} with window={window!r}, sink={sink!r}, "
                                 f"num_kv_heads={num_kv_heads!r}, gate={gate!r}")
            if N < H:
                raise ValueError(f"num_hiddens must be at least num_heads, got num_hiddens={N}, "
                                 f"num_heads={H}")
            make = lambda: MultiHeadLatentAttention(  # noqa: E731
                N, H, d_c, rope_size=d_r, bias=True)
        self.latent = latent_size is not None
        self.window = window
        self.embedding = nn.Embedding(self.vocab_size, N)
        self.blocks = nn.ModuleList(_Block(make(), N, bool(ffn)) for _ in range(L))
        self.norm = nn.LayerNorm(N)
        self.head = nn.Linear(N, self.num_outputs)
        if sink:
            with torch.no_grad():
                for block in self.blocks:
                    block.attention.sink_logits.fill_(sink_init)
        self.attention_weights: list[torch.Tensor | None] = []

    def forward(self, tokens: torch.Tensor, *,
                cache: Sequence[KVCache | LatentCache] | None = None) -> torch.Tensor:
        _check_tokens(tokens, self.vocab_size)
        L = len(self.blocks)
        if cache is not None:
            kind = LatentCache if self.latent else KVCache
            if not isinstance(cache, (list, tuple)) or len(cache) != L or not all(
                    isinstance(c, kind) for c in cache):
                raise ValueError(f"cache must be None or a list of {L} {kind.__name__} (one per "
                                 f"layer, from new_cache), got {cache!r:.80}")
        if tokens.device != self.head.weight.device:
            raise ValueError(f"tokens must be on the model's device ({self.head.weight.device}), "
                             f"got {tokens.device}")
        X = self.embedding(tokens)  # (B, T, N)
        for i, block in enumerate(self.blocks):
            X = block(X, None if cache is None else cache[i])  # (B, T, N)
        self.attention_weights = [b.attention.attention_weights for b in self.blocks]
        return self.head(self.norm(X))  # (B, T, num_outputs)

    def new_cache(self, *, window: int | None = None, sinks: int = 0,
                  rope_positions: str = "original") -> list[KVCache | LatentCache]:
        """One empty cache per layer: ``KVCache(window=..., sinks=..., rope_positions=...)``, or
        ``LatentCache()`` for MLA (which takes no policy: window None, sinks 0, "original")."""
        if self.latent:
            if window is not None or sinks != 0 or rope_positions != "original":
                raise ValueError(f"window must be None (and sinks 0, rope_positions 'original') "
                                 f"for MLA's LatentCache, got window={window!r}, sinks={sinks!r}, "
                                 f"rope_positions={rope_positions!r}")
            return [LatentCache() for _ in self.blocks]
        if not isinstance(rope_positions, str) or rope_positions not in ROPE_POSITIONS:
            raise ValueError(f"rope_positions must be one of {ROPE_POSITIONS}, "
                             f"got {rope_positions!r}")
        return [KVCache(window=window, sinks=sinks, rope_positions=rope_positions)
                for _ in self.blocks]

    def kv_numbers_per_token(self) -> int:
        """Numbers one token adds to each layer's cache: 2·G·(N/H) (keys and values of the G
        key-value heads; 2·N when G = H) for MHA and GQA, d_c + d_r for MLA."""
        attention = self.blocks[0].attention
        if self.latent:
            return attention.kv_numbers_per_token()
        return 2 * attention.W_k.out_features


# ------------------------------------------------------------------------------ training
def _check_model(model: object) -> TinyDecoder:
    if not isinstance(model, TinyDecoder):
        raise ValueError(f"model must be a TinyDecoder, got {type(model).__name__}")
    return model


def _check_logits_targets(logits: torch.Tensor, targets: object, what: str) -> torch.Tensor:
    """logits (B, T, V) with targets (B, T), or (B, T, O·V) with (B, T, O): logits viewed as
    (B, T, V) or (B, T, O, V)."""
    if not isinstance(targets, torch.Tensor) or targets.dtype != torch.long \
            or targets.dim() not in (2, 3):
        got = (f"{targets.dtype} of shape {tuple(targets.shape)}"
               if isinstance(targets, torch.Tensor) else type(targets).__name__)
        raise ValueError(f"{what} must be a long tensor (B, T) or (B, T, O), got {got}")
    check_holds_data(what, targets)
    B, T = logits.shape[:2]
    if tuple(targets.shape[:2]) != (B, T):
        raise ValueError(f"{what} must have the (B, T) = {(B, T)} of the logits, got "
                         f"{tuple(targets.shape)}")
    if targets.dim() == 3:
        O = targets.shape[-1]
        if O == 0 or logits.shape[-1] % O:
            raise ValueError(f"{what} must have O offsets dividing the {logits.shape[-1]} "
                             f"outputs (O·V), got O={O}")
        logits = logits.reshape(B, T, O, logits.shape[-1] // O)  # (B, T, O, V)
    if bool(((targets != IGNORE) & ((targets < 0) | (targets >= logits.shape[-1]))).any()):
        raise ValueError(f"{what} must be ids in [0, {logits.shape[-1]}) or IGNORE, got "
                         f"values from {int(targets.min())} to {int(targets.max())}")
    return logits


def _ce(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the entries of ``targets`` that are not IGNORE."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                           ignore_index=IGNORE)


def from_pool(pool: Sequence[torch.Tensor], batch_size: int,
              ) -> Callable[[torch.Generator | None], tuple[torch.Tensor, ...]]:
    """A ``sample`` for ``train`` that hands out a pool drawn beforehand, (tokens, targets, ...)
    with P rows each: call k (from 0) returns rows k·b … (k + 1)·b − 1 of every tensor, b =
    ``batch_size``, and ignores its generator; a call past the pool raises a ValueError.
    Drawing ``BackcopyTask.sample(b · steps, T)`` once is about 5× faster than ``steps`` draws
    (the chain steps through T either way)."""
    if not isinstance(pool, (tuple, list)) or len(pool) < 2 or not all(
            isinstance(x, torch.Tensor) and x.dim() >= 1 for x in pool):
        raise ValueError(f"pool must be a tuple (tokens, targets, ...) of tensors, got "
                         f"{type(pool).__name__}")
    rows = pool[0].shape[0]
    if any(x.shape[0] != rows for x in pool):
        raise ValueError(f"pool must hold tensors with one number of rows, got "
                         f"{[tuple(x.shape) for x in pool]}")
    b = check_positive_int("batch_size", batch_size)
    if b > rows:
        raise ValueError(f"batch_size must be at most the pool's {rows} rows, got {b}")
    pool, calls = tuple(pool), [0]

    def sample(generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
        start = calls[0] * b
        if start + b > rows:
            raise ValueError(f"pool must hold a batch for every step: {rows} rows give "
                             f"{rows // b} batches of {b}, got a call for batch {calls[0] + 1}")
        calls[0] += 1
        return tuple(x[start:start + b] for x in pool)

    return sample


def train(model: TinyDecoder, sample: Callable[[torch.Generator], tuple], *, steps: int,
          lr: float, seed: int = 0) -> list[float]:
    """Train ``model`` in place with Adam (``relative_task._adam_loop``: one thread on the CPU,
    the model left in eval mode) for ``steps`` steps; returns every step's loss.
    ``sample(generator)`` → (tokens (B, T) long, targets, ...) with the generator seeded with
    ``seed``; the loss is the cross-entropy over the targets that are not ``IGNORE``: targets
    (B, T) with logits (B, T, V), or (B, T, O) with logits (B, T, O·V) read as (B, T, O, V).
    A pool drawn once (``from_pool``) saves the time of drawing a batch per step."""
    model = _check_model(model)
    if not callable(sample):
        raise ValueError(f"sample must be a callable (generator) -> (tokens, targets, ...), "
                         f"got {type(sample).__name__}")
    steps = check_positive_int("steps", steps)
    lr = check_real("lr", lr, above=0.0)
    generator = torch.Generator().manual_seed(check_seed(seed))
    check_trainable("model", model)

    def loss_at(step: int) -> torch.Tensor:
        batch = sample(generator)
        if not isinstance(batch, (tuple, list)) or len(batch) < 2:
            raise ValueError(f"sample must return (tokens, targets, ...), got "
                             f"{type(batch).__name__}")
        logits = model(batch[0])  # (B, T, V) or (B, T, O·V)
        return _ce(_check_logits_targets(logits, batch[1], "sample's targets"), batch[1])

    return _adam_loop(model, steps, lr, loss_at)


# ------------------------------------------------------------------------------ streaming
@torch.no_grad()
def stream(model: TinyDecoder, tokens: torch.Tensor,
           cache: Sequence[KVCache | LatentCache]) -> torch.Tensor:
    """Feed ``tokens`` (B, T) one at a time, ``model(tokens[:, t:t+1], cache=cache)``, in eval
    mode without gradients: logits (B, T, num_outputs). ``cache``: ``model.new_cache(...)``
    (it keeps what its policy keeps; positions go on from ``cache.seen``)."""
    model = _check_model(model)
    _check_tokens(tokens, model.vocab_size)
    if cache is None:
        raise ValueError("cache must be a list of caches from model.new_cache(...), got None")
    was_training = model.training
    model.eval()
    try:
        return torch.cat([model(tokens[:, t:t + 1], cache=cache)
                          for t in range(tokens.shape[1])], dim=1)  # (B, T, V)
    finally:
        model.train(was_training)


@torch.no_grad()
def recompute(model: TinyDecoder, tokens: torch.Tensor, window: int) -> torch.Tensor:
    """Sliding window with recomputation: the logits at t are those of the model run from
    scratch on tokens[:, max(0, t − W + 1) … t] (positions from 0 in every window), eval mode,
    no gradients: (B, T, num_outputs). All windows go through the model as one batch."""
    model = _check_model(model)
    _check_tokens(tokens, model.vocab_size)
    W = check_positive_int("window", window)
    B, T = tokens.shape
    was_training = model.training
    model.eval()
    try:
        head = model(tokens[:, :W])  # (B, min(T, W), V): t < W sees 0 … t, causal
        if T <= W:
            return head
        windows = tokens.unfold(1, W, 1)  # (B, T − W + 1, W): window j = tokens j … j + W − 1
        last = model(windows.reshape(-1, W))[:, -1]  # (B·(T − W + 1), V)
        return torch.cat([head[:, :W - 1], last.view(B, T - W + 1, -1)], dim=1)  # (B, T, V)
    finally:
        model.train(was_training)


def position_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(T,) float64: the mean cross-entropy at each position over the batch (and the offsets)
    of the targets that are not ``IGNORE``; NaN where a position has none. logits (B, T, V)
    with targets (B, T), or (B, T, O·V) with (B, T, O)."""
    check_rank("logits", logits, 3, "(B, T, V)")
    check_holds_data("logits", logits)
    if not logits.is_floating_point():
        raise ValueError(f"logits must be a floating-point tensor, got dtype {logits.dtype}")
    view = _check_logits_targets(logits, targets, "targets")
    ok = targets != IGNORE  # (B, T) or (B, T, O)
    ce = F.cross_entropy(view.reshape(-1, view.shape[-1]).double(),
                         targets.reshape(-1).clamp(min=0), reduction="none").view(targets.shape)
    ce = torch.where(ok, ce, 0.0)
    dims = (0,) if targets.dim() == 2 else (0, 2)
    count = ok.sum(dims).double()  # (T,)
    return ce.sum(dims) / count  # 0 / 0 = NaN where nothing to predict


@torch.no_grad()
def accuracy_by_offset(model: TinyDecoder, tokens: torch.Tensor,
                       targets: torch.Tensor) -> torch.Tensor:
    """(O,) float64: for each offset o, the fraction of the targets[:, :, o − 1] that are not
    ``IGNORE`` which the model's argmax names (logits (B, T, O·V) read as (B, T, O, V)); eval
    mode, no gradients. An offset with no target (every entry IGNORE, e.g. o ≥ T) gives NaN,
    0 / 0, as ``position_loss`` does for a position: not 0, which would read as "always wrong"."""
    model = _check_model(model)
    _check_tokens(tokens, model.vocab_size)
    if not isinstance(targets, torch.Tensor) or targets.dim() != 3:
        raise ValueError(f"targets must be a long tensor (B, T, O), got "
                         f"{getattr(targets, 'shape', type(targets).__name__)}")
    was_training = model.training
    model.eval()
    try:
        view = _check_logits_targets(model(tokens), targets, "targets")  # (B, T, O, V)
    finally:
        model.train(was_training)
    ok = targets != IGNORE  # (B, T, O)
    right = (view.argmax(-1) == targets) & ok
    return right.sum((0, 1)).double() / ok.sum((0, 1)).double()  # (O,)
