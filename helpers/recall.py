"""Multi-query associative recall (多查询关联回忆; the task of Arora et al. 2023, "Zoology", and
of their linear-attention study "Based", 2024): a sequence writes N key–value pairs (and may
then write R of its keys again, with new values), then asks for the value of some of its keys:
the latest written. Notebook 12 trains softmax attention, linear attention, additive, decaying
and delta-rule memories of one size on it and measures what a memory of fixed size forgets as N
grows, which pairs it forgets, and whether it returns a rewritten key's latest value.

Legend: B batch, N key–value pairs written, M queries, D the model's size (of queries, keys and
values). Tokens are long ids: keys in [0, num_keys), values in [0, num_values).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .attention import scaled_dot_product
from .checks import (
    as_usable_device, check_generator, check_holds_data, check_positive_int,
    check_rank, check_real, check_seed, check_trainable,
)
from .device import cpu_threads
from .linear_attention import elu_feature_map, linear_attention
from .relative_task import _adam_loop

__all__ = [
    "KINDS", "make_batch", "RecallModel", "state_numbers", "train", "accuracy",
    "accuracy_by_position",
]

KINDS = ("softmax", "linear", "positive", "additive", "decay", "delta", "delta_token")
# RecallModel's ways to write and read the pairs (see its docstring)


def make_batch(
    batch_size: int, num_pairs: int, *, num_queries: int | None = None, num_keys: int = 64,
    num_values: int = 64, rewrites: int = 0, generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``batch_size`` sequences of ``num_pairs`` key–value pairs, then ``rewrites`` more writes
    of earlier keys with new values, then ``num_queries`` queries.

    Returns (keys (B, N + R), values (B, N + R), queries (B, M), targets (B, M)), all long. The
    first N keys of a sequence are distinct (drawn without replacement from
    ``range(num_keys)``), their values uniform from ``range(num_values)`` (they may repeat).
    The R = ``rewrites`` writes after them (0 … N) write R distinct keys of the N again, in
    random order, each with a value different from the one it had (uniform over the other
    num_values − 1; so num_values ≥ 2 when R > 0). The queries are M distinct keys of the
    sequence in random order (``num_queries`` None: all N of them, so each key is asked for
    once), and each target is the value written *last* with its query's key. Drawn on the CPU
    with ``generator`` (None: the global one), then moved to ``device`` (None: the CPU).
    With R = 0 the draws are those of a batch without the argument."""
    batch_size = check_positive_int("batch_size", batch_size)
    num_pairs = check_positive_int("num_pairs", num_pairs)
    num_keys = check_positive_int("num_keys", num_keys)
    num_values = check_positive_int("num_values", num_values)
    if num_pairs > num_keys:
        raise ValueError(f"num_pairs must be at most num_keys (the keys of a sequence are "
                         f"distinct), got num_pairs={num_pairs}, num_keys={num_keys}")
    num_queries = num_pairs if num_queries is None else check_positive_int("num_queries",
                                                                           num_queries)
    if num_queries > num_pairs:
        raise ValueError(f"num_queries must be at most num_pairs (each query asks for a "
                         f"different key), got num_queries={num_queries}, num_pairs={num_pairs}")
    rewrites = _check_rewrites(rewrites, num_pairs)
    if rewrites and num_values < 2:
        raise ValueError(f"num_values must be at least 2 when rewrites > 0 (a rewrite writes a "
                         f"new value), got num_values={num_values}, rewrites={rewrites}")
    generator = check_generator("generator", generator)
    device = as_usable_device("device", device)
    shuffle = torch.rand(batch_size, num_keys, generator=generator, dtype=torch.float64)
    keys = shuffle.argsort(dim=1)[:, :num_pairs]  # (B, N): a random permutation's first N
    values = torch.randint(0, num_values, (batch_size, num_pairs), generator=generator)  # (B, N)
    order = torch.rand(batch_size, num_pairs, generator=generator, dtype=torch.float64)
    asked = order.argsort(dim=1)[:, :num_queries]  # (B, M): which pairs are asked for
    latest = values
    if rewrites:
        pick = torch.rand(batch_size, num_pairs, generator=generator, dtype=torch.float64)
        again = pick.argsort(dim=1)[:, :rewrites]  # (B, R): which of the N keys are rewritten
        shift = torch.randint(1, num_values, (batch_size, rewrites), generator=generator)
        new = (values.gather(1, again) + shift) % num_values  # (B, R): never the old value
        latest = values.scatter(1, again, new)  # (B, N): the last value of each key
        keys = torch.cat([keys, keys.gather(1, again)], dim=1)  # (B, N + R)
        values = torch.cat([values, new], dim=1)  # (B, N + R)
    queries = keys.gather(1, asked)  # (B, M)
    targets = latest.gather(1, asked)  # (B, M)
    return keys.to(device), values.to(device), queries.to(device), targets.to(device)


def _check_rewrites(rewrites: object, num_pairs: int) -> int:
    """``rewrites`` as an int in [0, num_pairs] (each rewrite writes a different key again)."""
    if not (isinstance(rewrites, numbers.Integral) and not isinstance(rewrites, bool)) or not (
            0 <= rewrites <= num_pairs):
        raise ValueError(f"rewrites must be an int in [0, num_pairs] = [0, {num_pairs}] (each "
                         f"rewrite writes a different key of the sequence again), got "
                         f"{rewrites!r:.60}")
    return int(rewrites)


def _check_tokens(name: str, tokens: object, bound: int, bound_name: str,
                  device: torch.device) -> torch.Tensor:
    """Raise unless ``tokens`` is a long (B, T) tensor on ``device``, B, T ≥ 1, ids in
    [0, bound)."""
    check_rank(name, tokens, 2, "(B, T)")
    if tokens.dtype != torch.long:
        raise ValueError(f"{name} must be a long tensor of token ids, got dtype {tokens.dtype}")
    check_holds_data(name, tokens)
    if tokens.device != device:
        raise ValueError(f"{name} must be on the model's device ({device}), got {tokens.device}")
    if tokens.shape[0] == 0 or tokens.shape[1] == 0:
        raise ValueError(f"{name} must have at least one sequence of at least one token, got "
                         f"shape {tuple(tokens.shape)}")
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= bound:
        raise ValueError(f"{name} must be token ids in [0, {bound_name}) = [0, {bound}), got "
                         f"values from {low} to {high}")
    return tokens


def _delta_state(keys: torch.Tensor, values: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """The delta rule's state after writing every pair, S_N (B, D, D), for keys (B, N, D),
    values (B, N, D) and a step ``beta`` (a 0-d tensor, or (B, N, 1): one β_t per write), from
    S_0 = 0 (no checks: the model's own step). What token t writes, u_t = β (v_t − S_{t−1}ᵀ k_t), depends on the earlier
    writes only through u_t = β v_t − β Σ_{i<t} (k_t·k_i) u_i, a lower-triangular system that
    one ``solve_triangular`` answers for every t at once (the parallel form of DeltaNet, Yang et
    al. 2024); then S_N = Σ_t k_t u_tᵀ. The same numbers as the loop of ``recurrent_states``,
    several times faster to train through. float16 and bfloat16 solve in float32 and return
    their own dtype."""
    dtype = keys.dtype
    if dtype in (torch.float16, torch.bfloat16):  # no triangular solve in half precision
        keys, values, beta = keys.float(), values.float(), beta.float()
    overlap = torch.tril(keys @ keys.mT, diagonal=-1)  # (B, N, N): k_t·k_i for i < t
    writes = torch.linalg.solve_triangular(beta * overlap, beta * values, upper=False,
                                           unitriangular=True)  # (B, N, D): the u_t
    return (keys.mT @ writes).to(dtype)  # (B, D, D)


class RecallModel(nn.Module):
    """Write key–value pairs into a memory, then read it with each query: the smallest model
    that can recall, with one of seven memories (``kind``, all of the same size D):

    * ``"softmax"``: the cache of every key and value (2·D numbers per write, growing), read by
      softmax attention, softmax(q Kᵀ/√D) V (no positions: two writes of one key weigh alike);
    * ``"linear"``: linear attention (Katharopoulos et al. 2020), a state Σ φ(k_j) v_jᵀ (D, D)
      and Σ φ(k_j) (D,) with φ = elu + 1, read as φ(q)ᵀS / φ(q)·z (``linear_attention``);
    * ``"positive"``: the same features scaled to unit length, φ̂ = φ/|φ|, and no normaliser,
      S = Σ φ̂(k_j) v_jᵀ, read as φ̂(q)ᵀS: ``additive`` with keys that are all positive (every
      two overlap, cosine > 0), to tell what positive features cost from what unit keys and
      no normaliser gain;
    * ``"additive"``: unit keys and no feature map, S = Σ k̂_j v_jᵀ (D, D), read as q̂ᵀS
      (``recurrent_states`` without beta): the delta rule without its correction;
    * ``"decay"``: the additive state multiplied by a learnt decay γ before each write,
      S_t = γ S_{t−1} + k̂_t v_tᵀ (RetNet's decay, Sun et al. 2023, learnt here), read as q̂ᵀS;
      γ = sigmoid(``decay_logit``) in (0, 1), starts at sigmoid(3) ≈ 0.95; or, with
      ``decay=γ`` (a float in (0, 1), this kind only), frozen at γ: ``decay_logit`` is then a
      buffer, not a parameter, and training leaves it as it is;
    * ``"delta"``: the delta rule (DeltaNet; Schlag et al. 2021) with unit keys, each write
      S ← S + β k̂ (v − Sᵀk̂)ᵀ, read as q̂ᵀS; its step β = sigmoid(``beta_logit``) in (0, 1) is
      learnt (starts at 0.5);
    * ``"delta_token"``: the same with DeltaNet's step per token, β_t = sigmoid(w·e(key_t) + b)
      from the written key token's embedding (``beta_proj``, starts at 0: β_t = 0.5).

    A key token's embedding gives both the memory's key, k = W_k e(key), and the query,
    q = W_q e(query); a value token's embedding gives v = W_v u(value); the logits over the
    value tokens are ``readout``(read). Only the writes enter the memory: the queries only read
    it, each on its own (the order of the writes matters to decay and the delta rules alone; no
    model sees positions). Every kind has the same parameters but decay's γ, the delta rule's β
    and delta_token's w, b.
    """

    def __init__(self, num_keys: int, num_values: int, size: int, kind: str, *,
                 decay: float | None = None) -> None:
        super().__init__()
        self.num_keys = check_positive_int("num_keys", num_keys)
        self.num_values = check_positive_int("num_values", num_values)
        self.size = check_positive_int("size", size)
        if not isinstance(kind, str) or kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        if decay is not None:
            if kind != "decay":
                raise ValueError(f"decay must be None for kind {kind!r} (a frozen γ is for kind "
                                 f"'decay' only), got {decay!r:.60}")
            decay = check_real("decay", decay, above=0.0)
            if decay >= 1:
                raise ValueError(f"decay must be in (0, 1) (the frozen γ), got {decay}")
        D = self.size
        self.key_embedding = nn.Embedding(self.num_keys, D)  # e(key), for keys and queries
        self.value_embedding = nn.Embedding(self.num_values, D)  # u(value)
        self.W_q = nn.Linear(D, D, bias=False)
        self.W_k = nn.Linear(D, D, bias=False)
        self.W_v = nn.Linear(D, D, bias=False)
        self.readout = nn.Linear(D, self.num_values)
        self.beta_logit = nn.Parameter(torch.zeros(())) if kind == "delta" else None
        if decay is not None:  # frozen: a buffer, which Adam never sees
            self.register_buffer("decay_logit", torch.tensor(math.log(decay / (1 - decay))))
        else:
            self.decay_logit = nn.Parameter(torch.tensor(3.0)) if kind == "decay" else None
        self.beta_proj = None
        if kind == "delta_token":
            self.beta_proj = nn.Linear(D, 1)
            nn.init.zeros_(self.beta_proj.weight)
            nn.init.zeros_(self.beta_proj.bias)

    @property
    def beta(self) -> torch.Tensor | None:
        """The delta rule's step β = sigmoid(beta_logit), a 0-d tensor (None for other kinds,
        delta_token's included: its β_t depends on the token, see ``token_beta``)."""
        return None if self.beta_logit is None else torch.sigmoid(self.beta_logit)

    @property
    def decay(self) -> torch.Tensor | None:
        """The decay γ = sigmoid(decay_logit), a 0-d tensor (None for kinds other than decay)."""
        return None if self.decay_logit is None else torch.sigmoid(self.decay_logit)

    def token_beta(self, keys: torch.Tensor) -> torch.Tensor:
        """delta_token's step for each written key token, β_t = sigmoid(w·e(key_t) + b): keys
        (B, T) long → (B, T) in (0, 1). A ValueError for other kinds."""
        if self.beta_proj is None:
            raise ValueError(f"token_beta is delta_token's, got a model of kind {self.kind!r}")
        _check_tokens("keys", keys, self.num_keys, "num_keys", self.key_embedding.weight.device)
        return torch.sigmoid(self.beta_proj(self.key_embedding(keys)))[..., 0]

    def forward(self, keys: torch.Tensor, values: torch.Tensor,
                queries: torch.Tensor) -> torch.Tensor:
        """keys (B, T) and values (B, T), the writes in order (T = N + R with rewrites);
        queries (B, M), the keys asked for: long token ids on the model's device → logits
        (B, M, num_values)."""
        device = self.key_embedding.weight.device
        _check_tokens("keys", keys, self.num_keys, "num_keys", device)
        _check_tokens("values", values, self.num_values, "num_values", device)
        _check_tokens("queries", queries, self.num_keys, "num_keys", device)
        if values.shape != keys.shape:
            raise ValueError(f"values must have the shape of keys (B, N) = {tuple(keys.shape)} "
                             f"(one value per key), got {tuple(values.shape)}")
        if queries.shape[0] != keys.shape[0]:
            raise ValueError(f"queries must have the batch size of keys ({keys.shape[0]}), got "
                             f"{queries.shape[0]}")
        e = self.key_embedding(keys)  # (B, T, D)
        k = self.W_k(e)  # (B, T, D)
        v = self.W_v(self.value_embedding(values))  # (B, T, D)
        q = self.W_q(self.key_embedding(queries))  # (B, M, D)
        if self.kind == "softmax":
            read, _ = scaled_dot_product(q, k, v, need_weights=False)  # (B, M, D)
        elif self.kind == "linear":
            read = linear_attention(q, k, v)  # (B, M, D), φ = elu + 1
        elif self.kind == "positive":
            q, k = (F.normalize(elu_feature_map(x), dim=-1) for x in (q, k))  # unit, positive
            read = q @ (k.mT @ v)  # (B, M, D): the additive state of positive keys
        else:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)  # unit queries and keys
            if self.kind == "additive":
                state = k.mT @ v  # (B, D, D)
            elif self.kind == "decay":
                T = k.shape[1]
                age = torch.arange(T - 1, -1, -1, device=k.device, dtype=k.dtype)  # (T,)
                weight = self.decay ** age  # (T,): γ^(T−1−t), the newest write weighs 1
                state = (k * weight[:, None]).mT @ v  # (B, D, D)
            else:
                beta = (self.beta if self.kind == "delta"
                        else torch.sigmoid(self.beta_proj(e)))  # () or (B, T, 1)
                state = _delta_state(k, v, beta)  # (B, D, D)
            read = q @ state  # (B, M, D)
        return self.readout(read)  # (B, M, num_values)


def _recall_model(model: object) -> nn.Module:
    """Raise unless ``model`` is an ``nn.Module`` with int ``num_keys`` and ``num_values`` (a
    ``RecallModel``, or one called as it is) whose parameters hold data."""
    sizes = [getattr(model, name, None) for name in ("num_keys", "num_values")]
    if not isinstance(model, nn.Module) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
        raise ValueError(f"model must be a RecallModel (an nn.Module with int num_keys and "
                         f"num_values), got {type(model).__name__} with num_keys={sizes[0]!r}, "
                         f"num_values={sizes[1]!r}")
    param = next(model.parameters(), None)
    if param is None:
        raise ValueError("model must have parameters (its device is theirs), got none")
    check_holds_data("model's parameters", param)
    return model


def _check_pairs(name: str, num_pairs: object, num_keys: int) -> int:
    """``num_pairs`` as an int in [1, num_keys] (the keys of a sequence are distinct)."""
    num_pairs = check_positive_int(name, num_pairs)
    if num_pairs > num_keys:
        raise ValueError(f"{name} must be at most the model's num_keys={num_keys} (the keys of "
                         f"a sequence are distinct), got {num_pairs}")
    return num_pairs


def state_numbers(model: RecallModel, num_pairs: int) -> int:
    """How many numbers ``model``'s memory holds once it has read ``num_pairs`` pairs: the
    softmax cache 2·N·D (every key and value), linear attention's state D·D + D (S and z),
    every other kind's D·D: only softmax's grows with N (and with rewrites: 2·D per write)."""
    if not isinstance(model, RecallModel):
        raise ValueError(f"model must be a RecallModel, got {type(model).__name__}")
    num_pairs = _check_pairs("num_pairs", num_pairs, model.num_keys)
    D = model.size
    return {"softmax": 2 * num_pairs * D, "linear": D * D + D}.get(model.kind, D * D)


def _pairs_list(pairs: object, num_keys: int) -> list[int]:
    """``pairs`` (an int, or a non-empty sequence of ints) as a list of N in [1, num_keys]."""
    if isinstance(pairs, numbers.Integral) and not isinstance(pairs, bool):
        return [_check_pairs("pairs", pairs, num_keys)]
    if not isinstance(pairs, Sequence) or isinstance(pairs, str) or len(pairs) == 0:
        raise ValueError(f"pairs must be an int or a non-empty sequence of ints (e.g. "
                         f"range(1, 65)), got {pairs!r:.60}")
    for n in pairs:
        if not (isinstance(n, numbers.Integral) and not isinstance(n, bool)
                and 1 <= n <= num_keys):
            raise ValueError(f"pairs must hold ints in [1, num_keys] = [1, {num_keys}] (the keys "
                             f"of a sequence are distinct), got {n!r:.60}")
    return [int(n) for n in pairs]


def train(
    model: nn.Module, *, steps: int = 300, batch_size: int = 32,
    pairs: int | Sequence[int] | None = None, lr: float = 1e-2, seed: int = 0,
    rewrite_share: float = 0.0,
) -> list[float]:
    """Train ``model`` (a ``RecallModel``) in place with Adam for exactly ``steps`` steps, each
    on ``batch_size`` fresh sequences that ask for every pair they wrote (``make_batch``); the
    loss is the cross-entropy of the answers. ``pairs``: how many pairs a sequence writes, an
    int, or a sequence of ints of which each step draws one uniformly (one model learns every
    memory load); None: ``range(1, num_keys + 1)``. ``rewrite_share`` in [0, 1]: a step with N
    pairs also writes round(share·N) of its keys again with new values (``make_batch``'s
    ``rewrites``; the answers are the latest values). The draws come from a generator seeded
    with ``seed`` (with share 0 the same draws as without the argument). Returns the loss of every step. On the CPU it runs on one thread (small
    tensors train faster so) and restores the previous thread count. The model is left in eval
    mode.

    Adam is ``relative_task``'s, written out (betas 0.9 and 0.999, eps 1e-8, no weight decay:
    ``torch.optim.Adam``'s numbers). Every setting is checked before the model is touched. A
    model in float16 or bfloat16 is refused (a ValueError: train in float32 and cast
    afterwards). A loss that turns NaN or ±inf raises a ValueError naming the step, and so do
    non-finite weights after the last step."""
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    lr = check_real("lr", lr, above=0.0)
    seed = check_seed(seed)
    rewrite_share = check_real("rewrite_share", rewrite_share, at_least=0.0)
    if rewrite_share > 1:
        raise ValueError(f"rewrite_share must be in [0, 1] (the share of a step's keys written "
                         f"again), got {rewrite_share}")
    model = _recall_model(model)
    loads = _pairs_list(range(1, model.num_keys + 1) if pairs is None else pairs, model.num_keys)
    check_trainable("model", model)
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)

    def loss_at(step: int) -> torch.Tensor:
        n = loads[int(torch.randint(len(loads), (), generator=generator))]  # this step's N
        keys, values, queries, targets = make_batch(
            batch_size, n, num_keys=model.num_keys, num_values=model.num_values,
            rewrites=round(rewrite_share * n), generator=generator, device=device)
        logits = model(keys, values, queries)  # (B, N, num_values)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    return _adam_loop(model, steps, lr, loss_at)


@torch.no_grad()
def _recalled(model: nn.Module, num_pairs: int, num_sequences: int, seed: int,
              rewrites: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """1.0 where ``model`` recalls the key first written at position j of sequence b (its
    latest value), else 0.0, and True where that key was written again: two (num_sequences,
    num_pairs) tensors on the CPU (float64, bool), every key of every sequence asked for."""
    model = _recall_model(model)
    num_pairs = _check_pairs("num_pairs", num_pairs, model.num_keys)
    rewrites = _check_rewrites(rewrites, num_pairs)
    num_sequences = check_positive_int("num_sequences", num_sequences)
    generator = torch.Generator().manual_seed(check_seed(seed))
    device = next(model.parameters()).device
    keys, values, queries, targets = make_batch(
        num_sequences, num_pairs, num_keys=model.num_keys, num_values=model.num_values,
        rewrites=rewrites, generator=generator, device=device)  # (B, N + R), (B, N)
    was_training = model.training
    model.eval()
    try:
        with cpu_threads(1 if device.type == "cpu" else None):  # as in train
            answers = model(keys, values, queries).argmax(dim=-1)  # (B, N)
    finally:
        model.train(was_training)
    first = keys[:, :num_pairs]  # (B, N): the first writes, distinct keys
    position = (queries[..., None] == first[:, None, :]).int().argmax(dim=-1)  # (B, N): j asked
    right = torch.zeros(num_sequences, num_pairs, dtype=torch.float64, device=device)
    right.scatter_(1, position, (answers == targets).double())  # (B, N) by j
    again = (first[..., None] == keys[:, None, num_pairs:]).any(dim=-1)  # (B, N): rewritten
    return right.cpu(), again.cpu()


def accuracy_by_position(
    model: nn.Module, num_pairs: int, *, num_sequences: int = 256, seed: int = 1000,
) -> torch.Tensor:
    """For each position j of the N = ``num_pairs`` pairs written (0 the first, N − 1 the
    last), the fraction of ``num_sequences`` fresh sequences (drawn with ``seed``) whose j-th
    pair ``model`` recalls (the argmax of its logits names the value), every pair asked for:
    a float64 tensor (N,) on the CPU. A memory that forgets the oldest pairs first (the delta
    rule's) falls towards j = 0; one that blurs them all (a sum) is flat. On the CPU it runs on
    one thread, like ``train``."""
    return _recalled(model, num_pairs, num_sequences, seed)[0].mean(dim=0)


def accuracy(
    model: nn.Module, num_pairs: int, *, rewrites: int = 0, which: str = "all",
    num_sequences: int = 256, seed: int = 1000,
) -> float:
    """The fraction of the queries that ``model`` answers right (the argmax of its logits names
    the value), over ``num_sequences`` fresh sequences of ``num_pairs`` pairs (drawn with
    ``seed``), of which ``rewrites`` keys are then written again with new values
    (``make_batch``), every key asked for once, its target the latest value. ``which``:
    "all" the queries (with no rewrites, the mean of ``accuracy_by_position``), "rewritten"
    those whose key was written again, "once" the others (refused where it selects no query).
    Chance is about 1 / num_values. On the CPU it runs on one thread, like ``train``."""
    if which not in ("all", "rewritten", "once"):
        raise ValueError(f"which must be 'all', 'rewritten' or 'once', got {which!r:.60}")
    right, again = _recalled(model, num_pairs, num_sequences, seed, rewrites)
    if which == "all":
        return right.mean().item()
    chosen = again if which == "rewritten" else ~again
    if not bool(chosen.any()):
        raise ValueError(f"which={which!r} selects no query with rewrites={rewrites} of "
                         f"num_pairs={num_pairs}")
    return right[chosen].mean().item()
