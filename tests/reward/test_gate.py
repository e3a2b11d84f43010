from rlvr_sweep.reward.gate import first_box_token, score_rollouts

WORKED = " 7 + 3 * 4 = 7 + 12\n7 + 12 = 19\n\\boxed{19}<|endoftext|>"
BARE = " \\boxed{19}<|endoftext|>"
UNBOXED = " 7 + 3 * 4 = 19<|endoftext|>"
WRONG = " 7 + 3 * 4 = 7 + 12\n7 + 12 = 18\n\\boxed{18}<|endoftext|>"


def test_ungated_reward_needs_a_braced_box_and_the_right_answer():
    rewards, correct = score_rollouts([WORKED, BARE, UNBOXED, WRONG], "19", gate_chars=None)
    assert rewards == [1.0, 1.0, 0.0, 0.0]
    assert correct == rewards


def test_gate_zeroes_bare_guesses_but_keeps_their_correctness():
    rewards, correct = score_rollouts([WORKED, BARE, UNBOXED, WRONG], "19", gate_chars=4)
    assert rewards == [1.0, 0.0, 0.0, 0.0]
    assert correct == [1.0, 1.0, 0.0, 0.0]
    # the paper's 30-character gate: the worked line above puts \boxed at character 32
    assert score_rollouts([WORKED, BARE], "19", gate_chars=30)[0] == [1.0, 0.0]
    assert WORKED.rfind("\\boxed") == 32


def test_first_box_token_is_where_the_first_box_starts_in_real_qwen3_tokens(qwen3_tokenizer):
    tok = qwen3_tokenizer
    text = "We add 2 and 3.\nSo the answer is \\boxed{5}. Check: \\boxed{5}"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    decode = tok.decode
    pieces = [decode([i]) for i in ids]
    assert ".\n" in pieces  # a newline-bearing token, as the tree samplers see them
    at = first_box_token(ids, decode)
    assert pieces[at].endswith("\\") and pieces[at + 1] == "boxed"  # ' \\' then 'boxed'
    assert "\\boxed" not in decode(ids[:at]) and "\\boxed" in decode(ids[: at + 2])
    assert first_box_token(ids[:at], decode) == -1  # cut before the box: none
    assert first_box_token(ids[:at + 1], decode) == -1  # the backslash alone is no box
    assert first_box_token([], decode) == -1
