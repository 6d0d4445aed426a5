#!/usr/bin/env bash
# A two-node Ray cluster on this machine, for tests: a head node and a worker node that
# carries its own resource label (`worker_node`), both on this machine.
#   infra/local_cluster.sh start    # prints the address to pass as --address
#   eval "$(infra/local_cluster.sh env)"   # what a client (alignflow, ray.init) needs
#   infra/local_cluster.sh status
#   infra/local_cluster.sh stop     # ends only this cluster's processes (by PID), not other Ray
#   infra/local_cluster.sh kill-worker   # SIGKILL the worker node only (a node crash)
#   infra/local_cluster.sh start-worker  # start the worker node again (joins the head)
# Loopback: Ray refuses 127.0.0.1 as a node address in a multi-node cluster (it resolves
# it to the machine's own address, and its single-machine switch forbids a second node), so
# the nodes listen on this machine's address; Ray's token authentication keeps everyone
# else out (the token lives in $CLUSTER_DIR/auth_token, mode 600).
# Settings (environment): RAY_PORT (per user: 20000 + 4 × (uid mod 2000); it and the next
# three ports are used), HEAD_CPUS (1), WORKER_CPUS (1), WORKER_RESOURCE (worker_node),
# CLUSTER_DIR (per user: /tmp/alignflow-cluster-$USER), RAY (ray on PATH, else .venv/bin/ray).
# Two users of one machine each get their own cluster by default.
set -euo pipefail

RAY_PORT="${RAY_PORT:-$((20000 + ($(id -u) % 2000) * 4))}"
HEAD_CPUS="${HEAD_CPUS:-1}"
WORKER_CPUS="${WORKER_CPUS:-1}"
WORKER_RESOURCE="${WORKER_RESOURCE:-worker_node}"
CLUSTER_DIR="${CLUSTER_DIR:-/tmp/alignflow-cluster-$(id -un)}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
RAY="${RAY:-$(command -v ray || echo "$HERE/.venv/bin/ray")}"
NODE_IP="$(hostname -I 2>/dev/null | awk '{print $1}')"
ADDRESS="${NODE_IP:-127.0.0.1}:${RAY_PORT}"

common=(--disable-usage-stats)
export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$CLUSTER_DIR/auth_token"
# How fast the head's GCS gives up on a lost node: alignflow's choice, the same as
# tasks/simulate/node_health.py (which says why; tests/infra checks they agree).
export RAY_health_check_period_ms=500 RAY_health_check_timeout_ms=5000 \
  RAY_health_check_failure_threshold=3
# Ray starts workers 15 steps below their raylet's priority (its worker_niceness): the
# model work would starve on a busy machine. 0 runs them at this script's priority; a
# RAY_worker_niceness of the caller's is kept (flows/ray/niceness.py says why).
export RAY_worker_niceness="${RAY_worker_niceness:-0}"

start() {
  mkdir -p "$CLUSTER_DIR"
  if [ ! -s "$RAY_AUTH_TOKEN_PATH" ]; then
    (umask 077; od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$RAY_AUTH_TOKEN_PATH")
  fi
  "$RAY" start --head --port="$RAY_PORT" --temp-dir="$CLUSTER_DIR" "${common[@]}" \
    --num-cpus="$HEAD_CPUS" --num-gpus=0 --resources='{"head_node": 1}' \
    --include-dashboard=false --ray-client-server-port=$((RAY_PORT + 1)) \
    --dashboard-agent-listen-port=$((RAY_PORT + 2)) >"$CLUSTER_DIR/head.log" 2>&1
  start_worker
}

start_worker() {
  "$RAY" start --address="$ADDRESS" "${common[@]}" \
    --num-cpus="$WORKER_CPUS" --num-gpus=0 --resources="{\"$WORKER_RESOURCE\": 1}" \
    --dashboard-agent-listen-port=$((RAY_PORT + 3)) >>"$CLUSTER_DIR/worker.log" 2>&1
  echo "$ADDRESS"
}

# The cluster's processes: those whose command line names its own temp dir, and its Ray
# Client server (whose command line names only the cluster's address).
cluster_pids() {
  ps -eo pid=,args= | awk -v dir="$CLUSTER_DIR" -v client="client.server --address=$ADDRESS " \
    '(index($0, dir) || index($0, client)) && !index($0, "awk") {print $1}'
}

stop() {
  local pids
  pids="$(cluster_pids | grep -v "^$$\$" || true)"
  [ -z "$pids" ] && { echo "no cluster running under $CLUSTER_DIR"; return 0; }
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 2
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
  echo "stopped $(echo "$pids" | wc -w) processes"
}

# The worker node's processes: its raylet (the one whose resources name $WORKER_RESOURCE),
# everything the raylet started (agents, Ray workers, actors), and its log monitor.
worker_pids() {
  local raylets pid suffix
  raylets="$(cluster_pids | while read -r pid; do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "raylet/raylet .*[=,]$WORKER_RESOURCE,1" \
      && echo "$pid"; done || true)"
  for pid in $raylets; do
    echo "$pid"
    descendants "$pid"
    suffix="$(tr '\0' '\n' <"/proc/$pid/cmdline" | sed -n 's|^--stdout_filepath=.*/raylet\(.*\)\.out$|\1|p')"
    [ -n "$suffix" ] || continue  # (the head's files have none; never its log monitor)
    cluster_pids | while read -r p; do
      tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "/log_monitor$suffix\.out" && echo "$p"
    done || true
  done
}

descendants() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$child"
    descendants "$child"
  done
}

kill_worker() {
  local pids
  pids="$(worker_pids | sort -u)"
  [ -z "$pids" ] && { echo "no worker node running under $CLUSTER_DIR"; return 0; }
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null || true; done
  echo "killed $(echo "$pids" | wc -w) processes of the worker node"
}

env_lines() {
  echo "export RAY_ADDRESS=$ADDRESS RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH"
}

status() {
  RAY_ADDRESS="$ADDRESS" "$RAY" status 2>/dev/null || echo "no cluster at $ADDRESS"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  start-worker) start_worker ;;
  kill-worker) kill_worker ;;
  status) status ;;
  env) env_lines ;;
  *) echo "usage: $0 start|stop|status|env|start-worker|kill-worker" >&2; exit 2 ;;
esac
