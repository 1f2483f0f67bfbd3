"""The ratio policies through their protocol: fixed and capability ratios, the cap, P-UCBV's split / elimination /
rewards, E-UCB, determinism, independence of devices, pickling, and what feedback each one needs."""
import copy
import pickle

import numpy as np
import pytest

from testbed.algorithms.bandits import Agent, index_values, uniform_intervals
from testbed.algorithms.ratios import EUCB, PUCBV, CapabilityRatio, Feedback, FixedRatio, RatioPolicy

RNG = np.random.default_rng


def pucbv_feedback(accuracy, previous=None, flops=2e9, flops_per_s=1e9, bits_up=8e6, up_bps=4e6):
    """Cost T = 2 s + 2 s = 4 s unless changed."""
    return Feedback(accuracy=accuracy, previous_accuracy=previous, flops=flops, flops_per_s=flops_per_s,
                    bits_up=bits_up, up_bps=up_bps)


def with_ratio(policy, device, ratio):
    """Put device's agent in the state Alg. 2 starts from, with ratio s_k^r = ratio pending."""
    agent = Agent.fresh(uniform_intervals(policy.low, policy.high, policy.partitions))
    agent.ratio = ratio
    policy.state[device] = agent
    return agent


def play(policy, devices, rounds, seed, accuracy=lambda d, s, r: 0.5 + 0.1 * s):
    """Every device selected every round, one random stream per device, as the engine spawns them."""
    rngs = {d: RNG([seed, d]) for d in devices}
    chosen = {d: [] for d in devices}
    for r in range(rounds):
        for d in devices:
            s = policy.choose(d, r, 1.0, rngs[d])
            chosen[d].append(s)
            policy.observe(d, r, s, pucbv_feedback(accuracy(d, s, r)))
    return chosen


# ---- trivial policies -------------------------------------------------------------------------------------
def test_fixed_ratio_ignores_capability_unless_capped():
    rng = RNG(0)
    assert FixedRatio().choose(3, 0, 0.0625, rng) == 0.5
    assert FixedRatio(0.3).choose(3, 0, 1.0, rng) == 0.3
    assert FixedRatio(cap=True).choose(3, 0, 0.25, rng) == 0.25
    assert FixedRatio(cap=True).choose(3, 0, 1.0, rng) == 0.5
    assert FixedRatio().observe(3, 0, 0.5, Feedback()) is None


def test_capability_ratio_is_the_capability():
    policy = CapabilityRatio()
    assert [policy.choose(d, 0, z, RNG(0)) for d, z in enumerate([1, 0.5, 0.25, 0.125, 0.0625])] == \
        [1, 0.5, 0.25, 0.125, 0.0625]
    for bad in (0.0, 1.5, -0.5):
        with pytest.raises(ValueError):
            policy.choose(0, 0, bad, RNG(0))


def test_every_policy_speaks_the_protocol():
    for policy in (FixedRatio(), CapabilityRatio(), PUCBV(), EUCB()):
        assert isinstance(policy, RatioPolicy)


# ---- P-UCBV -----------------------------------------------------------------------------------------------
def test_pucbv_caps_the_bandit_ratio_with_the_capability():
    policy = PUCBV()
    s = policy.choose(0, 0, 1.0, RNG(1))
    assert 0.5 <= s < 1.0 and s == policy.state[0].ratio
    assert policy.choose(0, 0, 0.25, RNG(1)) == 0.25            # min(z, s): the held s is not redrawn
    assert policy.choose(0, 0, 0.75, RNG(1)) == min(0.75, s)
    assert PUCBV(cap=False).choose(0, 0, 0.25, RNG(1)) == s


def test_pucbv_holds_its_ratio_until_a_result_arrives():
    policy = PUCBV()
    first = policy.choose(0, 0, 1.0, RNG(0))
    assert policy.choose(0, 1, 1.0, RNG(99)) == first          # dropped device: keeps s
    policy.observe(0, 1, first, pucbv_feedback(0.6))
    assert policy.state[0].ratio is None                        # the next choose draws anew


def test_pucbv_splits_at_the_ratio_and_rewards_both_halves():
    policy = PUCBV()
    with_ratio(policy, 0, 0.75)
    policy.observe(0, 0, 0.75, pucbv_feedback(0.47, previous=0.5))   # change -0.03 >= Delta = -0.05: keep both
    agent = policy.state[0]
    edges = [e for iv in agent.intervals() for e in iv]
    assert edges == pytest.approx([0.5, 0.6, 0.6, 0.7, 0.7, 0.75, 0.75, 0.8, 0.8, 0.9, 0.9, 1.0])
    g = (0.8206503 - 0.8727737) / 4      # (U(0.47) - U(0.5)) / 4 s; e^0.1645 = 1.1788038, e^0.175 = 1.1912462
    assert [a.pulls for a in agent.arms] == [0, 0, 1, 1, 0, 0]
    assert agent.arms[2].mean == pytest.approx(g, abs=1e-7) and agent.arms[3].mean == pytest.approx(g, abs=1e-7)
    assert agent.eps == 0.5 and agent.observations == 1 and agent.last_accuracy == 0.47


def test_pucbv_eliminates_the_lower_half_on_an_accuracy_drop():
    policy = PUCBV()
    with_ratio(policy, 0, 0.75)
    policy.observe(0, 0, 0.75, pucbv_feedback(0.4, previous=0.5))    # change -0.1 < -0.05: [0.7, 0.75) goes
    agent = policy.state[0]
    edges = [e for iv in agent.intervals() for e in iv]
    assert edges == pytest.approx([0.5, 0.6, 0.6, 0.7, 0.75, 0.8, 0.8, 0.9, 0.9, 1.0])
    assert [a.pulls for a in agent.arms] == [0, 0, 1, 0, 0]
    assert agent.arms[2].mean == pytest.approx(-0.0434787, abs=1e-7)  # (U(0.4) - U(0.5)) / 4
    # the removed range can no longer be drawn
    for seed in range(100):
        s = policy.choose(0, 1, 1.0, RNG(seed))
        assert not 0.7 <= s < 0.75
        policy.state[0].ratio = None


def test_pucbv_elimination_is_strict_at_delta():
    policy = PUCBV(delta=-0.0625)
    with_ratio(policy, 0, 0.75)
    policy.observe(0, 0, 0.75, pucbv_feedback(0.4375, previous=0.5))   # change == Delta exactly: kept
    assert len(policy.state[0].arms) == 6


def test_pucbv_previous_accuracy_defaults_to_the_agents_memory():
    policy = PUCBV()
    with_ratio(policy, 0, 0.75)
    policy.observe(0, 0, 0.75, pucbv_feedback(0.5))             # a^{-1} = initial_accuracy = 0
    assert policy.state[0].arms[3].mean == pytest.approx(0.8727737 / 4, abs=1e-7)
    policy.state[0].ratio = 0.95
    policy.observe(0, 1, 0.95, pucbv_feedback(0.6))              # a^{r-1} = 0.5, remembered
    assert policy.state[0].arms[-1].mean == pytest.approx((1.0461582 - 0.8727737) / 4, abs=1e-7)


def test_a_capped_device_credits_the_arm_holding_the_ratio_it_trained_at():
    # the bandit draws s = 0.83 but the device can only train at z_k = 0.62: the arm [0.6, 0.7) is split at 0.62
    # and both halves get the reward; [0.8, 0.9), which the device never trained at, stays whole and empty
    policy = PUCBV()
    with_ratio(policy, 0, 0.83)
    trained = policy.choose(0, 0, 0.62, RNG(0))
    assert trained == 0.62
    policy.observe(0, 0, trained, pucbv_feedback(0.6))
    agent = policy.state[0]
    assert agent.intervals() == ((0.5, 0.6), (0.6, 0.62), (0.62, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.0))
    assert [a.pulls for a in agent.arms] == [0, 1, 1, 0, 0, 0]


def test_a_ratio_in_a_stretch_an_elimination_removed_credits_the_nearest_arm_whole():
    policy = PUCBV()
    agent = with_ratio(policy, 0, 0.75)
    del agent.arms[1]  # [0.6, 0.7) eliminated earlier
    policy.observe(0, 0, policy.choose(0, 0, 0.68, RNG(0)), pucbv_feedback(0.6))
    # 0.68 lies in no arm: [0.7, 0.8) is 0.02 away, [0.5, 0.6) 0.08: the former gets the reward, unsplit
    assert [(a.lo, a.hi, a.pulls) for a in policy.state[0].arms] == [
        (0.5, 0.6, 0), (0.7, 0.8, 1), (0.8, 0.9, 0), (0.9, 1.0, 0)]


def test_a_ratio_below_the_arm_space_credits_the_lowest_arm_whole():
    policy = PUCBV()
    with_ratio(policy, 0, 0.83)
    policy.observe(0, 0, policy.choose(0, 0, 0.125, RNG(0)), pucbv_feedback(0.6))
    agent = policy.state[0]
    assert agent.intervals() == uniform_intervals(0.5, 1.0, 5) and [a.pulls for a in agent.arms] == [1, 0, 0, 0, 0]


def test_observe_needs_a_pending_choice_and_its_feedback():
    policy = PUCBV()
    with pytest.raises(ValueError, match="without a choose"):
        policy.observe(0, 0, 0.5, pucbv_feedback(0.5))
    policy.choose(0, 0, 1.0, RNG(0))
    with pytest.raises(ValueError, match="flops"):
        policy.observe(0, 0, 0.5, Feedback(accuracy=0.5))
    with pytest.raises(ValueError, match="loss_after"):
        eucb = EUCB()
        eucb.choose(0, 0, 1.0, RNG(0))
        eucb.observe(0, 0, 0.5, pucbv_feedback(0.5))


def test_same_seed_same_sequence():
    a = play(PUCBV(), [0, 1], rounds=40, seed=7)
    b = play(PUCBV(), [0, 1], rounds=40, seed=7)
    c = play(PUCBV(), [0, 1], rounds=40, seed=8)
    assert a == b
    assert a != c


def test_agents_of_different_devices_share_nothing():
    alone = PUCBV()
    seq_alone = play(alone, [1], rounds=30, seed=3)[1]
    together = PUCBV()
    wild = lambda d, s, r: (0.9 - 0.6 * (r % 2)) if d == 0 else 0.5 + 0.1 * s   # device 0: big swings, eliminations
    seq_together = play(together, [0, 1], rounds=30, seed=3, accuracy=wild)
    assert seq_together[1] == seq_alone and together.state[1] == alone.state[1]
    assert together.state[0] != together.state[1] and together.state[0].arms is not together.state[1].arms
    snapshot = copy.deepcopy(together.state[1])
    s = together.choose(0, 99, 1.0, RNG(0))
    together.observe(0, 99, s, pucbv_feedback(0.1))
    assert together.state[1] == snapshot


def test_pickling_round_trips_a_policy_with_state():
    policy = PUCBV(delta=-0.1, xi=20.0)
    play(policy, [0, 5], rounds=25, seed=1)
    clone = pickle.loads(pickle.dumps(policy))
    assert clone == policy and clone.state == policy.state and clone.state is not policy.state
    assert repr(clone) == repr(policy) and "state" not in repr(policy)
    for d in (0, 5):   # both continue identically
        assert clone.choose(d, 25, 1.0, RNG([9, d])) == policy.choose(d, 25, 1.0, RNG([9, d]))


def test_policies_are_hashable_configs():
    assert hash(PUCBV()) == hash(PUCBV()) and PUCBV() == PUCBV() and PUCBV() != PUCBV(rho=1.0)


def test_state_may_live_in_a_client_store_that_spills():
    store_module = pytest.importorskip("testbed.store")
    with store_module.ClientStore(max_in_memory=1) as store:
        policy = PUCBV(state=store)
        reference = PUCBV()
        assert play(policy, [0, 1, 2], rounds=10, seed=2) == play(reference, [0, 1, 2], rounds=10, seed=2)
        assert all(policy.state[d] == reference.state[d] for d in (0, 1, 2))


# ---- E-UCB (FedMP) ----------------------------------------------------------------------------------------
def eucb_feedback(loss, time_s, mean_time_s, loss_before=None):
    return Feedback(loss_after=loss, loss_before=loss_before, round_time_s=time_s, mean_round_time_s=mean_time_s)


def test_eucb_starts_from_one_arm_and_is_not_capped():
    policy = EUCB()
    s = policy.choose(0, 0, 0.0625, RNG(0))
    assert policy.state[0].intervals() == ((0.2, 1.0),) and 0.2 <= s < 1.0 and s == policy.state[0].ratio
    assert EUCB(cap=True).choose(0, 0, 0.0625, RNG(0)) == 0.0625


def test_eucb_rewards_the_upper_child_with_loss_drop_over_time_saved():
    policy = EUCB()
    agent = with_ratio(policy, 0, 0.6)
    policy.observe(0, 0, 0.6, eucb_feedback(2.0, 8.0, 10.0))       # first result: no previous loss, no reward
    assert agent.intervals() == ((0.2, 0.6), (0.6, 1.0)) and [a.pulls for a in agent.arms] == [0, 0]
    agent.ratio = 0.8
    policy.observe(0, 1, 0.8, eucb_feedback(1.5, 8.0, 10.0))       # (2.0 - 1.5) / (10 - 8) = 0.25
    assert agent.intervals() == ((0.2, 0.6), (0.6, 0.8), (0.8, 1.0))
    assert [a.pulls for a in agent.arms] == [0, 0, 1] and agent.arms[2].mean == 0.25
    agent.ratio = 0.3
    policy.observe(0, 2, 0.3, eucb_feedback(1.0, 5.0, 5.0))        # time == mean: undefined, no reward
    assert [a.pulls for a in agent.arms] == [0, 0, 0, 1] and agent.last_loss == 1.0
    agent.ratio = 0.25
    policy.observe(0, 3, 0.25, eucb_feedback(1.0, 12.0, 10.0, loss_before=1.4))   # override: 0.4 / -2
    assert agent.arms[1].pulls == 1 and agent.arms[1].mean == pytest.approx(-0.2)


# ---- P-UCBV by hand (Alg. 2, eq. 14-17), both exploration terms --------------------------------------------
# Two arms over [0.5, 1): [0.5, 0.75), [0.75, 1). Every observation costs T = 2 s + 2 s = 4 s (eq. 14).
# U(x) = 10 - 20 / (1 + e^{0.35 x}): U(0.1) = 0.174983, U(0.3) = 0.524520, U(0.2) = 0.349857
R1 = (0.524520 - 0.174983) / 4   # 0.1 -> 0.3: +0.087384
R2 = (0.349857 - 0.524520) / 4   # 0.3 -> 0.2: -0.043666


@pytest.mark.parametrize("exploration", ["paper", "ucbv"])
def test_pucbv_by_hand(exploration):
    policy = PUCBV(partitions=2, epsilon_greedy=False, xi=10.0, exploration=exploration)
    with_ratio(policy, 0, 0.8)   # the first draw is a uniform arm; this one drew 0.8
    policy.observe(0, 0, policy.choose(0, 0, 1.0, RNG(0)), pucbv_feedback(0.3, previous=0.1))
    agent = policy.state[0]
    # [0.75, 1) split at 0.8; both halves get R1; no elimination (+0.2 >= -0.05); eps 1/2, m = 1
    assert agent.intervals() == ((0.5, 0.75), (0.75, 0.8), (0.8, 1.0))
    assert [a.pulls for a in agent.arms] == [0, 1, 1] and agent.arms[1].mean == pytest.approx(R1, abs=1e-5)
    # eq. 17 with rho = 0.5, variance 0: bonus sqrt(0.5 * 2 * L / (4 (h + 1))) = sqrt(L / (4 (h + 1)))
    #   paper: L = log(10 * (10 / 3^2) * 1/2) = log(5.5556) = 1.714798;  ucbv: L = log(1 + 1) = 0.693147
    L = {"paper": 1.714798, "ucbv": 0.693147}[exploration]
    expected = [(L / 4) ** 0.5, R1 + (L / 8) ** 0.5, R1 + (L / 8) ** 0.5]
    assert index_values(agent, 10.0, 0.5, exploration) == pytest.approx(expected, abs=1e-5)
    # the untried arm leads either way (paper 0.654748 vs 0.550362; ucbv 0.416277 vs 0.381738)
    s2 = policy.choose(0, 1, 1.0, RNG(1))
    assert 0.5 <= s2 < 0.75
    policy.observe(0, 1, s2, pucbv_feedback(0.2))  # previous: its own last accuracy, 0.3
    # accuracy fell by 0.1 < -0.05: [0.5, s2) eliminated; [s2, 0.75) gets R2 (it inherited nothing); eps 1/4, m = 2
    assert agent.intervals() == ((s2, 0.75), (0.75, 0.8), (0.8, 1.0))
    assert agent.arms[0].pulls == 1 and agent.arms[0].mean == pytest.approx(R2, abs=1e-5)
    #   paper: L = log(10 * (10 / 9) * 1/4) = log(2.7778) = 1.021651;  ucbv: L = log(3) = 1.098612
    L = {"paper": 1.021651, "ucbv": 1.098612}[exploration]
    assert index_values(agent, 10.0, 0.5, exploration) == pytest.approx(
        [R2 + (L / 8) ** 0.5, R1 + (L / 8) ** 0.5, R1 + (L / 8) ** 0.5], abs=1e-5)
    s3 = policy.choose(0, 2, 1.0, RNG(2))   # the two R1 arms tie: either, never the R2 one
    assert 0.75 <= s3 < 1.0


def test_the_papers_bonus_vanishes_from_the_third_pick_and_ucbv_keeps_one():
    # eps = 1/8 after three observations, with 4 arms: paper L = log(10 * 10/16 * 1/8) = log(0.78125) < 0
    agent = Agent.fresh(uniform_intervals(0.5, 1.0, 4))
    agent.eps, agent.observations = 0.125, 3
    assert list(index_values(agent, 10.0, 0.5, "paper")) == [0.0, 0.0, 0.0, 0.0]      # the means: mean-greedy
    assert index_values(agent, 10.0, 0.5, "ucbv") == pytest.approx([(1.386294 / 4) ** 0.5] * 4, abs=1e-6)  # log 4
