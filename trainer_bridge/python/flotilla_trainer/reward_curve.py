"""Reward curve of a stored run, as if it had stopped earlier.

  /usr/bin/python3 -m flotilla_trainer.reward_curve runs/arith-grpo/trajectories.db [--per-step 64]

For each length of N trainer steps (every --every steps) it takes the first N x per-step stored
samples, in completion order, and prints the run's summary figures for that length in
name=value form: the mean reward of the first and the last 10% of those samples and the rise.
"""
import argparse
import sqlite3


def rewards(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r for (r,) in con.execute("SELECT reward FROM trajectories ORDER BY seq")]
    finally:
        con.close()


def window_means(values):
    k = max(1, len(values) // 10)
    return sum(values[:k]) / k, sum(values[-k:]) / k


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--per-step", type=int, default=64, help="samples per trainer step")
    ap.add_argument("--every", type=int, default=100, help="print every this many steps")
    a = ap.parse_args()
    r = rewards(a.db)
    total = len(r) // a.per_step
    lengths = list(range(a.every, total + 1, a.every))
    if total and (not lengths or lengths[-1] != total):
        lengths.append(total)
    for steps in lengths:
        start, end = window_means(r[:steps * a.per_step])
        print(f"curve.steps={steps} reward_start={start:.3f} reward_end={end:.3f} rise={end - start:.3f}")


if __name__ == "__main__":
    main()
