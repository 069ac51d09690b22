"""Linear attention (线性注意力): kernel regression whose kernel is a product of feature maps
(特征映射), κ(q, k) = φ(q)·φ(k), so that the sums over the keys can be re-associated; and the
delta rule (增量规则), which writes into the same kind of state by online regression.

Legend: B batch, Q queries, K key-value pairs, T tokens, D query/key size, F features (the
size of φ's output), V value size. States are laid out (D or F, V): a read is ``q @ S`` (V,).
Mask convention: ``valid_lens`` (B,) or (B, Q) keeps the first ``n`` keys, and ``causal``
hides the keys in a query's future, lower-right aligned as ``causal_mask``: every query sees a
*prefix* of the keys, of the length ``visible_prefix`` gives. A query that sees no key gets an
all-zero output (its normaliser is 0, never divided by). NaN or inf in a key, value or query
that takes part reaches the outputs that see it (as in softmax attention); keys and values no
query sees, and queries that see no key, change nothing even when they hold NaN.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .attention import check_qkv
from .checks import (
    as_usable_device, check_bool, check_floating, check_generator, check_holds_data, check_int,
    check_like, check_positive_int, check_rank, check_size,
)
from .masking import ValidLens, lens_hidden

__all__ = [
    "FORMS", "elu_feature_map", "random_projection", "positive_random_features",
    "visible_prefix", "linear_attention", "recurrent_states", "delta_rule",
]

FORMS = ("quadratic", "linear", "recurrent")  # linear_attention's three equal forms
FeatureMap = Callable[[torch.Tensor], torch.Tensor]


def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1 (Katharopoulos et al. 2020, https://arxiv.org/abs/2006.16236),
    elementwise: (..., D) → (..., D) of x's dtype, x + 1 where x > 0, eˣ where x ≤ 0, except
    that a feature never falls below the dtype's smallest normal number
    ``torch.finfo(x.dtype).tiny`` (eˣ does below x ≈ −9.7 in float16, −87.3 in float32 and
    bfloat16, −708 in float64, and rounds to 0 further on): every feature is > 0, NaN stays
    NaN. A new tensor; ``x`` is not changed."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"x must be a tensor of shape (..., D), got {x!r:.60}")
    check_floating("x", x)
    check_holds_data("x", x)
    # not F.elu(x) + 1: for x ≪ 0 that is (eˣ − 1) + 1, which rounds eˣ to 0
    tiny = torch.finfo(x.dtype).tiny
    return F.relu(x) + torch.exp(x.clamp(max=0)).clamp(min=tiny)


def random_projection(
    num_features: int, size: int, *, generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64, device: torch.device | str | None = None,
    orthogonal: bool = False,
) -> torch.Tensor:
    """F random directions w_1 … w_F of size D: (F, D), drawn in float64 on the CPU with
    ``generator`` (None: the global one), then cast to ``dtype`` and moved to ``device``.
    ``positive_random_features`` uses them (Performer, Choromanski et al. 2021,
    https://arxiv.org/abs/2009.14794).

    * ``orthogonal=False``: every entry an independent standard normal number.
    * ``orthogonal=True``: FAVOR+'s orthogonal random features (ORF): blocks of D rows that
      are orthogonal to each other (the Q of a QR factorisation of a D×D Gaussian matrix,
      signs fixed so that it is uniformly distributed), each row then rescaled to the length
      of an independent Gaussian D-vector (chi-distributed with D degrees of freedom); the last
      block keeps only the rows needed. Each row is still a standard normal vector, so the
      kernel estimate stays unbiased; rows of a block no longer repeat directions, which lowers
      its variance. Rows of different blocks are independent."""
    num_features = check_positive_int("num_features", num_features)
    size = check_positive_int("size", size)
    generator = check_generator("generator", generator)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch.dtype, got {dtype!r}")
    device = as_usable_device("device", device)
    check_bool("orthogonal", orthogonal)
    if not orthogonal:
        W = torch.randn(num_features, size, generator=generator, dtype=torch.float64)  # (F, D)
        return W.to(device=device, dtype=dtype)
    blocks = -(-num_features // size)  # ⌈F / D⌉ blocks of D orthogonal rows
    G = torch.randn(blocks, size, size, generator=generator, dtype=torch.float64)  # (⌈F/D⌉, D, D)
    Qm, R = torch.linalg.qr(G)
    # columns × sign(diag R): Q then has Haar's distribution; its rows are orthonormal too
    Qm = Qm * torch.where(R.diagonal(dim1=-2, dim2=-1) < 0, -1.0, 1.0)[..., None, :]
    directions = Qm.mT.reshape(blocks * size, size)[:num_features]  # (F, D), unit rows
    lengths = torch.randn(num_features, size, generator=generator, dtype=torch.float64).norm(dim=1)
    return (directions * lengths[:, None]).to(device=device, dtype=dtype)  # (F, D)


def positive_random_features(x: torch.Tensor, projection: torch.Tensor) -> torch.Tensor:
    """Positive random features of the exponential kernel (Performer's FAVOR+):
    φ(x) = exp(W x − |x|²/2) / √F for ``projection`` W (F, D): (..., D) → (..., F), every
    feature > 0. For W with standard normal entries, E[φ(q)·φ(k)] = exp(q·k) exactly (an
    unbiased estimate), so with x = q / D^¼ and k / D^¼ the features estimate softmax's kernel
    exp(q·k/√D). ``projection`` may have another floating dtype than x (it must share x's
    device): both compute in the wider one (half precision in float32), the result has x's
    dtype. A feature never falls below x's ``torch.finfo(dtype).tiny`` (exp underflows for
    large |x|), so every feature is > 0 (NaN stays NaN); large |x| can still overflow to inf
    (float32: past about 88 in the exponent)."""
    if not isinstance(x, torch.Tensor) or x.dim() < 1:
        raise ValueError(f"x must be a tensor of shape (..., D), got {x!r:.60}")
    check_floating("x", x)
    check_holds_data("x", x)
    check_rank("projection", projection, 2, "(F, D)")
    check_floating("projection", projection)
    if projection.device != x.device:
        raise ValueError(f"projection must be on the device of x ({x.device}), got {projection.device}")
    check_size("feature size of projection (D, same as x)", x.shape[-1], projection.shape[-1])
    if projection.shape[0] == 0:
        raise ValueError("projection must have at least one row (F >= 1), got 0")
    dtype = torch.promote_types(_compute_dtype(x.dtype), _compute_dtype(projection.dtype))
    xc, W = x.to(dtype), projection.to(dtype)
    half_norm = (xc * xc).sum(dim=-1, keepdim=True) / 2  # (..., 1)
    phi = torch.exp(xc @ W.T - half_norm) / math.sqrt(W.shape[0])  # (..., F)
    return phi.to(x.dtype).clamp(min=torch.finfo(x.dtype).tiny)


def visible_prefix(
    valid_lens: ValidLens, batch: int, queries: int, keys: int,
    device: torch.device | str = "cpu", *, causal: bool = False,
) -> torch.Tensor:
    """How many keys each query sees, (B, Q) long: the first ``n`` keys, with ``n`` the valid
    length (K without one), and with ``causal`` at most K − Q + i + 1 for query i (it sits at
    position K − Q + i, as in ``causal_mask``; queries before the first key see 0)."""
    batch, queries, keys = (check_int(name, n, 0) for name, n in
                            (("batch", batch), ("queries", queries), ("keys", keys)))
    check_bool("causal", causal)
    usable = as_usable_device("device", device) or torch.device("cpu")
    n = torch.full((batch, queries), keys, dtype=torch.long, device=usable)  # (B, Q)
    if valid_lens is not None:
        hidden, _ = lens_hidden(valid_lens, batch, queries, keys, usable)  # (B, 1 or Q, K)
        n = torch.minimum(n, (~hidden).sum(dim=-1))  # the kept keys are a prefix: count them
    if causal:
        last = torch.arange(queries, device=usable) + (keys - queries + 1)  # (Q,)
        n = torch.minimum(n, last.clamp(min=0))
    return n


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Half precision computes in float32 (sums of many positive features overflow float16)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _features(feature_map: FeatureMap, x: torch.Tensor, name: str,
              takes_part: torch.Tensor | None = None) -> torch.Tensor:
    """φ(x) (B, T, F), checked: a floating tensor of x's leading shape, no negative feature, and
    finite wherever x's row (B, T) is finite and ``takes_part`` (None: everywhere). The map gets
    a copy of x (a map that writes into its input changes no caller's tensor)."""
    phi = feature_map(x.clone())
    if not isinstance(phi, torch.Tensor) or phi.dim() != 3 or phi.shape[:2] != x.shape[:2]:
        got = tuple(phi.shape) if isinstance(phi, torch.Tensor) else type(phi).__name__
        raise ValueError(f"feature_map must return a tensor (B, T, F) of {name}'s (B, T) = "
                         f"{tuple(x.shape[:2])}, got {got}")
    check_floating(f"feature_map({name})", phi)
    if phi.shape[-1] == 0:
        raise ValueError(f"feature_map must return at least one feature (F >= 1), got 0 for {name}")
    if bool((phi < 0).any()):  # a negative feature could make a normaliser 0 or negative
        raise ValueError(f"feature_map must return features >= 0 (the normaliser φ(q)·Σφ(k) is "
                         f"then 0 only when no key is seen), got a minimum of "
                         f"{phi.min().item():.3g} for {name}")
    broken = ~torch.isfinite(phi).all(dim=-1) & torch.isfinite(x).all(dim=-1)  # (B, T)
    if takes_part is not None:
        broken &= takes_part
    if bool(broken.any()):  # NaN (e.g. √x of x < 0) or an overflow, from finite numbers
        b, t = (int(i) for i in broken.nonzero()[0])
        raise ValueError(f"feature_map must return finite features for finite {name}, got NaN "
                         f"or inf for {int(broken.sum())} of them (the first: batch {b}, "
                         f"position {t})")
    return phi.to(x.dtype)


def linear_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
    valid_lens: ValidLens = None, *, feature_map: FeatureMap = elu_feature_map,
    causal: bool = False, form: str = "linear",
) -> torch.Tensor:
    """Attention with the kernel φ(q)·φ(k) in place of exp(q·k/√D): query i's output is

        o_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j)   over the keys j it sees,

    for queries (B, Q, D), keys (B, K, D), values (B, K, V) → (B, Q, V). ``form`` picks one of
    three equal computations: ``"quadratic"`` (the (B, Q, K) weights written out, as softmax
    attention does: memory Q·K), ``"linear"`` (re-associated: Σ_j φ(k_j) v_jᵀ (F, V) is summed
    once and each query reads it; with ``causal`` or per-query lengths, a running sum per key:
    memory K·F·V) and ``"recurrent"`` (a loop over the keys that adds each to a state S (F, V)
    and z (F,), every query reading the state when its prefix is complete: an RNN).
    ``feature_map``: (B, T, D) → (B, T, F), called on a copy of the inputs (in float32 for
    half precision). Checked wherever a key is seen (a key some query sees, a query that sees a
    key): every feature ≥ 0, finite where its input is finite, and the normaliser
    φ(q_i)·Σ_j φ(k_j) > 0. A zero normaliser there (features that are exactly 0, as ReLU's,
    or that underflow) would make the weights 0/0: it is refused with a ValueError naming
    ``feature_map``, not returned as 0 (a number the caller would take for an output) nor as
    NaN (which this module keeps for NaN in the data). Default elu + 1 (every feature > 0).
    Masks: ``valid_lens`` (B,) or (B, Q) and ``causal`` (see the module's docstring): a query
    that sees no key outputs 0 (gradient 0). NaN in a seen key, value or query reaches every
    output that sees it; keys and values no query sees change nothing, even holding NaN or inf.
    float16 and bfloat16 compute in float32 and return their own dtype."""
    check_qkv(queries, keys, values, same_qk_size=True)
    check_bool("causal", causal)
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    if not callable(feature_map):
        raise ValueError(f"feature_map must be a function (B, T, D) -> (B, T, F), got "
                         f"{type(feature_map).__name__}")
    B, Q, _ = queries.shape
    K = keys.shape[1]
    n = visible_prefix(valid_lens, B, Q, K, queries.device, causal=causal)  # (B, Q)
    dtype = _compute_dtype(queries.dtype)
    most = F.pad(n, (0, 1)).amax(dim=1)  # (B,): the longest prefix a query sees (0 if Q = 0)
    seen = torch.arange(K, device=keys.device) < most[:, None]  # (B, K): seen by some query
    hides = not bool(seen.all())  # some key no query sees (else no copies are needed)
    if hides:
        keys = torch.where(seen[..., None], keys, 0.0)  # unseen rows: 0, not NaN
        values = torch.where(seen[..., None], values, 0.0)
    sees = n > 0  # (B, Q): the queries that see a key
    blind = not bool(sees.all())
    if blind:  # a query that sees nothing outputs 0: its NaN must not reach its 0 (or gradient)
        queries = torch.where(sees[..., None], queries, 0.0)
    keys, values = keys.to(dtype), values.to(dtype)
    phi_q = _features(feature_map, queries.to(dtype), "queries", sees)  # (B, Q, F)
    phi_k = _features(feature_map, keys, "keys", seen)  # (B, K, F)
    if hides:
        phi_k = torch.where(seen[..., None], phi_k, 0.0)  # unseen keys add nothing to any sum
    if blind:
        phi_q = torch.where(sees[..., None], phi_q, 0.0)
    check_size("number of features of keys (F, same as queries)", phi_q.shape[-1], phi_k.shape[-1])
    if form == "quadratic":
        weights = phi_q @ phi_k.mT  # (B, Q, K): the kernel κ(q_i, k_j)
        takes = torch.arange(K, device=keys.device) < n[..., None]  # (B, Q, K)
        weights = weights.masked_fill(~takes, 0.0)
        numerator, normaliser = _masked_product(weights, values, takes), weights.sum(dim=-1)
    elif form == "linear":
        numerator, normaliser = _reassociated(phi_q, phi_k, values, n)
    else:
        numerator, normaliser = _recurrent(phi_q, phi_k, values, n)
    return _normalise(numerator, normaliser, sees).to(queries.dtype)


def _normalise(numerator: torch.Tensor, normaliser: torch.Tensor, sees: torch.Tensor) -> torch.Tensor:
    """numerator / normaliser (B, Q, V) where a query ``sees`` a key, 0 where it sees none
    (divided by 1, never by 0: no NaN in the gradient); NaN stays NaN. Refuses a normaliser
    of exactly 0 for a query that sees a key (0/0: the feature map's features vanish there)."""
    zero = normaliser == 0  # (B, Q); NaN is not 0: it propagates
    vanished = zero & sees
    if bool(vanished.any()):
        b, i = (int(x) for x in vanished.nonzero()[0])
        raise ValueError(f"feature_map must give a normaliser φ(q)·Σφ(k) > 0 for a query that "
                         f"sees keys, got 0 for {int(vanished.sum())} queries (the first: batch "
                         f"{b}, query {i}): its features and the keys' are 0 or underflow where "
                         f"they meet, and the weights would be 0/0")
    safe = torch.where(zero, 1.0, normaliser)  # never divide by 0 (a NaN gradient)
    return torch.where(sees[..., None], numerator / safe[..., None], 0.0)  # (B, Q, V)


def _masked_product(weights: torch.Tensor, values: torch.Tensor, takes: torch.Tensor) -> torch.Tensor:
    """weights @ values (B, Q, V), with ``weights`` 0 where not ``takes`` (B, Q, K), or (Q, K)
    for every batch: a NaN or inf value reaches only the rows that take its key (in a plain
    product 0 · NaN = NaN would reach every row); such entries are NaN. The chunkwise forms use
    it inside a chunk, ``takes`` the lower triangle."""
    bad = ~torch.isfinite(values)  # (B, K, V)
    if not bool(bad.any()):
        return weights @ values
    out = weights @ torch.where(bad, 0.0, values)  # (B, Q, V)
    reached = (takes.to(values.dtype) @ bad.to(values.dtype)) > 0  # (B, Q, V)
    return torch.where(reached, math.nan, out)


def _reassociated(phi_q: torch.Tensor, phi_k: torch.Tensor, values: torch.Tensor,
                  n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(numerator (B, Q, V), normaliser (B, Q)) with the sums over keys taken first."""
    if bool((n == n[:, :1]).all()):  # every query of a row sees the same prefix (phi_k is 0 past it)
        state = phi_k.mT @ values  # (B, F, V): Σ_j φ(k_j) v_jᵀ
        z = phi_k.sum(dim=1)  # (B, F): Σ_j φ(k_j)
        return phi_q @ state, (phi_q * z[:, None]).sum(dim=-1)  # (B, Q, V), (B, Q)
    outer = phi_k[..., :, None] * values[..., None, :]  # (B, K, F, V): φ(k_j) v_jᵀ
    running = F.pad(outer.cumsum(dim=1), (0, 0, 0, 0, 1, 0))  # (B, K + 1, F, V): sums of prefixes
    running_z = F.pad(phi_k.cumsum(dim=1), (0, 0, 1, 0))  # (B, K + 1, F)
    batch = torch.arange(phi_q.shape[0], device=n.device)[:, None]  # (B, 1)
    state, z = running[batch, n], running_z[batch, n]  # (B, Q, F, V), (B, Q, F): each query's prefix
    return (phi_q[..., None, :] @ state).squeeze(-2), (phi_q * z).sum(dim=-1)


def _recurrent(phi_q: torch.Tensor, phi_k: torch.Tensor, values: torch.Tensor,
               n: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same as an RNN: S (B, F, V) and z (B, F) grow by one key per step; a query reads
    them at the step where its prefix of n keys is complete."""
    B, Q, Fn = phi_q.shape
    K, V = values.shape[1], values.shape[2]
    S = phi_q.new_zeros(B, Fn, V)  # (B, F, V)
    z = phi_q.new_zeros(B, Fn)  # (B, F)
    numerator, normaliser = phi_q.new_zeros(B, Q, V), phi_q.new_zeros(B, Q)
    for t in range(K + 1):  # the state now holds keys 0 … t − 1
        reading = (n == t)  # (B, Q): the queries that see exactly t keys
        if bool(reading.any()):
            numerator = torch.where(reading[..., None], phi_q @ S, numerator)  # (B, Q, V)
            normaliser = torch.where(reading, (phi_q * z[:, None]).sum(dim=-1), normaliser)
        if t < K:
            S = S + phi_k[:, t, :, None] * values[:, t, None, :]  # + φ(k_t) v_tᵀ
            z = z + phi_k[:, t]
    return numerator, normaliser


def _check_beta(beta: float | torch.Tensor | None, keys: torch.Tensor) -> torch.Tensor | None:
    """β as a (B, T) tensor (a number: in the compute dtype, so half precision does not round
    it), or None (the additive update)."""
    if beta is None:
        return None
    B, T = keys.shape[:2]
    if isinstance(beta, torch.Tensor):
        check_floating("beta", beta)
        check_like("beta", beta, "keys", keys)
        if beta.shape != (B, T):
            raise ValueError(f"beta must be a number or a tensor (B, T) = {(B, T)}, got shape "
                             f"{tuple(beta.shape)}")
    elif isinstance(beta, bool) or not isinstance(beta, numbers.Real) or not math.isfinite(beta):
        raise ValueError(f"beta must be a finite number or a tensor (B, T), got {beta!r:.60}")
    else:
        beta = torch.full((B, T), float(beta), dtype=_compute_dtype(keys.dtype), device=keys.device)
    if not bool(torch.isfinite(beta).all()):
        raise ValueError("beta must hold finite numbers, got NaN or inf")
    return beta


def _check_decay(decay: float | torch.Tensor | None, keys: torch.Tensor) -> torch.Tensor | None:
    """α as a (B, T) tensor with entries in [0, 1] (a number: in the compute dtype), or None."""
    if decay is None:
        return None
    B, T = keys.shape[:2]
    if isinstance(decay, torch.Tensor):
        check_floating("decay", decay)
        check_like("decay", decay, "keys", keys)
        if decay.shape != (B, T):
            raise ValueError(f"decay must be a number in [0, 1] or a tensor (B, T) = {(B, T)}, "
                             f"got shape {tuple(decay.shape)}")
        if not bool(((decay >= 0) & (decay <= 1)).all()):  # NaN fails too
            bad = decay[~((decay >= 0) & (decay <= 1))][0].item()
            raise ValueError(f"decay must hold numbers in [0, 1], got {bad}")
        return decay
    if isinstance(decay, bool) or not isinstance(decay, numbers.Real) or not 0 <= decay <= 1:
        raise ValueError(f"decay must be a number in [0, 1] or a tensor (B, T), got {decay!r:.60}")
    return torch.full((B, T), float(decay), dtype=_compute_dtype(keys.dtype), device=keys.device)


def _check_states_inputs(keys: torch.Tensor, values: torch.Tensor) -> None:
    check_rank("keys", keys, 3, "(B, T, D)")
    check_rank("values", values, 3, "(B, T, V)")
    check_floating("keys", keys)
    check_floating("values", values)
    check_holds_data("keys", keys)
    check_like("values", values, "keys", keys)
    check_size("batch size of values (B)", keys.shape[0], values.shape[0])
    check_size("number of values (T, one per key)", keys.shape[1], values.shape[1])


def recurrent_states(
    keys: torch.Tensor, values: torch.Tensor, beta: float | torch.Tensor | None = None,
    decay: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """The state S_t (D, V) after each token t of keys (B, T, D) and values (B, T, V), from
    S_0 = 0: (B, T, D, V), S_t the state after writing token t. ``decay`` α_t (None: 1; a
    number or (B, T), in [0, 1]) first scales the previous state, a forget gate (遗忘门):
    constant in RetNet (https://arxiv.org/abs/2307.08621), per token in GLA
    (https://arxiv.org/abs/2312.06635) and Mamba-2 (https://arxiv.org/abs/2405.21060), one per
    head (fold heads into B).

    * ``beta=None``, the additive update of linear attention (no feature map, no normaliser):
      S_t = α_t S_{t−1} + k_t v_tᵀ.
    * ``beta`` (a number or (B, T)), the **delta rule** (DeltaNet; Widrow–Hoff): first read
      what k_t retrieves from the decayed state, r = α_t S_{t−1}ᵀ k_t, then write the error,
      S_t = α_t S_{t−1} + β_t k_t (v_t − r)ᵀ: one step of gradient descent on ½|Sᵀk_t − v_t|²
      with step β_t (with ``decay``: Gated DeltaNet, Yang et al. 2024,
      https://arxiv.org/abs/2412.06464). With a unit key and β = 1 the state then retrieves
      exactly v_t for k_t (the old value is replaced, not added to).
    Keys are used as given (DeltaNet normalises them to unit length first: the caller's step).
    float16 and bfloat16 compute in float32 and return their own dtype."""
    _check_states_inputs(keys, values)
    beta = _check_beta(beta, keys)
    decay = _check_decay(decay, keys)
    return _states(keys, values, beta, decay).to(keys.dtype)


def _states(keys: torch.Tensor, values: torch.Tensor, beta: torch.Tensor | None,
            decay: torch.Tensor | None) -> torch.Tensor:
    """The states (B, T, D, V) in the compute dtype, one token at a time."""
    dtype = _compute_dtype(keys.dtype)
    k, v = keys.to(dtype), values.to(dtype)
    B, T, D = k.shape
    S = k.new_zeros(B, D, v.shape[-1])  # (B, D, V)
    states = []
    for t in range(T):
        if decay is not None:
            S = decay[:, t, None, None].to(dtype) * S  # α_t S_{t−1}
        write = v[:, t]  # (B, V)
        if beta is not None:  # the delta rule: write the error of what k_t retrieves now
            retrieved = (k[:, t, None, :] @ S).squeeze(1)  # (B, V): (α_t S_{t−1})ᵀ k_t
            write = beta[:, t, None].to(dtype) * (write - retrieved)
        S = S + k[:, t, :, None] * write[:, None, :]  # (B, D, V): + k_t (write)ᵀ
        states.append(S)
    if not states:
        return k.new_zeros(B, 0, D, v.shape[-1])
    return torch.stack(states, dim=1)  # (B, T, D, V)


def delta_rule(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
    beta: float | torch.Tensor = 1.0, decay: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal outputs of the delta rule, o_t = S_tᵀ q_t with S_t from ``recurrent_states``
    (token t reads the state after its own write; ``decay`` α_t as there: Gated DeltaNet):
    queries (B, T, D), keys (B, T, D), values (B, T, V), ``beta`` a number or (B, T),
    ``decay`` None, a number or (B, T) → (B, T, V). float16 and bfloat16 compute in float32
    (the states too) and return their own dtype."""
    check_rank("queries", queries, 3, "(B, T, D)")
    check_floating("queries", queries)
    check_rank("keys", keys, 3, "(B, T, D)")
    check_like("queries", queries, "keys", keys)
    if queries.shape[:2] != keys.shape[:2]:
        raise ValueError(f"queries must have the (B, T) of keys {tuple(keys.shape[:2])} (one "
                         f"query per token), got {tuple(queries.shape[:2])}")
    check_size("feature size of queries (D, same as keys)", keys.shape[-1], queries.shape[-1])
    if beta is None:
        raise ValueError("beta must be a finite number or a tensor (B, T), got None "
                         "(recurrent_states(keys, values) is the additive update)")
    _check_states_inputs(keys, values)
    beta = _check_beta(beta, keys)
    decay = _check_decay(decay, keys)
    states = _states(keys, values, beta, decay)  # (B, T, D, V), compute dtype
    q = queries.to(states.dtype)[..., None, :]  # (B, T, 1, D)
    return (q @ states).squeeze(-2).to(queries.dtype)  # (B, T, V)
