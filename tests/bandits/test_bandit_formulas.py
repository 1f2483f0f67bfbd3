"""P-UCBV / E-UCB formulas by hand: the UCB-V index (eq. 17), interval splits, U (Sec. V-A), the cost (eq. 14),
the rewards (eq. 15 and FedMP's), running arm statistics (eq. 16) and the epsilon schedule (Alg. 2 l.6-7)."""

import numpy as np
import pytest

from testbed.algorithms.bandits import (Agent, Arm, explore_probability, find_interval, select_arm, split_arm,
                                        split_interval, ucbv_index, uniform_intervals, exploration_log)
from testbed.algorithms.ratios import eucb_reward, local_cost, pucbv_reward, utility, xi_for


def test_ucbv_index_by_hand():
    # xi psi eps = 10 * (10/36) * 0.5 = 1.3889 -> log = 0.328504; bonus = sqrt(0.5 * 2.5 * 0.328504 / 16) = 0.160201
    assert ucbv_index(mean=0.2, variance=0.5, pulls=3, log_term=exploration_log("paper", 10, 6, 0.5, 1), rho=0.5) \
        == pytest.approx(0.2 + 0.160201, abs=1e-6)
    # no pulls: denominator 4 * (0 + 1); xi psi eps = 10 * 2.5 * 1 = 25 -> log 3.218876; sqrt(0.5*2*3.218876/4)
    assert ucbv_index(0.0, 0.0, 0, log_term=exploration_log("paper", 10, 2, 1.0, 0), rho=0.5) == \
        pytest.approx(0.897061, abs=1e-6)


def test_ucbv_index_has_no_bonus_when_the_log_is_not_positive():
    # 10 * (10/49) * 0.25 = 0.51 -> log < 0; exactly 1 -> log = 0: both give the mean itself
    assert ucbv_index(0.3, 4.0, 2, log_term=exploration_log("paper", 10, 7, 0.25, 2), rho=0.5) == 0.3
    assert ucbv_index(-0.7, 1.0, 0, log_term=exploration_log("paper", 4, 4, 0.5, 1), rho=0.5) == -0.7


def test_uniform_intervals_are_the_codes_linspace():
    edges = np.array(uniform_intervals(0.5, 1.0, 5)).ravel()
    assert edges == pytest.approx([0.5, 0.6, 0.6, 0.7, 0.7, 0.8, 0.8, 0.9, 0.9, 1.0])
    assert uniform_intervals(0.2, 1.0, 1) == ((0.2, 1.0),)


def test_split_interval_by_hand():
    arms = ((0.5, 0.6), (0.6, 0.7), (0.7, 1.0))
    assert split_interval(arms, 0.65) == ((0.5, 0.6), (0.6, 0.65), (0.65, 0.7), (0.7, 1.0))
    assert split_interval(arms, 0.5) == arms            # at an arm's lower end: no empty interval
    assert split_interval(arms, 0.6) == arms            # 0.6 belongs to [0.6, 0.7), its lower end
    assert find_interval(arms, 0.7) == 2                # half-open: [0.6, 0.7) does not hold 0.7
    with pytest.raises(ValueError):
        split_interval(arms, 1.0)                       # outside every [lo, hi)


def test_split_arm_children_inherit_the_parents_history():
    agent = Agent(arms=[Arm(0.5, 0.75, pulls=2, mean=0.3, m2=0.02), Arm(0.75, 1.0)])
    assert split_arm(agent, 0.6) == (0, 1)
    assert agent.intervals() == ((0.5, 0.6), (0.6, 0.75), (0.75, 1.0))
    assert agent.arms[0].stats() == agent.arms[1].stats() == (0.3, 0.01, 2)
    assert agent.arms[2].stats() == (0.0, 0.0, 0)
    agent.arms[0].add(1.0)
    assert agent.arms[1].pulls == 2                     # copies, not shared


def test_arm_statistics_are_the_mean_and_population_variance():
    arm = Arm(0.5, 1.0)
    for r in (1.0, 2.0, 4.0):
        arm.add(r)
    mean, var, pulls = arm.stats()
    assert pulls == 3 and mean == pytest.approx(7 / 3)
    assert var == pytest.approx(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 3)   # 42/27


def test_utility_values_by_hand():
    assert utility(0.0) == 0.0
    assert utility(1.0) == pytest.approx(1.7323516, abs=1e-7)    # 10 - 20 / (1 + 1.4190675)
    assert utility(-1.0) == pytest.approx(-utility(1.0))          # odd
    assert utility(100.0) == pytest.approx(10.0, abs=1e-12)       # saturates at 10
    assert utility(0.5) == pytest.approx(0.8727737, abs=1e-7)     # 10 - 20 / (1 + 1.1912462)


def test_local_cost_and_pucbv_reward_by_hand():
    cost = local_cost(flops=2e9, flops_per_s=1e9, bits_up=8e6, up_bps=4e6)        # 2 s + 1 * 2 s
    assert cost == 4.0
    assert local_cost(2e9, 1e9, 8e6, 4e6, alpha=0.5) == 3.0
    # U(0.6) = 1.0461582, U(0.5) = 0.8727737 -> (0.1733845) / 4
    assert pucbv_reward(0.6, 0.5, cost) == pytest.approx(0.0433461, abs=1e-7)
    assert pucbv_reward(0.4, 0.5, cost) == pytest.approx(-0.0434787, abs=1e-7)
    # percent scale: U(60) - U(50) is ~0 (both saturated)
    assert abs(pucbv_reward(0.6, 0.5, cost, accuracy_scale=100.0)) < 1e-6


def test_eucb_reward_by_hand():
    assert eucb_reward(loss_before=2.0, loss_after=1.5, time_s=8.0, mean_time_s=10.0) == 0.25   # faster + drop
    assert eucb_reward(2.0, 1.5, time_s=12.0, mean_time_s=10.0) == -0.25                       # slower + drop
    assert eucb_reward(2.0, 1.5, time_s=10.0, mean_time_s=10.0) is None                        # undefined


def test_xi_is_rounds_over_clients_per_round():
    assert xi_for(100, 10) == 10.0
    assert xi_for(100, 50 * 0.2) == 10.0


def test_explore_probability_is_one_over_m():
    assert [explore_probability(m) for m in (0, 1, 2, 4, 10)] == [1.0, 1.0, 0.5, 0.25, 0.1]


def test_epsilon_schedule_turns_the_bonus_off():
    # arm 0: mean 0.3 after 20 pulls; arm 1: never pulled (mean 0)
    arms = [Arm(0.5, 0.75, pulls=20, mean=0.3), Arm(0.75, 1.0, pulls=0, mean=0.0)]
    rng = np.random.default_rng(0)
    early = Agent(arms=arms, eps=0.5, observations=1)
    # xi psi eps = 10 * 2.5 * 0.5 = 12.5: bonus 0.795 for the unpulled arm beats 0.3 + 0.173
    assert select_arm(early, xi=10, rho=0.5, epsilon_greedy=False, rng=rng) == 1
    late = Agent(arms=arms, eps=0.5 ** 5, observations=5)
    # 25 / 32 < 1: no bonus, the mean decides
    assert select_arm(late, xi=10, rho=0.5, epsilon_greedy=False, rng=rng) == 0


def test_first_draw_is_a_uniform_partition():
    agent = Agent.fresh(uniform_intervals(0.5, 1.0, 5))
    agent.arms[4].add(100.0)                 # a huge mean must not matter on the first draw
    picks = {select_arm(agent, 10, 0.5, False, np.random.default_rng(s)) for s in range(200)}
    assert picks == {0, 1, 2, 3, 4}
