# Sourced by scripts/format.sh and scripts/lint.sh: the project's own C++ files (what git tracks under
# harness/, cli/, generators/, plugins/, engines/), one per line.
kvc_cpp_files() {
  git ls-files -- harness cli generators plugins engines | grep -E '\.(c|cc|cpp|cu|h|hpp|mm)$'
}
