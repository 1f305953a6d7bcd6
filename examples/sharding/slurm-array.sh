#!/usr/bin/env bash
# A kvconform campaign in 4 shards as a Slurm job array, merged by a job that waits for it
# (docs/sharding.md). Submit from the repository root (kvconform on PATH):
#   bash examples/sharding/slurm-array.sh
# It submits itself as the array (`--array=0-3`; any MIN-MAX[:STEP] range works, kvconform counts
# the shard from SLURM_ARRAY_TASK_MIN and SLURM_ARRAY_TASK_STEP), then the merge with
# --dependency=afterok on the whole array.
#SBATCH --job-name=kvconform-shard
#SBATCH --array=0-3
#SBATCH --cpus-per-task=1
#SBATCH --output=kvconform-%A_%a.out
set -u
if [ -z "${SLURM_ARRAY_TASK_ID:-}" ]; then  # on the login node: submit the array and the merge
  job=$(sbatch --parsable "$0")
  sbatch --job-name=kvconform-merge --dependency=afterok:"$job" --output=kvconform-%j-merge.out \
    --wrap "kvconform merge reports/$job/shard-* --report-dir reports/$job/merged"
  echo "shards: job $job; merged reports: reports/$job/merged"
  exit
fi
# One task: the shard comes from SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT.
kvconform fuzz --iterations 20000 --no-write --report-dir "reports/$SLURM_ARRAY_JOB_ID/shard-$SLURM_ARRAY_TASK_ID"
status=$?
[ "$status" -le 1 ]  # 0 pass, 1 a failure: the merge decides (afterok needs 0); 2 bad usage fails the task
