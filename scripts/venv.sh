# Sourced by each script that makes one of the project's cached virtual environments (scripts/setup.sh,
# golden/, engines/, plugins/python/ and plugins/triton/setup_env.sh): the one way they are made.
#
#   make_venv PYTHON VENV PIP_INSTALL_ARGUMENTS...
#
# Makes VENV with the interpreter PYTHON (the one the caller's cache key names) and installs the
# arguments into it with uv (`uv pip install`, pinned below), byte-compiling nothing. uv unpacks each
# wheel once into its cache (uv's own, ~/.cache/uv) and hard-links the files into every venv that
# installs it: torch is in five of this project's venvs. A transformers environment took 15.5 s of
# CPU with pip (byte-compiling nothing), 3.5 s with uv and an empty uv cache, 0.6 s with torch in
# it. The venv is the interpreter's own (`PYTHON -m venv`), seeded with the pip and setuptools wheels
# that its ensurepip bundles (what `PYTHON -m venv` would install, without compiling them), so that
# scripts can still run the venv's pip. uv reads no pip configuration: the indexes, links and
# constraints of pip's (`pip config list`, its files and PIP_* variables) are passed to it. Where uv
# cannot be had (no network, no ensurepip wheels) or KVC_UV=0, pip installs, with --no-compile.
#
# A run imports a few hundred of the installed files: the venv writes the bytecode of what its
# processes import instead, at the first import, as any Python does unless told not to: a .pth file
# in its site-packages sets sys.dont_write_bytecode = False, because with PYTHONDONTWRITEBYTECODE set
# (as on this project's machines) nothing would ever be written and every start would compile
# torch's imports again (1.2 s of `import torch` becomes 2.8 s). The bytecode lands next to the
# sources, in __pycache__ folders (each venv's own: uv links files, not folders), where every
# checkout that links the venv finds it (the checkout's own folders ignore them).
KVC_UV_VERSION=0.13.9

# Sets kvc_uv_bin to the uv binary, installed once into the cache (uv-VERSION, by pip), or to
# nothing where KVC_UV=0 or it cannot be installed; decided once per shell.
kvc_uv() {
  [ -z "${kvc_uv_decided:-}" ] || return 0
  kvc_uv_decided=1 kvc_uv_bin=""
  [ "${KVC_UV:-1}" != 0 ] || return 0
  local python="$1"
  local dir="${KVC_CACHE:-$HOME/.cache/kvconform}/uv-$KVC_UV_VERSION"
  mkdir -p "$(dirname "$dir")"
  if (
    flock 8
    if [ ! -x "$dir/bin/uv" ] || [ ! -f "$dir/.kvc-installed" ]; then
      rm -rf "$dir"
      { "$python" -m venv "$dir" &&
        "$dir/bin/python" -m pip install --disable-pip-version-check --no-compile -q "uv==$KVC_UV_VERSION" &&
        touch "$dir/.kvc-installed"; } >&2 || { rm -rf "$dir"; exit 1; }
    fi
  ) 8>"$dir.lock"; then
    kvc_uv_bin="$dir/bin/uv"
  else
    echo "venv.sh: uv $KVC_UV_VERSION could not be installed; pip installs instead" >&2
  fi
}

# pip's configuration (`pip config list`: its files and PIP_* variables) as uv's arguments, one per
# line, and its certificate bundle as SSL_CERT_FILE=... .
kvc_uv_config() {
  "$1" -m pip config list 2>/dev/null | "$1" -c '
import shlex, sys
flags = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraints"}
for line in sys.stdin:
    key, _, value = line.strip().partition("=")
    key = key.rsplit(".", 1)[-1]
    words = " ".join(shlex.split(value)).split()
    if key == "cert" and words:
        print("SSL_CERT_FILE=" + words[0])
    elif key == "no-index" and words and words[0].lower() in ("1", "true", "yes", "on"):
        print("--no-index")
    elif key in flags:
        for word in words:
            print(flags[key])
            print(word)
'
}

# Installs the arguments (pip install's) into the environment of the interpreter PYTHON, or where
# --target says: with uv, else with pip, byte-compiling nothing either way.
venv_install() {
  local python="$1"; shift
  kvc_uv "$python"
  if [ -n "$kvc_uv_bin" ]; then
    local config=() args=() cert="${SSL_CERT_FILE:-}" line
    mapfile -t config < <(kvc_uv_config "$python")
    for line in "${config[@]}"; do
      if [[ "$line" == SSL_CERT_FILE=* ]]; then cert="${line#SSL_CERT_FILE=}"; else args+=("$line"); fi
    done
    # pip takes the best version over all its indexes and links; uv by default the first index's
    env ${cert:+SSL_CERT_FILE="$cert"} "$kvc_uv_bin" pip install --python "$python" --index-strategy unsafe-best-match "${args[@]}" "$@"
  else
    "$python" -m pip install --disable-pip-version-check --no-compile "$@"
  fi
}

# Without ensurepip's wheels to seed the venv's pip, pip makes the venv and installs.
make_venv() {
  local python="$1" venv="$2"; shift 2
  rm -rf "$venv"
  local bundled
  bundled="$("$python" -c 'import ensurepip, os; print(os.path.join(os.path.dirname(ensurepip.__file__), "_bundled"))' 2>/dev/null || true)"
  compgen -G "$bundled/pip-*.whl" >/dev/null || { kvc_uv_decided=1 kvc_uv_bin=""; }
  kvc_uv "$python"
  if [ -n "$kvc_uv_bin" ]; then
    "$python" -m venv --without-pip "$venv"
    "$kvc_uv_bin" pip install --quiet --python "$venv/bin/python" --no-index "$bundled"/*.whl
  else
    "$python" -m venv "$venv"
  fi
  venv_install "$venv/bin/python" "$@"
  local site
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo 'import sys; sys.dont_write_bytecode = False' > "$site/kvc-write-bytecode.pth"
}
