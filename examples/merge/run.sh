#!/usr/bin/env bash
# Three short RL runs of the arith-grpo example from different seeds, merged by model stock and by
# TIES, and every model's reward on the example's held-out prompts side by side. Usage (after
# scripts/build.sh):
#   examples/merge/run.sh [WORK_DIR]        RL_STEPS=150 per run, EVAL_STEPS=16 per evaluation
#
#   1. base: the example's SFT warm start (60 steps) and one RL step; its v0 is the common parent.
#   2. three RL runs from that base with seeds 1, 2, 3 (no SFT); each one's last checkpoint is a parent.
#   3. `flotilla merge` by model_stock and by ties (density 0.5) into model folders.
#   4. every model is evaluated by a frozen run (learning rate 1e-12) on the held-out prompts
#      (seed 99): the engine loads and serves it, the sandbox verifier scores it, and
#      the mean reward over all its samples is printed. The merges are evaluated through
#      `policy.init: merge:RECIPE.yaml`, the RL loop's own path: the run merges, then starts from it.
# The example's task has 100 distinct prompts (single digits a+b): the warm start and the RL runs
# draw only the 80 of `split=train`, the evaluations only the 20 of `split=heldout`, which no
# training run ever saw ((a + 2b) mod 5 == 0; see trainer_bridge/.../task_source.h).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "${1:-$root/runs/merge-example}")
bin=${FLOTILLA_BINARY_DIR:-$root/build}
flotilla=$bin/cli/flotilla
rl_steps=${RL_STEPS:-150}
eval_steps=${EVAL_STEPS:-16}
mkdir -p "$work"

# experiment NAME SEED INIT SFT_STEPS RL_STEPS LR SPLIT (the seed also seeds the prompts' sampler;
# SPLIT: train for the warm start and the RL runs, heldout for the evaluations)
experiment() {
  cat > "$work/$1.yaml" <<YAML
name: merge-$1
state_dir: $work/$1
seed: $2
scaffold: single-turn
sandbox_policy: no-network
policy:
  model: {vocab_size: 272, n_layers: 2, d_model: 64, n_heads: 2, n_kv_heads: 2, head_dim: 32,
          n_experts: 4, top_k: 2, n_shared_experts: 1, expert_hidden: 64, max_context: 64}
  init: $3
datasets:
  - {name: add, source: "builtin:arith?ops=+&max=9&split=$7", weight: 1, max_in_flight: 64}
rollout: {group_size: 8, groups_per_step: 8, max_in_flight: 64, staleness: 2, max_new_tokens: 4,
          temperature: 1.0, std_scaling: true}
trainer: {sft_steps: $4, sft_learning_rate: 0.003, rl_steps: $5, learning_rate: $6, lr_schedule: linear,
          clip_eps: 0.2, publish_every: 1, time_limit: 10m}
YAML
  echo "$work/$1.yaml"
}

latest() { ls "$1"/weights/v*.safetensors | sed 's/.*\/v\([0-9]*\)\.safetensors/\1 &/' | sort -n | tail -n 1 | cut -d' ' -f2; }

mean_reward() {
  /usr/bin/python3 -c 'import sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
n, r = con.execute("SELECT count(*), avg(reward) FROM trajectories").fetchone()
print(f"{r:.4f} over {n} samples")' "$1/trajectories.db"
}

echo "merge example: base (SFT warm start) in $work/base"
"$flotilla" run --fresh "$(experiment base 7 random 60 1 0.0003 train)" | tail -n 1
base=$work/base/weights/v0.safetensors

parents=()
for seed in 1 2 3; do
  echo "merge example: RL run with seed $seed ($rl_steps steps)"
  "$flotilla" run --fresh "$(experiment "seed$seed" "$seed" "$base" 0 "$rl_steps" 0.0003 train)" | tail -n 1
  parents+=("$(latest "$work/seed$seed")")
done

cat > "$work/model_stock.yaml" <<YAML
method: model_stock
base_model: $base
models:
$(for p in "${parents[@]}"; do echo "  - model: $p"; done)
YAML
cat > "$work/ties.yaml" <<YAML
method: ties
base_model: $base
parameters: {density: 0.5, lambda: 1.0}
models:
$(for p in "${parents[@]}"; do echo "  - model: $p"; done)
YAML
for m in model_stock ties; do
  "$flotilla" merge "$work/$m.yaml" --out "$work/merged-$m" --overwrite
done

declare -A inits=([base]=$base [seed1]=${parents[0]} [seed2]=${parents[1]} [seed3]=${parents[2]}
                  [model_stock]=merge:$work/model_stock.yaml [ties]=merge:$work/ties.yaml)
results=()
for name in base seed1 seed2 seed3 model_stock ties; do
  echo "merge example: evaluating $name"
  "$flotilla" run --fresh "$(experiment "eval-$name" 99 "${inits[$name]}" 0 "$eval_steps" 1e-12 heldout)" | tail -n 1
  results+=("$(printf '%-12s reward=%s' "$name" "$(mean_reward "$work/eval-$name")")")
done
echo "merge example: reward on the held-out prompts (frozen policy, $eval_steps steps x 64 samples)"
printf '  %s\n' "${results[@]}"
