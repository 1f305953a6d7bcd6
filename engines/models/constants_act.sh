# Sourced by check_moe_constants.sh and check_hybrid_constants.sh (needs $root, $oracle and $d): the two
# halves of "a family's constants act, and the check can fail".
#
# acts WHAT CONSTANT LABEL MODEL_DIR...: sensitivity.py passes on every model, and each of its lines
#   judges a constant of LABEL ("experts (", "hybrid (").
acts() {
  local what=$1 constant=$2 label=$3 out rc
  shift 3
  out="$(python3 "$root/engines/models/sensitivity.py" --oracle "$oracle" "$@")"
  rc=$?
  echo "$out"
  if [ $rc -ne 0 ]; then echo "FAIL: a $what model's window or $constant constant does not act (exit $rc)"; exit 1; fi
  if echo "$out" | grep -v "$label"; then echo "FAIL: the lines above judged no $constant constant"; exit 1; fi
}
# inert DRAW NAME EDIT EXPECT WHY: the draw DRAW renamed NAME with the Python statement EDIT applied to
# its config dict `c` is found INERT by sensitivity.py (exit 1), its line matching EXPECT.
inert() {
  local draw=$1 name=$2 edit=$3 expect=$4 why=$5 out rc
  python3 "$root/engines/models/make_models.py" --draw "$draw" |
    python3 -c "import json, sys; r = json.load(sys.stdin); r['name'] = r['folder'] = '$name'; c = r['config']; $edit; print(json.dumps(r))" |
    python3 "$root/engines/models/make_models.py" "$d" --recipe - >/dev/null || exit 1
  out="$(python3 "$root/engines/models/sensitivity.py" --oracle "$oracle" "$d/$name")"
  rc=$?
  echo "$out"
  if [ $rc -ne 1 ] || ! echo "$out" | grep -q "$name: INERT .*$expect"; then
    echo "FAIL: $why INERT (exit $rc)"
    exit 1
  fi
}
