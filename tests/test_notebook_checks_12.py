"""Notebook 12's exercise checks, taken from the stored notebook and called with right and
wrong answers (no kernel, no training). A check accepts the right answer in the types a reader
may give it, rejects the classic mistakes with the hint meant for each, and answers oddly typed
answers with a "not quite" that says what it expected (never a crash, never "correct")."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.notebook_code import notebook_namespace

NOTEBOOK = "12_linear_attention.ipynb"


@pytest.fixture(scope="module")
def nb():
    return notebook_namespace(NOTEBOOK, {"_number", "check_1", "check_2", "check_3", "check_4"})


WRONGLY_TYPED = ["a lot", {"pairs": 16}, object(), [None], 3.5j]
META = torch.empty((), device="meta")


def is_hint(verdict: str) -> bool:
    return verdict.startswith("not quite")


def test_none_is_not_answered_yet(nb):
    for n in range(1, 5):
        assert nb[f"check_{n}"](None) == "not answered yet"


# ------------------------------------------------------------------ exercise 1: the recurrent state's size
def test_check_1_accepts_the_state_and_the_normaliser(nb):
    for answer in (lambda L, D: D * D + D, lambda L, D: D * (D + 1), lambda L, D: float(D * D + D),
                   lambda L, D: np.int64(D * D + D), lambda L, D: torch.tensor(D * D + D),
                   lambda L, D: torch.tensor(D * D + D, dtype=torch.float64)):
        assert nb["check_1"](answer) == "correct"


@pytest.mark.parametrize("wrong, hint", [
    (lambda L, D: 2 * L * D, "KV cache"),  # softmax's cache, not the recurrent state
    (lambda L, D: D * D, "what else does the ratio need"),  # the normaliser z forgotten
    (lambda L, D: L * (D * D + D), "every state"),  # all states S_1 … S_L
    (lambda L, D: D * D + D + 1, "S_t and z_t"),
    (lambda L, D: D, "S_t and z_t"),
    (lambda L, D: 2 * D * D, "S_t and z_t"),
    (lambda L, D: math.nan, "S_t and z_t"),
    (lambda L, D: math.inf, "S_t and z_t"),
])
def test_check_1_rejects_wrong_counts_with_their_hint(nb, wrong, hint):
    verdict = nb["check_1"](wrong)
    assert is_hint(verdict) and hint in verdict, verdict


def test_check_1_rejects_every_state_and_says_so(nb):
    verdict = nb["check_1"](lambda L, D: L * D * D)  # all states S_1 … S_L without z
    assert is_hint(verdict)


def test_check_1_all_states_without_z_gets_the_all_states_hint(nb):
    assert "every state" in nb["check_1"](lambda L, D: L * D * D)


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [
    lambda L: 0, lambda L, D: None, lambda L, D: "4160", lambda L, D: [D * D + D], lambda L, D: 1j,
    lambda L, D: torch.tensor([D * D, D]), lambda L, D: META, lambda L, D: True, lambda L, D: 10**400,
    lambda L, D: 1 / 0, lambda L, D: np.array([D * D + D]), lambda L, D: torch.tensor(D * D + D, device="meta"),
])
def test_check_1_explains_wrong_types(nb, answer):
    verdict = nb["check_1"](answer)
    assert is_hint(verdict) and ("expected" in verdict or "raised" in verdict), verdict


def test_check_1_calls_the_answer_once_per_case(nb):
    calls = []

    def stateful(L, D):
        calls.append((L, D))
        if len(calls) > 1:
            raise RuntimeError("called twice")
        return None

    assert is_hint(nb["check_1"](stateful))


# ------------------------------------------------------------------ exercise 2: a feature map for (q·k)²
def outer(x):
    return (x[..., :, None] * x[..., None, :]).flatten(-2)


def upper_triangle(x):
    """F = D(D+1)/2: x_i² and √2 x_i x_j for i < j."""
    D = x.shape[-1]
    i, j = torch.triu_indices(D, D, 1)
    return torch.cat([x**2, math.sqrt(2) * x[..., i] * x[..., j]], dim=-1)


def rotated(x):
    """Any orthogonal rotation of the D² features keeps every dot product."""
    D = x.shape[-1]
    Q = torch.linalg.qr(torch.randn(D * D, D * D, dtype=torch.float64,
                                    generator=torch.Generator().manual_seed(D)))[0]
    return outer(x) @ Q.to(x.dtype)


def test_check_2_accepts_every_factorisation(nb):
    for answer in (outer, upper_triangle, rotated, lambda x: outer(x.float()), lambda x: upper_triangle(x.float()),
                   lambda x: torch.einsum("...i,...j->...ij", x, x).reshape(*x.shape[:-1], -1),
                   lambda x: torch.cat([outer(x), torch.zeros(*x.shape[:-1], 2, dtype=x.dtype)], dim=-1),
                   lambda x: outer(x).clone().requires_grad_(True)):
        assert nb["check_2"](answer) == "correct"


def test_check_2_accepts_float32_features(nb):
    assert nb["check_2"](lambda x: outer(x).float()) == "correct"


def test_check_2_names_the_missing_cross_terms(nb):
    verdict = nb["check_2"](lambda x: x**2)
    assert is_hint(verdict) and "cross" in verdict, verdict


@pytest.mark.parametrize("wrong", [
    lambda x: x,  # the kernel q·k itself
    lambda x: outer(x) / 2,
    lambda x: outer(x) * 2,
    lambda x: torch.cat([x**2, upper_triangle(x)[..., x.shape[-1]:] / math.sqrt(2)], dim=-1),  # √2 forgotten
    lambda x: torch.cat([x, outer(x)], dim=-1),  # (q·k)² + q·k
    lambda x: outer(x).abs(),
    lambda x: torch.exp(x),
    lambda x: outer(x) * math.nan,
    lambda x: outer(x[..., :2]),  # only the first two coordinates: right for D ≤ 2
])
def test_check_2_rejects_wrong_feature_maps(nb, wrong):
    assert is_hint(nb["check_2"](wrong))


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [
    lambda x: outer(x).numpy(), lambda x: outer(x).tolist(), lambda x: outer(x)[..., 0],
    lambda x: outer(x)[None], lambda x: outer(x).to(torch.complex128), lambda x: outer(x).long(),
    lambda x: outer(x) > 0, lambda x: torch.empty(2, 3, 4, device="meta"), lambda x: None,
    lambda x: 1 / 0, lambda: outer,
    lambda x: (outer(x), outer(x)), lambda x: outer(x).transpose(0, -1),
])
def test_check_2_explains_wrong_types_and_shapes(nb, answer):
    verdict = nb["check_2"](answer)
    assert is_hint(verdict) and ("expected" in verdict or "raised" in verdict), verdict


def test_check_2_feature_maps_of_different_sizes_for_q_and_k(nb):
    calls = []

    def grows(x):
        calls.append(1)
        return torch.cat([outer(x), torch.zeros(*x.shape[:-1], len(calls), dtype=x.dtype)], dim=-1)

    verdict = nb["check_2"](grows)
    assert is_hint(verdict) and "expected" in verdict, verdict


def test_check_2_rejects_a_map_that_changes_its_input(nb):
    assert is_hint(nb["check_2"](lambda x: x.zero_()))


# ------------------------------------------------------------------ exercise 3: the delta rule by hand
RIGHT_3 = [0.5, 1 / math.sqrt(2)]


def delta_rule_read() -> list[float]:
    """The two writes done step by step: S ← S + k (v − Sᵀk)ᵀ, then the read Sᵀk_1."""
    k1, k2 = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([1.0, 1.0], dtype=torch.float64) / math.sqrt(2)
    v1, v2 = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0.0, 1.0], dtype=torch.float64)
    S = torch.zeros(2, 2, dtype=torch.float64)
    for k, v in ((k1, v1), (k2, v2)):
        S = S + torch.outer(k, v - S.T @ k)
    return (S.T @ k1).tolist()


def test_the_hand_computation_is_what_the_check_wants():
    assert delta_rule_read() == pytest.approx(RIGHT_3, abs=1e-12)


def test_check_3_accepts_the_read_in_any_container(nb):
    for answer in (RIGHT_3, tuple(RIGHT_3), torch.tensor(RIGHT_3), torch.tensor(RIGHT_3, dtype=torch.float64),
                   np.array(RIGHT_3), np.array(RIGHT_3, dtype=np.float32), [round(x, 4) for x in RIGHT_3],
                   [0.5, 0.707], [np.float64(x) for x in RIGHT_3], [torch.tensor(x) for x in RIGHT_3],
                   torch.tensor(RIGHT_3, requires_grad=True), [1 / 2, math.sqrt(2) / 2], delta_rule_read()):
        assert nb["check_3"](answer) == "correct", answer


@pytest.mark.parametrize("wrong, hint", [
    ([1.0, 0.7071], "additive"),
    ([1, 0], "orthogonal"),
    ([0, 1], "v_2"),
    ([0.5, 0.5], "hint: after the first write"),
    ([0.7071, 0.5], "hint: after the first write"),  # swapped
    ([0.5, -0.7071], "hint: after the first write"),
    ([0.5, 0.70], "hint: after the first write"),
    (torch.tensor([1.0, 0.7071]), "additive"),
])
def test_check_3_rejects_wrong_reads_with_their_hint(nb, wrong, hint):
    verdict = nb["check_3"](wrong)
    assert is_hint(verdict) and hint in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [
    "0.5, 0.7071", 0.5, [0.5], [0.5, 0.7071, 0.0], [[0.5, 0.7071]], [0.5, math.nan], [0.5, math.inf],
    [0.5, "0.7071"], [[0.5], [0.7071, 1]], torch.tensor([0.5, 0.7071], dtype=torch.complex64),
    np.array([0.5, 0.7071], dtype=np.complex128), torch.tensor([True, False]), np.array([True, True]),
    torch.empty(2, device="meta"), [10**400, 0], np.array(["0.5", "0.7071"]), {0.5, 0.7071}, torch.zeros(0),
])
def test_check_3_explains_wrong_types_and_shapes(nb, answer):
    verdict = nb["check_3"](answer)
    assert is_hint(verdict) and "expected" in verdict, verdict


# ------------------------------------------------------------------ exercise 4: the delta rule's capacity
def test_16_orthonormal_keys_are_retrieved_exactly_and_a_17th_is_not():
    g = torch.Generator().manual_seed(0)
    keys = torch.linalg.qr(torch.randn(16, 16, dtype=torch.float64, generator=g))[0].T  # (16, D) orthonormal rows
    values = torch.randn(17, 3, dtype=torch.float64, generator=g)
    S = torch.zeros(16, 3, dtype=torch.float64)
    for k, v in zip(keys, values[:16]):
        S = S + torch.outer(k, v - S.T @ k)
    assert torch.allclose(keys @ S, values[:16])
    extra = torch.nn.functional.normalize(torch.randn(16, dtype=torch.float64, generator=g), dim=0)
    S = S + torch.outer(extra, values[16] - S.T @ extra)
    assert torch.allclose(extra @ S, values[16])  # the 17th is exact, but an earlier read moved
    assert not torch.allclose(keys @ S, values[:16])


def test_check_4_accepts_16_as_an_integer(nb):
    for answer in (16, np.int64(16), np.int32(16), np.uint8(16), torch.tensor(16),
                   torch.tensor(16, dtype=torch.int32), np.array(16)):
        assert nb["check_4"](answer) == "correct", answer


@pytest.mark.parametrize("wrong, hint", [
    (256, "span"), (17, "span"), (32, "span"), (16 * 16 + 16, "span"), (10**6, "span"),
    (15, "which keys"), (4, "which keys"), (0, "which keys"), (1, "which keys"), (-16, "which keys"),
    (np.int64(256), "span"), (torch.tensor(15), "which keys"),
])
def test_check_4_rejects_wrong_counts_with_their_hint(nb, wrong, hint):
    verdict = nb["check_4"](wrong)
    assert is_hint(verdict) and hint in verdict, verdict


@pytest.mark.parametrize("answer", WRONGLY_TYPED + [
    16.0, np.float64(16), torch.tensor(16.0), 16.5, "16", [16], (16,), torch.tensor([16]), np.array([16]),
    True, np.True_, torch.tensor(True), complex(16), torch.tensor(16 + 0j), META,
    torch.tensor(16, device="meta"), 10**400, -(10**400), math.nan, math.inf, lambda: 16,
])
def test_check_4_explains_wrong_types(nb, answer):
    verdict = nb["check_4"](answer)
    assert is_hint(verdict) and "expected" in verdict, verdict
