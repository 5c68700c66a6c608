#!/usr/bin/env bash
# make bench, section 5: TCP proxies side by side. wrk against nginx (a small
# body and 1 MiB, one connection and 50) and redis-benchmark against
# redis-server, each direct, through haproxy in TCP mode and through faultd's
# proxy with no toxic, interleaved in the same run. Prints each figure with its
# ratio to direct and the Faultline/haproxy ratio. Then HTTP (layer 7): wrk at
# c=50 direct, through haproxy in HTTP mode, through faultd's proxy in HTTP mode
# (no fault), and the same with an HTTP fault that matches no request (the cost
# of a fault decision per request). Then TLS, small body, c=50, keep-alive,
# against nginx over TLS: pass-through (haproxy in TCP mode; Faultline's proxy in
# HTTP mode with TLS pass-through and an SNI delay fault that matches no client,
# fl-proxyhost) and termination with re-encryption to the verified upstream
# (haproxy; Faultline's terminating proxy with a status fault that matches no
# path). wrk does not verify certificates; each path is checked with curl first.
#
# Usage: scripts/bench-proxy.sh BUILD_DIR   (root; peers from scripts/install-deps.sh)
# Everything runs in a network namespace of this run's own (its loopback only),
# with private ports, config and data under a temporary folder; all of it is
# removed on exit. The client runs on CPU 0; the server and the proxies on the
# last CPU, so a proxy competes with the server it fronts, as on a real host.
# Also: the CPU each proxy process spends per request (its /proc/PID/stat user + system time over a run /
# the requests), against haproxy's (target <= 0.75x), and a concurrency curve (c = 1 to 256, small body);
# rows to BENCH_SUMMARY and points to BENCH_SERIES when set (scripts/bench.sh: results.json, report.html).
# BENCH_REPS (default 3) rounds; BENCH_PROXY_SECONDS (default 2) per wrk run.
set -euo pipefail

BUILD=$(cd "${1:?usage: scripts/bench-proxy.sh BUILD_DIR}" && pwd)
REPS=${BENCH_REPS:-3}
SECS=${BENCH_PROXY_SECONDS:-2}
FAULTD=$BUILD/faultd
PROXYHOST=$BUILD/selftests/proxy/fl-proxyhost
for tool in nginx haproxy redis-server redis-benchmark wrk curl taskset openssl; do
  command -v "$tool" >/dev/null || { echo "bench-proxy: $tool is missing; run scripts/install-deps.sh" >&2; exit 1; }
done
[ -x "$FAULTD" ] || { echo "bench-proxy: $FAULTD is missing; build first" >&2; exit 1; }
[ -x "$PROXYHOST" ] || { echo "bench-proxy: $PROXYHOST is missing; build first" >&2; exit 1; }

NS=flbench-proxy-$$
DIR=$(mktemp -d /tmp/flbench-proxy.XXXXXX)
CPU_CLIENT=0
CPU_SERVER=$(($(nproc) - 1))
# Ports inside the private namespace.
P_NGINX=18080 P_REDIS=16379 P_HA_WEB=28080 P_HA_REDIS=26379 P_FL_WEB=38080 P_FL_REDIS=36379 P_API=18474
P_HA_L7=28081 P_FL_L7=38081 P_FL_L7F=38082
P_NGINX_TLS=18443 P_HA_TLS_PASS=28443 P_HA_TLS_TERM=28444
TLS_HOST=bench.fl.test  # in the namespace's own hosts file (/etc/netns/NS/hosts, read by ip netns exec)

cleanup() {
  local rc=$?
  set +e
  if [ -e "/run/netns/$NS" ]; then
    for pid in $(ip netns pids "$NS" 2>/dev/null); do kill "$pid" 2>/dev/null; done
    sleep 0.3
    for pid in $(ip netns pids "$NS" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$NS"
  fi
  rm -rf "$DIR" "/etc/netns/$NS"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

in_ns() { ip netns exec "$NS" "$@"; }
on_server() { in_ns taskset -c "$CPU_SERVER" "$@"; }
on_client() { in_ns taskset -c "$CPU_CLIENT" "$@"; }

wait_port() {
  for _ in $(seq 100); do
    in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "bench-proxy: nothing listens on port $1 ($2)" >&2
  return 1
}

ip netns add "$NS"
ip -n "$NS" link set lo up
mkdir -p "$DIR/www" "$DIR/tmp"
head -c 1048576 /dev/urandom >"$DIR/www/big"
printf 'ok\n' >"$DIR/www/small"
chmod 755 "$DIR" "$DIR/www" && chmod 644 "$DIR/www/big" "$DIR/www/small"  # nginx's worker is not root
mkdir -p "/etc/netns/$NS"
printf '127.0.0.1 localhost\n127.0.0.1 %s\n' "$TLS_HOST" >"/etc/netns/$NS/hosts"
# The upstream's CA and leaf (EC P-256, as the local CA mints), haproxy's
# front certificate (the same leaf), all for this run only.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=flbench CA $$" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
  -keyout "$DIR/ca.key" -out "$DIR/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$TLS_HOST" \
  -keyout "$DIR/up.key" -out "$DIR/up.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' \
  "$TLS_HOST" >"$DIR/up.ext"
openssl x509 -req -in "$DIR/up.csr" -CA "$DIR/ca.pem" -CAkey "$DIR/ca.key" -CAcreateserial -days 2 \
  -extfile "$DIR/up.ext" -out "$DIR/up.pem" 2>/dev/null
cat "$DIR/up.pem" "$DIR/up.key" >"$DIR/front.pem"
chmod 644 "$DIR/up.key"  # nginx reads it as root before dropping privileges; this folder is the run's

cat >"$DIR/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $DIR/nginx.pid;
error_log $DIR/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $DIR/tmp/body;
  proxy_temp_path $DIR/tmp/proxy;
  fastcgi_temp_path $DIR/tmp/fastcgi;
  uwsgi_temp_path $DIR/tmp/uwsgi;
  scgi_temp_path $DIR/tmp/scgi;
  keepalive_requests 1000000;
  sendfile on;
  server {
    listen 127.0.0.1:$P_NGINX reuseport;
    root $DIR/www;
  }
  server {
    listen 127.0.0.1:$P_NGINX_TLS ssl reuseport;
    ssl_certificate $DIR/up.pem;
    ssl_certificate_key $DIR/up.key;
    root $DIR/www;
  }
}
CONF
cat >"$DIR/haproxy.cfg" <<CONF
global
  nbthread 1
  maxconn 4000
defaults
  mode tcp
  timeout connect 5s
  timeout client 60s
  timeout server 60s
listen web
  bind 127.0.0.1:$P_HA_WEB
  server nginx 127.0.0.1:$P_NGINX
listen redis
  bind 127.0.0.1:$P_HA_REDIS
  server redis 127.0.0.1:$P_REDIS
listen web_http
  mode http
  bind 127.0.0.1:$P_HA_L7
  server nginx 127.0.0.1:$P_NGINX
listen tls_pass
  bind 127.0.0.1:$P_HA_TLS_PASS
  server nginx 127.0.0.1:$P_NGINX_TLS
listen tls_term
  mode http
  bind 127.0.0.1:$P_HA_TLS_TERM ssl crt $DIR/front.pem alpn http/1.1
  server nginx 127.0.0.1:$P_NGINX_TLS ssl verify required ca-file $DIR/ca.pem sni str($TLS_HOST) verifyhost $TLS_HOST alpn http/1.1
CONF
on_server nginx -c "$DIR/nginx.conf" -p "$DIR" >/dev/null 2>&1 &
on_server redis-server --port "$P_REDIS" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" \
  --daemonize no --logfile "$DIR/redis.log" >/dev/null 2>&1 &
on_server haproxy -f "$DIR/haproxy.cfg" -db >"$DIR/haproxy.log" 2>&1 &
# faultd with one proxy worker, as haproxy has one thread and nginx one worker.
FAULTLINE_RUN_DIR=$DIR/run on_server "$FAULTD" --foreground --socket "$DIR/faultd.sock" --metrics off \
  --toxiproxy "127.0.0.1:$P_API" --proxy-workers 1 >"$DIR/faultd.log" 2>&1 &
wait_port "$P_NGINX" nginx
wait_port "$P_REDIS" redis-server
wait_port "$P_HA_WEB" haproxy
wait_port "$P_API" "faultd's Toxiproxy API"
for p in "web $P_FL_WEB $P_NGINX" "redis $P_FL_REDIS $P_REDIS"; do
  set -- $p
  in_ns curl -sf -X POST "http://127.0.0.1:$P_API/proxies" \
    -d "{\"name\":\"$1\",\"listen\":\"127.0.0.1:$2\",\"upstream\":\"127.0.0.1:$3\"}" >/dev/null ||
    { echo "bench-proxy: faultd refused the $1 proxy:" >&2; cat "$DIR/faultd.log" >&2; exit 1; }
done
wait_port "$P_FL_WEB" "faultd's web proxy"
# Layer 7: one proxy in HTTP mode with no fault, one with a fault no request matches.
for p in "web_http $P_FL_L7" "web_fault $P_FL_L7F"; do
  set -- $p
  in_ns curl -sf -X POST "http://127.0.0.1:$P_API/proxies" \
    -d "{\"name\":\"$1\",\"listen\":\"127.0.0.1:$2\",\"upstream\":\"127.0.0.1:$P_NGINX\"}" >/dev/null ||
    { echo "bench-proxy: faultd refused the $1 proxy:" >&2; cat "$DIR/faultd.log" >&2; exit 1; }
done
in_ns curl -sf -X POST "http://127.0.0.1:$P_API/proxies/web_http/http_limits" -d '{"max_headers":100}' >/dev/null &&
  in_ns curl -sf -X POST "http://127.0.0.1:$P_API/proxies/web_fault/http_faults" \
    -d '{"name":"never","type":"status","match":{"path":"/never"},"attributes":{"status":503}}' >/dev/null ||
  { echo "bench-proxy: faultd refused HTTP mode:" >&2; cat "$DIR/faultd.log" >&2; exit 1; }
wait_port "$P_HA_L7" "haproxy in HTTP mode"
# Faultline's TLS proxies, each alone in a process (faultd's API has no TLS
# mode): they run until the fifo's writer (this shell) goes.
mkfifo "$DIR/hold"
on_server "$PROXYHOST" "127.0.0.1:$P_NGINX_TLS" ring sni <"$DIR/hold" >"$DIR/fl-pass.out" 2>&1 &
on_server "$PROXYHOST" "127.0.0.1:$P_NGINX_TLS" ring terminate "$DIR/flca" "$DIR/ca.pem" <"$DIR/hold" \
  >"$DIR/fl-term.out" 2>&1 &
exec 9>"$DIR/hold"
listen_port() {
  for _ in $(seq 100); do
    grep -q '^listen ' "$1" 2>/dev/null && { sed -n 's/^listen .*:\([0-9]*\)$/\1/p' "$1"; return 0; }
    sleep 0.05
  done
  echo "bench-proxy: fl-proxyhost did not start:" >&2
  cat "$1" >&2
  return 1
}
P_FL_TLS_PASS=$(listen_port "$DIR/fl-pass.out")
P_FL_TLS_TERM=$(listen_port "$DIR/fl-term.out")
wait_port "$P_HA_TLS_TERM" "haproxy terminating TLS"

# Each path answers the whole body, directly and through each proxy.
for port in $P_NGINX $P_HA_WEB $P_FL_WEB $P_HA_L7 $P_FL_L7 $P_FL_L7F; do
  for f in small big; do
    got=$(in_ns curl -sf -o /dev/null -w '%{size_download}' "http://127.0.0.1:$port/$f") || got=error
    [ "$got" = "$(stat -c %s "$DIR/www/$f")" ] ||
      { echo "bench-proxy: GET /$f on port $port gave $got bytes" >&2; exit 1; }
  done
done

# Over TLS: each path gives the whole body to curl trusting only the CA that should sign it.
for t in "$P_NGINX_TLS|$DIR/ca.pem" "$P_HA_TLS_PASS|$DIR/ca.pem" "$P_FL_TLS_PASS|$DIR/ca.pem" \
  "$P_HA_TLS_TERM|$DIR/ca.pem" "$P_FL_TLS_TERM|$DIR/flca/ca.pem"; do
  IFS='|' read -r port ca <<<"$t"
  got=$(in_ns curl -sf --cacert "$ca" -o /dev/null -w '%{size_download}' "https://$TLS_HOST:$port/small") || got=error
  [ "$got" = "$(stat -c %s "$DIR/www/small")" ] ||
    { echo "bench-proxy: GET https://$TLS_HOST:$port/small gave $got bytes" >&2; cat "$DIR"/fl-*.out >&2; exit 1; }
done

# The proxies' processes, whose CPU time each run is charged: found in the
# namespace by name (and, for the two fl-proxyhost, by their mode).
pid_in_ns() {
  local p
  for p in $(ip netns pids "$NS"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$1" ] || continue
    [ -z "${2:-}" ] || tr '\0' ' ' <"/proc/$p/cmdline" | grep -qw -- "$2" || continue
    echo "$p"
    return 0
  done
  echo "bench-proxy: no $1 ${2:-}process in $NS" >&2
  return 1
}
PID_HA=$(pid_in_ns haproxy)
PID_FL=$(pid_in_ns faultd)
PID_FL_PASS=$(pid_in_ns fl-proxyhost sni)
PID_FL_TERM=$(pid_in_ns fl-proxyhost terminate)
HZ=$(getconf CLK_TCK)
# user + system time of PID so far, in clock ticks (0 for no PID)
cpu_ticks() { if [ -n "${1:-}" ]; then awk '{ print $14 + $15 }' "/proc/$1/stat"; else echo 0; fi; }

# wrk PORT PATH CONNECTIONS [BASE] [PID] -> "REQ_PER_S P50_US MB_PER_S CPU_US_PER_REQ" (BASE: default
# http://127.0.0.1; CPU_US_PER_REQ: PID's CPU time over the run / the requests, 0 without a PID)
wrk_run() {
  local before after out
  before=$(cpu_ticks "${5:-}")
  out=$(on_client wrk -t1 -c"$3" -d"${SECS}s" --latency "${4:-http://127.0.0.1}:$1$2" 2>&1 | awk '
    /Requests\/sec:/ { rps = $2 }
    /Transfer\/sec:/ { v = $2; if (v ~ /GB$/) m = v * 1024; else if (v ~ /MB$/) m = v + 0; else if (v ~ /KB$/) m = v / 1024; else m = v / 1048576 }
    /^ +50%/ { v = $2; if (v ~ /us$/) p = v + 0; else if (v ~ /ms$/) p = v * 1000; else p = v * 1e6 }
    END { if (rps == "") exit 1; printf "%s %s %s\n", rps, p, m }')
  after=$(cpu_ticks "${5:-}")
  awk -v o="$out" -v t=$((after - before)) -v hz="$HZ" -v s="$SECS" 'BEGIN {
    split(o, f, " "); req = f[1] * s; printf "%s %.1f\n", o, (req > 0) ? t / hz * 1e6 / req : 0 }'
}
# redis-benchmark PORT -> "GET_PER_S"
redis_run() {
  on_client redis-benchmark -h 127.0.0.1 -p "$1" -t get -n 100000 -c 50 -q --csv 2>/dev/null |
    awk -F'"' '/"GET"/ { print $4 }'
}

declare -A R
ROWS=("small c=1|/small|1" "small c=50|/small|50" "1MiB c=1|/big|1" "1MiB c=50|/big|50")
TARGETS=("direct|$P_NGINX|$P_REDIS|" "haproxy|$P_HA_WEB|$P_HA_REDIS|$PID_HA" "faultline|$P_FL_WEB|$P_FL_REDIS|$PID_FL")
SWEEP=(1 4 16 64 256)  # the concurrency curve: small body, each target
for rep in $(seq "$REPS"); do
  for row in "${ROWS[@]}"; do
    IFS='|' read -r name path conns <<<"$row"
    for t in "${TARGETS[@]}"; do
      IFS='|' read -r who web _ pid <<<"$t"
      R["$name|$who"]+="$(wrk_run "$web" "$path" "$conns" "" "$pid");"
    done
  done
  for c in "${SWEEP[@]}"; do
    for t in "${TARGETS[@]}"; do
      IFS='|' read -r who web _ pid <<<"$t"
      R["sweep$c|$who"]+="$(wrk_run "$web" /small "$c" "" "$pid");"
    done
  done
  for t in "${TARGETS[@]}"; do
    IFS='|' read -r who _ redis <<<"$t"
    R["redis|$who"]+="$(redis_run "$redis");"
  done
  for t in "direct|$P_NGINX|" "haproxy|$P_HA_L7|$PID_HA" "faultline|$P_FL_L7|$PID_FL" "faultline_fault|$P_FL_L7F|$PID_FL"; do
    IFS='|' read -r who port pid <<<"$t"
    R["l7|$who"]+="$(wrk_run "$port" /small 50 "" "$pid");"
  done
  for t in "tls_pass|direct|$P_NGINX_TLS|" "tls_pass|haproxy|$P_HA_TLS_PASS|$PID_HA" \
    "tls_pass|faultline|$P_FL_TLS_PASS|$PID_FL_PASS" "tls_term|direct|$P_NGINX_TLS|" \
    "tls_term|haproxy|$P_HA_TLS_TERM|$PID_HA" "tls_term|faultline|$P_FL_TLS_TERM|$PID_FL_TERM"; do
    IFS='|' read -r row who port pid <<<"$t"
    R["$row|$who"]+="$(wrk_run "$port" /small 50 "https://$TLS_HOST" "$pid");"
  done
done

# median of field F of the ';'-separated samples
med() { tr ';' '\n' <<<"$1" | awk -v f="$2" 'NF { print $f }' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", (b > 0) ? a / b : 0 }'; }

echo "   (medians of $REPS rounds, ${SECS} s per wrk run; ratios against direct; F/H = Faultline over haproxy)"
printf '   %-13s %12s %22s %22s %8s\n' "row" "direct" "haproxy" "faultline" "F/H"
for row in "${ROWS[@]}"; do
  name=${row%%|*}
  d=$(med "${R[$name|direct]}" 1) h=$(med "${R[$name|haproxy]}" 1) f=$(med "${R[$name|faultline]}" 1)
  printf '   %-13s %10.0f/s %12.0f/s (%s) %12.0f/s (%s) %8s\n' "$name" "$d" "$h" "$(ratio "$h" "$d")" "$f" \
    "$(ratio "$f" "$d")" "$(ratio "$f" "$h")"
  if [[ $name == *"c=1" ]]; then
    d=$(med "${R[$name|direct]}" 2) h=$(med "${R[$name|haproxy]}" 2) f=$(med "${R[$name|faultline]}" 2)
    printf '   %-13s %10.0fus %+13.0fus %+20.0fus\n' "  p50" "$d" "$(awk -v a="$h" -v b="$d" 'BEGIN{print a-b}')" \
      "$(awk -v a="$f" -v b="$d" 'BEGIN{print a-b}')"
  fi
  if [[ $name == 1MiB* ]]; then
    d=$(med "${R[$name|direct]}" 3) h=$(med "${R[$name|haproxy]}" 3) f=$(med "${R[$name|faultline]}" 3)
    printf '   %-13s %8.0fMB/s %10.0fMB/s (%s) %10.0fMB/s (%s) %8s\n' "  throughput" "$d" "$h" "$(ratio "$h" "$d")" \
      "$f" "$(ratio "$f" "$d")" "$(ratio "$f" "$h")"
  fi
done
d=$(med "${R[redis|direct]}" 1) h=$(med "${R[redis|haproxy]}" 1) f=$(med "${R[redis|faultline]}" 1)
printf '   %-13s %10.0f/s %12.0f/s (%s) %12.0f/s (%s) %8s\n' "redis GET c50" "$d" "$h" "$(ratio "$h" "$d")" "$f" \
  "$(ratio "$f" "$d")" "$(ratio "$f" "$h")"
echo "   HTTP (layer 7), small body, c=50, keep-alive: haproxy in HTTP mode; faultd's proxy in HTTP mode"
d=$(med "${R[l7|direct]}" 1) h=$(med "${R[l7|haproxy]}" 1) f=$(med "${R[l7|faultline]}" 1) g=$(med "${R[l7|faultline_fault]}" 1)
printf '   %-13s %10.0f/s %12.0f/s (%s) %12.0f/s (%s) %8s\n' "L7 no fault" "$d" "$h" "$(ratio "$h" "$d")" "$f" \
  "$(ratio "$f" "$d")" "$(ratio "$f" "$h")"
printf '   %-13s %10s %25s %12.0f/s (%s) %8s   (a fault that matches nothing: %s of no fault)\n' "L7 1 fault" "" "" "$g" \
  "$(ratio "$g" "$d")" "$(ratio "$g" "$h")" "$(ratio "$g" "$f")"
echo "   TLS, small body, c=50, keep-alive, to nginx over TLS: pass-through (haproxy TCP mode; Faultline with an"
echo "   SNI fault matching no client), and terminating + re-encrypting to the verified upstream (both)"
for row in "tls_pass|TLS pass" "tls_term|TLS terminate"; do
  IFS='|' read -r key label <<<"$row"
  d=$(med "${R[$key|direct]}" 1) h=$(med "${R[$key|haproxy]}" 1) f=$(med "${R[$key|faultline]}" 1)
  printf '   %-13s %10.0f/s %12.0f/s (%s) %12.0f/s (%s) %8s\n' "$label" "$d" "$h" "$(ratio "$h" "$d")" "$f" \
    "$(ratio "$f" "$d")" "$(ratio "$f" "$h")"
done

# CPU per request: the proxy process's user + system time over each run / the
# requests it carried (clock ticks of 1/$HZ s); the proxy that spends less
# leaves more of the 2 CPUs to the server. Target: Faultline at most 0.75x haproxy.
lo_hi() { tr ';' '\n' <<<"$1" | awk -v f="$2" 'NF { print $f }' | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
row_out() { [ -n "${BENCH_SUMMARY:-}" ] && printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$BENCH_SUMMARY" || true; }
echo "   CPU per request of the proxy process (us, median of $REPS [min-max]); F/H target <= 0.75x"
printf '   %-13s %22s %22s %8s %s\n' "row" "haproxy" "faultline" "F/H" ""
for row in "small c=1" "small c=50" "1MiB c=1" "1MiB c=50" "l7" "tls_pass" "tls_term"; do
  h=$(med "${R[$row|haproxy]}" 4) f=$(med "${R[$row|faultline]}" 4)
  r=$(awk -v a="$f" -v b="$h" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }')
  v=$(awk -v r="$r" -v h="$h" 'BEGIN { print (h > 0 && r <= 0.75) ? "MET" : "MISSED" }')
  printf '   %-13s %12.1f [%s] %12.1f [%s] %7sx %s\n' "$row" "$h" "$(lo_hi "${R[$row|haproxy]}" 4)" "$f" \
    "$(lo_hi "${R[$row|faultline]}" 4)" "$r" "$v"
  row_out "5 proxy" "CPU per request, $row (faultline; haproxy $h us)" "$f us [$(lo_hi "${R[$row|faultline]}" 4)]" \
    "${r}x" "<= 0.75x haproxy" "$v"
done

# The concurrency curve (small body): req/s and CPU per request at each c.
echo "   small body against concurrency (req/s, median of $REPS; CPU us per request)"
printf '   %-6s %18s %18s %18s\n' c direct haproxy faultline
for c in "${SWEEP[@]}"; do
  line=$(printf '   %-6s' "$c")
  for who in direct haproxy faultline; do
    q=$(med "${R[sweep$c|$who]}" 1) u=$(med "${R[sweep$c|$who]}" 4)
    line+=$(printf ' %10.0f/s %5.1fus' "$q" "$u")
    if [ -n "${BENCH_SERIES:-}" ]; then
      printf '{"plot":"proxy req/s against concurrency (small body)","x_label":"connections","y_label":"req/s","series":"%s","x":%s,"y":%s}\n' \
        "$who" "$c" "$q" >>"$BENCH_SERIES"
      [ "$who" = direct ] || printf '{"plot":"proxy CPU per request against concurrency (small body)","x_label":"connections","y_label":"us of the proxy CPU per request","series":"%s","x":%s,"y":%s}\n' \
        "$who" "$c" "$u" >>"$BENCH_SERIES"
    fi
  done
  echo "$line"
done
