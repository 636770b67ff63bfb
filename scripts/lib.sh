# Shared by scripts/run, scripts/test and scripts/bench. Source it; do not run it.

# Debian packages threadcast needs to build, test and run.
TC_APT_PACKAGES=(
  gcc pkg-config meson ninja-build
  libuv1-dev libwebsockets-dev libwebsockets-evlib-uv libhiredis-dev libcjson-dev zlib1g-dev
  libcmocka-dev libjwt-dev redis-server redis-tools
  libssl-dev openssl  # TLS to Redis (src/tls.c); the TLS tests make their certificates with openssl
)

# What scripts/images needs to make base images and build the Dockerfiles
# (as root podman needs neither uidmap nor fuse-overlayfs: the kernel's overlay,
# else the vfs driver).
TC_IMAGE_APT_PACKAGES=(podman debootstrap gpgv debian-archive-keyring)

tc_log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

tc_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root (or sudo) to run: $*" >&2; return 1; fi
}

# Installs whatever of TC_APT_PACKAGES (plus extra arguments) is missing.
tc_install_apt() {
  local missing=() p
  for p in "${TC_APT_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then missing+=(nodejs npm); fi
  [ ${#missing[@]} -eq 0 ] && return 0
  tc_log "installing: ${missing[*]}"
  tc_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  tc_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Configures (once) and builds a meson build directory: tc_build DIR [meson options...]
tc_build() {
  local dir=$1; shift
  local log; log=$(mktemp -t threadcast-build.XXXXXX)
  if [ ! -f "$dir/build.ninja" ] && ! meson setup "$dir" "$@" >"$log" 2>&1; then
    tail -40 "$log" >&2; rm -f "$log"; return 1
  fi
  if ! ninja -C "$dir" >"$log" 2>&1; then   # quiet when it works, the errors when not
    grep -v '^\[' "$log" | tail -60 >&2; rm -f "$log"; return 1
  fi
  rm -f "$log"
}

# The port threadcast will listen on with these arguments: --port N or
# --port=N (the last wins), else THREADCAST_PORT, else 8080.
tc_port_of() {
  local port=${THREADCAST_PORT:-8080}
  while [ $# -gt 0 ]; do
    case "$1" in
      --port) [ $# -ge 2 ] && port=$2; shift ;;
      --port=*) port=${1#--port=} ;;
    esac
    shift
  done
  echo "$port"
}

# Prints a TCP port on 127.0.0.1 that nothing listens on, outside the kernel's
# ephemeral range: a port from inside it can meanwhile become the local port of
# some outgoing connection (tests running beside this make thousands), and a
# listener then fails to bind it.
tc_free_port() {
  local lo=32768 hi=60999 base span p
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  if [ "$lo" -gt 11024 ]; then base=10000 span=$((lo - 10000))
  else base=$((hi + 1)) span=$((65535 - hi)); fi
  for _ in $(seq 1 200); do
    p=$(( base + (RANDOM * 32768 + RANDOM) % span ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
  done
  return 1
}

# Starts redis-server on a free port in a temp dir; sets TC_REDIS_PID, TC_REDIS_PORT, TC_REDIS_DIR.
# Another port is tried when the chosen one was taken meanwhile; a slow start
# is waited for as long as the server lives (up to 60 s).
tc_start_redis() {
  TC_REDIS_DIR=$(mktemp -d -t threadcast-redis.XXXXXX)
  local log="$TC_REDIS_DIR/redis.log"
  for _ in 1 2 3 4 5; do
    TC_REDIS_PORT=$(tc_free_port) || break
    : >"$log"
    redis-server --port "$TC_REDIS_PORT" --bind 127.0.0.1 --dir "$TC_REDIS_DIR" \
      --save '' --appendonly yes --daemonize no --logfile "$log" &
    TC_REDIS_PID=$!
    for _ in $(seq 1 1200); do
      redis-cli -p "$TC_REDIS_PORT" ping >/dev/null 2>&1 && return 0
      kill -0 "$TC_REDIS_PID" 2>/dev/null || break
      sleep 0.05
    done
    if kill -0 "$TC_REDIS_PID" 2>/dev/null; then
      echo "redis-server on port $TC_REDIS_PORT did not answer PING within 60 s" >&2
      break
    fi
    wait "$TC_REDIS_PID" 2>/dev/null || true
    TC_REDIS_PID=
    grep -q 'Address already in use' "$log" || break
  done
  echo "redis-server did not start; the end of its log:" >&2
  tail -20 "$log" >&2
  return 1
}

tc_stop_redis() {
  if [ -n "${TC_REDIS_PID:-}" ]; then
    kill "$TC_REDIS_PID" 2>/dev/null || true
    wait "$TC_REDIS_PID" 2>/dev/null || true
    TC_REDIS_PID=
  fi
  [ -n "${TC_REDIS_DIR:-}" ] && rm -rf "$TC_REDIS_DIR"
  TC_REDIS_DIR=
}
