"""The date task and the Bahdanau encoder-decoder: data, shapes, masking, an oracle step,
the fixed-context baseline, training, greedy prediction and input checks."""

from __future__ import annotations

import contextlib
import datetime
import re
import signal

import numpy as np
import pytest
import torch

from helpers import seq2seq as s

# The five source formats, as strptime patterns (the C locale's English month names).
STRPTIME = {0: "%d %b %Y", 1: "%b %d, %Y", 2: "%d %B %Y", 3: "%B %d, %Y", 4: "%d.%m.%Y"}


def small_model(device, embed_size=5, num_hiddens=7, seed=0) -> s.Seq2Seq:
    torch.manual_seed(seed)
    return s.Seq2Seq(embed_size, num_hiddens).to(device).eval()


def batch(device, texts=("3 May 1998", "September 21, 2004", "07.11.1950")):
    src, lens = s.encode_sources(list(texts), device)
    targets = [datetime.datetime.strptime(t, next(f for f in STRPTIME.values()
                                                 if _parses(t, f))).strftime("%Y-%m-%d")
               for t in texts]
    return src, lens, s.encode_targets(targets, device)


def _parses(text, fmt) -> bool:
    try:
        datetime.datetime.strptime(text, fmt)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------- data
def test_tokenize_source_keeps_words_and_splits_digits():
    assert s.tokenize_source("3 May, 1998") == ["3", "May", ",", "1", "9", "9", "8"]
    assert s.tokenize_source("07.11.1950") == ["0", "7", ".", "1", "1", ".", "1", "9", "5", "0"]
    assert s.tokenize_target("1998-05-03") == list("1998-05-03")


def test_format_date_matches_strptime_for_every_format():
    for fmt, pattern in STRPTIME.items():
        for y, m, d in [(1998, 5, 3), (2004, 9, 21), (1900, 12, 31), (2099, 2, 1)]:
            text, target = s.format_date(y, m, d, fmt)
            assert datetime.datetime.strptime(text, pattern) == datetime.datetime(y, m, d), text
            assert target == datetime.date(y, m, d).isoformat()


def test_encode_decode_round_trip_and_padding():
    texts = ["3 May 1998", "September 21, 2004", "07.11.1950"]
    src, lens = s.encode_sources(texts)
    assert src.dtype == torch.long and src.shape == (3, 10)
    assert lens.tolist() == [len(s.tokenize_source(t)) for t in texts] == [6, 8, 10]
    for b, text in enumerate(texts):
        assert s.SRC_VOCAB.decode(src[b, :lens[b]]) == s.tokenize_source(text)
        assert (src[b, lens[b]:] == s.SRC_VOCAB.pad).all()
    tgt = s.encode_targets(["1998-05-03", "2004-09-21"])
    assert tgt.shape == (2, 11) and s.TGT_VOCAB.decode(tgt[:, -1]) == [s.EOS, s.EOS]
    assert [s.decode_target(row) for row in tgt] == ["1998-05-03", "2004-09-21"]
    bos = s.TGT_VOCAB.stoi[s.BOS]
    assert s.decode_target([bos] + s.TGT_VOCAB.encode(list("12") + [s.EOS, "3"])) == "12"
    assert s.output_text(list("1998-05-03") + [s.EOS]) == "1998-05-03"
    assert s.output_text(list("19")) == "19"
    with pytest.raises(ValueError, match="outside the vocabulary"):
        s.encode_sources(["3 Mai 1998"])


def test_make_dates_is_seeded_valid_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    a, b = s.make_dates(300, seed=5), s.make_dates(300, seed=5)
    assert torch.equal(torch.get_rng_state(), state)
    assert a.texts == b.texts and a.targets == b.targets
    assert torch.equal(a.src, b.src) and torch.equal(a.tgt, b.tgt)
    assert a.texts != s.make_dates(300, seed=6).texts
    assert len(set(a.texts)) == 300
    used = set()
    for text, target in zip(a.texts, a.targets):
        fmt = next(f for f, p in STRPTIME.items() if _parses(text, p))
        used.add(fmt)
        assert datetime.datetime.strptime(text, STRPTIME[fmt]).date().isoformat() == target
        assert 1900 <= int(target[:4]) <= 2099
    assert used == set(STRPTIME)  # every format occurs
    assert a.src.shape[0] == a.src_lens.shape[0] == a.tgt.shape[0] == len(a.formats) == 300
    assert (a.src_lens == torch.tensor([len(s.tokenize_source(t)) for t in a.texts])).all()
    for text, target, fmt in zip(a.texts, a.targets, a.formats):  # the recorded format wrote it
        y, m, d = map(int, target.split("-"))
        assert s.format_date(y, m, d, fmt) == (text, target)


def test_make_dates_exclude_gives_a_disjoint_set():
    train = s.make_dates(200, seed=1)
    test = s.make_dates(200, seed=1, exclude=train.texts)
    assert not set(train.texts) & set(test.texts)
    with pytest.raises(ValueError):
        s.make_dates(0)


@contextlib.contextmanager
def finishes_within(seconds: float):
    """Turn a hang into a failure: raise TimeoutError in the test after ``seconds``."""
    def give_up(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def all_texts(first_year: int, last_year: int) -> set[str]:
    """Every source text of the years, written out here (strftime: the C locale's names)."""
    day, last = datetime.date(first_year, 1, 1), datetime.date(last_year, 12, 31)
    texts = set()
    while day <= last:
        d, y, mon, month = day.day, day.year, day.strftime("%b"), day.strftime("%B")
        texts |= {f"{d} {mon} {y}", f"{mon} {d}, {y}", f"{d} {month} {y}", f"{month} {d}, {y}",
                  day.strftime("%d.%m.%Y")}
        day += datetime.timedelta(days=1)
    return texts


def test_count_dates_counts_every_distinct_text():
    assert s.count_dates((2001, 2001)) == len(all_texts(2001, 2001)) == 5 * 365 - 2 * 31
    assert s.count_dates((2000, 2001)) == len(all_texts(2000, 2001))  # 2000 is a leap year
    with pytest.raises(ValueError, match="years"):
        s.count_dates((2001, 2000))


def test_make_dates_refuses_more_dates_than_the_years_hold():
    """It used to loop forever when n exceeded the distinct texts of ``years``."""
    total = s.count_dates((2001, 2001))  # 1763
    with finishes_within(20), pytest.raises(ValueError, match=f"only {total} distinct"):
        s.make_dates(total + 1, years=(2001, 2001))
    every = s.make_dates(total, seed=4, years=(2001, 2001))  # all of them, in a seeded order
    assert set(every.texts) == all_texts(2001, 2001) and len(every.texts) == total
    assert every.texts == s.make_dates(total, seed=4, years=(2001, 2001)).texts
    assert every.texts != s.make_dates(total, seed=5, years=(2001, 2001)).texts
    for text, target, fmt in zip(every.texts, every.targets, every.formats):
        assert s.format_date(*map(int, target.split("-")), fmt) == (text, target)
    # exclude leaves too few: the message says how many are left
    excluded = every.texts[:10] + ["not a date"]
    with finishes_within(20), pytest.raises(ValueError, match=f"{total - 10} left"):
        s.make_dates(total - 9, years=(2001, 2001), exclude=excluded)
    rest = s.make_dates(total - 10, years=(2001, 2001), exclude=excluded)
    assert set(rest.texts) == set(every.texts[10:])


# ---------------------------------------------------------------- the model
def test_shapes(device):
    model = small_model(device)
    src, lens, tgt = batch(device)
    enc_outputs, state = model.encoder(src, lens)
    assert enc_outputs.shape == (3, 10, 14) and state.shape == (3, 7)
    logits, weights = model(src, lens, s.shift_right(tgt))
    assert logits.shape == (3, 11, len(s.TGT_VOCAB)) and weights.shape == (3, 11, 10)
    assert logits.device.type == device.type and weights.device.type == device.type
    one_logits, one_weights = model(src[:1, :6], lens[:1], s.shift_right(tgt[:1, :4]))
    assert one_logits.shape == (1, 4, len(s.TGT_VOCAB)) and one_weights.shape == (1, 4, 6)


def test_shift_right_starts_with_bos():
    tgt = s.encode_targets(["1998-05-03"])
    shifted = s.shift_right(tgt)
    assert s.TGT_VOCAB.decode(shifted[0, :1]) == [s.BOS] and torch.equal(shifted[0, 1:], tgt[0, :-1])


def test_padded_source_tokens_get_weight_zero_and_rows_sum_to_one(device):
    model = small_model(device)
    src, lens, tgt = batch(device)
    _, weights = model(src, lens, s.shift_right(tgt))  # (B, S, T)
    for b, n in enumerate(lens.tolist()):
        assert (weights[b, :, n:] == 0).all()
        assert (weights[b, :, :n] > 0).all()
        torch.testing.assert_close(weights[b].sum(-1), torch.ones(11, device=device))


def test_padded_source_tokens_change_nothing(device):
    model = small_model(device)
    src, lens, tgt = batch(device)
    logits, weights = model(src, lens, s.shift_right(tgt))
    other = src.clone()
    positions = torch.arange(src.shape[1], device=device)
    padded = positions[None, :] >= lens[:, None]
    other[padded] = s.SRC_VOCAB.stoi["December"]  # real tokens where the padding was
    enc_a, state_a = model.encoder(src, lens)
    enc_b, state_b = model.encoder(other, lens)
    assert torch.equal(enc_a, enc_b) and torch.equal(state_a, state_b)
    assert (enc_a[padded] == 0).all()
    logits_b, weights_b = model(other, lens, s.shift_right(tgt))
    assert torch.equal(logits, logits_b) and torch.equal(weights, weights_b)
    # Even garbage in the decoder's keys/values at padded positions is ignored.
    garbage = enc_a.masked_fill(padded[..., None], 1e4)
    logits_c, _ = model.decoder(s.shift_right(tgt), state_a, garbage, lens)
    torch.testing.assert_close(logits_c, logits)


def test_decoder_reads_the_encoder_outputs(device):
    model = small_model(device)
    src, lens, tgt = batch(device)
    enc_outputs, state = model.encoder(src, lens)
    logits, _ = model.decoder(s.shift_right(tgt), state, enc_outputs, lens)
    nudged = enc_outputs.clone()
    nudged[:, 0] += 0.5  # first source token, valid in every row
    logits_b, _ = model.decoder(s.shift_right(tgt), state, nudged, lens)
    assert not torch.allclose(logits, logits_b)
    # With the same initial state, every step's context changes with the encoder outputs.
    assert ((logits - logits_b).abs().amax(dim=-1) > 0).all()


def test_one_decoder_step_equals_the_bahdanau_equations_written_out(device):
    """α = softmax over valid tokens of w_vᵀ tanh(W_q s + W_k h_j); c = Σ α_j h_j;
    s' = GRU([e(y); c], s) with the gates written out; logits = W_o [s'; c] + b_o."""
    model = small_model(device).double()
    src, lens, _ = batch(device)
    dec = model.decoder
    enc, state = model.encoder(src, lens)  # (B, T, 2N), (B, N)
    token = torch.tensor([3, 5, 7], device=device)
    logits, new_state, weights = dec.step(token, state, enc, lens)
    att, cell = dec.attention, dec.cell
    for b in range(3):
        n = int(lens[b])
        h_j = enc[b, :n]  # (n, 2N)
        scores = torch.tanh(state[b] @ att.W_q.weight.T + h_j @ att.W_k.weight.T) @ att.w_v.weight[0]
        alpha = torch.exp(scores - scores.max())
        alpha = alpha / alpha.sum()
        torch.testing.assert_close(weights[b, :n], alpha)
        assert (weights[b, n:] == 0).all()
        context = alpha @ h_j  # (2N,)
        x = torch.cat([dec.embedding.weight[token[b]], context])
        gi = cell.weight_ih @ x + cell.bias_ih
        gh = cell.weight_hh @ state[b] + cell.bias_hh
        N = state.shape[1]
        r = torch.sigmoid(gi[:N] + gh[:N])
        z = torch.sigmoid(gi[N:2 * N] + gh[N:2 * N])
        cand = torch.tanh(gi[2 * N:] + r * gh[2 * N:])
        s_new = (1 - z) * cand + z * state[b]
        torch.testing.assert_close(new_state[b], s_new)
        torch.testing.assert_close(logits[b], dec.dense.weight @ torch.cat([s_new, context]) + dec.dense.bias)


@contextlib.contextmanager
def rnn_in_full_float32():
    """cuDNN runs float32 GRUs in TF32 by default (``torch.backends.cudnn.rnn.fp32_precision`` is
    "tf32"), and a batch of 3 and a batch of 1 round differently: 8e-5 apart on an H200. The
    comparisons below are about which state is read, so they run in full float32 (no effect on
    the CPU)."""
    rnn = torch.backends.cudnn.rnn
    before = rnn.fp32_precision
    rnn.fp32_precision = "ieee"
    try:
        yield
    finally:
        rnn.fp32_precision = before


@rnn_in_full_float32()
def test_encoder_state_is_read_after_the_last_valid_token(device):
    model = small_model(device)
    src, lens, _ = batch(device)
    enc, state = model.encoder(src, lens)
    for b in range(3):  # each row alone, unpadded, gives the same outputs and state
        n = int(lens[b])
        enc_b, state_b = model.encoder(src[b:b + 1, :n], lens[b:b + 1])
        torch.testing.assert_close(enc_b[0], enc[b, :n])
        torch.testing.assert_close(state_b[0], state[b])
    N = state.shape[1]  # forward half at the last valid token, backward half at the first
    fwd_last = enc[torch.arange(3), lens - 1, :N]
    bwd_first = enc[:, 0, N:]
    want = torch.tanh(model.encoder.init_state(torch.cat([fwd_last, bwd_first], -1)))
    torch.testing.assert_close(state, want)


# ---------------------------------------------------------------- training and prediction
@pytest.fixture
def one_thread():
    """Tensors this small train fastest on one thread (a busy 2-core machine can make two
    threads wait on each other for seconds)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_training_is_torch_optim_adam_on_seeded_batches(one_thread):
    """train_seq2seq = a plain loop written out here: torch.optim.Adam, teacher forcing,
    cross-entropy without padding, gradients clipped to norm 1, batches from its own generator."""
    data = s.make_dates(64, seed=3)
    torch.manual_seed(0)
    ours = s.Seq2Seq(5, 7)
    theirs = s.Seq2Seq(5, 7)
    theirs.load_state_dict(ours.state_dict())
    losses = s.train_seq2seq(ours, data, steps=4, batch_size=16, lr=0.05, seed=9,
                             print_every=None)
    opt = torch.optim.Adam(theirs.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(9)
    want = []
    for _ in range(4):
        idx = torch.randint(64, (16,), generator=gen)
        src, lens, tgt = data.src[idx], data.src_lens[idx], data.tgt[idx]
        src = src[:, :int(lens.max())]
        bos = torch.full((16, 1), s.TGT_VOCAB.stoi[s.BOS])
        logits, _ = theirs(src, lens, torch.cat([bos, tgt[:, :-1]], 1))
        keep = tgt != 0
        loss = -logits.log_softmax(-1).gather(-1, tgt[..., None])[..., 0][keep].mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        opt.step()
        want.append(loss.item())
    assert losses == pytest.approx(want, rel=1e-5)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)


def test_num_threads_is_restored_even_after_an_error():
    data = s.make_dates(32, seed=3)
    before = torch.get_num_threads()
    seen = []
    s.train_seq2seq(s.Seq2Seq(5, 7), data, steps=2, batch_size=4, print_every=None,
                    num_threads=1, callback=lambda step, loss: seen.append(torch.get_num_threads()))
    assert seen == [1, 1] and torch.get_num_threads() == before

    def boom(step, loss):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        s.train_seq2seq(s.Seq2Seq(5, 7), data, steps=2, batch_size=4, print_every=None,
                        num_threads=1, callback=boom)
    assert torch.get_num_threads() == before


def test_a_tiny_training_run_lowers_the_loss(capsys, one_thread):
    torch.manual_seed(0)
    model = s.Seq2Seq(8, 16)
    data = s.make_dates(256, seed=3)
    seen = []
    losses = s.train_seq2seq(model, data, steps=30, batch_size=32, lr=0.02, print_every=10,
                             callback=lambda step, loss: seen.append((step, loss)))
    assert len(losses) == 30 and seen == list(enumerate(losses, start=1))
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["10/30", "20/30", "30/30"]
    assert not model.training
    torch.manual_seed(0)
    again = s.train_seq2seq(s.Seq2Seq(8, 16), data, steps=30, batch_size=32, lr=0.02,
                            print_every=None)
    assert again == losses  # seeded: the same run twice
    assert capsys.readouterr().out == ""


def test_predict_returns_tokens_and_one_weight_row_per_token(device):
    model = small_model(device)
    texts = ["3 May 1998", "September 21, 2004", "07.11.1950"]
    preds = s.predict_many(model, texts, max_steps=9)
    for text, (tokens, weights) in zip(texts, preds):
        T = len(s.tokenize_source(text))
        assert weights.shape == (len(tokens), T) and weights.device.type == "cpu"
        assert 1 <= len(tokens) <= 9 and (s.EOS not in tokens[:-1])
        torch.testing.assert_close(weights.sum(-1), torch.ones(len(tokens)))
        alone_tokens, alone_weights = s.predict(model, text, max_steps=9)
        assert alone_tokens == tokens  # padding in the batch changes nothing
        torch.testing.assert_close(alone_weights, weights)


def test_greedy_decode_feeds_back_its_own_argmax(device):
    model = small_model(device)
    src, lens, _ = batch(device)
    ids, weights = s.greedy_decode(model, src, lens, max_steps=6)
    assert ids.shape == (3, 6) and weights.shape == (3, 6, 10)
    # Teacher forcing with the greedy output as target reproduces the same argmaxes.
    logits, tf_weights = model(src, lens, s.shift_right(ids))
    assert torch.equal(logits.argmax(-1), ids)
    torch.testing.assert_close(tf_weights, weights)


def test_exact_match_counts_whole_strings():
    torch.manual_seed(0)
    model = s.Seq2Seq(8, 16).eval()
    texts = ["3 May 1998", "May 4, 1999"]
    outputs = [s.output_text(tokens) for tokens, _ in s.predict_many(model, texts)]
    assert s.exact_match(model, texts, outputs) == 1.0
    assert s.exact_match(model, texts, [outputs[0], outputs[1] + "0"]) == 0.5
    with pytest.raises(ValueError):
        s.exact_match(model, texts, outputs[:1])


# ---------------------------------------------------------------- input checks
BAD_CALLS = {
    "src rank 1": lambda src, lens, tgt_in: (src[0], lens, tgt_in),
    "src rank 3": lambda src, lens, tgt_in: (src[..., None], lens, tgt_in),
    "src_lens rank 2": lambda src, lens, tgt_in: (src, lens[:, None], tgt_in),
    "src_lens batch": lambda src, lens, tgt_in: (src, lens[:2], tgt_in),
    "tgt_in batch": lambda src, lens, tgt_in: (src, lens, tgt_in[:2]),
    "tgt_in rank 1": lambda src, lens, tgt_in: (src, lens, tgt_in[0]),
    "float src": lambda src, lens, tgt_in: (src.float(), lens, tgt_in),
    "zero length": lambda src, lens, tgt_in: (src, lens * 0, tgt_in),
    "length > T": lambda src, lens, tgt_in: (src, lens + 1, tgt_in),
}


@pytest.mark.parametrize("case", list(BAD_CALLS))
def test_bad_inputs_raise_value_error(device, case):
    model = small_model(device)
    src, lens, tgt = batch(device)
    with pytest.raises(ValueError):
        model(*BAD_CALLS[case](src, lens, s.shift_right(tgt)))


def test_bad_decoder_inputs_raise_value_error(device):
    model = small_model(device)
    src, lens, tgt = batch(device)
    tgt_in = s.shift_right(tgt)
    enc, state = model.encoder(src, lens)
    with pytest.raises(ValueError, match="batch size of state"):
        model.decoder(tgt_in, state[:2], enc, lens)
    with pytest.raises(ValueError, match="enc_outputs"):
        model.decoder(tgt_in, state, enc[0], lens)
    with pytest.raises(ValueError, match="state"):
        model.decoder(tgt_in, state[0], enc, lens)


# ---------------------------------------------------------------- the fixed-context baseline
def test_mean_context_decoder_reads_the_average_of_the_valid_encoder_outputs(device):
    """Without attention every step gets the same context: the mean of h_1..h_n, i.e. weights
    frozen at 1/n on the valid tokens and 0 on the padding."""
    torch.manual_seed(0)
    model = s.Seq2Seq(5, 7, attention=False).to(device).double().eval()
    assert isinstance(model.decoder, s.MeanContextDecoder)
    src, lens, tgt = batch(device)
    enc, state = model.encoder(src, lens)
    logits, weights = model(src, lens, s.shift_right(tgt))  # (B, S, C), (B, S, T)
    for b, n in enumerate(lens.tolist()):
        want = torch.zeros(src.shape[1], dtype=weights.dtype, device=device)
        want[:n] = 1 / n
        torch.testing.assert_close(weights[b], want.expand(11, -1))
        context, w = model.decoder.context(state[b:b + 1], enc[b:b + 1, :n], lens[b:b + 1])
        torch.testing.assert_close(context[0], enc[b, :n].sum(0) / n)
    # One step written out: the GRU cell and the output layer read [e(y); c] and [s'; c].
    dec = model.decoder
    token = torch.tensor([3, 5, 7], device=device)
    step_logits, new_state, _ = dec.step(token, state, enc, lens)
    context = (enc * (weights[:, 0, :, None])).sum(1)  # (B, 2N)
    want_state = dec.cell(torch.cat([dec.embedding(token), context], -1), state)
    torch.testing.assert_close(new_state, want_state)
    torch.testing.assert_close(step_logits, dec.dense(torch.cat([want_state, context], -1)))


def test_the_baseline_is_the_attention_model_less_the_scorer():
    with_attention = {n: p.shape for n, p in s.Seq2Seq(5, 7).named_parameters()}
    without = {n: p.shape for n, p in s.Seq2Seq(5, 7, attention=False).named_parameters()}
    assert without == {n: shape for n, shape in with_attention.items()
                       if not n.startswith("decoder.attention.")}
    assert len(with_attention) > len(without)
    # Built from the same seed, the layers they share start from the same weights (the scorer
    # is made last), so the notebook's comparison changes one thing only.
    torch.manual_seed(3)
    a = dict(s.Seq2Seq(5, 7).named_parameters())
    torch.manual_seed(3)
    for name, p in s.Seq2Seq(5, 7, attention=False).named_parameters():
        assert torch.equal(p, a[name]), name


def test_only_attention_makes_the_context_depend_on_the_decoder_state(device):
    """The query is s_{t-1}: another state gives another context with attention, the same
    context without."""
    torch.manual_seed(0)
    src, lens, _ = batch(device)
    for attention in (False, True):
        model = s.Seq2Seq(5, 7, attention=attention).to(device).eval()
        enc, state = model.encoder(src, lens)
        a, wa = model.decoder.context(state, enc, lens)
        b, wb = model.decoder.context(-state, enc, lens)
        assert torch.equal(a, b) == (not attention) and torch.equal(wa, wb) == (not attention)


def test_the_baseline_trains_and_predicts(one_thread):
    torch.manual_seed(0)
    model = s.Seq2Seq(8, 16, attention=False)
    data = s.make_dates(256, seed=3)
    losses = s.train_seq2seq(model, data, steps=30, batch_size=32, print_every=None)
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    (tokens, weights), = s.predict_many(model, ["3 May 1998"])
    torch.testing.assert_close(weights, torch.full((len(tokens), 6), 1 / 6))


# ---------------------------------------------------------------- predictions and scores
def test_predict_many_of_no_texts_is_empty():
    """predict_many([]) used to fail in greedy_decode; no texts, no predictions."""
    model = s.Seq2Seq(5, 7)
    assert s.predict_many(model, []) == []
    assert s.predict_many(model, ()) == []


def test_matches_marks_each_text():
    torch.manual_seed(0)
    model = s.Seq2Seq(8, 16).eval()
    texts = ["3 May 1998", "May 4, 1999", "07.11.1950"]
    outputs = [s.output_text(tokens) for tokens, _ in s.predict_many(model, texts)]
    hits = s.matches(model, texts, [outputs[0], "1999-05-04" + "0", outputs[2]])
    assert hits.dtype == torch.bool and hits.tolist() == [True, False, True]
    assert s.exact_match(model, texts, [outputs[0], "x", outputs[2]]) == 2 / 3


# ---------------------------------------------------------------- bad input to the data helpers
MODEL = s.Seq2Seq(5, 7)
DATA = s.make_dates(8, seed=0)

# Each call must raise a ValueError whose message contains the given text. The comment after
# each says what it did before these checks: hung, silent (a wrong result, no error), a raw
# TypeError/IndexError/..., a ValueError that did not say what was wrong, or already right.
SRC_3_MAY, LENS_3_MAY = s.encode_sources(["3 May 1998"])
BAD_DATA_CALLS = {
    "make_dates n too large": (lambda: s.make_dates(10**6, years=(2001, 2001)), "distinct"),  # hung
    "make_dates n float": (lambda: s.make_dates(2.5), "n must be"),  # TypeError
    "make_dates n bool": (lambda: s.make_dates(True), "n must be"),  # silent: 1 date
    "make_dates years reversed": (lambda: s.make_dates(3, years=(2001, 2000)), "years"),  # RuntimeError
    "make_dates years one int": (lambda: s.make_dates(3, years=2001), "years"),  # TypeError
    "make_dates year 0": (lambda: s.make_dates(3, years=(0, 5)), "years"),  # silent: '04.12.2'
    "make_dates exclude str": (lambda: s.make_dates(3, exclude="3 May 1998"), "wrap it"),  # silent
    "make_dates seed str": (lambda: s.make_dates(3, seed="1"), "seed"),  # RuntimeError
    "Vocab str": (lambda: s.Vocab("abc"), "list of str"),  # silent: one token per character
    "Vocab repeated": (lambda: s.Vocab(["a", "b", "a"]), "repeated"),  # already a ValueError
    "Vocab non-str": (lambda: s.Vocab(["a", 1]), "must be str"),  # silent
    "encode str": (lambda: s.SRC_VOCAB.encode("1998"), "list of tokens"),  # silent: characters
    "encode unknown": (lambda: s.SRC_VOCAB.encode(["Mai"]), "outside the vocabulary"),  # already
    "encode unhashable": (lambda: s.SRC_VOCAB.encode([["1"]]), "outside the vocabulary"),  # TypeError
    "decode negative": (lambda: s.TGT_VOCAB.decode([-1]), "must lie in"),  # silent: last token
    "decode too large": (lambda: s.TGT_VOCAB.decode([99]), "must lie in"),  # IndexError
    "decode float": (lambda: s.TGT_VOCAB.decode([1.7]), "integers"),  # silent: truncated
    "decode float tensor": (lambda: s.TGT_VOCAB.decode(torch.tensor([1.0])), "integer tensor"),  # silent
    "decode 2-D tensor": (lambda: s.TGT_VOCAB.decode(torch.ones(2, 2, dtype=torch.long)), "1-D"),  # unclear
    "decode_target bad id": (lambda: s.decode_target([3, -2]), "must lie in"),  # silent
    "tokenize_source int": (lambda: s.tokenize_source(1998), "must be a str"),  # TypeError
    "tokenize_target None": (lambda: s.tokenize_target(None), "must be a str"),  # TypeError
    "format_date month 0": (lambda: s.format_date(1998, 0, 3, 0), "month"),  # silent: December
    "format_date month 13": (lambda: s.format_date(1998, 13, 3, 0), "month"),  # IndexError
    "format_date 30 February": (lambda: s.format_date(1998, 2, 30, 0), "no such date"),  # silent
    "format_date day 0": (lambda: s.format_date(1998, 5, 0, 0), "no such date"),  # silent
    "format_date fmt -1": (lambda: s.format_date(1998, 5, 3, -1), "fmt"),  # silent: format 4
    "format_date fmt 5": (lambda: s.format_date(1998, 5, 3, 5), "fmt"),  # IndexError
    "format_date year str": (lambda: s.format_date("1998", 5, 3, 0), "year"),  # unclear
    "encode_sources str": (lambda: s.encode_sources("1998"), "wrap it"),  # silent: 4 texts
    "encode_sources empty text": (lambda: s.encode_sources(["3 May 1998", " "]), "no tokens"),  # silent
    "encode_sources unknown": (lambda: s.encode_sources(["3 Mai 1998"]), "3 Mai 1998"),  # unclear
    "encode_sources non-str": (lambda: s.encode_sources([1998]), "must be a str"),  # TypeError
    "encode_targets str": (lambda: s.encode_targets("1998-05-03"), "wrap it"),  # silent: 10 rows
    "encode_targets unknown": (lambda: s.encode_targets(["1998/05/03"]), "outside the vocabulary"),  # already
    "output_text unknown": (lambda: s.output_text(["x"]), "outside the vocabulary"),  # already
    "shift_right rank 1": (lambda: s.shift_right(torch.tensor([4, 5])), "2 dimensions"),  # IndexError
    "shift_right float": (lambda: s.shift_right(torch.ones(1, 3)), "integer ids"),  # silent
    "shift_right no steps": (lambda: s.shift_right(torch.ones(2, 0, dtype=torch.long)), "at least one"),  # silent
    "Seq2Seq size 0": (lambda: s.Seq2Seq(0, 7), "embed_size"),  # unclear (torch's message)
    "Seq2Seq size float": (lambda: s.Seq2Seq(5, 7.5), "num_hiddens"),  # TypeError
    "Seq2Seq attention str": (lambda: s.Seq2Seq(5, 7, attention="no"), "attention"),  # new argument
    "train steps 0": (lambda: s.train_seq2seq(MODEL, DATA, steps=0), "steps"),  # silent: []
    "train steps -3": (lambda: s.train_seq2seq(MODEL, DATA, steps=-3), "steps"),  # silent: []
    "train batch 0": (lambda: s.train_seq2seq(MODEL, DATA, batch_size=0), "batch_size"),  # RuntimeError
    "train lr negative": (lambda: s.train_seq2seq(MODEL, DATA, lr=-0.1), "lr"),  # silent: trains uphill
    "train lr nan": (lambda: s.train_seq2seq(MODEL, DATA, lr=float("nan")), "lr"),  # silent: NaN weights
    "train data tuple": (lambda: s.train_seq2seq(MODEL, (DATA.texts, DATA.targets)), "DateData"),  # AttributeError
    "train model": (lambda: s.train_seq2seq(torch.nn.Linear(2, 2), DATA), "Seq2Seq"),  # TypeError
    "train print_every 0.5": (lambda: s.train_seq2seq(MODEL, DATA, print_every=0.5), "print_every"),  # TypeError
    "train num_threads 0": (lambda: s.train_seq2seq(MODEL, DATA, num_threads=0), "num_threads"),  # new argument
    "greedy max_steps 0": (lambda: s.greedy_decode(MODEL, SRC_3_MAY, LENS_3_MAY, 0), "max_steps"),  # already
    "greedy max_steps float": (lambda: s.greedy_decode(MODEL, SRC_3_MAY, LENS_3_MAY, 2.5), "max_steps"),  # TypeError
    "greedy float lengths": (lambda: s.greedy_decode(MODEL, SRC_3_MAY, LENS_3_MAY.float()),
                             "integer lengths"),  # unclear ("ids and lengths")
    "greedy id too large": (lambda: s.greedy_decode(MODEL, SRC_3_MAY + 99, LENS_3_MAY), "ids in"),  # IndexError
    "predict_many str": (lambda: s.predict_many(MODEL, "3 May 1998"), "wrap it"),  # unclear; '1998': silent
    "predict_many empty text": (lambda: s.predict_many(MODEL, [""]), "no tokens"),  # unclear
    "predict list": (lambda: s.predict(MODEL, ["3 May 1998"]), "must be a str"),  # TypeError
    "predict unknown": (lambda: s.predict(MODEL, "3 Mai 1998"), "outside the vocabulary"),  # already
    "exact_match none": (lambda: s.exact_match(MODEL, [], []), "at least one"),  # unclear
    "exact_match str target": (lambda: s.exact_match(MODEL, ["3 May 1998"], "1998-05-03"), "wrap it"),  # unclear
    "exact_match lengths": (lambda: s.exact_match(MODEL, ["3 May 1998"], []), "targets"),  # already
}


@pytest.mark.parametrize("case", list(BAD_DATA_CALLS))
def test_bad_input_to_the_helpers_raises_a_clear_value_error(case):
    call, match = BAD_DATA_CALLS[case]
    with finishes_within(30), pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------- found by the fuzz specs
# (tests/fuzz/specs_seq2seq.py). Each test below failed before its fix.
def first_line_names(name: str) -> str:
    """A message whose first line names ``name`` and says what was expected and what came."""
    return rf"^(?=[^\n]*\b{name}\b)[^\n]*(must|expected)[^\n]*got"


def test_numpy_integers_and_flags_are_accepted():
    """np.int64 / np.int32 / np.float32 / np.True_ were refused ('must be an int') or raised
    a raw TypeError inside nn.GRU."""
    i64, i32 = np.int64, np.int32
    assert s.format_date(i64(2004), i32(9), np.int16(21), np.uint8(3)) == ("September 21, 2004", "2004-09-21")
    assert s.count_dates((i64(2001), i32(2001))) == 5 * 365 - 2 * 31
    assert s.make_dates(3, seed=i64(4)).texts == s.make_dates(3, seed=4).texts
    model = s.Seq2Seq(i64(3), i32(4), attention=np.True_)
    assert isinstance(model.decoder, s.AttentionDecoder) and model.decoder.cell.hidden_size == 4
    assert s.Encoder(i64(7), i32(2), i64(3)).rnn.hidden_size == 3
    data = s.make_dates(4, seed=1)
    torch.manual_seed(0)
    a = s.train_seq2seq(s.Seq2Seq(3, 4), data, steps=i64(2), batch_size=i32(2), lr=np.float32(0.5),
                        seed=i64(3), print_every=None, num_threads=1)
    torch.manual_seed(0)
    b = s.train_seq2seq(s.Seq2Seq(3, 4), data, steps=2, batch_size=2, lr=float(np.float32(0.5)),
                        seed=3, print_every=None, num_threads=1)
    assert a == b and len(a) == 2


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_training_refuses_reduced_precision(dtype):
    """A float16 model used to train without a word (its Adam moments underflow: NaN weights
    within a few steps); float32 is the training precision, convert afterwards."""
    data = s.make_dates(4, seed=1)
    for model in (s.Seq2Seq(3, 4).to(dtype), s.Seq2Seq(3, 4)):
        if model.encoder.embedding.weight.dtype == torch.float32:
            model.decoder.to(dtype)  # mixed: the decoder alone in reduced precision
        before = [p.clone() for p in model.parameters()]
        with pytest.raises(ValueError, match=first_line_names("model") + ".*") as err:
            s.train_seq2seq(model, data, steps=2, batch_size=2, print_every=None)
        assert "float32" in str(err.value) and str(dtype).replace("torch.", "") in str(err.value)
        assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before))  # untouched


def test_float16_training_really_goes_nan_without_the_check():
    """Why the check: the same loop in float16 ends with NaN weights (bfloat16 keeps going, but
    with 8 significant bits its small updates round away)."""
    torch.manual_seed(0)
    model = s.Seq2Seq(3, 4).half()
    data = s.make_dates(64, seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(30):
        logits, _ = model(data.src, data.src_lens, s.shift_right(data.tgt))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), data.tgt.flatten(), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    assert not all(torch.isfinite(p).all() for p in model.parameters())


def test_training_stops_at_a_non_finite_loss_and_names_the_step(one_thread):
    """lr = 1e25 returned NaN losses (and NaN weights) without a word; lr = 1e300 raised a raw
    RuntimeError inside Adam."""
    data = s.make_dates(6, seed=1, years=(1990, 1999))
    torch.manual_seed(0)
    model = s.Seq2Seq(3, 4)
    seen = []
    # Step 2 on every CPU; which of the two turns NaN first depends on its kernels (the loss on
    # MKL's SSE4.2 path; elsewhere a finite 2.4e25 loss with a NaN gradient).
    with pytest.raises(ValueError, match=r"must stay finite, got loss \S+ and gradient norm "
                                         r"\S+ at step 2 ") as error:
        s.train_seq2seq(model, data, steps=3, batch_size=3, lr=1e25, print_every=None,
                        callback=lambda step, loss: seen.append(loss))
    assert re.search(r"got loss (nan|inf)|gradient norm (nan|inf)", str(error.value))
    assert len(seen) == 1 and all(torch.isfinite(p).all() for p in model.parameters())
    assert not model.training  # put back in eval mode on the way out
    with pytest.raises(ValueError, match=first_line_names("lr")):
        s.train_seq2seq(model, data, steps=1, lr=1e300, print_every=None)


def test_training_checks_callback_and_empty_data():
    data = s.make_dates(4, seed=1)
    with pytest.raises(ValueError, match=first_line_names("callback")):  # was a raw TypeError
        s.train_seq2seq(s.Seq2Seq(3, 4), data, steps=1, print_every=None, callback="print")
    empty = s.DateData([], [], [], data.src[:0], data.src_lens[:0], data.tgt[:0])
    with pytest.raises(ValueError, match=first_line_names("data")):  # was a raw RuntimeError
        s.train_seq2seq(s.Seq2Seq(3, 4), empty, steps=1, print_every=None)


def _date_data(**change):
    d = s.make_dates(3, seed=1)
    fields = dict(texts=d.texts, targets=d.targets, formats=d.formats, src=d.src,
                  src_lens=d.src_lens, tgt=d.tgt)
    fields.update(change)
    return s.DateData(**fields)


@pytest.mark.parametrize("name, change", [
    ("texts", lambda d: dict(texts=0)),
    ("texts", lambda d: dict(texts="3 May 1998")),
    ("targets", lambda d: dict(targets=d.targets[:2])),
    ("formats", lambda d: dict(formats=[0, 5, 1])),
    ("formats", lambda d: dict(formats=[True, 0, 1])),
    ("src", lambda d: dict(src=d.src[:2])),
    ("src", lambda d: dict(src=d.src.float())),
    ("src", lambda d: dict(src=d.src + 100)),
    ("src_lens", lambda d: dict(src_lens=d.src_lens * 0)),
    ("src_lens", lambda d: dict(src_lens=d.src_lens + 100)),
    ("tgt", lambda d: dict(tgt=d.tgt.int())),
    ("tgt", lambda d: dict(tgt=torch.full_like(d.tgt, -1))),
    ("tgt", lambda d: dict(tgt=d.tgt[0])),
])
def test_date_data_checks_its_fields(name, change):
    """DateData took anything (103 silent cases): train_seq2seq failed later, raw."""
    good = _date_data()
    assert good.texts and len(good.src) == 3
    with pytest.raises(ValueError, match=first_line_names(name)):
        _date_data(**change(good))


def test_vocab_refuses_what_is_not_a_sequence_of_tokens_or_ids():
    """Raw TypeErrors (Vocab(0), encode(0), decode(None)); silent: a generator gave an empty
    vocabulary, bools were read as ids 0 and 1."""
    cases = [
        ("tokens", lambda: s.Vocab(0)), ("tokens", lambda: s.Vocab(t for t in "ab")),
        ("tokens", lambda: s.Vocab({"a", "b"})), ("tokens", lambda: s.TGT_VOCAB.encode(0)),
        ("tokens", lambda: s.output_text(5)), ("ids", lambda: s.TGT_VOCAB.decode(None)),
        ("ids", lambda: s.TGT_VOCAB.decode(3)), ("ids", lambda: s.TGT_VOCAB.decode([True, 3])),
        ("ids", lambda: s.TGT_VOCAB.decode(torch.tensor([True, False]))),
        ("ids", lambda: s.decode_target(torch.tensor([True]))),
        ("ids", lambda: s.TGT_VOCAB.decode(torch.empty(3, dtype=torch.long, device="meta"))),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=first_line_names(name)):
            call()
    assert s.TGT_VOCAB.decode(np.array([3, 13])) == ["0", "-"]


@pytest.mark.parametrize("device", [0.5, -1, "meta", "cuda:63", "gpu"])
def test_encode_checks_its_device(device):
    """device=0.5 / -1 / 'cuda:63' raised PyTorch's TypeError / RuntimeError; 'meta' gave
    tensors that hold nothing."""
    for encode, texts in ((s.encode_sources, ["3 May 1998"]), (s.encode_targets, ["1998-05-03"])):
        with pytest.raises(ValueError, match=first_line_names("device")):
            encode(texts, device)


def test_meta_and_empty_inputs_are_refused_clearly():
    """Meta tensors raised NotImplementedError / RuntimeError ('cannot be called on meta
    tensors'); an empty batch 'Cannot pack empty tensors'; zero target steps 'stack expects a
    non-empty TensorList'."""
    model = small_model("cpu")
    src, lens, tgt = batch("cpu")
    meta = lambda x: torch.empty(x.shape, dtype=x.dtype, device="meta")  # noqa: E731
    cases = [
        ("tgt", lambda: s.shift_right(meta(tgt))),
        ("src", lambda: model.encoder(meta(src), lens)),
        ("src_lens", lambda: model.encoder(src, meta(lens))),
        ("src_lens", lambda: s.greedy_decode(model, src, meta(lens))),
        ("tgt_in", lambda: model(src, lens, meta(tgt))),
        ("src", lambda: model.encoder(src[:0], lens[:0])),
        ("tgt_in", lambda: model(src, lens, tgt[:, :0])),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=first_line_names(name)):
            call()


def test_decoder_context_and_step_check_their_inputs():
    """context / step read anything: a str state gave an AttributeError, a list token a
    TypeError, a 2-D token 'Tensors must have same number of dimensions', and src_lens of 0
    or None was silently taken (weights over no token at all, or over every one)."""
    model = small_model("cpu")
    src, lens, tgt = batch("cpu")
    enc, state = model.encoder(src, lens)
    token = torch.tensor([1, 3, 4])
    for decoder in (model.decoder, s.Seq2Seq(5, 7, attention=False).decoder):
        cases = [
            ("state", lambda: decoder.context("x", enc, lens)),
            ("src_lens", lambda: decoder.context(state, enc, lens * 0)),
            ("src_lens", lambda: decoder.context(state, enc, None)),
            ("src_lens", lambda: decoder.context(state, enc, lens.tolist())),
            ("state", lambda: decoder.context(state.double(), enc, lens)),
            ("token", lambda: decoder.step(token.tolist(), state, enc, lens)),
            ("token", lambda: decoder.step(token[None], state, enc, lens)),
            ("token", lambda: decoder.step(token.bool(), state, enc, lens)),
            ("token", lambda: decoder.step(token + 20, state, enc, lens)),
            ("tgt_in", lambda: decoder(tgt[:, :0], state, enc, lens)),
        ]
        for name, call in cases:
            with pytest.raises(ValueError, match=first_line_names(name)):
                call()
    base = s.Decoder(len(s.TGT_VOCAB), 5, 7)  # the shared base says where a context comes from
    with pytest.raises(NotImplementedError, match="AttentionDecoder or MeanContextDecoder"):
        base.context(state, enc, lens)


@pytest.mark.parametrize("name, call", [
    ("tokens", lambda: s.Vocab(["a", "b", "a"])),
    ("tokens", lambda: s.SRC_VOCAB.encode(["Mai"])),
    ("year", lambda: s.format_date(0, 5, 3, 0)),
    ("month", lambda: s.format_date(1998, 13, 3, 0)),
    ("day", lambda: s.format_date(1998, 2, 30, 0)),
    ("fmt", lambda: s.format_date(1998, 5, 3, 5)),
    ("texts", lambda: s.encode_sources(["3 May 1998", " "])),
    ("texts", lambda: s.encode_sources(["3 Mai 1998"])),
    ("text", lambda: s.predict(MODEL, "3 Mai 1998")),
    ("n", lambda: s.make_dates(2000, years=(2001, 2001))),
    ("targets", lambda: s.matches(MODEL, ["3 May 1998"], [])),
    ("texts", lambda: s.exact_match(MODEL, [], [])),
])
def test_messages_name_the_parameter_and_say_what_came(name, call):
    """These were ValueErrors that did not say 'must ... got' (or named another parameter,
    e.g. 'texts[0]' for predict's ``text``)."""
    with pytest.raises(ValueError, match=first_line_names(name)):
        call()
