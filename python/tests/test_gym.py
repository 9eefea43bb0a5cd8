"""Admission decided in Python (cosched.gym): the callback and the Gymnasium environment drive the engine's own
coscheduler, first come first served from Python is the CLI's run byte for byte, episodes replay from a seed,
and a bad action is refused without moving anything."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import cosched
from cosched import CoschedError
from conftest import REPO
from cosched.gym import Decision, SchedulingEnv, fcfs, run_policy

#: The workload docs/python.md's example decides: 16 nodes, gang scheduling with three rows, 200 jobs at load 0.8.
GANG = dict(schemes=["gs"], nodes=16, mpl=3, jobs=200, load=0.8, seed=3)


def shortest_first(decision: Decision):
    fitting = [job for job in decision.queue if job.fits]
    return min(fitting, key=lambda job: (job.requested_s, job.job))


@pytest.mark.parametrize("settings", [GANG, dict(schemes=["sb"], nodes=8, mpl=2, jobs=80, load=0.7, seed=11)])
def test_first_come_first_served_from_python_is_the_clis_run(settings):
    own = cosched.simulate(**settings)
    chosen = run_policy(fcfs, max_queue=4, **settings)
    assert chosen.jobs_csv == own.jobs_csv
    assert chosen.summary_csv == own.summary_csv


def test_a_hand_written_policy_beats_first_come_first_served():
    first_come = run_policy(fcfs, **GANG).summary.iloc[0]
    shortest = run_policy(shortest_first, **GANG).summary.iloc[0]
    assert shortest.mean_response_s < first_come.mean_response_s
    assert shortest.mean_bounded_slowdown < first_come.mean_bounded_slowdown


def episode(env: SchedulingEnv, seed: int, action_seed: int):
    """Run one episode with random allowed actions; (digest of every observation, rewards, result)."""
    rng = np.random.default_rng(action_seed)
    obs, info = env.reset(seed=seed)
    digest, rewards = hashlib.sha256(), []
    while True:
        assert env.observation_space.contains(obs)
        for key in sorted(obs):
            digest.update(obs[key].tobytes())
        fitting = np.flatnonzero(obs["queue"][:, 3])
        position = int(rng.choice(fitting))
        rows = np.flatnonzero(obs["queue_fits_row"][position])
        row = int(rng.choice(rows)) if len(rows) and rng.random() < 0.5 else env.rows
        obs, reward, terminated, truncated, info = env.step((position, row))
        rewards.append(reward)
        if terminated or truncated:
            return digest.hexdigest(), rewards, info["result"]


def test_an_episode_replays_from_its_seed_and_its_rewards_sum_to_the_total_wait():
    env = SchedulingEnv(max_queue=8, row_choice=True, **{**GANG, "jobs": 60})
    assert env.observation_space["matrix"].shape == (3, 16)
    assert env.observation_space["queue"].shape == (8, 4)
    first, rewards, result = episode(env, seed=5, action_seed=0)
    again, rewards_again, result_again = episode(env, seed=5, action_seed=0)
    assert (first, rewards) == (again, rewards_again)
    assert result.jobs_csv == result_again.jobs_csv
    assert sum(rewards) == pytest.approx(-result.jobs["wait_s"].sum(), rel=1e-9, abs=1e-6)
    other, _, _ = episode(env, seed=6, action_seed=0)
    assert other != first, "another seed draws another workload"


def test_the_matrix_shows_a_job_in_the_row_it_was_given():
    env = SchedulingEnv(row_choice=True, **{**GANG, "jobs": 100})
    obs, info = env.reset()
    seen_at_once = 0
    while True:
        fitting = np.flatnonzero(obs["queue"][:, 3])
        if obs["state"][2] > 0 and len(fitting) < 2:
            obs, _, terminated, _, info = env.step((env.max_queue, env.rows))  # wait: let jobs gather
        else:
            position = int(fitting[0])
            job, time_s = info["decision"].queue[position].job, obs["state"][0]
            last_row = obs["queue_fits_row"][position, -1] == 1
            obs, _, terminated, _, info = env.step((position, env.rows - 1 if last_row else env.rows))
            if last_row and not terminated and obs["state"][0] == time_s:  # decided at the same instant again
                assert job in obs["matrix"][env.rows - 1], "the job holds cells in the last row"
                assert job not in obs["matrix"][: env.rows - 1]
                seen_at_once += 1
        if terminated:
            break
    assert seen_at_once > 0, "no job was put in the last row with another decision at the same instant"


def test_a_bad_action_is_refused_and_changes_nothing():
    env = SchedulingEnv(max_queue=4, row_choice=True, **{**GANG, "jobs": 40})
    obs, info = env.reset()
    assert list(env.action_masks()) == [True, False, False, False, False] + [True, True, True, True]
    with pytest.raises(CoschedError, match="nothing runs"):
        env.step((env.max_queue, 0))  # waiting on an empty machine
    with pytest.raises(CoschedError, match="shows 1 jobs"):
        env.step((2, 0))
    with pytest.raises(CoschedError, match="rows 0 to 2"):
        env.step((0, 7))
    for bad in [0, 0.9, (0.0, 1.0), "0", (0, 1, 2), [[0, 1]], (-1, 0), np.array([0.6, 2.9])]:
        with pytest.raises(CoschedError, match="an action is"):
            env.step(bad)
    while True:  # then first come, first served to the end
        mask = env.action_masks()
        assert mask[0] == bool(obs["queue"][0, 3])
        obs, _, terminated, _, info = env.step((0 if mask[0] else env.max_queue, env.rows))
        if terminated:
            break
    assert info["result"].jobs_csv == cosched.simulate(**{**GANG, "jobs": 40}).jobs_csv


def test_a_policys_answer_must_be_one_of_its_decisions_jobs():
    stale = []

    def answers(bad):
        def policy(decision):
            if decision.running:  # the first decision passes; the next one answers badly
                return bad(decision)
            stale.append(decision.queue[0])
            return decision.queue[0]

        return policy

    bad_answers = [
        lambda d: 0,  # a position or a job index: not an answer
        lambda d: d.queue[0].job,
        lambda d: stale[0],  # a job of an earlier decision
        lambda d: (d.queue[0], -1),
        lambda d: (d.queue[0], 1.5),
        lambda d: [d.queue[0], 0],
    ]
    for bad in bad_answers:
        with pytest.raises(CoschedError):
            run_policy(answers(bad), **{**GANG, "jobs": 20})
    for max_queue in [0, -1, 2.5, 10**6, True]:
        with pytest.raises(CoschedError, match="max_queue"):
            run_policy(fcfs, max_queue=max_queue, **GANG)
        with pytest.raises(CoschedError, match="max_queue"):
            SchedulingEnv(max_queue=max_queue, **GANG)
    result = run_policy(fcfs, max_queue=3, **{**GANG, "jobs": 20})
    assert result.document["admission"] == {"policy": "fcfs", "max_queue": 3}


def test_reset_without_a_seed_draws_new_workloads_reproducibly():
    env = SchedulingEnv(**{**GANG, "jobs": 30})
    seeds = [env.reset()[1]["seed"]]  # the settings' seed first
    seeds += [env.reset()[1]["seed"] for _ in range(2)]
    assert seeds[0] == 3 and len(set(seeds)) == 3
    env.reset(seed=7)
    after = [env.reset()[1]["seed"] for _ in range(2)]
    env.reset(seed=7)
    assert [env.reset()[1]["seed"] for _ in range(2)] == after


def test_a_run_cut_by_the_horizon_is_truncated_and_its_last_reward_refunds_nothing():
    env = SchedulingEnv(**{**GANG, "nodes": 4, "jobs": 200, "load": 1.5, "horizon_s": 30})
    obs, info = env.reset()
    rewards = []
    while True:
        obs, reward, terminated, truncated, info = env.step(0 if obs["queue"][0, 3] else env.max_queue)
        rewards.append(reward)
        if terminated or truncated:
            break
    assert truncated and not terminated
    assert rewards[-1] == 0 and all(r <= 0 for r in rewards)


def test_a_run_closed_midway_makes_room_for_the_next():
    env = SchedulingEnv(**{**GANG, "jobs": 30})
    obs, _ = env.reset(seed=1)
    env.step(0)
    obs, _ = env.reset(seed=1)  # ends the first run's thread
    env.close()
    result = run_policy(fcfs, **{**GANG, "jobs": 30, "seed": 1})
    assert len(result.jobs) == 30


def test_a_machine_file_changed_between_episodes_is_refused_not_reshaped(tmp_path):
    machine = tmp_path / "machine.json"
    text = (REPO / "test-data/machines/vm-2026-11-30/machine.json").read_text()
    machine.write_text(text)
    env = SchedulingEnv(**{**GANG, "jobs": 30, "seed": 7}, args=["--machine", str(machine)])
    assert env.cpus == 16 * 2
    machine.write_text(text.replace('"cpus_per_node": 2', '"cpus_per_node": 4'))
    with pytest.raises(CoschedError, match="has 3 rows and 64 CPUs, not the 3 and 32"):
        env.reset()
    machine.write_text(text)
    _, info = env.reset()  # the refused reset left the settings' seed for this one
    assert info["seed"] == 7
    machine.write_text(text.replace('"cpus_per_node": 2', '"cpus_per_node": 4'))
    with pytest.raises(CoschedError, match="has 3 rows and 64 CPUs, not the 3 and 32"):
        env.reset(seed=1)
    with pytest.raises(CoschedError, match="no decision is pending"):
        env.step(0)
    machine.write_text(text)  # the machine it was made for again: the environment runs on
    obs, _ = env.reset(seed=1)
    assert obs["matrix"].shape == (3, 32)
    env.close()


def test_the_native_run_answers_only_in_turn():
    """A second next() would wait forever for a decision the engine never sends; a choice before the first
    decision would answer nothing. Both are refused at once, and the run goes on."""
    env = SchedulingEnv(**{**GANG, "jobs": 30})
    env.reset(seed=1)
    with pytest.raises(CoschedError, match="first decision only"):
        env._run.next()
    env.step(0)
    run = env._run
    env.close()
    with pytest.raises(CoschedError, match="ended"):
        run.choose(None)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(schemes=["gs", "sb"]), "one scheme"),
        (dict(schemes=["gs-cosched"]), "controller admits its jobs itself"),
        (dict(schemes=["gs"], backfill="easy"), "--backfill"),
        (dict(schemes=["gs"], fast=True), "fast mode"),
        (dict(schemes=["no-such-scheme"]), "no-such-scheme"),
    ],
)
def test_what_a_policy_cannot_decide_is_refused_with_the_reason(settings, message):
    with pytest.raises(CoschedError, match=message):
        SchedulingEnv(**settings)
    with pytest.raises(CoschedError, match=message):
        run_policy(fcfs, **settings)
