#!/usr/bin/env bash
# make bench, the AI-agent guard: what its decisions cost a request. wrk runs as
# the guarded command (`faultctl guard -- wrk ...`, the proxy variables mode, as
# a user) against nginx on a private namespace's loopback, the request line in
# absolute form to the guard's forward proxy, interleaved round by round:
#   base       the guard with no rule (every request judged, allowed by default)
#   rules-1k   the guard with a policy of 1,000 rules, none matching, then an allow
#   body-16k   a 16 KiB JSON POST to /v1/messages, the host not an LLM host
#   facts      the same POST to an --llm-host: the streaming scan of the body's
#              top-level JSON (model, max_tokens) and the answer's usage read
#   activity   base with --json-log (the hash-chained activity line per request)
#   detectors  facts with the detectors on: --dlp, --prompt-guard and a
#              --content-policy of 20 lines, each scanning the same 16 KiB body
#   tls        HTTPS terminated: wrk (which verifies no certificate) straight at
#              nginx's TLS port under a root guard, its connections taken by the
#              transparent capture, --terminate-tls --upstream-ca; no target in
#              the issue, and not comparable to base (root, another capture)
# Targets (issue 26): rules-1k >= 0.95x base req/s at c=50 and <= +10 us p50 at
# c=1; facts <= +30 us p50 over body-16k at c=1; activity p99 within 5% of base
# at c=50 (issue 26); detectors >= 0.85x facts req/s and <= +100 us p50 at c=50
# (issue 27: the detectors on vs off, 16 KiB bodies). Then the budget: 20 callers at once against --llm-request-budget 10:
# exactly 10 admitted (a count, not a time).
#
# Usage: scripts/bench-guard.sh BUILD_DIR   (root: the namespace; the guard runs as nobody)
# Everything runs in a network namespace of this run's own, with private ports
# and files under a temporary folder, removed on exit. BENCH_REPS (default 5)
# rounds; BENCH_GUARD_SECONDS (default 2) per wrk run. BENCH_GUARD_VARIANTS
# (default all of them) picks some: "activity" runs base and activity only and
# prints only the ratios those allow (base always runs; facts brings body-16k);
# the budget count runs only when every variant does.
set -euo pipefail

BUILD=$(cd "${1:?usage: scripts/bench-guard.sh BUILD_DIR}" && pwd)
REPS=${BENCH_REPS:-5}
SECS=${BENCH_GUARD_SECONDS:-2}
FAULTCTL=$BUILD/faultctl
for tool in nginx wrk curl setpriv python3 openssl; do
  command -v "$tool" >/dev/null || { echo "bench-guard: $tool is missing; run scripts/install-deps.sh" >&2; exit 1; }
done
[ -x "$FAULTCTL" ] || { echo "bench-guard: $FAULTCTL is missing; build first" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "bench-guard: needs root (a private network namespace)" >&2; exit 1; }

NS=flbench-guard-$$
DIR=$(mktemp -d /tmp/flbench-guard.XXXXXX)
P_WEB=18181
P_TLS=18443
cleanup() {
  local rc=$?
  set +e
  if [ -e "/run/netns/$NS" ]; then
    for pid in $(ip netns pids "$NS" 2>/dev/null); do kill "$pid" 2>/dev/null; done
    sleep 0.3
    for pid in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$NS"
  fi
  rm -rf "$DIR"
  [ -e "/sys/fs/bpf/$NS" ] && rm -rf "/sys/fs/bpf/$NS"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

in_ns() { ip netns exec "$NS" "$@"; }
ip netns add "$NS"
in_ns ip link set lo up

# The upstream: a small answer for GET, an LLM-shaped JSON answer with usage for
# the model API's path.
mkdir -p "$DIR/nginx"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DIR/tls.key" -out "$DIR/tls.pem" \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -days 1 2>/dev/null
cat >"$DIR/nginx.conf" <<EOF
worker_processes 1;
pid $DIR/nginx.pid;
error_log $DIR/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_buffer_size 64k;
  client_body_temp_path $DIR/nginx/body;
  proxy_temp_path $DIR/nginx/proxy; fastcgi_temp_path $DIR/nginx/fcgi;
  uwsgi_temp_path $DIR/nginx/uwsgi; scgi_temp_path $DIR/nginx/scgi;
  server {
    listen 127.0.0.1:$P_WEB;
    location / { return 200 "ok\n"; }
    location = /v1/messages {
      default_type application/json;
      return 200 '{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":4000,"output_tokens":12}}';
    }
  }
  server {
    listen 127.0.0.1:$P_TLS ssl;
    ssl_certificate $DIR/tls.pem;
    ssl_certificate_key $DIR/tls.key;
    location / { return 200 "ok\n"; }
  }
}
EOF
in_ns nginx -c "$DIR/nginx.conf"

# 1,000 rules that match nothing here (other hosts, paths, methods), then the allow.
python3 - "$DIR/rules-1k.yaml" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("apiVersion: faultline.dev/v1\nkind: Policy\nmetadata:\n  name: bench\nspec:\n  guard:\n    rules:\n")
    for i in range(999):
        kind = i % 3
        if kind == 0:
            f.write(f"      - {{name: r{i}, action: deny, host: 'h{i}.blocked.example'}}\n")
        elif kind == 1:
            f.write(f"      - {{name: r{i}, action: deny, path: '/secret-{i}/'}}\n")
        else:
            f.write(f"      - {{name: r{i}, action: deny, method: DELETE, host: '*.zone{i}.example'}}\n")
    f.write("      - {name: local, action: allow, host: '127.0.0.1'}\n")
EOF
"$FAULTCTL" policy validate "$DIR/rules-1k.yaml" >/dev/null

# The content policy of the detectors variant: literals and regexes that the
# body does not hold (a match would deny, and wrk would count non-2xx).
python3 - "$DIR/content.txt" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("# bench: nothing here is in the body\n")
    for i in range(10):
        f.write(f"codename-{i}: project-nightjar-{i}\n")
        f.write(f"ticket-{i}: re:INC-{i}[0-9]{{6}}\n")
EOF

# wrk scripts: the request line in absolute form (the forward proxy's form).
printf 'wrk.path = "http://127.0.0.1:%s/hello"\n' "$P_WEB" >"$DIR/get.lua"
python3 - "$DIR/post.lua" "$P_WEB" <<'EOF'
import json, random, sys
# Prose, not one letter repeated: the prompt guard's readings (base64 and
# leetspeak runs, confusables) and the DLP anchors see what a prompt holds.
words = ("the service returns an error when the cache is cold so please read the logs from "
         "yesterday and summarise which requests failed with a timeout and why the retry did "
         "not help then propose a fix for the handler in src/api/orders.py line 42").split()
rng = random.Random(26)
prompt = ""
while len(prompt) < 16000:
    prompt += " ".join(rng.choice(words) for _ in range(12)) + ". "
prompt = prompt[:16000]
body = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": 512,
                   "model": "claude-sonnet-4-5"}, separators=(",", ":"))
with open(sys.argv[1], "w") as f:
    f.write(f'wrk.method = "POST"\nwrk.path = "http://127.0.0.1:{sys.argv[2]}/v1/messages"\n')
    f.write('wrk.headers["Content-Type"] = "application/json"\n')
    f.write("wrk.body = [[" + body + "]]\n")
EOF
chmod -R a+rX "$DIR"
mkdir -p "$DIR/state" && chown nobody "$DIR/state"

# wrk's output on stdin: prints "RPS P50_US P99_US".
wrk_figures() {
  python3 -c '
import re, sys
text = sys.stdin.read()
def us(v, unit):
    return float(v) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]
rps = re.search(r"Requests/sec:\s+([0-9.]+)", text)
p50 = re.search(r"50%\s+([0-9.]+)(us|ms|s)\b", text)
p99 = re.search(r"99%\s+([0-9.]+)(us|ms|s)\b", text)
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
if not (rps and p50 and p99) or errs:
    sys.stderr.write("bench-guard: wrk did not run cleanly:\n" + text + open(sys.argv[1]).read()[-2000:])
    sys.exit(1)
print(rps.group(1), us(*p50.groups()), us(*p99.groups()))' "$DIR/guard.err"
}

# One wrk run under the guard as nobody: prints "RPS P50_US P99_US".
guarded_wrk() {  # CONNS SCRIPT GUARD_FLAGS...
  local conns=$1 script=$2
  shift 2
  in_ns setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$DIR/state" \
    "$FAULTCTL" guard --terminate-tls "$@" -- \
    sh -c "exec wrk -t1 -c$conns -d${SECS}s -s $DIR/$script --latency \"\$HTTP_PROXY\"" 2>"$DIR/guard.err" | wrk_figures
}

# One wrk run at nginx's TLS port under a root guard (transparent capture,
# TLS terminated): prints "RPS P50_US P99_US".
tls_wrk() {  # CONNS
  in_ns env FAULTLINE_BPFFS_ROOT="/sys/fs/bpf/$NS" FAULTLINE_RUN_DIR="$DIR/run" FAULTLINE_CA_DIR="$DIR/ca-root" \
    FAULTLINE_STATE_DIR="$DIR/state-root" "$FAULTCTL" guard --terminate-tls --upstream-ca "$DIR/tls.pem" -- \
    wrk -t1 -c"$1" -d"${SECS}s" --latency "https://127.0.0.1:$P_TLS/hello" 2>"$DIR/guard.err" | wrk_figures
}

declare -A FLAGS=(
  [base]=""
  [rules-1k]="--policy $DIR/rules-1k.yaml"
  [body-16k]=""
  [facts]="--llm-host 127.0.0.1:$P_WEB"
  [activity]="--json-log $DIR/state/activity.jsonl"
  [detectors]="--llm-host 127.0.0.1:$P_WEB --dlp --prompt-guard --content-policy $DIR/content.txt"
  [dlp]="--llm-host 127.0.0.1:$P_WEB --dlp"
  [prompt-guard]="--llm-host 127.0.0.1:$P_WEB --prompt-guard"
  [content-policy]="--llm-host 127.0.0.1:$P_WEB --content-policy $DIR/content.txt"
  [tls]=""
)
declare -A SCRIPT=([base]=get.lua [rules-1k]=get.lua [body-16k]=post.lua [facts]=post.lua [activity]=get.lua
  [detectors]=post.lua [dlp]=post.lua [prompt-guard]=post.lua [content-policy]=post.lua)
# dlp, prompt-guard and content-policy split the detectors variant by detector:
# run only when named in BENCH_GUARD_VARIANTS (they bring facts).
ALL_VARIANTS="base rules-1k body-16k facts activity detectors tls"
VARIANTS=${BENCH_GUARD_VARIANTS:-$ALL_VARIANTS}
ALL_RUN=yes
for v in $ALL_VARIANTS; do
  case " $VARIANTS " in *" $v "*) ;; *) ALL_RUN=no ;; esac
done
for v in $VARIANTS; do
  [ -n "${FLAGS[$v]+set}" ] || { echo "bench-guard: BENCH_GUARD_VARIANTS: unknown variant '$v' ($ALL_VARIANTS)" >&2; exit 2; }
done
case " $VARIANTS " in *" base "*) ;; *) VARIANTS="base $VARIANTS" ;; esac
for v in detectors dlp prompt-guard content-policy; do
  case " $VARIANTS " in *" $v "*) case " $VARIANTS " in *" facts "*) ;; *) VARIANTS="$VARIANTS facts" ;; esac ;; esac
done
case " $VARIANTS " in *" facts "*) case " $VARIANTS " in *" body-16k "*) ;; *) VARIANTS="$VARIANTS body-16k" ;; esac ;; esac
declare -A RES
echo "guard bench: $REPS rounds of ${SECS}s per variant, interleaved; nginx on a private namespace's loopback"
for round in $(seq 1 "$REPS"); do
  for c in 1 50; do
    for v in $VARIANTS; do
      if [ "$v" = tls ]; then
        RES[$v,$c,$round]=$(tls_wrk "$c")
      else
        # shellcheck disable=SC2086
        RES[$v,$c,$round]=$(guarded_wrk "$c" "${SCRIPT[$v]}" ${FLAGS[$v]})
      fi
      rm -f "$DIR/state/activity.jsonl"
    done
  done
  echo "  round $round done"
done

python3 - "$REPS" "$VARIANTS" <<EOF
import statistics, sys
reps, variants = int(sys.argv[1]), sys.argv[2].split()
raw = """$(for k in "${!RES[@]}"; do echo "$k ${RES[$k]}"; done)"""
data = {}
for line in raw.strip().splitlines():
    key, rps, p50, p99 = line.split()
    v, c, r = key.split(",")
    data.setdefault((v, int(c)), []).append((float(rps), float(p50), float(p99)))
def col(v, c, i):
    xs = sorted(x[i] for x in data[(v, c)])
    return statistics.median(xs), xs[0], xs[-1]
def fmt(m):
    return f"{m[0]:9.1f} [{m[1]:.1f}-{m[2]:.1f}]"
print(f"{'variant':10} {'c':>3} {'req/s median [min-max]':>30} {'p50 us':>24} {'p99 us':>26}")
for c in (1, 50):
    for v in variants:
        print(f"{v:10} {c:>3} {fmt(col(v, c, 0)):>30} {fmt(col(v, c, 1)):>24} {fmt(col(v, c, 2)):>26}")
def verdict(ok):
    return "MET" if ok else "MISSED"
print()
if "rules-1k" in variants:
    rules_rps = col("rules-1k", 50, 0)[0] / col("base", 50, 0)[0]
    rules_p50 = col("rules-1k", 1, 1)[0] - col("base", 1, 1)[0]
    print(f"rules-1k / base req/s at c=50: {rules_rps:.3f}x (target >= 0.95x): {verdict(rules_rps >= 0.95)}")
    print(f"rules-1k - base p50 at c=1: {rules_p50:+.1f} us (target <= +10 us): {verdict(rules_p50 <= 10)}")
if "facts" in variants:
    facts_p50 = col("facts", 1, 1)[0] - col("body-16k", 1, 1)[0]
    print(f"facts - body-16k p50 at c=1: {facts_p50:+.1f} us (target <= +30 us): {verdict(facts_p50 <= 30)}")
if "activity" in variants:
    act_p99 = col("activity", 50, 2)[0] / col("base", 50, 2)[0]
    print(f"activity / base p99 at c=50: {act_p99:.3f}x (target within 5%): {verdict(act_p99 <= 1.05)}")
if "detectors" in variants:
    det_rps = col("detectors", 50, 0)[0] / col("facts", 50, 0)[0]
    det_p50 = col("detectors", 50, 1)[0] - col("facts", 50, 1)[0]
    print(f"detectors / facts req/s at c=50: {det_rps:.3f}x (target >= 0.85x): {verdict(det_rps >= 0.85)}")
    print(f"detectors - facts p50 at c=50: {det_p50:+.1f} us (target <= +100 us): {verdict(det_p50 <= 100)}")
for one in ("dlp", "prompt-guard", "content-policy"):
    if one in variants:
        d1 = col(one, 1, 1)[0] - col("facts", 1, 1)[0]
        r50 = col(one, 50, 0)[0] / col("facts", 50, 0)[0]
        print(f"{one} alone - facts p50 at c=1: {d1:+.1f} us; req/s at c=50: {r50:.3f}x (no target: the split of detectors)")
if "tls" in variants:
    print("tls: HTTPS terminated under a root guard's transparent capture; no target, not a ratio to base")
EOF

# The budget under 20 callers at once: reserve-then-settle admits exactly the budget.
if [ "$ALL_RUN" != yes ]; then
  echo "budget of 10 requests, 20 callers at once: not run (BENCH_GUARD_VARIANTS picks some variants)"
  exit 0
fi
admitted=$(in_ns setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$DIR/state" \
  "$FAULTCTL" guard --state-dir "$DIR/state" --llm-host "127.0.0.1:$P_WEB" --llm-request-budget 10 --enforce -- \
  sh -c "seq 20 | xargs -P 20 -I{} curl -s -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
    -d '{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":64,\"messages\":[]}' http://127.0.0.1:$P_WEB/v1/messages" \
  2>/dev/null | grep -c '^200$' || true)
echo "budget of 10 requests, 20 callers at once: $admitted admitted (target exactly 10): $([ "$admitted" = 10 ] && echo MET || echo MISSED)"
