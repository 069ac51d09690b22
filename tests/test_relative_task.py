"""relative_task: the targets are the tokens ``offset`` places back, training runs exactly the
steps asked for and learns, and accuracy_by_position counts what a model gets right, position by
position, as a count written out by hand does."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import helpers as h
from helpers import relative_task
from helpers.adam import Adam
from helpers.relative_task import IGNORE


class Oracle(nn.Module):
    """Logits that name the token ``offset`` places back (0 where there is none): always right."""

    def __init__(self, vocab_size: int = 10, offset: int = 3) -> None:
        super().__init__()
        self.vocab_size, self.offset = vocab_size, offset
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, tokens, *, need_weights=True):
        back = torch.zeros_like(tokens)
        back[:, self.offset:] = tokens[:, : -self.offset]
        return nn.functional.one_hot(back, self.vocab_size).double() + 0 * self.dummy


class Constant(Oracle):
    """Always names token ``value``."""

    def __init__(self, value: int) -> None:
        super().__init__()
        self.value = value

    def forward(self, tokens, *, need_weights=True):
        return nn.functional.one_hot(torch.full_like(tokens, self.value), self.vocab_size).double()


# ---------------------------------------------------------------- make_batch
@pytest.mark.parametrize("batch_size, length, vocab_size, offset", [(4, 10, 10, 3), (1, 2, 3, 1), (7, 33, 50, 5)])
def test_targets_are_the_tokens_offset_places_back(batch_size, length, vocab_size, offset):
    g = torch.Generator().manual_seed(0)
    tokens, targets = relative_task.make_batch(batch_size, length, vocab_size=vocab_size,
                                               offset=offset, generator=g)
    assert tokens.shape == targets.shape == (batch_size, length)
    assert tokens.dtype == targets.dtype == torch.long
    assert 0 <= int(tokens.min()) and int(tokens.max()) < vocab_size
    for b in range(batch_size):
        for t in range(length):
            want = IGNORE if t < offset else int(tokens[b, t - offset])
            assert int(targets[b, t]) == want


def test_batches_follow_the_generator_and_move_to_the_device(device):
    first = relative_task.make_batch(3, 8, generator=torch.Generator().manual_seed(5), device=device)
    again = relative_task.make_batch(3, 8, generator=torch.Generator().manual_seed(5), device=device)
    other = relative_task.make_batch(3, 8, generator=torch.Generator().manual_seed(6), device=device)
    assert all(t.device.type == device.type for t in first)
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])
    # the tokens are drawn on the CPU, so every device sees the same sequences
    assert torch.equal(first[0].cpu(), torch.randint(0, 10, (3, 8), generator=torch.Generator().manual_seed(5)))


def test_tokens_are_roughly_uniform():
    tokens, _ = relative_task.make_batch(500, 40, generator=torch.Generator().manual_seed(1))
    share = torch.bincount(tokens.flatten(), minlength=10).double() / tokens.numel()
    assert torch.allclose(share, torch.full((10,), 0.1, dtype=torch.float64), atol=0.01)


@pytest.mark.parametrize("kwargs, match", [
    (dict(batch_size=0, length=5), r"batch_size must be a positive int, got 0"),
    (dict(batch_size=2, length=3, offset=3), r"offset must be below the length .* offset=3, length=3"),
    (dict(batch_size=2, length=5, offset=0), r"offset must be a positive int, got 0"),
    (dict(batch_size=2, length=5, vocab_size=True), r"vocab_size must be a positive int, got True"),
    (dict(batch_size=2, length=2.5), r"length must be a positive int, got 2.5"),
])
def test_make_batch_rejects_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=match):
        relative_task.make_batch(**kwargs)


# ---------------------------------------------------------------- accuracy_by_position
def test_accuracy_of_an_oracle_is_one_everywhere():
    acc = relative_task.accuracy_by_position(Oracle(), 20, num_sequences=16)
    assert acc.shape == (17,) and acc.dtype == torch.float64
    assert torch.equal(acc, torch.ones(17, dtype=torch.float64))


def test_accuracy_of_a_constant_guess_is_the_share_of_that_token_by_hand():
    model = Constant(4)
    acc = relative_task.accuracy_by_position(model, 12, num_sequences=50, seed=7)
    tokens, _ = relative_task.make_batch(50, 12, generator=torch.Generator().manual_seed(7))
    by_hand = [sum(int(tokens[b, t - 3]) == 4 for b in range(50)) / 50 for t in range(3, 12)]
    torch.testing.assert_close(acc, torch.tensor(by_hand, dtype=torch.float64))


def test_prefix_of_the_per_position_accuracy_is_the_accuracy_on_shorter_sequences():
    # A causal model's prediction at t sees tokens 0 … t only: positions 3 … L-1 of long
    # sequences are scored exactly as the same sequences cut to length L.
    h.set_seed(0)
    model = h.DecoderLM(10, 16, 2, 1, ffn_hiddens=32, max_len=40, positional="rope").eval()
    acc = relative_task.accuracy_by_position(model, 40, num_sequences=32, seed=3)
    tokens, targets = relative_task.make_batch(32, 40, generator=torch.Generator().manual_seed(3))
    for L in (4, 16, 25):
        with torch.no_grad():
            predictions = model(tokens[:, :L]).argmax(dim=-1)  # (B, L)
        right = (predictions == targets[:, :L])[:, 3:].double().mean()
        assert abs(acc[: L - 3].mean().item() - right.item()) < 1e-12


def test_accuracy_restores_mode_and_threads():
    model = Constant(1).train()
    threads = torch.get_num_threads()
    relative_task.accuracy_by_position(model, 8, num_sequences=4)
    assert model.training and torch.get_num_threads() == threads


def test_accuracy_rejects_bad_input():
    with pytest.raises(ValueError, match=r"model must have an int vocab_size .* got Linear"):
        relative_task.accuracy_by_position(nn.Linear(2, 2), 8)
    with pytest.raises(ValueError, match=r"num_sequences must be a positive int, got 0"):
        relative_task.accuracy_by_position(Oracle(), 8, num_sequences=0)
    with pytest.raises(ValueError, match=r"offset must be below the length"):
        relative_task.accuracy_by_position(Oracle(), 3)
    with pytest.raises(ValueError, match=r"seed must be an int"):
        relative_task.accuracy_by_position(Oracle(), 8, seed=1.5)


# ---------------------------------------------------------------- train
def test_train_runs_the_steps_asked_for_learns_and_restores_threads(device):
    h.set_seed(0)
    model = h.DecoderLM(10, 16, 2, 1, ffn_hiddens=32, max_len=16, positional="rope").to(device)
    threads = torch.get_num_threads()
    before = relative_task.accuracy_by_position(model, 16, num_sequences=64).mean().item()
    losses = relative_task.train(model, steps=80, seed=0)
    assert len(losses) == 80 and all(isinstance(x, float) for x in losses)
    assert torch.get_num_threads() == threads and not model.training
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:10]) / 10  # the loss falls
    after = relative_task.accuracy_by_position(model, 16, num_sequences=64).mean().item()
    assert after > 0.9 > before


@pytest.mark.parametrize("positional", ["rope", "t5"])
def test_train_takes_the_steps_of_torch_optim_adam_exactly(positional):
    """The Adam written out in train gives, on the CPU, bit for bit the weights and losses of
    torch.optim.Adam (its default single-tensor path): the same training, by hand."""
    import torch.nn.functional as F

    from helpers.device import cpu_threads

    def model():
        h.set_seed(3)
        return h.DecoderLM(10, 16, 2, 1, ffn_hiddens=32, max_len=16, positional=positional)

    ours, theirs = model(), model()
    losses = relative_task.train(ours, steps=12, lr=1e-2, seed=4)
    generator = torch.Generator().manual_seed(4)
    optimizer = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    expected = []
    theirs.train()
    with cpu_threads(1):
        for _ in range(12):
            tokens, targets = relative_task.make_batch(32, 16, generator=generator)
            logits = theirs(tokens, need_weights=False)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=relative_task.IGNORE)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            expected.append(loss.item())
    assert losses == expected
    for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        assert torch.equal(a, b), name


def test_train_is_reproducible_from_the_seeds():
    def run(seed):
        h.set_seed(0)
        model = h.DecoderLM(10, 8, 1, 1, ffn_hiddens=16, max_len=16, positional="sinusoidal")
        return relative_task.train(model, steps=5, seed=seed)

    assert run(1) == run(1) and run(1) != run(2)


def test_train_rejects_bad_settings():
    model = h.DecoderLM(10, 8, 1, 1, ffn_hiddens=16, max_len=16)
    for kwargs, match in [(dict(steps=0), r"steps must be a positive int, got 0"),
                          (dict(lr=0.0), r"lr must be a finite number > 0.0, got 0.0"),
                          (dict(seed="a"), r"seed must be an int"),
                          (dict(length=32), r"sequence length must be at most max_len=16, got 32")]:
        with pytest.raises(ValueError, match=match):
            relative_task.train(model, **kwargs)
    with pytest.raises(ValueError, match=r"model must have an int vocab_size"):
        relative_task.train(nn.Linear(2, 2))


# ---------------------------------------------------------------- reduced precision, divergence
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_train_refuses_reduced_precision_and_leaves_the_model_alone(dtype):
    # float16 used to give losses [2.42, nan, nan] and NaN weights without a word
    model = h.DecoderLM(10, 8, 1, 1, ffn_hiddens=16, max_len=16).to(dtype)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=rf"model must have float32 or float64 parameters to "
                                         rf"train \(train in float32 and cast afterwards\), got "
                                         rf"{dtype}"):
        relative_task.train(model, steps=3)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_train_raises_naming_the_step_when_the_loss_turns_non_finite():
    model = h.DecoderLM(10, 8, 1, 1, ffn_hiddens=16, max_len=16)
    with pytest.raises(ValueError, match=r"training diverged at step 2 with lr=1e\+30: the loss "
                                         r"must stay finite, got nan"):
        relative_task.train(model, steps=3, lr=1e30, batch_size=4, length=8)


def test_train_raises_when_the_last_step_leaves_non_finite_weights(monkeypatch):
    model = h.DecoderLM(10, 8, 1, 1, ffn_hiddens=16, max_len=16)

    step = Adam.step

    def poison(self):  # a step that writes NaN into a weight
        step(self)
        with torch.no_grad():
            model.head.bias[0] = float("nan")

    monkeypatch.setattr(Adam, "step", poison)
    with pytest.raises(ValueError, match=r"diverged at step 1 .*parameters must stay finite"):
        relative_task.train(model, steps=1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(seed=1.5), r"seed must be an int"),
    (dict(lr="x"), r"lr must be a finite number > 0.0, got 'x'"),
    (dict(batch_size=0), r"batch_size must be a positive int, got 0"),
    (dict(length=2.0), r"length must be a positive int, got 2.0"),
    (dict(offset=16), r"offset must be below the length"),
    (dict(steps=True), r"steps must be a positive int, got True"),
])
def test_train_checks_every_setting_before_touching_the_model(kwargs, match):
    model = h.DecoderLM(10, 8, 1, 1, ffn_hiddens=16, max_len=16)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=match):
        relative_task.train(model, **kwargs)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_make_batch_checks_generator_and_device():
    with pytest.raises(ValueError, match=r"generator must be None or a torch.Generator on the "
                                         r"CPU, got 3"):
        relative_task.make_batch(2, 5, generator=3)
    with pytest.raises(ValueError, match=r"device must be"):
        relative_task.make_batch(2, 5, device="meta")
    with pytest.raises(ValueError, match=r"device must be"):
        relative_task.make_batch(2, 5, device="banana")


def test_accuracy_refuses_a_model_without_data():
    model = h.DecoderLM(10, 8, 1, 1, ffn_hiddens=16, max_len=16).to("meta")
    with pytest.raises(ValueError, match=r"model's parameters must be on a device that holds data"):
        relative_task.accuracy_by_position(model, 8)


# ------------------------------------------------------------ whatever the default dtype
@pytest.fixture(scope="module")
def float32_model_and_run():
    """A float32 model and what training a copy of it gives under the float32 default (module
    scope: made before any ``default_dtype`` fixture changes it)."""
    import copy

    assert torch.get_default_dtype() == torch.float32
    h.set_seed(0)
    model = h.DecoderLM(10, 8, 1, 1, ffn_hiddens=16, max_len=16, positional="sinusoidal")
    trained = copy.deepcopy(model)
    return model, trained, relative_task.train(trained, steps=5, seed=1)


def test_a_float32_model_trains_the_same_under_any_default_dtype(default_dtype,
                                                                 float32_model_and_run):
    """train takes its model from the caller and draws only token ids: nothing in it follows
    the default dtype (checked, as toy.train and train_with_checkpoints once did follow it)."""
    import copy

    model, want_model, want_losses = float32_model_and_run
    model = copy.deepcopy(model)
    assert relative_task.train(model, steps=5, seed=1) == want_losses
    assert torch.get_default_dtype() == default_dtype
    for (name, got), (_, expected) in zip(model.state_dict().items(),
                                          want_model.state_dict().items(), strict=True):
        assert got.dtype == torch.float32 and torch.equal(got, expected), name
