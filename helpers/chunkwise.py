"""The chunkwise-parallel form (分块并行形式) of causal linear attention and of the delta rule:
the T tokens are cut into chunks of C; inside a chunk the outputs are computed at once, as
quadratic attention (a C × C matrix of scores); between chunks only the state S (D, V) is
carried, as the recurrent form does token by token. Memory T·C + (T/C)·D·V instead of T² or
T·D·V, and matrix products instead of T small steps (Yang et al. 2024, "Parallelizing Linear
Transformers with the Delta Rule over Sequence Length", https://arxiv.org/abs/2406.06484).
Each function equals a recurrent form of ``helpers.linear_attention`` up to rounding.

Legend: B batch, T tokens, D query/key size (F features after a feature map), V value size,
C ``chunk_size`` (any positive int: the last chunk is shorter when C does not divide T; heads:
fold them into B). Mask convention: causal, token t reads the state after its own write (it
sees keys 0 … t). ``decay`` α_t (None: 1; a number or (B, T) of keys' dtype, in [0, 1]) scales
the state before token t writes. NaN or inf in token j's key, value or query reaches the
outputs that see it (t ≥ j; t = j only for a query), never an earlier token's. float16 and
bfloat16 compute in float32 and return their own dtype; no input is changed.
"""

from __future__ import annotations

import torch

from .checks import check_holds_data, check_positive_int, check_rank, check_size
from .linear_attention import (
    FeatureMap, _check_beta, _check_decay, _check_states_inputs, _compute_dtype, _features,
    _masked_product, _normalise, elu_feature_map,
)

__all__ = ["chunkwise_linear_attention", "chunkwise_additive", "chunkwise_delta_rule"]


def _check_qkv(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> None:
    """queries (B, T, D), keys (B, T, D), values (B, T, V) of one dtype and device."""
    check_rank("queries", queries, 3, "(B, T, D)")
    _check_states_inputs(keys, values)
    check_holds_data("queries", queries)
    if queries.dtype != keys.dtype or queries.device != keys.device:
        raise ValueError(f"queries must have the dtype and device of keys ({keys.dtype} on "
                         f"{keys.device}), got {queries.dtype} on {queries.device}")
    if queries.shape[:2] != keys.shape[:2]:
        raise ValueError(f"queries must have the (B, T) of keys {tuple(keys.shape[:2])} (one "
                         f"query per token), got {tuple(queries.shape[:2])}")
    check_size("feature size of queries (D, same as keys)", keys.shape[-1], queries.shape[-1])


def _segment_products(a: torch.Tensor) -> torch.Tensor:
    """a (..., C) → (..., C, C): entry [i, j] = a_{j+1} ⋯ a_i for j ≤ i (1 on the diagonal), 0
    above it. Running products along i, never a quotient of two (which would divide by an a that
    underflowed to 0) nor a difference of logarithms (log 0 = −inf: NaN in the gradient)."""
    C = a.shape[-1]
    below = torch.ones(C, C, dtype=torch.bool, device=a.device).tril(-1)  # i > j
    products = torch.where(below, a[..., :, None], 1.0).cumprod(dim=-2)  # [i, j] = Π_{j<m≤i} a_m
    return torch.where(below.logical_or(torch.eye(C, dtype=torch.bool, device=a.device)), products, 0.0)


def _chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor | None,
             decay: torch.Tensor | None, C: int) -> torch.Tensor:
    """o_t = S_tᵀ q_t (B, T, V) for S_t = α_t S_{t−1} + k_t e_tᵀ, with e_t = v_t (``beta`` None)
    or the delta rule's e_t = β_t (v_t − α_t S_{t−1}ᵀ k_t); all in q's (compute) dtype.

    Inside a chunk, with S_0 the state before it, γ_i = α_1 ⋯ α_i and Γ_ij = α_{j+1} ⋯ α_i
    (j ≤ i): S_i = γ_i S_0 + Σ_{j≤i} Γ_ij k_j e_jᵀ, so o_i = γ_i S_0ᵀ q_i + Σ_{j≤i} Γ_ij
    (q_i·k_j) e_j. The delta rule's e_i depends on the e_j before it: (I + L) E = diag(β)
    (V − diag(γ) K S_0), L_ij = β_i Γ_ij (k_i·k_j) for j < i, a unit lower-triangular system
    (the UT transform): E = U − W S_0 with U = (I + L)⁻¹ diag(β) V and W = (I + L)⁻¹ diag(βγ) K,
    both solved for every chunk at once before the pass over the chunks (the WY form)."""
    B, T, D = k.shape
    V = v.shape[-1]
    N = -(-T // C)  # chunks
    pad = N * C - T  # zeros at the end: k = v = 0, β = 0, α = 1 write nothing

    def chunks(x: torch.Tensor, fill: float = 0.0) -> torch.Tensor:  # (B, T, ...) → (B, N, C, ...)
        if pad:
            x = torch.cat([x, x.new_full((B, pad, *x.shape[2:]), fill)], dim=1)
        return x.reshape(B, N, C, *x.shape[2:])

    q, k, v = chunks(q), chunks(k), chunks(v)  # (B, N, C, D), (B, N, C, D), (B, N, C, V)
    lower = torch.ones(C, C, dtype=torch.bool, device=k.device).tril()  # j ≤ i
    if decay is None:
        gamma = k.new_ones(B, N, C)  # (B, N, C)
        Gamma = lower.to(k.dtype).expand(B, N, C, C)  # (B, N, C, C)
    else:
        alpha = chunks(decay.to(k.dtype), 1.0)  # (B, N, C): α = 1 past the end
        gamma = alpha.cumprod(dim=-1)  # (B, N, C): γ_i
        Gamma = _segment_products(alpha)  # (B, N, C, C): Γ_ij, 0 above the diagonal
    A = torch.where(lower, (q @ k.mT) * Gamma, 0.0)  # (B, N, C, C): Γ_ij q_i·k_j, j ≤ i
    to_end = Gamma[..., -1, :]  # (B, N, C): Γ_{C,j}, key j's decay to the chunk's end
    if beta is not None:
        b = chunks(beta.to(k.dtype))  # (B, N, C)
        L = torch.where(lower.tril(-1), b[..., None] * (k @ k.mT) * Gamma, 0.0)  # (B, N, C, C)
        I_L = L + torch.eye(C, dtype=k.dtype, device=k.device)
        U = torch.linalg.solve_triangular(I_L, b[..., None] * v, upper=False, unitriangular=True)
        W = torch.linalg.solve_triangular(I_L, (b * gamma)[..., None] * k, upper=False,
                                          unitriangular=True)  # (B, N, C, V), (B, N, C, D)
    S = k.new_zeros(B, D, V)  # (B, D, V): the state before the chunk
    out = []
    for n in range(N):  # the only sequential part: one step per chunk
        E = v[:, n] if beta is None else U[:, n] - W[:, n] @ S  # (B, C, V): what each token writes
        out.append(gamma[:, n, :, None] * (q[:, n] @ S) + _masked_product(A[:, n], E, lower))
        S = gamma[:, n, -1, None, None] * S + (k[:, n] * to_end[:, n, :, None]).mT @ E
    return torch.cat(out, dim=1)[:, :T] if out else v.new_zeros(B, 0, V)  # (B, T, V)


def _chunk_size(chunk_size: object, T: int) -> int:
    C = check_positive_int("chunk_size", chunk_size)
    return max(1, min(C, T))  # a chunk longer than the sequence: one chunk of T


def chunkwise_linear_attention(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, *,
    feature_map: FeatureMap = elu_feature_map, chunk_size: int = 64,
) -> torch.Tensor:
    """Causal linear attention, o_t = Σ_{j≤t} φ(q_t)·φ(k_j) v_j / Σ_{j≤t} φ(q_t)·φ(k_j), chunk
    by chunk: queries (B, T, D), keys (B, T, D), values (B, T, V) → (B, T, V); the same as
    ``linear_attention(queries, keys, values, causal=True, feature_map=feature_map)``. The
    normaliser is carried as one more column of ones in the values (z = Σ φ(k_j), the state's
    last column). ``feature_map`` is checked as there (features ≥ 0, finite for finite inputs,
    a normaliser > 0: every query sees at least its own key)."""
    _check_qkv(queries, keys, values)
    if not callable(feature_map):
        raise ValueError(f"feature_map must be a function (B, T, D) -> (B, T, F), got "
                         f"{type(feature_map).__name__}")
    B, T, _ = keys.shape
    C = _chunk_size(chunk_size, T)
    dtype = _compute_dtype(queries.dtype)
    phi_q = _features(feature_map, queries.to(dtype), "queries")  # (B, T, F)
    phi_k = _features(feature_map, keys.to(dtype), "keys")  # (B, T, F)
    check_size("number of features of keys (F, same as queries)", phi_q.shape[-1], phi_k.shape[-1])
    v = values.to(dtype)
    v1 = torch.cat([v, v.new_ones(B, T, 1)], dim=-1)  # (B, T, V + 1)
    both = _chunked(phi_q, phi_k, v1, None, None, C)  # (B, T, V + 1)
    sees = torch.ones(B, T, dtype=torch.bool, device=keys.device)  # each sees its own key
    return _normalise(both[..., :-1], both[..., -1], sees).to(queries.dtype)


def chunkwise_additive(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
    decay: float | torch.Tensor | None = None, *, chunk_size: int = 64,
) -> torch.Tensor:
    """o_t = S_tᵀ q_t with S_t = α_t S_{t−1} + k_t v_tᵀ (linear attention's additive state, no
    feature map, no normaliser; with ``decay``: RetNet's constant α, GLA's and Mamba-2's per
    token), chunk by chunk: queries (B, T, D), keys (B, T, D), values (B, T, V) → (B, T, V);
    the same as ``einsum("btdv,btd->btv", recurrent_states(keys, values, decay=decay),
    queries)``."""
    _check_qkv(queries, keys, values)
    decay = _check_decay(decay, keys)
    C = _chunk_size(chunk_size, keys.shape[1])
    dtype = _compute_dtype(queries.dtype)
    return _chunked(queries.to(dtype), keys.to(dtype), values.to(dtype), None, decay,
                    C).to(queries.dtype)


def chunkwise_delta_rule(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
    beta: float | torch.Tensor = 1.0, decay: float | torch.Tensor | None = None, *,
    chunk_size: int = 64,
) -> torch.Tensor:
    """The delta rule chunk by chunk through the WY / UT form: inside each chunk one unit
    lower-triangular solve gives the values each token writes (their "pseudo-values"),
    then the state crosses the chunk in one step. queries (B, T, D), keys (B, T, D), values
    (B, T, V), ``beta`` a number or (B, T), ``decay`` None, a number or (B, T) (Gated
    DeltaNet) → (B, T, V); the same as ``delta_rule(queries, keys, values, beta, decay)``."""
    _check_qkv(queries, keys, values)
    if beta is None:
        raise ValueError("beta must be a finite number or a tensor (B, T), got None "
                         "(chunkwise_additive is the additive update)")
    beta = _check_beta(beta, keys)
    decay = _check_decay(decay, keys)
    C = _chunk_size(chunk_size, keys.shape[1])
    dtype = _compute_dtype(queries.dtype)
    return _chunked(queries.to(dtype), keys.to(dtype), values.to(dtype), beta, decay,
                    C).to(queries.dtype)
