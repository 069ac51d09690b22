"""helpers.adam: the trainers' Adam gives torch.optim.Adam's numbers bit for bit on the CPU,
and never imports torch._dynamo."""

import subprocess
import sys

import pytest
import torch
from torch import nn

from helpers.adam import Adam, adam_step


def _pair(dtype):
    torch.manual_seed(0)
    ours = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).to(dtype)
    theirs = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3)).to(dtype)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lr", [1e-3, 0.05])
def test_steps_equal_torch_optim_adam_bit_for_bit(dtype, lr):
    ours, theirs = _pair(dtype)
    mine, reference = Adam(ours.parameters(), lr=lr), torch.optim.Adam(theirs.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(1)
    for step in range(15):
        x = torch.randn(4, 5, generator=gen, dtype=dtype)
        for model, opt in ((ours, mine), (theirs, reference)):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a, b), step


def test_a_parameter_without_gradient_is_skipped_and_keeps_its_own_step_count():
    """torch.optim.Adam counts steps per parameter: one unused at some steps has its bias
    correction from its own count, not the optimiser's."""
    ours, theirs = _pair(torch.float64)
    mine = Adam(ours.parameters(), lr=0.01)
    reference = torch.optim.Adam(theirs.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(2)
    for step in range(12):
        x = torch.randn(4, 5, generator=gen, dtype=torch.float64)
        for model, opt in ((ours, mine), (theirs, reference)):
            opt.zero_grad()
            if step % 3 == 1:  # only the first layer's output: the last layer gets no gradient
                model[0](x).pow(2).mean().backward()
            else:
                model(x).pow(2).mean().backward()
            opt.step()
        for a, b in zip(ours.parameters(), theirs.parameters()):
            assert torch.equal(a, b), step
    assert mine.counts == [12, 12, 8, 8]


def test_adam_step_by_formula_and_leaves_gradientless_parameters_alone():
    p, q = nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64)), nn.Parameter(torch.ones(2))
    p.grad = torch.tensor([0.5, -4.0], dtype=torch.float64)
    moments = [(torch.zeros(2, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)),
               (torch.zeros(2), torch.zeros(2))]
    adam_step([p, q], moments, step=1, lr=0.1)
    g = torch.tensor([0.5, -4.0], dtype=torch.float64)
    m, v = 0.1 * g, 0.001 * g * g  # (1 − β1)·g, (1 − β2)·g²
    expected = torch.tensor([1.0, -2.0], dtype=torch.float64) - 0.1 * (m / 0.1) / ((v / 0.001).sqrt() + 1e-8)
    assert torch.allclose(p.detach(), expected, rtol=0, atol=1e-15)  # first step: p − lr·sign(g)
    assert torch.equal(q.detach(), torch.ones(2)) and not moments[1][0].any()


def test_no_trainer_imports_torch_dynamo():
    """Why Adam is written out: the first torch.optim.Adam of a session imports torch._dynamo
    (1.7 s). In a fresh interpreter, training leaves it unimported."""
    code = ("import sys, helpers as h; from helpers import induction, relative_task, toy; "
            "induction.train_with_checkpoints(induction.CopyTask(), steps=2, every=1, eval_size=4); "
            "toy.train(1, steps=2, every=1); "
            "relative_task.train(h.DecoderLM(10, 8, 1, 1, max_len=16), steps=2); "
            "print('torch._dynamo' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
