"""The date task and the Bahdanau encoder-decoder: data, shapes, masking, an oracle step,
training, greedy prediction and input checks."""

from __future__ import annotations

import datetime

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
    assert a.src.shape[0] == a.src_lens.shape[0] == a.tgt.shape[0] == 300
    assert (a.src_lens == torch.tensor([len(s.tokenize_source(t)) for t in a.texts])).all()


def test_make_dates_exclude_gives_a_disjoint_set():
    train = s.make_dates(200, seed=1)
    test = s.make_dates(200, seed=1, exclude=train.texts)
    assert not set(train.texts) & set(test.texts)
    with pytest.raises(ValueError):
        s.make_dates(0)


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
    enc, state = model.encoder(src, lens)  # (B, T, 2H), (B, H)
    token = torch.tensor([3, 5, 7], device=device)
    logits, new_state, weights = dec.step(token, state, enc, lens)
    att, cell = dec.attention, dec.cell
    for b in range(3):
        n = int(lens[b])
        h_j = enc[b, :n]  # (n, 2H)
        scores = torch.tanh(state[b] @ att.W_q.weight.T + h_j @ att.W_k.weight.T) @ att.w_v.weight[0]
        alpha = torch.exp(scores - scores.max())
        alpha = alpha / alpha.sum()
        torch.testing.assert_close(weights[b, :n], alpha)
        assert (weights[b, n:] == 0).all()
        context = alpha @ h_j  # (2H,)
        x = torch.cat([dec.embedding.weight[token[b]], context])
        gi = cell.weight_ih @ x + cell.bias_ih
        gh = cell.weight_hh @ state[b] + cell.bias_hh
        H = state.shape[1]
        r = torch.sigmoid(gi[:H] + gh[:H])
        z = torch.sigmoid(gi[H:2 * H] + gh[H:2 * H])
        cand = torch.tanh(gi[2 * H:] + r * gh[2 * H:])
        s_new = (1 - z) * cand + z * state[b]
        torch.testing.assert_close(new_state[b], s_new)
        torch.testing.assert_close(logits[b], dec.dense.weight @ torch.cat([s_new, context]) + dec.dense.bias)


def test_encoder_state_is_read_after_the_last_valid_token(device):
    model = small_model(device)
    src, lens, _ = batch(device)
    enc, state = model.encoder(src, lens)
    for b in range(3):  # each row alone, unpadded, gives the same outputs and state
        n = int(lens[b])
        enc_b, state_b = model.encoder(src[b:b + 1, :n], lens[b:b + 1])
        torch.testing.assert_close(enc_b[0], enc[b, :n])
        torch.testing.assert_close(state_b[0], state[b])
    H = state.shape[1]  # forward half at the last valid token, backward half at the first
    fwd_last = enc[torch.arange(3), lens - 1, :H]
    bwd_first = enc[:, 0, H:]
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


def test_adam_matches_torch_optim_adam():
    torch.manual_seed(0)
    a, b = s.Seq2Seq(5, 7), s.Seq2Seq(5, 7)
    b.load_state_dict(a.state_dict())
    start = {name: p.detach().clone() for name, p in a.named_parameters()}
    for model in (a, b):  # a frozen parameter is left alone
        model.decoder.embedding.weight.requires_grad_(False)
    ours = s.Adam(a.parameters(), lr=0.05, betas=(0.8, 0.95), eps=1e-6)
    theirs = torch.optim.Adam([p for p in b.parameters() if p.requires_grad], lr=0.05,
                              betas=(0.8, 0.95), eps=1e-6)
    src, lens, tgt = batch("cpu")
    for _ in range(4):
        for model, opt in ((a, ours), (b, theirs)):
            opt.zero_grad()
            logits, _ = model(src, lens, s.shift_right(tgt))
            torch.nn.functional.cross_entropy(logits.flatten(0, 1), tgt.flatten()).backward()
            opt.step()
        for (name, p), q in zip(a.named_parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)
    assert torch.equal(a.decoder.embedding.weight, start["decoder.embedding.weight"])
    assert not torch.equal(a.encoder.embedding.weight, start["encoder.embedding.weight"])


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
