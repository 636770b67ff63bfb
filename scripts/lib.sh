# Shared by scripts/run, scripts/test and scripts/bench. Source it; do not run it.

# Debian packages threadcast needs to build, test and run.
TC_APT_PACKAGES=(
  gcc pkg-config meson ninja-build
  libuv1-dev libwebsockets-dev libwebsockets-evlib-uv libhiredis-dev libcjson-dev zlib1g-dev
  libcmocka-dev libjwt-dev redis-server redis-tools
  libssl-dev openssl  # TLS to Redis (src/tls.c); the TLS tests make their certificates with openssl
  python3 python3-venv  # the Python worker (src/worker-python) and its tests: a venv from its lock file
  python3-wheel-whl  # wheel, with which the venv's setuptools builds the worker's own package
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

# Finds the URI of this machine's apt source for a suite, in deb822
# (*.sources) or one-line (*.list) form: tc_apt_uri bookworm-security
tc_apt_uri() {
  local want=$1 f
  {
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      awk -v want="$want" '
        function flush() {
          if (deb && !off && uri != "" && (" " suites " ") ~ (" " want " ")) { print uri; found = 1; exit }
          deb = off = 0; uri = suites = ""
        }
        /^[ \t]*$/ { flush(); next }
        /^Types:/ { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
        /^URIs:/ { uri = $2 }
        /^Suites:/ { $1 = ""; suites = $0 }
        /^Enabled:[ \t]*no/ { off = 1 }
        END { if (!found) flush() }' "$f"
    done
    { cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true; } |
      awk -v want="$want" '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i + 1) == want) print $i }'
  } | awk 'NR == 1'
}

# The Valkey 8 server the store's suites run against a second time
# (scripts/test): prints the path of a valkey-server to run, making it
# available first. Debian 13 has Valkey 8 in main. Debian 12 has none, but
# bookworm-backports has 8.0: its apt source is added for valkey-tools alone
# (pinned: nothing else is taken from backports), and only valkey-tools is
# installed: it holds the server binary (valkey-check-rdb, which is the
# server when called valkey-server), while the valkey-server package would
# install and start a service on 6379, beside redis-server's. The name is a
# symlink in dir (scripts/test's own temporary directory).
#   tc_valkey_server DIR
tc_valkey_server() {
  local dir=$1 codename bin mirror
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if ! dpkg-query -W -f='${Status}' valkey-tools 2>/dev/null | grep -q 'install ok installed'; then
    if [ "$codename" = bookworm ]; then
      mirror=${TC_DEBIAN_MIRROR:-$(tc_apt_uri bookworm)}
      tc_log "adding bookworm-backports for valkey-tools alone (Valkey 8)"
      printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "${mirror:-http://deb.debian.org/debian}" | tc_as_root tee /etc/apt/sources.list.d/threadcast-valkey.sources >/dev/null
      printf 'Package: *\nPin: release a=bookworm-backports\nPin-Priority: -10\n\nPackage: valkey-tools\nPin: release a=bookworm-backports\nPin-Priority: 500\n' |
        tc_as_root tee /etc/apt/preferences.d/threadcast-valkey >/dev/null
    fi
    tc_log "installing: valkey-tools"
    tc_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      tc_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valkey-tools >/dev/null ||
      { echo "could not install valkey-tools" >&2; return 1; }
  fi
  bin=$(command -v valkey-check-rdb) || { echo "valkey-tools has no valkey-check-rdb" >&2; return 1; }
  mkdir -p "$dir" && ln -sf "$bin" "$dir/valkey-server"
  if ! "$dir/valkey-server" --version | grep -q ' v=8\.'; then
    echo "not Valkey 8: $("$dir/valkey-server" --version)" >&2; return 1
  fi
  echo "$dir/valkey-server"
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

# The Python worker's environment (src/worker-python): a venv the project
# makes, filled from a lock file with hashes (pip --require-hashes), then the
# worker itself installed into it without fetching anything more (its build
# backend is the venv's own setuptools). Prints the venv's directory.
#   tc_python_env          the worker's dependencies (requirements.lock)
#   tc_python_env dev      and what its tests need: the Python reference server
#                          (langgraph dev), its SDK, pytest, ruff, the saver's
#                          conformance suite (requirements-dev.lock)
# The venv is build-py/venv (build-py/venv-dev for dev); a lock that changed
# since it was filled fills it again.
tc_python_env() {
  local kind=${1:-} pkg=src/worker-python lock venv stamp py
  lock=$pkg/requirements${kind:+-$kind}.lock
  venv=${TC_PY_VENV:-build-py/venv${kind:+-$kind}}
  stamp=$venv/.threadcast-lock
  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$lock" "$stamp"; then
    echo "$venv"; return 0
  fi
  py=$(command -v python3) || { echo "no python3" >&2; return 1; }
  if ! "$py" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "python3 must be 3.11 or newer, with its venv module (Debian: python3-venv)" >&2; return 1
  fi
  tc_log "python environment $venv from $lock"
  rm -rf "$venv"
  "$py" -m venv "$venv" >&2 || return 1
  "$venv/bin/pip" install --quiet --disable-pip-version-check --require-hashes --no-deps -r "$lock" >&2 || return 1
  # The worker's lock has no setuptools: the one the venv came with builds the package, and
  # needs wheel for it (setuptools 70.1 and later have it inside): Debian's, as the image does.
  if ! "$venv/bin/python" -c 'import setuptools.command.bdist_wheel' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-index /usr/share/python-wheels/wheel-*.whl >&2 || return 1
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --no-build-isolation --no-index -e "$pkg" >&2 || return 1
  cp "$lock" "$stamp"
  echo "$venv"
}
