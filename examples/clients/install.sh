#!/usr/bin/env bash
# Installs the lock client libraries the adapters under examples/clients/ wrap, at pinned
# versions, into prefixes beside this script:
#   examples/clients/.venv                 Python virtual environment (PyPI)
#   examples/clients/node/node_modules     npm packages
# Usage: examples/clients/install.sh [python|node]...   (no argument: both)
# Needs python3 (with venv) and npm. Running it again is cheap: pinned versions already
# installed are left alone.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

PYTHON_PINS=(
  "redis==8.2.0"
  "python-redis-lock==4.0.1"
  "pottery==3.0.1"
  "kazoo==2.11.0"
)
NODE_PINS=(
  "redlock@5.0.0-beta.2"
  "@sesamecare-oss/redlock@1.4.0"
  "redis-semaphore@5.8.0"
  "ioredis@5.9.3"
  "etcd3@1.1.2"
)

fail() { echo "examples/clients/install.sh: $*" >&2; exit 1; }

install_python() {
  command -v python3 >/dev/null || fail "python3 not found: install Python 3.9 or later"
  if [ ! -x "$here/.venv/bin/python" ]; then
    python3 -m venv "$here/.venv" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
  fi
  "$here/.venv/bin/python" -m pip install --quiet --disable-pip-version-check "${PYTHON_PINS[@]}" \
    || fail "pip could not install ${PYTHON_PINS[*]}"
  "$here/.venv/bin/python" - <<'PY' || fail "the Python libraries installed but do not import"
import redis, redis_lock, pottery, kazoo  # noqa: F401
PY
  echo "examples/clients/install.sh: Python libraries in $here/.venv: ${PYTHON_PINS[*]}"
}

install_node() {
  command -v node >/dev/null || fail "node not found: install Node.js 18 or later"
  command -v npm >/dev/null || fail "npm not found: install npm"
  (cd "$here/node" && npm install --no-audit --no-fund --loglevel=error) \
    || fail "npm could not install ${NODE_PINS[*]}"
  echo "examples/clients/install.sh: Node libraries in $here/node/node_modules: ${NODE_PINS[*]}"
}

targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(python node)
for target in "${targets[@]}"; do
  case "$target" in
    python) install_python ;;
    node) install_node ;;
    *) fail "unknown target $target (python or node)" ;;
  esac
done
