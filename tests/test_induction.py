"""The copy task, the head metrics and training with checkpoints: against loops written out here,
hand-made attention maps whose scores are known, and one real training run that must produce a
previous-token head in layer 1 and an induction head in layer 2."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from helpers import DecoderLM
from helpers import induction
from helpers.induction import (
    CopyBatch, CopyTask, composition_scores, copy_accuracy, copy_loss, induction_score, induction_targets,
    make_model, mean_weight_on, offset_profile, offset_targets, previous_token_score,
    token_labels, train_with_checkpoints,
)

# ------------------------------------------------------------------------------ the task


def test_sample_is_prefix_segment_copy_with_distinct_letters_before_the_copy():
    task = CopyTask(vocab_size=12, seq_len=14, min_period=3, max_period=6)
    batch = task.sample(300, torch.Generator().manual_seed(0))
    assert batch.tokens.shape == (300, 14) and batch.tokens.dtype == torch.long
    assert batch.period.shape == (300,)
    assert set(batch.period.tolist()) == {3, 4, 5, 6}  # every copy distance occurs
    for tokens, period in zip(batch.tokens.tolist(), batch.period.tolist()):
        start = 14 - period
        assert tokens[start:] == tokens[start - period:start]  # the segment, repeated
        first = tokens[:start]
        assert len(set(first)) == len(first)  # all distinct before the copy
        assert all(0 <= t < 12 for t in tokens)


def test_sample_is_reproducible_and_leaves_the_global_generator_alone():
    task = CopyTask()
    state = torch.get_rng_state()
    a = task.sample(5, torch.Generator().manual_seed(3))
    b = task.sample(5, torch.Generator().manual_seed(3))
    c = task.sample(5, torch.Generator().manual_seed(4))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.period, b.period)
    assert not torch.equal(a.tokens, c.tokens)
    assert torch.equal(torch.get_rng_state(), state)


def test_copy_start_and_predictable_positions():
    batch = CopyBatch(torch.zeros(3, 10, dtype=torch.long), torch.tensor([2, 4, 5]))
    assert batch.copy_start.tolist() == [8, 6, 5]
    expected = torch.zeros(3, 10, dtype=torch.bool)
    for b, start in enumerate([8, 6, 5]):
        for t in range(start, 9):  # from the copy start to T − 2: the next token is a copy
            expected[b, t] = True
    assert torch.equal(batch.predictable, expected)
    assert len(batch) == 3 and len(batch[1]) == 1 and batch[[0, 2]].period.tolist() == [2, 5]


@pytest.mark.parametrize("kwargs, match", [
    (dict(min_period=1), r"2 ≤ min_period ≤ max_period, got min_period=1"),
    (dict(min_period=5, max_period=4), r"min_period=5, max_period=4"),
    (dict(max_period=9), r"2·max_period must be at most seq_len=16, got 2·9 = 18"),
    (dict(vocab_size=11), r"vocab_size must be at least seq_len − min_period = 12 .*got 11"),
    (dict(seq_len=0), r"seq_len must be a positive int, got 0"),
])
def test_task_rejects_impossible_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CopyTask(**kwargs)


def test_sample_rejects_a_bad_batch_size():
    with pytest.raises(ValueError, match=r"batch_size must be a positive int, got 0"):
        CopyTask().sample(0)


def test_token_labels_are_letters():
    assert token_labels(torch.tensor([0, 1, 25, 26])) == ["A", "B", "Z", "26"]


# ------------------------------------------------------------------------- loss, accuracy


def test_copy_loss_and_accuracy_against_a_loop():
    task = CopyTask()
    batch = task.sample(6, torch.Generator().manual_seed(1))
    logits = torch.randn(6, 16, 16, generator=torch.Generator().manual_seed(2))
    losses, hits = [], []
    for b in range(6):
        start = 16 - int(batch.period[b])
        for t in range(start, 15):
            row = logits[b, t].double()
            target = int(batch.tokens[b, t + 1])
            losses.append(math.log(row.exp().sum()) - float(row[target]))
            hits.append(int(row.argmax()) == target)
    assert copy_loss(logits, batch).item() == pytest.approx(sum(losses) / len(losses), rel=1e-5)
    assert copy_accuracy(logits, batch) == pytest.approx(sum(hits) / len(hits))


def test_a_model_that_reads_the_answer_has_zero_loss_and_full_accuracy():
    batch = CopyTask().sample(4, torch.Generator().manual_seed(5))
    logits = 100.0 * torch.nn.functional.one_hot(batch.tokens.roll(-1, dims=1), 16).float()
    assert copy_loss(logits, batch).item() < 1e-6
    assert copy_accuracy(logits, batch) == 1.0


def test_loss_rejects_logits_of_another_shape():
    batch = CopyTask().sample(2)
    with pytest.raises(ValueError, match=r"\(B, T\) = \(2, 16\), got \(2, 15, 16\)"):
        copy_loss(torch.zeros(2, 15, 16), batch)
    with pytest.raises(ValueError, match=r"logits must have 3 dimensions"):
        copy_accuracy(torch.zeros(2, 16), batch)


# ------------------------------------------------------------------------------ targets


def brute_force_induction_targets(tokens: list[int]) -> list[int]:
    out = []
    for i, token in enumerate(tokens):
        earlier = [j for j in range(i) if tokens[j] == token]
        out.append(earlier[-1] + 1 if earlier else -1)
    return out


def test_induction_targets_against_a_loop_with_repeats():
    tokens = torch.randint(0, 4, (5, 12), generator=torch.Generator().manual_seed(0))
    got = induction_targets(tokens)
    for row, expected in zip(got.tolist(), tokens.tolist()):
        assert row == brute_force_induction_targets(expected)


def test_induction_targets_of_the_copy_task():
    batch = CopyTask().sample(20, torch.Generator().manual_seed(6))
    targets = induction_targets(batch.tokens)
    for b in range(20):
        L, start = int(batch.period[b]), int(batch.copy_start[b])
        assert (targets[b, :start] == -1).all()  # every letter before the copy is new
        for t in range(start, 16):
            assert targets[b, t] == t - L + 1  # the letter after the previous occurrence
            assert batch.tokens[b, targets[b, t]] == batch.tokens[b, (t + 1) % 16] or t == 15


def test_offset_targets():
    batch = CopyBatch(torch.zeros(2, 8, dtype=torch.long), torch.tensor([2, 3]))
    assert offset_targets(batch, 1).tolist() == [[-1, 0, 1, 2, 3, 4, -1, -1],
                                                 [-1, 0, 1, 2, 3, -1, -1, -1]]
    assert offset_targets(batch, 0).tolist()[1] == [0, 1, 2, 3, 4, -1, -1, -1]
    assert offset_targets(batch, 3).tolist()[0] == [-1, -1, -1, 0, 1, 2, -1, -1]
    with pytest.raises(ValueError, match=r"offset must be an int >= 0, got -1"):
        offset_targets(batch, -1)


# ------------------------------------------------------------------------------ metrics


def test_mean_weight_on_against_a_loop():
    gen = torch.Generator().manual_seed(0)
    weights = torch.rand(3, 2, 4, 6, 6, generator=gen)  # (B, L, H, T, T)
    keys = torch.randint(-1, 6, (3, 6), generator=gen)
    keys[0, 0] = 2  # at least one pair
    got = mean_weight_on(weights, keys)
    assert got.shape == (2, 4)
    pairs = [(b, i, int(keys[b, i])) for b in range(3) for i in range(6) if keys[b, i] >= 0]
    for l in range(2):
        for hh in range(4):
            expected = sum(float(weights[b, l, hh, i, j]) for b, i, j in pairs) / len(pairs)
            assert got[l, hh].item() == pytest.approx(expected, rel=1e-6)


def test_mean_weight_on_rejects_bad_shapes_and_empty_keys():
    expected = r"\(B, \.\.\., T, T\) = \(2, \.\.\., 5, 5\), got \(2, 5, 4\)"
    with pytest.raises(ValueError, match=expected):
        mean_weight_on(torch.zeros(2, 5, 4), torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"keys must have 2 dimensions"):
        mean_weight_on(torch.zeros(2, 5, 5), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match=r"keys must hold at least one key position >= 0 .*"
                                         r"got -1 everywhere"):
        mean_weight_on(torch.zeros(2, 5, 5), torch.full((2, 5), -1))


def perfect_head(keys: torch.Tensor) -> torch.Tensor:
    """(B, T, T) one-hot rows on ``keys`` (B, T); rows without a key put 1 on key 0."""
    B, T = keys.shape
    return torch.nn.functional.one_hot(keys.clamp(min=0), T).float()


def test_scores_of_perfect_and_uniform_heads():
    task = CopyTask()
    batch = task.sample(32, torch.Generator().manual_seed(7))
    previous = perfect_head(offset_targets(batch, 1))  # (B, T, T)
    inducing = perfect_head(induction_targets(batch.tokens))
    uniform = (torch.ones(16, 16).tril() / torch.arange(1, 17)[:, None]).expand(32, 16, 16)
    assert previous_token_score(previous, batch).item() == pytest.approx(1.0)
    assert induction_score(inducing, batch.tokens).item() == pytest.approx(1.0)
    # a perfect previous-token head is no induction head, and the other way round
    assert induction_score(previous, batch.tokens).item() < 0.2
    assert previous_token_score(inducing, batch).item() < 0.2
    # uniform over the past: 1/(i+1) at query i, averaged over the pairs that count
    prev_pairs = [i for b in range(32) for i in range(1, int(batch.copy_start[b]))]
    ind_pairs = [i for b in range(32) for i in range(int(batch.copy_start[b]), 16)]
    assert previous_token_score(uniform, batch).item() == pytest.approx(
        sum(1 / (i + 1) for i in prev_pairs) / len(prev_pairs), rel=1e-5)
    assert induction_score(uniform, batch.tokens).item() == pytest.approx(
        sum(1 / (i + 1) for i in ind_pairs) / len(ind_pairs), rel=1e-5)


def test_induction_score_over_chosen_queries():
    batch = CopyTask().sample(16, torch.Generator().manual_seed(8))
    inducing = perfect_head(induction_targets(batch.tokens))
    spoiled = inducing.clone()
    spoiled[:, -1] = 0.0  # the last query attends nowhere useful
    spoiled[:, -1, 0] = 1.0
    assert induction_score(spoiled, batch.tokens).item() < 1.0
    assert induction_score(spoiled, batch.tokens, batch.predictable).item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"queries must be a boolean tensor of shape \(B, T\) = "
                                         r"\(16, 16\)"):
        induction_score(spoiled, batch.tokens, batch.predictable.long())


def test_offset_profile_against_the_diagonals():
    batch = CopyTask().sample(8, torch.Generator().manual_seed(9))
    weights = torch.softmax(torch.randn(8, 2, 3, 16, 16), dim=-1)  # (B, L, H, T, T)
    profile = offset_profile(weights, batch, 3)
    assert profile.shape == (2, 3, 4)
    torch.testing.assert_close(profile[..., 1], previous_token_score(weights, batch))
    for k in range(4):
        values = [weights[b, :, :, i, i - k] for b in range(8)
                  for i in range(k, int(batch.copy_start[b]))]
        torch.testing.assert_close(profile[..., k], torch.stack(values).mean(0))


# ------------------------------------------------------------------------------ training


def test_make_model_is_seeded_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    a, b, c = (make_model(CopyTask(), seed=s) for s in (0, 0, 1))
    assert torch.equal(torch.get_rng_state(), state)
    assert isinstance(a, DecoderLM) and a.vocab_size == 16 and a.max_len == 16
    assert len(a.blocks) == 2 and a.blocks[0].attention.num_heads == 2
    assert a.blocks[0].ffn[0].out_features == 64 and a.embedding.embedding_dim == 64
    for (name, x), (_, y), (_, z) in zip(a.state_dict().items(), b.state_dict().items(),
                                         c.state_dict().items()):
        assert torch.equal(x, y), name
    assert not torch.equal(a.embedding.weight, c.embedding.weight)


@pytest.fixture(scope="module")
def short_run():
    return train_with_checkpoints(steps=25, every=10, eval_size=48, seed=3)


def test_short_run_records_what_it_says(short_run):
    run = short_run
    assert run.steps == [0, 10, 20, 25]
    assert run.train_loss.shape == (25,) and run.eval_loss.shape == (4,)
    assert run.previous_token.shape == run.induction.shape == (4, 2, 2)
    E = len(run.examples)
    assert run.examples.period.tolist() == sorted(set(run.eval_batch.period.tolist()))
    assert run.weights.shape == (4, E, 2, 2, 16, 16)
    torch.testing.assert_close(run.weights.sum(-1), torch.ones(4, E, 2, 2, 16))
    assert (run.weights.triu(diagonal=1) == 0).all()  # causal at every checkpoint
    # the last checkpoint is the returned model, measured again here
    with torch.no_grad():
        logits = run.model(run.eval_batch.tokens)
        maps = torch.stack(run.model.attention_weights, dim=1)  # (B, L, H, T, T)
        run.model(run.examples.tokens)
        example_maps = torch.stack(run.model.attention_weights, dim=1)
    expected_loss = copy_loss(logits, run.eval_batch).item()
    assert run.eval_loss[-1].item() == pytest.approx(expected_loss, rel=1e-5)
    assert run.eval_accuracy[-1].item() == pytest.approx(copy_accuracy(logits, run.eval_batch))
    torch.testing.assert_close(run.previous_token[-1], previous_token_score(maps, run.eval_batch))
    torch.testing.assert_close(run.induction[-1], induction_score(
        maps, run.eval_batch.tokens, run.eval_batch.predictable))
    torch.testing.assert_close(run.weights[-1], example_maps)
    assert not torch.equal(run.weights[0], run.weights[-1])  # it did train


def test_training_is_reproducible_restores_threads_and_the_global_generator():
    threads, state = torch.get_num_threads(), torch.get_rng_state()
    a = train_with_checkpoints(steps=5, every=5, eval_size=16, seed=1, threads=1)
    b = train_with_checkpoints(steps=5, every=5, eval_size=16, seed=1, threads=1)
    assert torch.get_num_threads() == threads and torch.equal(torch.get_rng_state(), state)
    torch.testing.assert_close(a.train_loss, b.train_loss, rtol=0, atol=0)
    torch.testing.assert_close(a.weights, b.weights, rtol=0, atol=0)


def test_training_rejects_a_model_of_another_task():
    with pytest.raises(ValueError, match=r"model vocab_size \(the task's\): expected 16, got 10"):
        train_with_checkpoints(model=DecoderLM(10, 8, 2, 1), steps=1)
    with pytest.raises(ValueError, match=r"max_len must be at least seq_len=16, got 8"):
        train_with_checkpoints(model=DecoderLM(16, 8, 2, 1, max_len=8), steps=1)
    with pytest.raises(ValueError, match=r"every must be a positive int, got 0"):
        train_with_checkpoints(steps=1, every=0)


def test_default_training_grows_a_previous_token_head_and_an_induction_head():
    """The notebook's claim, on its own settings: after 200 steps the copy is predicted, a
    layer-1 head puts most of its weight one token back (more than on any other offset), and a
    layer-2 head attends to the token after the previous occurrence of the current one."""
    run = induction.train_with_checkpoints()
    assert run.eval_accuracy[-1] >= 0.95 and run.eval_loss[-1] < 0.2
    assert run.eval_loss[0] > 2.5  # untrained: about ln 16
    assert run.induction[-1, 1].max() > 0.8  # layer 2: an induction head
    assert run.induction[-1, 0].max() < 0.3  # layer 1 is not one
    with torch.no_grad():
        run.model(run.eval_batch.tokens)
    maps = torch.stack(run.model.attention_weights, dim=1)
    profile = offset_profile(maps, run.eval_batch, 3)  # (L, H, 4)
    best = int(profile[0, :, 1].argmax())  # layer 1's most previous-token-like head
    assert profile[0, best, 1] > 0.4
    assert profile[0, best, 1] > 1.4 * profile[0, best, [0, 2, 3]].max()
    # untrained, no head is either
    assert run.previous_token[0].max() < 0.3 and run.induction[0].max() < 0.3
    # in the weights: layer 2's keys read what layer 1 writes (K-composition above the untrained
    # model's 0.1-0.15 for every pair), its queries and values do not (Q and V below it)
    k, q, v = (composition_scores(run.model, kind) for kind in "kqv")
    assert bool((k > 0.18).all()) and bool((q < 0.11).all()) and bool((v < 0.11).all())
    # layer 1 is needed: without its attention the copy fails
    ablated = make_model(run.task)
    ablated.load_state_dict(run.model.state_dict())
    with torch.no_grad():
        ablated.blocks[0].attention.W_o.weight.zero_()
        ablated.blocks[0].attention.W_o.bias.zero_()
        assert copy_accuracy(ablated(run.eval_batch.tokens), run.eval_batch) < 0.5


# ------------------------------------------------------------------ composition scores
def _float64_model(num_layers: int = 3) -> DecoderLM:
    """A float64 DecoderLM (N = 6, H = 2, d_h = 3) whose LayerNorms have gains and shifts that
    matter, so that folding them in is tested."""
    torch.manual_seed(5)
    model = DecoderLM(7, 6, 2, num_layers, ffn_hiddens=5, max_len=8).double()
    with torch.no_grad():
        for block in model.blocks:
            block.norm1.weight.uniform_(0.5, 1.5)
            block.norm1.bias.uniform_(-0.5, 0.5)
    return model


def _composition_by_hand(model: DecoderLM, kind: str, sender: int, receiver: int) -> torch.Tensor:
    """The formula written out, entry by entry, in float64: for receiver head j and sender head i,
    R = diag(γ) P with P = I − 11ᵀ/N (each block's first LayerNorm), W_QK = (W_q^j R)ᵀ (W_k^j R)
    / √d_h, W_OV = W_o^i W_v^i R, and ‖A B‖_F / (‖A‖_F ‖B‖_F) with A = W_QK (K), W_QKᵀ (Q) or
    the receiver's W_OV (V), B the sender's W_OV."""
    N, H = 6, 2
    d_h = N // H
    P = torch.eye(N, dtype=torch.float64) - torch.full((N, N), 1 / N, dtype=torch.float64)

    def circuits(layer):
        block = model.blocks[layer - 1]
        att, R = block.attention, torch.diag(block.norm1.weight.detach()) @ P
        out = []
        for head in range(H):
            rows = list(range(head * d_h, (head + 1) * d_h))
            Wq, Wk, Wv = (lin.weight.detach()[rows] @ R for lin in (att.W_q, att.W_k, att.W_v))
            Wo = att.W_o.weight.detach()[:, rows]
            out.append((Wq.T @ Wk / math.sqrt(d_h), Wo @ Wv))
        return out

    def frobenius(M):
        return math.sqrt(sum(float(M[a, b]) ** 2 for a in range(N) for b in range(N)))

    senders, receivers = circuits(sender), circuits(receiver)
    table = torch.zeros(H, H, dtype=torch.float64)
    for i, (_, B) in enumerate(senders):
        for j, (qk, ov) in enumerate(receivers):
            A = {"k": qk, "q": qk.T, "v": ov}[kind]
            table[i, j] = frobenius(A @ B) / (frobenius(A) * frobenius(B))
    return table


@pytest.mark.parametrize("kind", ["k", "q", "v"])
@pytest.mark.parametrize("sender, receiver", [(1, 2), (1, 3), (2, 3)])
def test_composition_scores_against_the_formula_in_float64(kind, sender, receiver):
    model = _float64_model()
    scores = composition_scores(model, kind, sender, receiver)
    assert scores.dtype == torch.float64 and scores.shape == (2, 2)
    torch.testing.assert_close(scores, _composition_by_hand(model, kind, sender, receiver),
                               rtol=1e-12, atol=1e-12)
    assert bool(((scores > 0) & (scores <= 1)).all())


def test_k_composition_is_the_key_side():
    """A receiver whose keys read exactly the direction the sender writes, and whose queries read
    an orthogonal one, scores 1 on K and 0 on Q (both directions sum to 0, so the centring keeps
    them; γ = 1). A receiver head whose values read nothing (W_v = 0) scores 0 on V."""
    model = DecoderLM(5, 4, 1, 2, ffn_hiddens=3, max_len=4).double()
    u1 = torch.tensor([1.0, -1.0, 0.0, 0.0], dtype=torch.float64)  # the sender writes along u1
    u2 = torch.tensor([0.0, 0.0, 1.0, -1.0], dtype=torch.float64)  # ⊥ u1
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for block in model.blocks:
            block.norm1.weight.fill_(1.0)
        first, second = model.blocks[0].attention, model.blocks[1].attention
        first.W_v.weight[0] = u2  # reads u2, writes u1
        first.W_o.weight[:, 0] = u1
        second.W_k.weight[0] = u1  # keys read u1
        second.W_q.weight[0] = u2  # queries read u2
    k, q, v = (float(composition_scores(model, kind)) for kind in "kqv")
    assert math.isclose(k, 1.0, rel_tol=1e-12) and q == 0.0 and v == 0.0


def test_composition_scores_of_the_untrained_model_and_in_float16():
    """The untrained model scores at the level of random matrices (0.1–0.15 for N = 64, d_h = 32,
    the range notebook 08 measures over 1,000 Gaussian draws); float16 weights are computed in
    float32."""
    model = make_model(CopyTask())
    scores = composition_scores(model)
    assert scores.shape == (2, 2) and bool(((scores > 0.1) & (scores < 0.15)).all())
    half = composition_scores(make_model(CopyTask()).half())
    assert half.dtype == torch.float32
    torch.testing.assert_close(half, scores, rtol=2e-2, atol=2e-3)


@pytest.mark.parametrize("kwargs, match", [
    (dict(kind="x"), r"kind must be one of \('q', 'k', 'v'\), got 'x'"),
    (dict(kind="K"), r"kind must be one of"),
    (dict(sender=2), r"sender must be a layer before receiver=2, got 2"),
    (dict(receiver=3), r"receiver must be a layer of the model, 1 … 2, got 3"),
    (dict(sender=0), r"sender must be a positive int, got 0"),
    (dict(receiver=True), r"receiver must be a positive int, got True"),
])
def test_composition_scores_refuse_bad_choices(kwargs, match):
    with pytest.raises(ValueError, match=match):
        composition_scores(make_model(CopyTask()), **kwargs)


def test_composition_scores_refuse_a_rope_model_and_other_modules():
    with pytest.raises(ValueError, match=r"model must have position-free queries and keys .*"
                                         r"got positional='rope'"):
        composition_scores(DecoderLM(5, 4, 1, 2, positional="rope"))
    with pytest.raises(ValueError, match=r"model must be a DecoderLM, got TransformerBlock"):
        composition_scores(make_model(CopyTask()).blocks[0])
    with pytest.raises(ValueError, match=r"model's parameters must be on a device that holds data, got meta"):
        composition_scores(make_model(CopyTask()).to("meta"))


# ------------------------------------------------------------- bad input, reduced precision
def test_copy_batch_checks_its_tensors():
    tokens = torch.zeros(2, 8, dtype=torch.long)
    for period, match in [(torch.tensor([2, 5]), r"period must lie in \[2, T/2\] = \[2, 4\].*got "
                                                 r"values from 2 to 5"),
                          (torch.tensor([1, 2]), r"period must lie in \[2, T/2\]"),
                          (torch.tensor([2, 3, 4]), r"length of period .*expected 2, got 3"),
                          (torch.tensor([2.0, 3.0]), r"period must be a long tensor .*got "
                                                     r"torch.float32")]:
        with pytest.raises(ValueError, match=match):
            CopyBatch(tokens, period)
    with pytest.raises(ValueError, match=r"tokens must be a long tensor .*got torch.float32"):
        CopyBatch(tokens.float(), torch.tensor([2, 3]))
    with pytest.raises(ValueError, match=r"tokens must have 2 dimensions"):
        CopyBatch(tokens[0], torch.tensor([2]))
    with pytest.raises(ValueError, match=r"tokens must be token ids >= 0, got a minimum of -1"):
        CopyBatch(tokens - 1, torch.tensor([2, 3]))  # copy_loss used to fail in cross_entropy


def test_metrics_refuse_keys_and_positions_out_of_range():
    weights = torch.rand(2, 3, 5, 5)  # (B, H, T, T)
    keys = torch.tensor([[0, 1, 2, 3, -1], [-1, 0, 0, 0, 0]])
    assert mean_weight_on(weights, keys).shape == (3,)
    for bad in (5, 7, -2):
        spoiled = keys.clone()
        spoiled[0, 4] = bad
        with pytest.raises(ValueError, match=r"keys must hold key positions in \[0, T\) = "
                                             r"\[0, 5\) or -1 \(no key\), got values from"):
            mean_weight_on(weights, spoiled)
    with pytest.raises(ValueError, match=r"keys must be an integer tensor .*got torch.float32"):
        mean_weight_on(weights, keys.float())
    with pytest.raises(ValueError, match=r"weights must be a floating-point tensor, got dtype "
                                         r"torch.int64"):
        mean_weight_on(weights.long(), keys)
    with pytest.raises(ValueError, match=r"weights must be on a device that holds data"):
        mean_weight_on(weights.to("meta"), keys)
    with pytest.raises(ValueError, match=r"keys must hold at least one key position"):
        mean_weight_on(weights, torch.full((2, 5), -1))


def test_offset_targets_and_offset_profile_refuse_offsets_past_the_copy():
    batch = CopyBatch(torch.zeros(2, 8, dtype=torch.long), torch.tensor([2, 3]))  # starts 6, 5
    assert offset_targets(batch, 7).tolist() == [[-1] * 8] * 2  # no query before the copy: valid
    with pytest.raises(ValueError, match=r"offset must be an int >= 0, got 1.0"):
        offset_targets(batch, 1.0)
    with pytest.raises(ValueError, match=r"offset must be below the sequence length T = 8, got 8"):
        offset_targets(batch, 8)
    assert offset_targets(batch, np.int64(2)).tolist() == offset_targets(batch, 2).tolist()
    weights = torch.rand(2, 8, 8)
    assert offset_profile(weights, batch, 5).shape == (6,)
    with pytest.raises(ValueError, match=r"max_offset must be below the latest copy start 6 "
                                         r".*got 6"):
        offset_profile(weights, batch, 6)


def test_scores_refuse_a_batch_that_is_not_one():
    weights = torch.rand(2, 8, 8)
    with pytest.raises(ValueError, match=r"batch must be a CopyBatch, got Tensor"):
        previous_token_score(weights, torch.zeros(2, 8, dtype=torch.long))
    with pytest.raises(ValueError, match=r"tokens must be an integer tensor"):
        induction_targets(torch.zeros(2, 8))
    with pytest.raises(ValueError, match=r"tokens must repeat a token"):
        induction_score(weights, torch.arange(16).reshape(2, 8))


def test_loss_refuses_tokens_beyond_the_vocabulary_and_integer_logits():
    batch = CopyTask().sample(2, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"logits must score every token of batch: a vocabulary "
                                         r"of more than 15 .*got V = 8"):
        copy_loss(torch.zeros(2, 16, 8), batch)
    with pytest.raises(ValueError, match=r"logits must be a floating-point tensor"):
        copy_accuracy(torch.zeros(2, 16, 16, dtype=torch.long), batch)


def test_token_labels_refuse_negative_ids_and_floats():
    with pytest.raises(ValueError, match=r"tokens must be token ids >= 0, got a minimum of -1"):
        token_labels(torch.tensor([0, -1]))  # used to print "Z" for -1
    with pytest.raises(ValueError, match=r"tokens must be an integer tensor"):
        token_labels(torch.tensor([0.0, 1.0]))


def test_make_model_and_sample_check_their_arguments():
    with pytest.raises(ValueError, match=r"seed must be an int"):
        make_model(CopyTask(), seed=1.5)
    with pytest.raises(ValueError, match=r"task must be a CopyTask, got int"):
        make_model(3)
    with pytest.raises(ValueError, match=r"generator must be None or a torch.Generator"):
        CopyTask().sample(2, generator=3)
    assert CopyTask(vocab_size=np.int64(16)).vocab_size.__class__ is int


@pytest.mark.parametrize("kwargs, match", [
    (dict(seed=1.5), r"seed must be an int"),
    (dict(lr="x"), r"lr must be a finite number > 0.0, got 'x'"),
    (dict(lr=0), r"lr must be a finite number > 0.0, got 0"),
    (dict(threads=0), r"threads must be a positive int, got 0"),
    (dict(task=3), r"task must be a CopyTask or None, got int"),
    (dict(model="m"), r"model must be a DecoderLM or None, got str"),
])
def test_training_checks_every_setting(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train_with_checkpoints(steps=1, eval_size=4, **kwargs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_training_refuses_reduced_precision(dtype):
    model = make_model(CopyTask(), num_hiddens=8, num_heads=1, num_layers=1, ffn_hiddens=8)
    model = model.to(dtype)
    with pytest.raises(ValueError, match=rf"model must have float32 or float64 parameters to train "
                                         rf"\(train in float32 and cast afterwards\), got {dtype}"):
        train_with_checkpoints(model=model, steps=2, eval_size=4)


def test_training_raises_naming_the_step_when_the_loss_turns_non_finite():
    task = CopyTask(vocab_size=6, seq_len=6, min_period=2, max_period=3)
    with pytest.raises(ValueError, match=r"training diverged at step 2 with lr=1e\+30: the loss "
                                         r"must stay finite, got nan"):
        train_with_checkpoints(task, steps=3, every=5, batch_size=4, eval_size=4, lr=1e30)


def test_training_takes_the_largest_seed():
    task = CopyTask(vocab_size=6, seq_len=6, min_period=2, max_period=3)
    run = train_with_checkpoints(task, steps=1, batch_size=2, eval_size=4, seed=2**64 - 1)
    assert run.steps == [0, 1]


# ------------------------------------------------------------ whatever the default dtype
SMALL_TASK = CopyTask(vocab_size=8, seq_len=8, min_period=2, max_period=4)
SMALL_RUN = dict(steps=4, every=2, batch_size=8, eval_size=16, seed=2)


@pytest.fixture(scope="module")
def float32_default_run():
    """The run and a sample under PyTorch's own default dtype, float32 (module scope: made
    before any ``default_dtype`` fixture changes it)."""
    assert torch.get_default_dtype() == torch.float32
    return (train_with_checkpoints(SMALL_TASK, **SMALL_RUN),
            SMALL_TASK.sample(64, torch.Generator().manual_seed(5)))


def test_training_is_the_float32_run_under_any_default_dtype(default_dtype, float32_default_run):
    """After torch.set_default_dtype(torch.bfloat16) the default model was bfloat16 and trained
    so, silently (and the sampled sequences changed with the dtype of their random keys)."""
    want, want_sample = float32_default_run
    sample = SMALL_TASK.sample(64, torch.Generator().manual_seed(5))
    assert torch.equal(sample.tokens, want_sample.tokens)
    assert torch.equal(sample.period, want_sample.period)
    run = train_with_checkpoints(SMALL_TASK, **SMALL_RUN)
    assert torch.get_default_dtype() == default_dtype  # left as the caller set it
    for (name, got), (_, expected) in zip(run.model.state_dict().items(),
                                          want.model.state_dict().items(), strict=True):
        assert got.dtype == torch.float32 and torch.equal(got, expected), name
    assert run.steps == want.steps and torch.equal(run.eval_batch.tokens, want.eval_batch.tokens)
    for name in ("train_loss", "eval_loss", "eval_accuracy", "previous_token", "induction",
                 "weights"):
        got, expected = getattr(run, name), getattr(want, name)
        assert got.dtype == torch.float32 and torch.equal(got, expected), name


def test_a_model_made_under_a_reduced_default_dtype_is_still_refused(default_dtype):
    model = make_model(SMALL_TASK, num_hiddens=8, num_heads=1, num_layers=1, ffn_hiddens=8)
    assert next(model.parameters()).dtype == default_dtype  # make_model follows the default
    if default_dtype == torch.float64:
        assert len(train_with_checkpoints(SMALL_TASK, model, **SMALL_RUN).train_loss) == 4
        return
    with pytest.raises(ValueError, match=rf"model must have float32 or float64 parameters to "
                                         rf"train \(train in float32 and cast afterwards\), got "
                                         rf"{default_dtype}"):
        train_with_checkpoints(SMALL_TASK, model, **SMALL_RUN)


# ------------------------------------------------------------------ indexing a CopyBatch
@pytest.mark.parametrize("integer", [np.int64(1), np.int32(1), np.int8(-3), np.uint8(3),
                                     torch.tensor(1), torch.tensor(-3, dtype=torch.int32),
                                     np.array(2)], ids=repr)
def test_any_integer_index_picks_one_sequence_as_a_python_int_does(integer):
    """CopyBatch[np.int64(1)] gave a 1-d tokens tensor and a ValueError; CopyBatch[1] a batch
    of one. Any integer is now what the Python int is."""
    batch = CopyTask().sample(4, torch.Generator().manual_seed(0))
    i = int(integer)
    got = batch[integer]
    assert got.tokens.shape == (1, 16) and got.period.shape == (1,)
    assert torch.equal(got.tokens, batch.tokens[i].unsqueeze(0))  # (1, T), written out
    assert torch.equal(got.period, batch.period[i].unsqueeze(0))
    assert torch.equal(got.tokens, batch[i].tokens) and torch.equal(got.period, batch[i].period)


@pytest.mark.parametrize("bad", [True, False, np.bool_(True), torch.tensor(True), 1.0, 1.5,
                                 np.float64(1.0), torch.tensor(1.0)], ids=repr)
def test_a_bool_or_float_index_is_refused(bad):
    batch = CopyTask().sample(4, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"index must be an int, a slice, or a list or tensor of "
                                         r"positions \(or a boolean mask \(B,\)\), got "
                                         + re.escape(repr(bad))):
        batch[bad]


def test_copy_batch_indexing_keeps_slices_lists_masks_and_iteration():
    batch = CopyTask().sample(4, torch.Generator().manual_seed(0))
    assert torch.equal(batch[1:3].tokens, batch.tokens[1:3])
    assert torch.equal(batch[[0, 2]].period, batch.period[[0, 2]])
    assert torch.equal(batch[np.array([3, 1])].tokens, batch.tokens[[3, 1]])
    mask = torch.tensor([True, False, True, False])
    assert torch.equal(batch[mask].tokens, batch.tokens[mask])
    with pytest.raises(IndexError):  # past the end: IndexError, which ends iteration
        batch[np.int64(4)]
    assert [int(one.period) for one in batch] == batch.period.tolist()  # four batches of one
