#!/usr/bin/env bash
# A soak of `tmetric serve` as an operator runs it: beside a real Prometheus (scraping every 2 s,
# evaluating `tmetric rules` every 2 s) for DURATION seconds while services' cgroups are killed
# and made again under the same path (as systemd restarts them) and short-lived cgroups come
# and go. At the end: whether every scrape answered, the recording rules against the gauges they
# stand for, cgroups added and removed, and serve's resident memory over the run.
#
# usage: tests/soak/serve-soak.sh [DURATION_SECONDS] (default 1800; root, cgroup v2, prometheus,
# curl, python3). TMETRIC names the binary (default target/release/tmetric).
set -euo pipefail
cd "$(dirname "$0")/../.."
duration="${1:-1800}"
bin="$(realpath "${TMETRIC:-target/release/tmetric}")"
for tool in prometheus curl python3; do
  command -v "$tool" >/dev/null || { echo "serve-soak: $tool is missing" >&2; exit 77; }
done
root="$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)"
[ -n "$root" ] && [ -w "$root" ] || { echo "serve-soak: no writable cgroup v2 mount (needs root)" >&2; exit 77; }
work="$(mktemp -d)"
base="$(mktemp -d -u "$root/tmetric-soak-XXXXXXXX")"
mkdir "$base"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for d in $(find "$base" -mindepth 1 -type d 2>/dev/null | sort -r); do
    echo 1 > "$d/cgroup.kill" 2>/dev/null || true; rmdir "$d" 2>/dev/null || true
  done
  rmdir "$base" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
serve_port="$(port)"; prom_port="$(port)"
name="${base#"$root"}"

# A service: a shell that wakes every 50 ms (context switches, little CPU), in its own cgroup.
start_service() {
  mkdir -p "$1"
  sh -c 'echo $$ > "$1/cgroup.procs"; exec sh -c "while :; do sleep 0.05; done"' sh "$1" &
  pids+=($!)
}
for s in web db queue cache; do start_service "$base/$s"; done

"$bin" rules -M Software --events -o "$work/rules.yml"
"$bin" serve --listen "127.0.0.1:$serve_port" -M Software --interval 10s \
  --cgroup "$name/**" >"$work/serve.log" 2>&1 &
serve_pid=$!; pids+=("$serve_pid")
cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
rule_files:
  - $work/rules.yml
scrape_configs:
  - job_name: tmetric
    static_configs:
      - targets: ['127.0.0.1:$serve_port']
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$prom_port" --log.level=error >/dev/null 2>&1 &
pids+=($!)

echo "serve-soak: ${duration} s, serve pid $serve_pid on $serve_port, prometheus on $prom_port, cgroups under $name"
start=$(date +%s); restarts=0; ephemeral=0; next_restart=$((start + 20)); next_burst=$((start + 60))
: >"$work/rss.txt"
while [ $(( $(date +%s) - start )) -lt "$duration" ]; do
  now=$(date +%s)
  if [ "$now" -ge "$next_restart" ]; then
    # A service restart: everything in the cgroup killed, the directory removed and made again.
    s=$(printf 'web\ndb\nqueue\ncache\n' | sed -n "$(( restarts % 4 + 1 ))p")
    echo 1 > "$base/$s/cgroup.kill"
    for _ in $(seq 50); do grep -q '^populated 0' "$base/$s/cgroup.events" && break; sleep 0.1; done
    rmdir "$base/$s"; start_service "$base/$s"
    restarts=$((restarts + 1)); next_restart=$((now + 20))
  fi
  if [ "$now" -ge "$next_burst" ]; then
    # Five short-lived jobs, each in a cgroup of its own, gone 30 s later.
    for j in 1 2 3 4 5; do
      d="$base/job-$ephemeral-$j"; mkdir "$d"
      sh -c 'echo $$ > "$1/cgroup.procs"; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done' sh "$d" &
      pids+=($!)
    done
    # Ended as a job scheduler ends them, killed first: on a loaded machine a job can outlive
    # its 30 s, and an rmdir of a cgroup with tasks fails, leaving it counted for the rest of
    # the run (a growing set of targets, not a leak).
    ( sleep 32; for j in 1 2 3 4 5; do
        d="$base/job-$ephemeral-$j"
        echo 1 > "$d/cgroup.kill" 2>/dev/null || true
        for _ in $(seq 50); do grep -q '^populated 0' "$d/cgroup.events" 2>/dev/null && break; sleep 0.1; done
        rmdir "$d" 2>/dev/null || true
      done ) &
    ephemeral=$((ephemeral + 1)); next_burst=$((now + 60))
  fi
  echo "$(( now - start )) $(awk '/VmRSS/ {print $2}' /proc/$serve_pid/status)" >>"$work/rss.txt"
  sleep 5
done

q() { curl -sG "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1"; }
window="${duration}s"
{
  echo "restarts $restarts"; echo "bursts $ephemeral"
  echo "up_min $(q "min_over_time(up{job=\"tmetric\"}[$window])")"
  echo "scrapes $(q "count_over_time(up{job=\"tmetric\"}[$window])")"
  echo "added $(q 'tmetric_cgroups_added_total')"
  echo "removed $(q 'tmetric_cgroups_removed_total')"
  echo "counted $(q 'tmetric_cgroups{state="counted"}')"
  echo "counted_max $(q "max_over_time(tmetric_cgroups{state=\"counted\"}[$window])")"
  # Series younger than the rule's window are left out: Prometheus's rate() extrapolates at
  # most half a scrape interval before a series' first sample, so it reads them low.
  for m in cpus_utilized cs_per_second page_faults_per_second; do
    echo "rule_vs_gauge $m $(q "((tmetric:$m:rate1m - on (instance, job, cgroup, model) avg_over_time(tmetric_$m[1m])) / on (instance, job, cgroup, model) avg_over_time(tmetric_$m[1m])) and on (instance, job, cgroup) (tmetric_$m offset 70s)")"
  done
  echo "rule cpus_utilized $(q 'tmetric:cpus_utilized:rate1m')"
  echo "gauge cpus_utilized $(q 'avg_over_time(tmetric_cpus_utilized[1m])')"
} >"$work/results.txt"
python3 - "$work/results.txt" "$work/rss.txt" <<'PY'
import json, sys
rows = open(sys.argv[1]).read().splitlines()
for row in rows:
    key, _, rest = row.partition(" ")
    if key in ("restarts", "bursts"):
        print(f"{key}: {rest}"); continue
    if key in ("rule", "gauge"):
        metric, _, body = rest.partition(" ")
        res = json.loads(body)["data"]["result"]
        vals = {r["metric"].get("cgroup", "(host)"): float(r["value"][1]) for r in res}
        print(f"{key} {metric}: " + ", ".join(f"{k}={v:.4g}" for k, v in sorted(vals.items())))
        continue
    if key == "rule_vs_gauge":
        metric, _, body = rest.partition(" ")
        res = json.loads(body)["data"]["result"]
        errs = sorted(abs(float(r["value"][1])) for r in res if r["value"][1] not in ("NaN", "+Inf", "-Inf"))
        if errs:
            print(f"rule vs gauge, {metric}: {len(errs)} series older than the window, median |diff| {100*errs[len(errs)//2]:.2f} %, max {100*errs[-1]:.2f} %")
        else:
            print(f"rule vs gauge, {metric}: no series")
        continue
    res = json.loads(rest)["data"]["result"]
    print(f"{key}: " + ", ".join(r["value"][1] for r in res))
rss = [int(l.split()[1]) for l in open(sys.argv[2]) if len(l.split()) == 2]
if rss:
    n = len(rss); q = max(1, n // 4)
    first, last = rss[:q], rss[-q:]
    print(f"serve RSS: first quarter {min(first)/1024:.1f}-{max(first)/1024:.1f} MB, last quarter {min(last)/1024:.1f}-{max(last)/1024:.1f} MB, max {max(rss)/1024:.1f} MB over {n} samples")
PY
