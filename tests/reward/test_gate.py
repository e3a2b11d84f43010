from rlvr_sweep.reward.gate import score_rollouts

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
