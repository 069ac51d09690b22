"""recall: the batches are associative recall (distinct keys, targets the queried keys' values),
each kind of RecallModel computes its formula written out here in float64, state_numbers counts
the memory, train learns and refuses what it cannot train, and accuracy counts what a
hand-built model gets right, position by position."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import recall
from helpers.linear_attention import recurrent_states
from helpers.recall import KINDS, RecallModel


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _model(kind: str, *, num_keys: int = 11, num_values: int = 7, size: int = 5,
           dtype: torch.dtype = torch.float64, seed: int = 0) -> RecallModel:
    """A RecallModel with random weights (larger than the defaults, so that every term
    matters); the delta rule's β ≈ 0.62, not its initial 0.5."""
    torch.manual_seed(seed)
    model = RecallModel(num_keys, num_values, size, kind).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
        if model.beta_logit is not None:
            model.beta_logit.fill_(0.5)
    return model.eval()


# ---------------------------------------------------------------- make_batch
@pytest.mark.parametrize("B, N, M, num_keys, num_values",
                         [(5, 6, None, 9, 4), (1, 1, None, 1, 1), (3, 7, 2, 7, 50), (4, 10, 10, 64, 3)])
def test_a_batch_writes_distinct_keys_and_asks_for_their_values(B, N, M, num_keys, num_values):
    keys, values, queries, targets = recall.make_batch(
        B, N, num_queries=M, num_keys=num_keys, num_values=num_values, generator=_gen(3))
    M = N if M is None else M
    assert keys.shape == values.shape == (B, N) and queries.shape == targets.shape == (B, M)
    assert all(t.dtype == torch.long for t in (keys, values, queries, targets))
    assert 0 <= int(keys.min()) and int(keys.max()) < num_keys
    assert 0 <= int(values.min()) and int(values.max()) < num_values
    for b in range(B):
        row = keys[b].tolist()
        assert len(set(row)) == N  # the keys of a sequence are distinct
        asked = queries[b].tolist()
        assert len(set(asked)) == M and set(asked) <= set(row)  # distinct keys of the sequence
        for q, t in zip(asked, targets[b].tolist()):
            assert t == int(values[b, row.index(q)])  # the value written with the queried key
    if M == N:  # every pair is asked for once
        assert torch.equal(queries.sort(dim=1).values, keys.sort(dim=1).values)


def test_batches_follow_the_generator_and_move_to_the_device(device):
    first = recall.make_batch(3, 8, generator=_gen(5), device=device)
    again = recall.make_batch(3, 8, generator=_gen(5), device=device)
    other = recall.make_batch(3, 8, generator=_gen(6), device=device)
    assert all(t.device.type == device.type for t in first)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])


def test_keys_queries_and_values_are_uniform():
    keys, values, queries, _ = recall.make_batch(2000, 5, num_queries=2, num_keys=10, num_values=4,
                                                 generator=_gen(1))
    for tokens, n in ((keys, 10), (queries, 10), (values, 4)):
        share = torch.bincount(tokens.flatten(), minlength=n).double() / tokens.numel()
        assert torch.allclose(share, torch.full((n,), 1 / n, dtype=torch.float64), atol=0.015)
    # the queries pick each position of the pairs as often
    position = (queries[..., None] == keys[:, None, :]).int().argmax(-1)
    share = torch.bincount(position.flatten(), minlength=5).double() / position.numel()
    assert torch.allclose(share, torch.full((5,), 0.2, dtype=torch.float64), atol=0.02)


def test_rewrites_write_keys_again_with_new_values_and_the_targets_are_the_latest():
    keys, values, queries, targets = recall.make_batch(50, 6, rewrites=3, num_keys=9, num_values=4,
                                                       generator=_gen(7))
    assert keys.shape == values.shape == (50, 9) and queries.shape == targets.shape == (50, 6)
    for b in range(50):
        first = keys[b, :6].tolist()
        assert len(set(first)) == 6  # the first N keys distinct
        again = keys[b, 6:].tolist()
        assert len(set(again)) == 3 and set(again) <= set(first)  # R distinct earlier keys
        latest = {}
        for key, value in zip(keys[b].tolist(), values[b].tolist()):
            if key in latest:
                assert value != latest[key]  # a rewrite writes a new value
            latest[key] = value
        assert sorted(queries[b].tolist()) == sorted(first)  # every key asked for once
        assert targets[b].tolist() == [latest[k] for k in queries[b].tolist()]


def test_no_rewrites_draws_the_batch_of_old():
    plain = recall.make_batch(4, 5, generator=_gen(8))
    zero = recall.make_batch(4, 5, rewrites=0, generator=_gen(8))
    assert all(torch.equal(a, b) for a, b in zip(plain, zero))


def test_accuracy_splits_rewritten_keys_from_the_others():
    """A model that answers the value written last in the sequence is right on the last rewritten
    key (its latest value) and, on keys written once, only by the chance that values agree."""
    model = Answers(position=-1, num_keys=12, num_values=5)
    rewritten = recall.accuracy(model, 6, rewrites=6, which="rewritten", num_sequences=40, seed=2)
    once = recall.accuracy(model, 6, rewrites=2, which="once", num_sequences=40, seed=2)
    both = recall.accuracy(model, 6, rewrites=2, num_sequences=40, seed=2)
    keys, values, queries, targets = recall.make_batch(40, 6, rewrites=2, num_keys=12, num_values=5,
                                                       generator=_gen(2))
    right = targets == values[:, -1:]  # (B, N): the answer is the last value written
    again = (queries[..., None] == keys[:, None, 6:]).any(-1)  # (B, N): rewritten keys
    assert both == pytest.approx(right.double().mean().item())
    assert once == pytest.approx(right[~again].double().mean().item())
    assert 1 / 6 <= rewritten < 1  # the last key of each sequence is always right
    with pytest.raises(ValueError, match=r"which must be 'all', 'rewritten' or 'once', got 'new'"):
        recall.accuracy(model, 6, rewrites=2, which="new")
    with pytest.raises(ValueError, match=r"which='rewritten' selects no query with rewrites=0"):
        recall.accuracy(model, 6, which="rewritten")
    with pytest.raises(ValueError, match=r"rewrites must be an int in \[0, num_pairs\] = \[0, 6\]"):
        recall.accuracy(model, 6, rewrites=7)


def test_the_delta_rule_returns_the_latest_value_where_the_sum_mixes_both():
    """One key written twice, β = 1, one-hot memories: the delta rule reads the new value, the
    additive sum reads old + new (a tie of the two), softmax without positions the mean."""
    keys, values, queries = torch.tensor([[1, 2, 1]]), torch.tensor([[3, 0, 4]]), torch.tensor([[1]])
    delta = _one_hot_memory("delta")
    with torch.no_grad():
        delta.beta_logit.fill_(40.0)  # β = 1
    additive = _one_hot_memory("additive")
    with torch.no_grad():
        assert delta(keys, values, queries)[0, 0].argmax().item() == 4
        read = additive(keys, values, queries)[0, 0]
        assert read[3] == read[4] and read[4] > read[0]


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_size=2, num_pairs=3, rewrites=4), r"rewrites must be an int in \[0, num_pairs\] = \[0, 3\] .* got 4"),
    (dict(batch_size=2, num_pairs=3, rewrites=-1), r"rewrites must be an int in \[0, num_pairs\]"),
    (dict(batch_size=2, num_pairs=3, rewrites=1.0), r"rewrites must be an int in \[0, num_pairs\]"),
    (dict(batch_size=2, num_pairs=1, num_values=1, rewrites=1), r"num_values must be at least 2 when rewrites > 0"),
    (dict(batch_size=0, num_pairs=3), r"batch_size must be a positive int, got 0"),
    (dict(batch_size=2, num_pairs=0), r"num_pairs must be a positive int, got 0"),
    (dict(batch_size=2, num_pairs=9, num_keys=8), r"num_pairs must be at most num_keys .* got num_pairs=9, num_keys=8"),
    (dict(batch_size=2, num_pairs=3, num_queries=4), r"num_queries must be at most num_pairs .* got num_queries=4"),
    (dict(batch_size=2, num_pairs=3, num_queries=0), r"num_queries must be a positive int, got 0"),
    (dict(batch_size=2, num_pairs=3, num_values=True), r"num_values must be a positive int, got True"),
    (dict(batch_size=2, num_pairs=3, generator=3), r"generator must be None or a torch.Generator on the CPU, got 3"),
    (dict(batch_size=2, num_pairs=3, device="meta"), r"device must be the CPU or an accelerator"),
])
def test_make_batch_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        recall.make_batch(**kwargs)


# ---------------------------------------------------------------- the model, by hand
def _embed(model, keys, values, queries):
    """(q (B, M, D), k (B, N, D), v (B, N, D)) from the model's weights, written out."""
    E, U = model.key_embedding.weight, model.value_embedding.weight
    return (E[queries] @ model.W_q.weight.T, E[keys] @ model.W_k.weight.T,
            U[values] @ model.W_v.weight.T)


def _logits_by_hand(model, keys, values, queries):
    q, k, v = _embed(model, keys, values, queries)
    B, M, D = q.shape
    N = k.shape[1]
    read = torch.zeros(B, M, D, dtype=q.dtype)
    if model.kind == "softmax":  # PyTorch's own kernel is the reference here
        read = F.scaled_dot_product_attention(q, k, v)
    elif model.kind == "linear":  # Σ_j φ(q)·φ(k_j) v_j / Σ_j φ(q)·φ(k_j), φ(x) = elu(x) + 1
        phi = lambda x: torch.where(x > 0, x + 1, torch.exp(x))  # noqa: E731
        for b in range(B):
            for i in range(M):
                weights = [float(phi(q[b, i]) @ phi(k[b, j])) for j in range(N)]
                read[b, i] = sum(w * v[b, j] for j, w in enumerate(weights)) / sum(weights)
    else:
        phi = lambda x: torch.where(x > 0, x + 1, torch.exp(x))  # noqa: E731
        unit = ((lambda x: phi(x) / phi(x).norm()) if model.kind == "positive"
                else (lambda x: x / x.norm()))  # noqa: E731
        E = model.key_embedding.weight
        for b in range(B):
            S = torch.zeros(D, D, dtype=q.dtype)
            for j in range(N):  # write the pairs in order
                kj = unit(k[b, j])
                if model.kind in ("additive", "positive"):
                    S = S + torch.outer(kj, v[b, j])  # S += k vᵀ
                elif model.kind == "decay":
                    S = torch.sigmoid(model.decay_logit) * S + torch.outer(kj, v[b, j])  # S = γS + k vᵀ
                else:
                    beta = (torch.sigmoid(model.beta_logit) if model.kind == "delta" else
                            torch.sigmoid(E[keys[b, j]] @ model.beta_proj.weight[0] + model.beta_proj.bias[0]))
                    S = S + beta * torch.outer(kj, v[b, j] - S.T @ kj)  # S += β k (v − Sᵀk)ᵀ
            for i in range(M):  # then every query reads the final state
                read[b, i] = S.T @ unit(q[b, i])
    return read @ model.readout.weight.T + model.readout.bias


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_computes_its_formula_in_float64(kind):
    model = _model(kind)
    keys, values, queries, _ = recall.make_batch(3, 6, num_queries=4, num_keys=11, num_values=7,
                                                 generator=_gen(2))
    with torch.no_grad():
        out = model(keys, values, queries)
        expected = _logits_by_hand(model, keys, values, queries)
    assert out.shape == (3, 4, 7) and out.dtype == torch.float64
    torch.testing.assert_close(out, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("beta", [1.0, 0.3])
def test_the_delta_state_is_the_loop_of_recurrent_states(beta):
    """The triangular solve gives the state the delta rule's loop reaches, for keys of any
    length (not only unit keys) and values of another size."""
    keys = torch.randn(2, 9, 4, dtype=torch.float64) / 2
    values = torch.randn(2, 9, 3, dtype=torch.float64)
    state = recall._delta_state(keys, values, torch.tensor(beta, dtype=torch.float64))
    loop = recurrent_states(keys, values, beta)[:, -1]  # (B, D, V) after the last write
    torch.testing.assert_close(state, loop, rtol=1e-10, atol=1e-10)
    additive = recurrent_states(keys, values)[:, -1]
    assert not torch.allclose(state, additive)  # the delta rule is another state


def test_the_delta_rule_with_unit_beta_overwrites_what_a_key_retrieves():
    """β = 1, a unit key: the state retrieves exactly the last value written with that key."""
    k = F.normalize(torch.randn(1, 5, 4, dtype=torch.float64), dim=-1)
    v = torch.randn(1, 5, 4, dtype=torch.float64)
    S = recall._delta_state(k, v, torch.tensor(1.0, dtype=torch.float64))
    torch.testing.assert_close(S[0].T @ k[0, -1], v[0, -1])


def test_every_kind_has_the_same_parameters_but_beta_and_decay():
    counts = {kind: sum(p.numel() for p in RecallModel(64, 64, 16, kind).parameters())
              for kind in KINDS}
    same = 64 * 16 + 64 * 16 + 3 * 16 * 16 + 16 * 64 + 64  # embeddings, W_q W_k W_v, readout
    assert counts == {"softmax": same, "linear": same, "positive": same, "additive": same,
                      "decay": same + 1, "delta": same + 1, "delta_token": same + 16 + 1}
    assert RecallModel(4, 4, 2, "delta").beta.item() == 0.5
    assert RecallModel(4, 4, 2, "linear").beta is None and RecallModel(4, 4, 2, "linear").decay is None
    assert abs(RecallModel(4, 4, 2, "decay").decay.item() - 1 / (1 + math.exp(-3))) < 1e-7
    token = RecallModel(4, 4, 2, "delta_token")
    assert token.beta is None
    assert torch.equal(token.token_beta(torch.tensor([[0, 3, 1]])), torch.full((1, 3), 0.5))
    with pytest.raises(ValueError, match=r"token_beta is delta_token's, got a model of kind 'delta'"):
        RecallModel(4, 4, 2, "delta").token_beta(torch.tensor([[0]]))


def test_token_beta_is_the_sigmoid_of_the_key_embedding():
    model = _model("delta_token")
    keys = torch.tensor([[0, 5, 8], [2, 2, 1]])
    E, w, b = model.key_embedding.weight, model.beta_proj.weight[0], model.beta_proj.bias[0]
    with torch.no_grad():
        expected = torch.sigmoid(E[keys] @ w + b)
        torch.testing.assert_close(model.token_beta(keys), expected)


def test_the_delta_state_with_a_step_per_token_is_the_loop_of_recurrent_states():
    keys = F.normalize(torch.randn(2, 7, 4, dtype=torch.float64), dim=-1)
    values = torch.randn(2, 7, 3, dtype=torch.float64)
    beta = torch.rand(2, 7, dtype=torch.float64)
    state = recall._delta_state(keys, values, beta[..., None])
    torch.testing.assert_close(state, recurrent_states(keys, values, beta)[:, -1], rtol=1e-10, atol=1e-10)


def test_the_queries_only_read(device):
    """A query's logits depend on the pairs and itself only: asked alone or with others, first
    or last, it gets the same answer (no kind lets queries write or see each other)."""
    keys, values, queries, _ = recall.make_batch(2, 6, num_keys=11, num_values=7, generator=_gen(4),
                                                 device=device)
    for kind in KINDS:
        model = _model(kind).to(device)
        with torch.no_grad():
            together = model(keys, values, queries)
            alone = torch.cat([model(keys, values, queries[:, i:i + 1]) for i in range(6)], dim=1)
            backwards = model(keys, values, queries.flip(1)).flip(1)
        torch.testing.assert_close(together, alone, rtol=1e-9, atol=1e-9)
        torch.testing.assert_close(together, backwards, rtol=1e-9, atol=1e-9)


def test_only_decay_and_the_delta_rules_depend_on_the_order_of_the_pairs():
    keys, values, queries, _ = recall.make_batch(2, 6, num_keys=11, num_values=7, generator=_gen(5))
    for kind in KINDS:
        model = _model(kind)
        with torch.no_grad():
            same = torch.allclose(model(keys, values, queries),
                                  model(keys.flip(1), values.flip(1), queries), atol=1e-9)
        assert same == (kind not in ("decay", "delta", "delta_token")), kind


@pytest.mark.parametrize("kind", KINDS)
def test_forward_works_on_the_device_and_in_float32_and_changes_no_input(kind, device):
    model = _model(kind, dtype=torch.float32).to(device)
    batch = recall.make_batch(2, 5, num_queries=3, num_keys=11, num_values=7, generator=_gen(6),
                              device=device)
    copies = [t.clone() for t in batch]
    out = model(*batch[:3])
    assert out.shape == (2, 3, 7) and out.dtype == torch.float32 and out.device.type == device.type
    assert all(torch.equal(a, b) for a, b in zip(batch, copies))
    out.sum().backward()  # every parameter takes part
    assert all(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in model.parameters())
    cpu = _model(kind, dtype=torch.float32)
    torch.testing.assert_close(out.detach().cpu(), cpu(*(t.cpu() for t in batch[:3])).detach(),
                               rtol=1e-4, atol=1e-4)


def test_model_rejects_bad_input():
    with pytest.raises(ValueError, match=r"kind must be one of \('softmax', 'linear', 'positive', 'additive', 'decay', 'delta', 'delta_token'\), got 'rnn'"):
        RecallModel(8, 8, 4, "rnn")
    with pytest.raises(ValueError, match=r"size must be a positive int, got 0"):
        RecallModel(8, 8, 0, "linear")
    with pytest.raises(ValueError, match=r"num_keys must be a positive int, got 2.0"):
        RecallModel(2.0, 8, 4, "linear")
    model = RecallModel(8, 5, 4, "delta")
    k, v, q = torch.tensor([[1, 2, 3]]), torch.tensor([[0, 4, 1]]), torch.tensor([[2, 3]])
    for args, match in [
        ((k.float(), v, q), r"keys must be a long tensor of token ids, got dtype torch.float32"),
        ((k, v, q[0]), r"queries must have 2 dimensions \(B, T\), got 1"),
        ((k, v + 1, q), r"values must be token ids in \[0, num_values\) = \[0, 5\), got values from 1 to 5"),
        ((k - 2, v, q), r"keys must be token ids in \[0, num_keys\) = \[0, 8\), got values from -1"),
        ((k, v[:, :2], q), r"values must have the shape of keys \(B, N\) = \(1, 3\) .* got \(1, 2\)"),
        ((k, v, q.repeat(2, 1)), r"queries must have the batch size of keys \(1\), got 2"),
        ((k[:, :0], v[:, :0], q), r"keys must have at least one sequence of at least one token"),
        ((k.to("meta"), v, q), r"keys must be on a device that holds data"),
    ]:
        with pytest.raises(ValueError, match=match):
            model(*args)


# ---------------------------------------------------------------- state_numbers
def test_state_numbers_counts_the_memory():
    for kind, expected in (("softmax", 2 * 10 * 6), ("linear", 6 * 6 + 6), ("positive", 36),
                           ("additive", 36), ("decay", 36), ("delta", 36), ("delta_token", 36)):
        assert recall.state_numbers(RecallModel(20, 3, 6, kind), 10) == expected
    assert recall.state_numbers(RecallModel(20, 3, 6, "softmax"), 20) == 240  # grows with N
    with pytest.raises(ValueError, match=r"model must be a RecallModel, got Linear"):
        recall.state_numbers(nn.Linear(2, 2), 3)
    with pytest.raises(ValueError, match=r"num_pairs must be at most the model's num_keys=20 .* got 21"):
        recall.state_numbers(RecallModel(20, 3, 6, "delta"), 21)


# ---------------------------------------------------------------- accuracy
class Answers(nn.Module):
    """Answers every query with the value of the pair written at ``position`` (-1: the last), or
    with ``value`` when one is given: num_keys and num_values as a RecallModel has them."""

    def __init__(self, *, position: int = -1, value: int | None = None, num_keys: int = 12,
                 num_values: int = 5) -> None:
        super().__init__()
        self.position, self.value = position, value
        self.num_keys, self.num_values = num_keys, num_values
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, keys, values, queries):
        answer = values[:, self.position] if self.value is None else torch.full_like(keys[:, 0], self.value)
        return F.one_hot(answer, self.num_values)[:, None, :].expand(-1, queries.shape[1], -1).double()


def _one_hot_memory(kind: str, num_keys: int = 8) -> RecallModel:
    """A RecallModel set by hand to recall perfectly: one-hot keys (orthogonal, and for the
    feature map elu + 1, almost disjoint), values read out as themselves."""
    model = RecallModel(num_keys, num_keys, num_keys, kind).double()
    eye = torch.eye(num_keys, dtype=torch.float64)
    with torch.no_grad():
        model.key_embedding.weight.copy_(40 * eye - (20 if kind == "linear" else 0))
        model.value_embedding.weight.copy_(eye)
        for layer in (model.W_q, model.W_k, model.W_v, model.readout):
            layer.weight.copy_(eye)
        model.readout.bias.zero_()
    return model


@pytest.mark.parametrize("kind", KINDS)
def test_a_memory_set_by_hand_recalls_every_pair(kind):
    model = _one_hot_memory(kind)
    assert recall.accuracy(model, 8, num_sequences=20) == 1.0
    assert torch.equal(recall.accuracy_by_position(model, 5, num_sequences=20),
                       torch.ones(5, dtype=torch.float64))


def test_a_model_that_remembers_the_last_pair_is_right_at_the_last_position():
    acc = recall.accuracy_by_position(Answers(position=-1), 6, num_sequences=40, seed=3)
    keys, values, _, _ = recall.make_batch(40, 6, num_keys=12, num_values=5, generator=_gen(3))
    by_hand = [sum(int(values[b, j]) == int(values[b, -1]) for b in range(40)) / 40 for j in range(6)]
    assert acc.shape == (6,) and acc.dtype == torch.float64 and acc[-1] == 1.0
    torch.testing.assert_close(acc, torch.tensor(by_hand, dtype=torch.float64))
    first = recall.accuracy_by_position(Answers(position=0), 6, num_sequences=40, seed=3)
    assert first[0] == 1.0 and first[-1] < 1.0


def test_the_accuracy_of_a_constant_answer_is_the_share_of_that_value():
    acc = recall.accuracy(Answers(value=2), 7, num_sequences=50, seed=9)
    _, _, _, targets = recall.make_batch(50, 7, num_keys=12, num_values=5, generator=_gen(9))
    assert acc == (targets == 2).double().mean().item()
    assert abs(acc - recall.accuracy_by_position(Answers(value=2), 7, num_sequences=50, seed=9).mean().item()) < 1e-12
    assert 0.1 < acc < 0.3  # about 1 / num_values


def test_accuracy_restores_mode_and_threads():
    model = _one_hot_memory("delta").train()
    threads = torch.get_num_threads()
    recall.accuracy(model, 4, num_sequences=4)
    assert model.training and torch.get_num_threads() == threads


def test_accuracy_rejects_bad_input():
    with pytest.raises(ValueError, match=r"model must be a RecallModel .* got Linear with num_keys=None"):
        recall.accuracy(nn.Linear(2, 2), 3)
    with pytest.raises(ValueError, match=r"num_pairs must be at most the model's num_keys=12 .* got 13"):
        recall.accuracy_by_position(Answers(), 13)
    with pytest.raises(ValueError, match=r"num_sequences must be a positive int, got 0"):
        recall.accuracy(Answers(), 3, num_sequences=0)
    with pytest.raises(ValueError, match=r"seed must be an int"):
        recall.accuracy(Answers(), 3, seed=0.5)
    with pytest.raises(ValueError, match=r"model's parameters must be on a device that holds data"):
        recall.accuracy(RecallModel(8, 8, 4, "linear").to("meta"), 3)


# ---------------------------------------------------------------- train
@pytest.mark.parametrize("kind", KINDS)
def test_train_learns_runs_the_steps_asked_for_and_restores_threads(kind):
    torch.manual_seed(0)
    model = RecallModel(16, 8, 8, kind)
    threads = torch.get_num_threads()
    before = recall.accuracy(model, 4, num_sequences=64)
    losses = recall.train(model, steps=60, batch_size=16, pairs=range(1, 5), lr=3e-2, seed=1)
    assert len(losses) == 60 and all(isinstance(x, float) and math.isfinite(x) for x in losses)
    assert torch.get_num_threads() == threads and not model.training
    assert sum(losses[-10:]) < 0.5 * sum(losses[:10])  # the loss falls
    assert recall.accuracy(model, 4, num_sequences=64) > max(0.6, before + 0.3)


def test_the_first_loss_is_the_untrained_models_on_the_first_batch():
    """Step 1: N drawn from ``pairs`` with the seeded generator, then the batch from the same
    generator, every pair asked for; the loss is the mean cross-entropy of the answers."""
    torch.manual_seed(2)
    model = RecallModel(10, 6, 4, "delta")
    untrained = RecallModel(10, 6, 4, "delta")
    untrained.load_state_dict(model.state_dict())
    losses = recall.train(model, steps=1, batch_size=5, pairs=[3, 7], seed=8)
    generator = _gen(8)
    n = [3, 7][int(torch.randint(2, (), generator=generator))]
    keys, values, queries, targets = recall.make_batch(5, n, num_keys=10, num_values=6,
                                                       generator=generator)
    with torch.no_grad():
        logits = untrained(keys, values, queries).double()
    expected = (logits.logsumexp(-1) - logits.gather(-1, targets[..., None])[..., 0]).mean()
    assert abs(losses[0] - expected.item()) < 1e-5


def test_train_is_reproducible_from_the_seeds():
    def run(seed):
        torch.manual_seed(0)
        return recall.train(RecallModel(10, 6, 4, "linear"), steps=4, batch_size=4, seed=seed)

    assert run(1) == run(1) and run(1) != run(2)


def test_an_int_pairs_trains_on_that_many_pairs_only():
    seen = []

    class Spy(Answers):
        def forward(self, keys, values, queries):
            seen.append(keys.shape[1])
            return super().forward(keys, values, queries) + self.dummy

    recall.train(Spy(), steps=3, batch_size=2, pairs=5)
    recall.train(Spy(), steps=30, batch_size=2, pairs=(2, 9))
    recall.train(Spy(num_keys=3), steps=30, batch_size=2)  # None: 1 … num_keys
    assert seen[:3] == [5, 5, 5] and set(seen[3:33]) == {2, 9} and set(seen[33:]) == {1, 2, 3}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_train_refuses_half_precision(dtype):
    model = RecallModel(8, 4, 4, "softmax").to(dtype)
    before = [p.clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=r"model must have float32 or float64 parameters to train \(train in float32"):
        recall.train(model, steps=2)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_train_refuses_a_loss_that_is_not_finite():
    torch.manual_seed(0)
    with pytest.raises(ValueError, match=r"training diverged at step \d+ with lr=1e\+30: the (loss|parameters) must stay finite"):
        recall.train(RecallModel(8, 4, 4, "additive"), steps=5, batch_size=4, lr=1e30)


def test_train_rejects_bad_settings_before_touching_the_model():
    model = RecallModel(8, 4, 4, "linear")
    before = [p.clone() for p in model.parameters()]
    for kwargs, match in [
        (dict(steps=0), r"steps must be a positive int, got 0"),
        (dict(batch_size=1.5), r"batch_size must be a positive int, got 1.5"),
        (dict(lr=0.0), r"lr must be a finite number > 0.0, got 0.0"),
        (dict(seed=None), r"seed must be an int"),
        (dict(pairs=9), r"pairs must be at most the model's num_keys=8 .* got 9"),
        (dict(pairs=[]), r"pairs must be an int or a non-empty sequence of ints .* got \[\]"),
        (dict(pairs="4"), r"pairs must be an int or a non-empty sequence of ints .* got '4'"),
        (dict(pairs=range(0, 4)), r"pairs must hold ints in \[1, num_keys\] = \[1, 8\] .* got 0"),
        (dict(pairs=[2, 4.0]), r"pairs must hold ints in \[1, num_keys\] .* got 4.0"),
        (dict(rewrite_share=1.5), r"rewrite_share must be in \[0, 1\] .* got 1.5"),
        (dict(rewrite_share=-0.1), r"rewrite_share must be a finite number >= 0.0, got -0.1"),
    ]:
        with pytest.raises(ValueError, match=match):
            recall.train(model, **kwargs)
    with pytest.raises(ValueError, match=r"model must be a RecallModel .* got Linear"):
        recall.train(nn.Linear(2, 2))
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())) and model.training


def test_train_with_rewrites_draws_batches_with_rewritten_keys():
    """rewrite_share 0 trains as before (the same losses); a share > 0 trains on longer
    sequences, whose losses differ."""
    def losses(**kwargs):
        torch.manual_seed(0)
        model = RecallModel(12, 5, 4, "delta")
        return recall.train(model, steps=3, pairs=8, seed=1, **kwargs)
    assert losses() == losses(rewrite_share=0.0)
    assert losses() != losses(rewrite_share=0.5)


def test_a_frozen_decay_stays_where_it_was_put_and_reads_like_the_learnt_one():
    frozen = RecallModel(9, 5, 4, "decay", decay=0.9)
    assert abs(frozen.decay.item() - 0.9) < 1e-6
    assert [name for name, _ in frozen.named_parameters()] == [
        name for name, _ in RecallModel(9, 5, 4, "additive").named_parameters()]  # γ not among them
    learnt = RecallModel(9, 5, 4, "decay")
    learnt.load_state_dict(frozen.state_dict())  # the same weights, γ = 0.9 as a parameter
    keys, values, queries, _ = recall.make_batch(2, 5, num_keys=9, num_values=5, rewrites=2,
                                                 generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(frozen(keys, values, queries), learnt(keys, values, queries))
    before = frozen.decay_logit.clone()
    recall.train(frozen, steps=3, seed=1)
    assert torch.equal(frozen.decay_logit, before)  # trained, γ untouched
    assert abs(frozen.double().decay.item() - 0.9) < 1e-6


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="delta", decay=0.9), r"decay must be None for kind 'delta' \(a frozen γ is for kind 'decay' only\), got 0.9"),
    (dict(kind="decay", decay=1.0), r"decay must be in \(0, 1\) \(the frozen γ\), got 1.0"),
    (dict(kind="decay", decay=0.0), r"decay must be a finite number > 0.0, got 0.0"),
    (dict(kind="decay", decay=float("nan")), r"decay must be a finite number > 0.0, got nan"),
    (dict(kind="decay", decay=True), r"decay must be a finite number > 0.0, got True"),
])
def test_a_frozen_decay_is_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RecallModel(9, 5, 4, **kwargs)
