# Sourced by each script that makes one of the project's cached virtual environments (scripts/setup.sh,
# golden/, engines/, plugins/python/ and plugins/triton/setup_env.sh): the one way they are made.
#
#   make_venv PYTHON VENV PIP_INSTALL_ARGUMENTS...
#
# Makes VENV with the interpreter PYTHON (the one the caller's cache key names) and pip-installs the
# arguments into it, byte-compiling
# nothing (--no-compile). pip would compile every file it installs: torch and its dependencies are
# 5,400 files (14 s of CPU), a transformers environment 10,000 (22 s of its 35 s install), and a run
# imports a few hundred of them. The venv writes the bytecode of what its processes import instead,
# at the first import, as any Python does unless told not to: a .pth file in its site-packages sets
# sys.dont_write_bytecode = False, because with PYTHONDONTWRITEBYTECODE set (as on this project's
# machines) nothing would ever be written and every start would compile torch's imports again
# (1.2 s of `import torch` becomes 2.8 s). The bytecode lands next to the sources, in __pycache__
# folders, where every checkout that links the venv finds it (the checkout's own folders ignore them).
make_venv() {
  local python="$1" venv="$2"; shift 2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --disable-pip-version-check --no-compile "$@"
  local site
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo 'import sys; sys.dont_write_bytecode = False' > "$site/kvc-write-bytecode.pth"
}
