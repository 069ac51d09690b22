"""Multi-query associative recall (多查询关联回忆; Arora et al. 2023, "Zoology"): a sequence
writes N key–value pairs, then asks for the value of some of its keys. Notebook 12 trains
softmax attention, linear attention and the delta rule of one size on it and measures what a
memory of fixed size forgets as N grows, and which pairs it forgets.

Legend: B batch, N key–value pairs written, M queries, D the model's size (of queries, keys and
values). Tokens are long ids: keys in [0, num_keys), values in [0, num_values).
"""

from __future__ import annotations

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
from .linear_attention import linear_attention
from .relative_task import _adam_loop

__all__ = [
    "KINDS", "make_batch", "RecallModel", "state_numbers", "train", "accuracy",
    "accuracy_by_position",
]

KINDS = ("softmax", "linear", "additive", "delta")  # RecallModel's ways to read the pairs


def make_batch(
    batch_size: int, num_pairs: int, *, num_queries: int | None = None, num_keys: int = 64,
    num_values: int = 64, generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``batch_size`` sequences of ``num_pairs`` key–value pairs, then ``num_queries`` queries.

    Returns (keys (B, N), values (B, N), queries (B, M), targets (B, M)), all long. The keys of
    a sequence are distinct (N drawn without replacement from ``range(num_keys)``), its values
    uniform from ``range(num_values)`` (they may repeat); the queries are M distinct keys of the
    sequence in random order (``num_queries`` None: all N of them, so each pair is asked for
    once), and each target is the value written with its query's key. Drawn on the CPU with
    ``generator`` (None: the global one), then moved to ``device`` (None: the CPU)."""
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
    generator = check_generator("generator", generator)
    device = as_usable_device("device", device)
    shuffle = torch.rand(batch_size, num_keys, generator=generator, dtype=torch.float64)
    keys = shuffle.argsort(dim=1)[:, :num_pairs]  # (B, N): a random permutation's first N
    values = torch.randint(0, num_values, (batch_size, num_pairs), generator=generator)  # (B, N)
    order = torch.rand(batch_size, num_pairs, generator=generator, dtype=torch.float64)
    asked = order.argsort(dim=1)[:, :num_queries]  # (B, M): which pairs are asked for
    queries, targets = keys.gather(1, asked), values.gather(1, asked)  # (B, M) each
    return keys.to(device), values.to(device), queries.to(device), targets.to(device)


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
    values (B, N, D) and a step ``beta`` (a 0-d tensor), from S_0 = 0 (no checks: the model's
    own step). What token t writes, u_t = β (v_t − S_{t−1}ᵀ k_t), depends on the earlier
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
    """Write N key–value pairs into a memory, then read it with each query: the smallest model
    that can recall, with one of four memories (``kind``, all of the same size D):

    * ``"softmax"``: the cache of every key and value (2·N·D numbers, growing with N), read by
      softmax attention, softmax(q Kᵀ/√D) V;
    * ``"linear"``: linear attention (Katharopoulos et al. 2020), a state Σ φ(k_j) v_jᵀ (D, D)
      and Σ φ(k_j) (D,) with φ = elu + 1, read as φ(q)ᵀS / φ(q)·z (``linear_attention``);
    * ``"additive"``: the same sum with unit keys and no feature map, S = Σ k̂_j v_jᵀ (D, D),
      read as q̂ᵀS (``recurrent_states`` without beta): the delta rule without its
      correction, to tell what its keys do from what its update does;
    * ``"delta"``: the delta rule (DeltaNet; Schlag et al. 2021) with unit keys, each write
      S ← S + β k̂ (v − Sᵀk̂)ᵀ, read as q̂ᵀS; its step β = sigmoid(``beta_logit``) in (0, 1) is
      learnt (starts at 0.5).

    A key token's embedding gives both the memory's key, k = W_k e(key), and the query,
    q = W_q e(query); a value token's embedding gives v = W_v u(value); the logits over the
    value tokens are ``readout``(read). Only the pairs write into the memory: the queries only
    read it, each on its own (the order of pairs matters to the delta rule alone; no model sees
    positions). Every kind has the same parameters (the delta rule one scalar more, β).
    """

    def __init__(self, num_keys: int, num_values: int, size: int, kind: str) -> None:
        super().__init__()
        self.num_keys = check_positive_int("num_keys", num_keys)
        self.num_values = check_positive_int("num_values", num_values)
        self.size = check_positive_int("size", size)
        if not isinstance(kind, str) or kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        D = self.size
        self.key_embedding = nn.Embedding(self.num_keys, D)  # e(key), for keys and queries
        self.value_embedding = nn.Embedding(self.num_values, D)  # u(value)
        self.W_q = nn.Linear(D, D, bias=False)
        self.W_k = nn.Linear(D, D, bias=False)
        self.W_v = nn.Linear(D, D, bias=False)
        self.readout = nn.Linear(D, self.num_values)
        self.beta_logit = nn.Parameter(torch.zeros(())) if kind == "delta" else None

    @property
    def beta(self) -> torch.Tensor | None:
        """The delta rule's step β = sigmoid(beta_logit), a 0-d tensor (None for other kinds)."""
        return None if self.beta_logit is None else torch.sigmoid(self.beta_logit)

    def forward(self, keys: torch.Tensor, values: torch.Tensor,
                queries: torch.Tensor) -> torch.Tensor:
        """keys (B, N) and values (B, N), the pairs written; queries (B, M), the keys asked
        for: long token ids on the model's device → logits (B, M, num_values)."""
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
        k = self.W_k(self.key_embedding(keys))  # (B, N, D)
        v = self.W_v(self.value_embedding(values))  # (B, N, D)
        q = self.W_q(self.key_embedding(queries))  # (B, M, D)
        if self.kind == "softmax":
            read, _ = scaled_dot_product(q, k, v, need_weights=False)  # (B, M, D)
        elif self.kind == "linear":
            read = linear_attention(q, k, v)  # (B, M, D), φ = elu + 1
        else:
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)  # unit queries and keys
            state = (k.mT @ v if self.kind == "additive"
                     else _delta_state(k, v, self.beta))  # (B, D, D)
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
    softmax cache 2·N·D (every key and value), linear attention's state D·D + D (S and z), the
    additive and delta rules' D·D: only softmax's grows with N."""
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
) -> list[float]:
    """Train ``model`` (a ``RecallModel``) in place with Adam for exactly ``steps`` steps, each
    on ``batch_size`` fresh sequences that ask for every pair they wrote (``make_batch``); the
    loss is the cross-entropy of the answers. ``pairs``: how many pairs a sequence writes, an
    int, or a sequence of ints of which each step draws one uniformly (one model learns every
    memory load); None: ``range(1, num_keys + 1)``. The draws come from a generator seeded
    with ``seed``. Returns the loss of every step. On the CPU it runs on one thread (small
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
    model = _recall_model(model)
    loads = _pairs_list(range(1, model.num_keys + 1) if pairs is None else pairs, model.num_keys)
    check_trainable("model", model)
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)

    def loss_at(step: int) -> torch.Tensor:
        n = loads[int(torch.randint(len(loads), (), generator=generator))]  # this step's N
        keys, values, queries, targets = make_batch(
            batch_size, n, num_keys=model.num_keys, num_values=model.num_values,
            generator=generator, device=device)  # (B, N) each
        logits = model(keys, values, queries)  # (B, N, num_values)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    return _adam_loop(model, steps, lr, loss_at)


@torch.no_grad()
def _recalled(model: nn.Module, num_pairs: int, num_sequences: int, seed: int) -> torch.Tensor:
    """1.0 where ``model`` recalls the pair written at position j of sequence b, else 0.0:
    (num_sequences, num_pairs) float64 on the CPU, every pair of every sequence asked for."""
    model = _recall_model(model)
    num_pairs = _check_pairs("num_pairs", num_pairs, model.num_keys)
    num_sequences = check_positive_int("num_sequences", num_sequences)
    generator = torch.Generator().manual_seed(check_seed(seed))
    device = next(model.parameters()).device
    keys, values, queries, targets = make_batch(
        num_sequences, num_pairs, num_keys=model.num_keys, num_values=model.num_values,
        generator=generator, device=device)  # (B, N) each
    was_training = model.training
    model.eval()
    try:
        with cpu_threads(1 if device.type == "cpu" else None):  # as in train
            answers = model(keys, values, queries).argmax(dim=-1)  # (B, N)
    finally:
        model.train(was_training)
    position = (queries[..., None] == keys[:, None, :]).int().argmax(dim=-1)  # (B, N): j asked
    right = torch.zeros(num_sequences, num_pairs, dtype=torch.float64, device=device)
    return right.scatter_(1, position, (answers == targets).double()).cpu()  # (B, N) by j


def accuracy_by_position(
    model: nn.Module, num_pairs: int, *, num_sequences: int = 256, seed: int = 1000,
) -> torch.Tensor:
    """For each position j of the N = ``num_pairs`` pairs written (0 the first, N − 1 the
    last), the fraction of ``num_sequences`` fresh sequences (drawn with ``seed``) whose j-th
    pair ``model`` recalls (the argmax of its logits names the value), every pair asked for:
    a float64 tensor (N,) on the CPU. A memory that forgets the oldest pairs first (the delta
    rule's) falls towards j = 0; one that blurs them all (a sum) is flat. On the CPU it runs on
    one thread, like ``train``."""
    return _recalled(model, num_pairs, num_sequences, seed).mean(dim=0)


def accuracy(
    model: nn.Module, num_pairs: int, *, num_sequences: int = 256, seed: int = 1000,
) -> float:
    """The fraction of the queries that ``model`` answers right (the argmax of its logits names
    the value), over ``num_sequences`` fresh sequences of ``num_pairs`` pairs (drawn with
    ``seed``), every pair asked for once: the mean of ``accuracy_by_position``. Chance is about
    1 / num_values. On the CPU it runs on one thread, like ``train``."""
    return _recalled(model, num_pairs, num_sequences, seed).mean().item()
