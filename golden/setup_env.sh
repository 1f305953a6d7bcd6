#!/usr/bin/env bash
# Create golden/.venv-VERSION with the pinned requirements of golden/requirements-VERSION.txt.
#
#   bash golden/setup_env.sh 4.57.6
#   bash golden/setup_env.sh 5.24.0
#
# The venv itself lives in the cache, named by the content it was built from:
#   ${KVC_CACHE:-$HOME/.cache/kvconform}/golden-VERSION-<16 hex of sha256(requirements, python X.Y)>
# and golden/.venv-VERSION is a symlink to it, so a second checkout (a CI clone) reuses it and an
# edited requirements file gets a fresh one. A stamp file inside it, written last, marks a complete
# install; an interrupted one is redone. Concurrent callers serialize on a lock file.
# Installs with make_venv (scripts/venv.sh: uv, else pip) and --no-deps (everything is pinned, so the
# installer can never pull another torch),
# then `pip check` and an import check of torch 2.13.0 + the requested transformers version.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 TRANSFORMERS_VERSION   (one of: $(ls "$(dirname "$0")" | sed -n 's/^requirements-\(.*\)\.txt$/\1/p' | tr '\n' ' '))" >&2
  exit 2
fi
VERSION="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
REQ="$HERE/requirements-$VERSION.txt"
LINK="$HERE/.venv-$VERSION"
PYTHON="${PYTHON:-python3}"

if [ ! -f "$REQ" ]; then
  echo "setup_env: no requirements file $REQ" >&2
  exit 2
fi

WANT="$(sha256sum "$REQ" | cut -d' ' -f1) $("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
CACHE="${KVC_CACHE:-$HOME/.cache/kvconform}"
VENV="$CACHE/golden-$VERSION-$(printf '%s' "$WANT" | sha256sum | cut -c1-16)"
STAMP="$VENV/.kvconform-stamp"
# Points golden/.venv-VERSION at the cached venv (replacing a venv that an older layout put there).
link() {
  if [ "$(readlink "$LINK" 2>/dev/null)" != "$VENV" ]; then
    rm -rf "$LINK"
    ln -s "$VENV" "$LINK"
  fi
}
mkdir -p "$CACHE"
exec 9>"$VENV.lock"
flock 9
# Current: the stamp (written only after the install imported torch and transformers at their pins)
# matches, and both packages are still installed at those versions. Read from their metadata, not
# imported: an import of torch costs 3 to 5 s, and CI asks this of four releases three times.
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && "$VENV/bin/python" - "$VERSION" 2>/dev/null <<'EOF'
import importlib.metadata as m, sys
sys.exit(0 if m.version("transformers") == sys.argv[1] and m.version("torch").split("+")[0] == "2.13.0" else 1)
EOF
then
  link
  echo "setup_env: $LINK is up to date ($VENV)"
  exit 0
fi

source "$HERE/../scripts/venv.sh"
make_venv "$PYTHON" "$VENV" --quiet --no-deps -r "$REQ"
"$VENV/bin/python" -m pip check
"$VENV/bin/python" - "$VERSION" <<'EOF'
import sys
import torch, transformers
want = sys.argv[1]
assert transformers.__version__ == want, (transformers.__version__, want)
assert torch.__version__.split("+")[0] == "2.13.0", torch.__version__
print(f"setup_env: python {sys.version.split()[0]}, torch {torch.__version__}, transformers {transformers.__version__}")
EOF
echo "$WANT" > "$STAMP"
link
echo "setup_env: created $VENV ($LINK points to it)"
