"""kvconform site REPORT_DIR... [--out DIR]: the results of kvconform runs as a static site.

Reads the report folders that `kvconform run`, `engine`, `fuzz` and `merge` write (summary.json, and
report.html for its pictures) and writes one folder of plain HTML, CSS and JavaScript that opens from
the disk (no server, nothing fetched):

  index.html     the runs read, their totals, and the pages below
  matrix.html    every case: engine configuration x family x plan, with filters (the URL's #hash keeps
                 them, so a filtered view is a link), and the configuration x family counts of what
                 the filters leave
  cases/*.html   one page per FAIL and DEVIATION: its diagnosis, plan, the position/mask pictures and
                 expected-vs-got values of report.html, the reproduce line, the findings it matches and
                 their standalone reproductions
  findings.html  every known engine deviation (engines/known_deviations.json, or the expectations
                 files of engines/*/): the configurations and versions it was seen in, its state in
                 these reports, its reproductions (copied under repro/)
  kernels.html   the attention kernels x dtype x scenario class table of every kernel report read
                 (`kvconform run -v`, scripts/matrix.py)
  coverage.html  which local-attention families of the newest pinned transformers release the model
                 oracle reads (engines/models/coverage.py)

A case run in several folders keeps its last result (a rerun given after the run it reruns). The
same inputs give the same bytes. Standard library only.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import html
import importlib.util
import json
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

SUMMARY_FORMAT = "kvconform-summary-v1"
# Deviations and failures first wherever cases are listed.
STATUS_ORDER = {"FAIL": 0, "DEVIATION": 1, "SKIP": 2, "OK": 3}
STATUS_CLASS = {"FAIL": "fail", "DEVIATION": "dev", "SKIP": "skip", "OK": "ok"}
PAGE_STATUSES = ("FAIL", "DEVIATION")  # the statuses that get a page of their own

# The kernel table (docs/conformance.md): scenario classes over the built-in step patterns' names
# (harness/include/kvconform/step_patterns.h); a pattern may serve several classes.
KERNEL_DTYPES = ["float32", "float16", "bfloat16", "float64"]
KERNEL_CLASSES: List[Tuple[str, List[str]]] = [
    ("decode across the window", ["decode_across_window", "wrap_around_three_times", "cache_shorter_than_window",
                                  "reset_and_restart"]),
    ("multi-token update after full", ["prefill_longer_than_window", "prefill_equal_window_then_extend"]),
    ("chunked", ["chunked_across_chunks"]),
    ("left padding, fully masked rows", ["sliding_left_padding_batch", "chunked_left_padding"]),
    ("chunked + left padding", ["chunked_left_padding"]),
    # heads != kv_heads in step_patterns.h: 4/2 (GQA) and 2/1 (MQA)
    ("GQA / MQA", ["prefill_longer_than_window", "prefill_equal_window_then_extend", "chunked_across_chunks",
                   "chunked_left_padding", "reset_and_restart", "full_attention"]),
    ("full attention", ["full_attention"]),
]
KERNEL_RANK = {"FAIL": 3, "DEVIATION": 2, "OK": 1, "SKIP": 0}
MAX_ERROR = re.compile(r"max error ([0-9.eE+-]+|nan|inf)")


class SiteError(Exception):
    """Bad input: the message names the file and the field."""


# ---------------------------------------------------------------------------------------------------
# Reading report folders


@dataclass
class Case:
    id: str
    suite: str
    name: str
    params: str
    backend: str
    dtype: str
    status: str
    message: str
    detail: str
    reproduce: str
    title: str
    source: int  # which report folder (index into Site.reports)
    article: str  # report.html's <article> of the case, "" where the report has none
    family: str = ""
    model: str = ""
    plan: str = ""
    slug: str = ""
    findings: List[int] = field(default_factory=list)
    expectation: Dict[str, Any] = field(default_factory=dict)  # what an expectations file made of it


@dataclass
class Report:
    dir: str
    summary: Dict[str, Any]


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SiteError(f"{where}: must be a string, not {json.dumps(value)[:60]}")
    return value


def _articles(report_html: str) -> Dict[int, str]:
    """The per-case sections of a report.html (harness/report/src/html.cpp), by case index."""
    out: Dict[int, str] = {}
    for m in re.finditer(r'<article class="[a-z]+" id="case-([0-9]+)">\n(.*?)</article>\n', report_html, re.S):
        out[int(m.group(1))] = m.group(2)
    return out


def read_report(folder: str, source: int) -> Tuple[Report, List[Case]]:
    path = os.path.join(folder, "summary.json")
    if not os.path.isdir(folder):
        raise SiteError(f"{folder}: not a folder")
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except FileNotFoundError:
        raise SiteError(f"{folder}: no summary.json (not a kvconform report folder)") from None
    except (OSError, ValueError) as e:
        raise SiteError(f"{path}: {e}") from None
    if not isinstance(summary, dict) or summary.get("format") != SUMMARY_FORMAT:
        got = summary.get("format") if isinstance(summary, dict) else None
        raise SiteError(f"{path}: /format is {json.dumps(got)}, expected \"{SUMMARY_FORMAT}\"")
    if not isinstance(summary.get("cases"), list):
        raise SiteError(f"{path}: /cases must be an array")
    articles: Dict[int, str] = {}
    html_path = os.path.join(folder, "report.html")
    if os.path.isfile(html_path):
        with open(html_path, encoding="utf-8", errors="replace") as f:
            articles = _articles(f.read())
    cases = []
    for i, c in enumerate(summary["cases"]):
        where = f"{path}: /cases/{i}"
        if not isinstance(c, dict):
            raise SiteError(f"{where}: must be an object")
        get = {k: _string(c.get(k, ""), f"{where}/{k}") for k in
               ("id", "suite", "name", "params", "backend", "dtype", "status", "message", "detail", "reproduce", "title")}
        if get["status"] not in STATUS_ORDER:
            raise SiteError(f"{where}/status: {json.dumps(get['status'])} is not one of OK, FAIL, DEVIATION, SKIP")
        if not get["id"]:
            get["id"] = f"{get['suite']}/{get['backend']}/{get['name']}({get['params']})"
        case = Case(get["id"], get["suite"], get["name"], get["params"], get["backend"], get["dtype"], get["status"],
                    get["message"], get["detail"], get["reproduce"], get["title"], source, articles.get(i, ""))
        if isinstance(c.get("expectation"), dict):
            case.expectation = c["expectation"]
        cases.append(case)
    return Report(folder, summary), cases


# ---------------------------------------------------------------------------------------------------
# Engine configurations, families, plans


class Families:
    """The family (config.json's model_type) of a zoo model: read from the --models folder of the
    case's reproduce line or of --models, else the model's name up to its window ("gemma2-w4")."""

    def __init__(self, dirs: Sequence[str]):
        self.dirs = list(dirs)
        self.cache: Dict[Tuple[str, str], str] = {}

    def of(self, model: str, reproduce: str) -> str:
        dirs = list(self.dirs)
        try:
            words = shlex.split(reproduce)
        except ValueError:
            words = []
        for i, w in enumerate(words[:-1]):
            if w == "--models":
                dirs.insert(0, words[i + 1])
        for d in dirs:
            key = (d, model)
            if key not in self.cache:
                self.cache[key] = ""
                cfg = os.path.join(d, model, "config.json")
                if os.path.isfile(cfg):
                    try:
                        with open(cfg, encoding="utf-8") as f:
                            self.cache[key] = str(json.load(f).get("model_type", ""))
                    except (OSError, ValueError):
                        pass
            if self.cache[key]:
                return self.cache[key]
        stem = re.sub(r"^draw-", "", model)
        return re.split(r"-(?:w[0-9]|[0-9])", stem, maxsplit=1)[0]


def classify(case: Case, families: Families) -> None:
    if case.suite == "engine" and "/" in case.name:
        case.model, case.plan = case.name.split("/", 1)
        case.family = families.of(case.model, case.reproduce)
    else:
        case.family, case.model, case.plan = case.suite, "", case.name


def engine_version(cases: Iterable[Case]) -> Dict[str, str]:
    """The engine's own version from its hello, which an engine case's detail opens with."""
    out: Dict[str, str] = {}
    for c in cases:
        if c.suite == "engine" and c.backend not in out:
            m = re.search(r"^engine: (.*)$", c.detail, re.M)
            if m:
                out[c.backend] = m.group(1).strip()
    return out


def slug_of(case: Case) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", case.id)[:80].strip("_")
    return f"{readable}-{hashlib.sha256(case.id.encode()).hexdigest()[:10]}"


# ---------------------------------------------------------------------------------------------------
# Findings: the known engine deviations


@dataclass
class Finding:
    index: int
    engine: str
    family: str
    model: str
    plan: str
    kind: str  # what the engine is expected to do: a diagnosis kind, an error text, any logit failure
    note: str
    source: str  # the file it came from
    case: str = ""  # an expectations file's "case": a regex over case ids
    link: str = ""  # upstream issue
    folder: str = ""  # engines/NAME of a per-engine expectations file
    cases: List[Case] = field(default_factory=list)  # reported as this deviation
    candidates: List[Case] = field(default_factory=list)  # every case its patterns match
    unexpected: List[Case] = field(default_factory=list)  # passed where the expectations file said fail
    repro: List[str] = field(default_factory=list)  # repository paths
    corpus: List[str] = field(default_factory=list)  # regressions/engine/... shrunk plans


def _expected(entry: Dict[str, Any]) -> str:
    if "diagnosis" in entry:
        d = entry["diagnosis"]
        return "diagnosis " + (d if isinstance(d, str) else str(d.get("kind", d)) if isinstance(d, dict) else str(d))
    if "error" in entry:
        return "error " + str(entry["error"])
    if "failure" in entry:
        return "any " + str(entry["failure"]) + " failure"
    if "outcome" in entry:
        return str(entry["outcome"])
    return ""


def strip_comments(text: str) -> str:
    """JSON with // line comments (an expectations file, .jsonc) as JSON; "//" inside strings stays."""
    out, i, in_string = [], 0, False
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _entries_of(path: str, text: str) -> List[Dict[str, Any]]:
    try:
        data = json.loads(strip_comments(text))
    except ValueError as e:
        raise SiteError(f"{path}: {e}") from None
    for key in ("deviations", "expectations"):
        if isinstance(data, dict) and isinstance(data.get(key), list):
            return [e for e in data[key] if isinstance(e, dict)]
    raise SiteError(f"{path}: expected {{\"deviations\": [...]}} or {{\"expectations\": [...]}}")


def read_findings(root: str, known: Optional[str]) -> List[Finding]:
    """The known deviations: --known FILE (either form), else engines/known_deviations.json
    ({"deviations": [...]}), else every engine folder's expectations file (engines/*/expectations.jsonc:
    {"expectations": [{"case", "outcome", "reason", "link", ...}]})."""
    paths = [known] if known else []
    if not paths:
        central = os.path.join(root, "engines", "known_deviations.json")
        per_engine = sorted(glob.glob(os.path.join(root, "engines", "*", "expectations.json*")))
        paths = [central] if os.path.isfile(central) else per_engine
    out: List[Finding] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as err:
            raise SiteError(f"{path}: {err.strerror}") from None
        rel = os.path.relpath(path, root)
        for i, e in enumerate(_entries_of(path, text)):
            def get(k: str, d: str = ".", e: Dict[str, Any] = e) -> str:
                return str(e.get(k, d))
            parent = os.path.dirname(os.path.abspath(path))
            folder = os.path.basename(parent) if os.path.basename(os.path.dirname(parent)) == "engines" else ""
            out.append(Finding(index=len(out) + 1, engine=get("engine", ""), family=get("family", ""), model=get("model", ""),
                               plan=get("plan"), kind=_expected(e), note=get("note", get("reason", "")),
                               source=f"{rel} /{'deviations' if 'deviations' in text else 'expectations'}/{i}",
                               case=get("case", ""), link=get("link", ""), folder=folder))
    return out


def _search(pattern: str, text: str) -> bool:
    if not pattern:
        return True
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return pattern in text


def _engine_folders(root: str, finding: Finding) -> List[str]:
    """The folders (engines/NAME) of the configurations of engines/engines.json a finding names."""
    if finding.folder:
        return [finding.folder]
    path = os.path.join(root, "engines", "engines.json")
    try:
        with open(path, encoding="utf-8") as f:
            configs = json.load(f).get("engines", [])
    except (OSError, ValueError, AttributeError):
        configs = []
    folders = set()
    for c in configs:
        if isinstance(c, dict) and _search(finding.engine, str(c.get("name", ""))):
            m = re.search(r"engines/([A-Za-z0-9_]+)/", str(c.get("command", "")) + " " + str(c.get("setup", "")))
            name = m.group(1) if m else re.split(r"[-/]", str(c.get("name", "")))[0].replace(".", "_")
            folders.add(name)
    return sorted(folders)


def _family_words(pattern: str) -> List[str]:
    """The literal names of a family/model pattern: "^(gemma2|mistral)$" -> gemma2, mistral."""
    words = [w for w in re.split(r"[|()^$\\.?*+\[\]]+", pattern) if len(w) >= 3]
    return sorted({v for w in words for v in (w, re.sub(r"_text$", "", w), w.replace("_", "")) if v})


def attach_findings(findings: List[Finding], cases: Sequence[Case], root: str) -> None:
    for f in findings:
        for c in cases:
            if c.suite != "engine":
                continue
            plan = c.plan.split("/", 1)[1] if c.plan.startswith("regressions/") else c.plan
            plan_param = re.search(r"(?:^|,)plan=([^,]+)", c.params)
            if not (_search(f.engine, c.backend) and _search(f.case, c.id) and (not f.family or _search(f.family, c.family))
                    and (not f.model or _search(f.model, c.model))
                    and (_search(f.plan, plan) or (plan_param is not None and _search(f.plan, plan_param.group(1))))):
                continue
            f.candidates.append(c)
            said = c.expectation.get("reason") if c.expectation.get("outcome") == "expected_failure" else None
            if c.status == "DEVIATION" and f.note and (said == f.note or f.note in c.message):
                f.cases.append(c)
                c.findings.append(f.index)
            if c.expectation.get("outcome") == "unexpected_pass" and c.expectation.get("reason") == f.note:
                f.unexpected.append(c)
        words = _family_words(f.family or f.model)
        for folder in _engine_folders(root, f):
            for path in sorted(glob.glob(os.path.join(root, "engines", folder, "repro_*.py"))):
                base = os.path.basename(path)[len("repro_"):]
                if any(base.startswith(w + "_") for w in words):
                    f.repro.append(os.path.relpath(path, root))
        for c in f.cases:
            if c.plan.startswith("regressions/"):
                corpus = os.path.join("regressions", "engine", c.model, c.plan.split("/", 1)[1] + ".json")
                if os.path.isfile(os.path.join(root, corpus)) and corpus not in f.corpus:
                    f.corpus.append(corpus)


def finding_state(f: Finding) -> Tuple[str, str]:
    """(class, text): whether these reports show the deviation, show it gone, or never ran it."""
    if f.cases:
        return "dev", f"reported: {len(f.cases)} case{'s' if len(f.cases) != 1 else ''}"
    if f.unexpected:
        return "ok", f"passes now: {len(f.unexpected)} unexpected pass{'es' if len(f.unexpected) != 1 else ''}"
    judged = [c for c in f.candidates if c.status in ("OK", "FAIL")]
    if judged and all(c.status == "OK" for c in judged):
        return "ok", f"passes now: its {len(judged)} matching case{'s' if len(judged) != 1 else ''} OK (an unexpected pass)"
    if f.candidates:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(_count(f.candidates).items(), key=lambda kv: STATUS_ORDER[kv[0]]))
        return "skip", f"not reported: matching cases {counts}"
    return "none", "not run in these reports"


def _count(cases: Iterable[Case]) -> Dict[str, int]:
    n: Dict[str, int] = {}
    for c in cases:
        n[c.status] = n.get(c.status, 0) + 1
    return n


# ---------------------------------------------------------------------------------------------------
# Kernel table (docs/conformance.md) and family coverage (engines/models/coverage.py)


def kernel_pattern(case: Dict[str, Any]) -> Optional[str]:
    name = str(case.get("name", ""))
    if case.get("suite") == "plugin":
        parts = name.split("/")
        return parts[1] if parts[0] == "kernel" and len(parts) == 3 else None
    return name.split("/")[0] if case.get("suite") == "backend" else None


def kernel_error(case: Dict[str, Any]) -> Optional[float]:
    errors = [float(m) for m in MAX_ERROR.findall(str(case.get("message", "")) + "\n" + str(case.get("detail", "")))]
    return max(errors) if errors else None


def kernel_cell(cases: Sequence[Dict[str, Any]]) -> str:
    """The worst status of a class's cases and the largest error any measured: "OK 2.4e-04",
    "OK 1.2e-07 (2/4 SKIP)", "SKIP", or "\u2013" for no case."""
    if not cases:
        return "\u2013"
    status = max((str(c["status"]) for c in cases), key=lambda s: KERNEL_RANK.get(s, 3))
    judged = [c for c in cases if c["status"] != "SKIP"]
    if not judged:
        return "SKIP"
    errors = [e for e in map(kernel_error, judged) if e is not None]
    text = status + (f" {max(errors):.1e}" if errors else "")
    skipped = len(cases) - len(judged)
    return text + (f" ({skipped}/{len(cases)} SKIP)" if skipped else "")


def kernel_rows(rows: Sequence[Tuple[str, Sequence[Dict[str, Any]]]]) -> List[List[str]]:
    """implementation, dtype, then a cell per scenario class: a row per implementation and dtype."""
    out = []
    for implementation, cases in rows:
        for dtype in KERNEL_DTYPES:
            out.append([implementation, dtype] + [
                kernel_cell([c for c in cases if c.get("dtype") == dtype and kernel_pattern(c) in patterns])
                for _, patterns in KERNEL_CLASSES])
    return out


def kernel_markdown(rows: Sequence[Tuple[str, Sequence[Dict[str, Any]]]]) -> str:
    lines = ["| implementation | dtype | " + " | ".join(name for name, _ in KERNEL_CLASSES) + " |",
             "|" + " --- |" * (len(KERNEL_CLASSES) + 2)]
    lines += ["| " + " | ".join(r) + " |" for r in kernel_rows(rows)]
    return "\n".join(lines) + "\n"


def _coverage_module(root: str) -> Tuple[Any, str]:
    """engines/models/coverage.py as a module, or None and why not."""
    path = os.path.join(root, "engines", "models", "coverage.py")
    if not os.path.isfile(path):
        return None, f"{os.path.relpath(path, root)} is not in {root}"
    spec = importlib.util.spec_from_file_location("kvconform_coverage", path)
    if spec is None or spec.loader is None:
        return None, f"{path} cannot be imported"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, ""


def coverage_engines(root: str, rows: Optional[Sequence[Tuple[str, str, str]]], cases: Sequence[Case]) -> Dict[str, str]:
    """Each coverage folder's engines cell (coverage.py's engines_cell): the engines that ran the site's
    cases of its models and how each fared; {} where coverage.py has no engines_cell (an older checkout)."""
    module, _ = _coverage_module(root)
    if rows is None or module is None or not hasattr(module, "engines_cell"):
        return {}
    results = [(c.backend, c.family, c.status, c.message, bool(c.expectation)) for c in cases if c.suite == "engine" and c.family]
    table = module.engine_results(results, [r[0] for r in rows])
    return {r[0]: module.engines_cell(table, r[0], not r[2].startswith("not read")) for r in rows}


def coverage_release(root: str) -> str:
    """The release the coverage table reads when --release names none: the newest pinned one, as
    engines/models/coverage.py picks it (5.24.0 where the checkout's coverage.py cannot say)."""
    module, _ = _coverage_module(root)
    try:
        return module.newest_release() if module is not None and hasattr(module, "newest_release") else "5.24.0"
    except SystemExit:  # no golden/requirements-*.txt beside it
        return "5.24.0"


def coverage_rows(root: str, release: str) -> Tuple[Optional[List[Tuple[str, str, str]]], str]:
    """engines/models/coverage.py's table, or None and why not."""
    module, why = _coverage_module(root)
    if module is None:
        return None, why
    path = os.path.join(root, "engines", "models", "coverage.py")
    rows, missing = getattr(module, "rows", None), getattr(module, "NotInstalled", None)
    if rows is None or missing is None:
        return None, f"{os.path.relpath(path, root)} has no rows() (an older checkout)"
    try:
        return list(rows(release)), ""
    except missing as e:
        return None, str(e)


# ---------------------------------------------------------------------------------------------------
# HTML


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


CSS = """:root{--ok:#1a7f37;--fail:#cf222e;--dev:#9a6700;--skip:#6e7781;--ink:#1f2328;--muted:#57606a;
--line:#d0d7de}
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--ink);
margin:0;padding:0 32px 32px;background:#fff}
nav.top{display:flex;gap:18px;flex-wrap:wrap;padding:12px 0;border-bottom:1px solid var(--line);
margin-bottom:12px}
nav.top a{color:var(--ink);text-decoration:none;font-weight:600}
nav.top a[aria-current]{color:var(--fail);text-decoration:underline}
h1{font-size:24px;margin:8px 0 4px}
h2{font-size:19px;margin:28px 0 8px;border-bottom:1px solid var(--line);padding-bottom:4px}
h3{font-size:16px;margin:0 0 6px;font-family:ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}
h4{font-size:14px;margin:14px 0 4px}
.meta{color:var(--muted);margin:0 0 14px}
table{border-collapse:collapse;font-size:13px;margin:6px 0 14px}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa;position:sticky;top:0}
td.case,code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;overflow-wrap:anywhere}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:700;color:#fff;
white-space:nowrap}
.badge.ok{background:var(--ok)}.badge.fail{background:var(--fail)}.badge.dev{background:var(--dev)}
.badge.skip,.badge.none{background:var(--skip)}
tr.fail td{background:#ffebe9}tr.dev td{background:#fff8c5}
td.n{white-space:nowrap}td.n .fail{color:var(--fail);font-weight:700}
td.n .dev{color:var(--dev);font-weight:700}td.n .ok{color:var(--ok)}td.n .skip{color:var(--skip)}
form.filters{display:flex;gap:12px;flex-wrap:wrap;align-items:end;padding:10px;border:1px solid var(--line);
border-radius:8px;background:#f6f8fa}
form.filters label{display:flex;flex-direction:column;font-size:12px;color:var(--muted)}
form.filters select,form.filters input[type=search]{font:14px system-ui,sans-serif;max-width:22em}
form.filters fieldset{border:0;margin:0;padding:0;display:flex;gap:8px;align-items:center;font-size:13px}
#shown{font-weight:700;margin:10px 0}
article{border:1px solid var(--line);border-left:6px solid var(--fail);border-radius:6px;padding:14px 18px;
margin:16px 0}
article.dev{border-left-color:var(--dev)}
.message{font-weight:600;margin:4px 0 10px}
pre{background:#f6f8fa;border:1px solid var(--line);border-radius:6px;padding:10px;overflow-x:auto;
font:13px/1.4 ui-monospace,"DejaVu Sans Mono",monospace;white-space:pre-wrap;word-break:break-all}
pre.cmd{background:#0d1117;color:#e6edf3}
figure{margin:10px 0 14px}figcaption{font-size:13px;color:var(--muted);margin-bottom:4px}
.legend{display:flex;gap:14px;flex-wrap:wrap;font-size:13px;margin-top:6px}
.sw{display:inline-block;width:13px;height:13px;vertical-align:-2px;margin-right:4px;border:1px solid #8c959f}
.sw.att{background:#3b6fb6}.sw.msk{background:#e9edf2}.sw.extra{background:#d62728}
.sw.missing{background:#ff9f1c}.sw.none{background:#fff}
svg text{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
.expect{color:var(--muted);font-style:italic}
ol.steps{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px}
"""

# The matrix page's filters: every row carries its configuration, family, plan and status; a filter
# hides the rows it does not keep and the counts are taken again over what is left. The filters live
# in the URL's hash (#status=FAIL,DEVIATION&family=gemma2), so a filtered view is a link.
JS = """"use strict";
(function () {
  var form = document.getElementById("filters");
  if (!form) return;
  var rows = Array.prototype.slice.call(document.querySelectorAll("#cases tbody tr"));
  var keys = ["config", "family", "plan", "dtype"];
  var order = ["FAIL", "DEVIATION", "SKIP", "OK"];
  var cls = {FAIL: "fail", DEVIATION: "dev", SKIP: "skip", OK: "ok"};
  function state() {
    var s = {text: form.elements.text.value.toLowerCase(), status: {}};
    keys.forEach(function (k) { s[k] = form.elements[k].value; });
    order.forEach(function (st) { s.status[st] = form.elements["st-" + st].checked; });
    return s;
  }
  function keep(row, s) {
    if (!s.status[row.dataset.status]) return false;
    for (var i = 0; i < keys.length; i++) {
      var k = keys[i];
      if (s[k] && row.dataset[k] !== s[k]) return false;
    }
    return !s.text || row.textContent.toLowerCase().indexOf(s.text) >= 0;
  }
  function pivot(kept) {
    var configs = [], families = [], cells = {};
    kept.forEach(function (row) {
      var c = row.dataset.config, f = row.dataset.family;
      if (configs.indexOf(c) < 0) configs.push(c);
      if (families.indexOf(f) < 0) families.push(f);
      var key = c + "\\u0000" + f;
      cells[key] = cells[key] || {};
      cells[key][row.dataset.status] = (cells[key][row.dataset.status] || 0) + 1;
    });
    families.sort();
    var table = document.getElementById("pivot");
    var head = "<thead><tr><th>configuration</th>" + families.map(function (f) {
      return "<th>" + escapeHtml(f) + "</th>"; }).join("") + "</tr></thead>";
    var body = configs.map(function (c) {
      return "<tr><th>" + escapeHtml(c) + "</th>" + families.map(function (f) {
        var n = cells[c + "\\u0000" + f];
        if (!n) return "<td></td>";
        return "<td class=\\"n\\">" + order.filter(function (st) { return n[st]; }).map(function (st) {
          return "<span class=\\"" + cls[st] + "\\">" + n[st] + " " + st + "</span>"; }).join(" &#183; ") + "</td>";
      }).join("") + "</tr>";
    }).join("");
    table.innerHTML = head + "<tbody>" + body + "</tbody>";
  }
  function escapeHtml(s) {
    return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function apply(write) {
    var s = state(), kept = [];
    rows.forEach(function (row) {
      var k = keep(row, s);
      row.hidden = !k;
      if (k) kept.push(row);
    });
    document.getElementById("shown").textContent = kept.length + " of " + rows.length + " cases shown";
    pivot(kept);
    if (write) {
      var parts = [];
      keys.forEach(function (k) { if (s[k]) parts.push(k + "=" + encodeURIComponent(s[k])); });
      var st = order.filter(function (x) { return s.status[x]; });
      if (st.length !== order.length) parts.push("status=" + st.join(","));
      if (s.text) parts.push("text=" + encodeURIComponent(s.text));
      history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname);
    }
  }
  function read() {
    var h = location.hash.replace(/^#/, "");
    if (!h) return;
    h.split("&").forEach(function (part) {
      var i = part.indexOf("="), k = part.slice(0, i), v = decodeURIComponent(part.slice(i + 1));
      if (keys.indexOf(k) >= 0) form.elements[k].value = v;
      if (k === "text") form.elements.text.value = v;
      if (k === "status") {
        var on = v.split(",");
        order.forEach(function (st) { form.elements["st-" + st].checked = on.indexOf(st) >= 0; });
      }
    });
  }
  form.addEventListener("input", function () { apply(true); });
  form.addEventListener("change", function () { apply(true); });
  window.addEventListener("hashchange", function () { read(); apply(false); });
  read();
  apply(false);
  document.body.dataset.filtered = "yes";
})();
"""

PAGES = [("index.html", "Overview"), ("matrix.html", "Matrix"), ("findings.html", "Findings"),
         ("kernels.html", "Kernels"), ("coverage.html", "Family coverage")]


def page(title: str, current: str, body: str, depth: int = 0, script: bool = False) -> str:
    up = "../" * depth
    mark = ' aria-current="page"'
    nav = "".join(f'<a href="{up}{href}"{mark if href == current else ""}>{esc(name)}</a>' for href, name in PAGES)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)} · kvconform</title>\n<link rel=\"stylesheet\" href=\"{up}site.css\">\n</head>\n<body>\n"
            f"<nav class=\"top\">{nav}</nav>\n<h1>{esc(title)}</h1>\n{body}"
            + (f"<script src=\"{up}site.js\"></script>\n" if script else "") + "</body>\n</html>\n")


def badge(status: str) -> str:
    return f'<span class="badge {STATUS_CLASS.get(status, "none")}">{esc(status)}</span>'


def counts_text(n: Dict[str, int]) -> str:
    return " &#183; ".join(f'<span class="{STATUS_CLASS[s]}">{n[s]} {s}</span>' for s in STATUS_ORDER if n.get(s))


@dataclass
class Site:
    reports: List[Report]
    cases: List[Case]
    findings: List[Finding]
    versions: Dict[str, str]
    root: str
    coverage: Tuple[Optional[List[Tuple[str, str, str]]], str]
    release: str


def sort_key(c: Case) -> Tuple[int, str, str, str, str]:
    return STATUS_ORDER[c.status], c.backend, c.family, c.model, c.id


def render_index(s: Site) -> str:
    total = _count(s.cases)
    out = [f"<p class=\"verdict\" id=\"totals\">{len(s.cases)} cases: {counts_text(total) or 'none'}</p>\n"]
    out.append("<h2>Reports read</h2>\n<table id=\"reports\"><thead><tr><th>folder</th><th>command</th><th>tool</th>"
               "<th>build</th><th>cases</th></tr></thead><tbody>\n")
    for r in s.reports:
        record = r.summary.get("run")
        run: Dict[str, Any] = record if isinstance(record, dict) else {}
        out.append(f"<tr><td><code>{esc(r.dir)}</code></td><td><code>{esc(r.summary.get('command', ''))}</code></td>"
                   f"<td>{esc(r.summary.get('tool_version', ''))}</td><td><code>{esc(run.get('build', ''))}</code></td>"
                   f"<td>{len(r.summary.get('cases', []))}</td></tr>\n")
    out.append("</tbody></table>\n")
    bad = sorted((c for c in s.cases if c.status in PAGE_STATUSES), key=sort_key)
    out.append(f"<h2 id=\"not-ok\">Failures and deviations ({len(bad)})</h2>\n")
    if bad:
        out.append("<ul class=\"cases\">\n")
        for c in bad:
            out.append(f"<li>{badge(c.status)} <a href=\"cases/{c.slug}.html\"><code>{esc(c.id)}</code></a> "
                       f"{esc(c.message[:200])}</li>\n")
        out.append("</ul>\n")
    else:
        out.append("<p>None.</p>\n")
    out.append("<h2>Pages</h2>\n<ul>\n<li><a href=\"matrix.html\">Matrix</a>: every case by configuration, family and "
               "plan, with filters</li>\n<li><a href=\"findings.html\">Findings</a>: the known engine deviations and where "
               "they were seen</li>\n<li><a href=\"kernels.html\">Kernels</a>: attention kernels by dtype and scenario "
               "class</li>\n<li><a href=\"coverage.html\">Family coverage</a>: the families of transformers "
               f"{esc(s.release)} the model oracle reads</li>\n</ul>\n")
    return page("kvconform results", "index.html", "".join(out))


def expectation_note(c: Case) -> str:
    """What an expectations file made of the case (summary.json's cases[].expectation), beside its badge."""
    outcome = str(c.expectation.get("outcome", ""))
    if not outcome:
        return ""
    where = f"{c.expectation.get('file', '')}:{c.expectation.get('line', '')}: {c.expectation.get('reason', '')}"
    return f' <small class="expect" title="{esc(where)}">{esc(outcome.replace("_", " "))}</small>'


def render_matrix(s: Site) -> str:
    cases = sorted(s.cases, key=sort_key)
    def options(name: str, values: Iterable[str], label: str) -> str:
        opts = "".join(f"<option value=\"{esc(v)}\">{esc(v)}</option>" for v in sorted(set(values)))
        return f"<label>{label}<select name=\"{name}\"><option value=\"\">all</option>{opts}</select></label>\n"
    out = ["<p class=\"meta\">Every case of the reports, failures and deviations first. The filters keep their state in "
           "the address (a filtered view is a link); the counts below are taken over the cases they leave.</p>\n",
           "<form class=\"filters\" id=\"filters\" onsubmit=\"return false\">\n",
           options("config", (c.backend for c in cases), "configuration"),
           options("family", (c.family for c in cases), "family (suite outside engines)"),
           options("plan", (c.plan for c in cases), "plan"),
           options("dtype", (c.dtype for c in cases), "dtype"),
           "<fieldset>" + "".join(f"<label><input type=\"checkbox\" name=\"st-{st}\" checked> {st}</label>"
                                  for st in STATUS_ORDER) + "</fieldset>\n",
           "<label>text<input type=\"search\" name=\"text\" placeholder=\"id or message\"></label>\n</form>\n",
           f"<p id=\"shown\">{len(cases)} of {len(cases)} cases shown</p>\n"]
    # Configuration x family counts of every case (the script takes them again over the filtered rows).
    configs: List[str] = []
    for c in s.cases:
        if c.backend not in configs:
            configs.append(c.backend)
    families = sorted({c.family for c in s.cases})
    cells: Dict[Tuple[str, str], Dict[str, int]] = {}
    for c in s.cases:
        n = cells.setdefault((c.backend, c.family), {})
        n[c.status] = n.get(c.status, 0) + 1
    out.append("<h2>Configuration \u00d7 family</h2>\n<table id=\"pivot\"><thead><tr><th>configuration</th>"
               + "".join(f"<th>{esc(f)}</th>" for f in families) + "</tr></thead><tbody>")
    for cfg in configs:
        out.append(f"<tr><th>{esc(cfg)}</th>" + "".join(
            f"<td class=\"n\">{counts_text(cells[(cfg, f)])}</td>" if (cfg, f) in cells else "<td></td>"
            for f in families) + "</tr>")
    out.append("</tbody></table>\n")
    if s.versions:
        out.append("<h2>Engine versions</h2>\n<table id=\"versions\"><thead><tr><th>configuration</th><th>version "
                   "(its hello)</th></tr></thead><tbody>\n")
        out += [f"<tr><td><code>{esc(k)}</code></td><td>{esc(v)}</td></tr>\n" for k, v in sorted(s.versions.items())]
        out.append("</tbody></table>\n")
    out.append(render_changes(s))
    out.append("<h2>Cases</h2>\n<table id=\"cases\"><thead><tr><th>case</th><th>configuration</th><th>family</th>"
               "<th>plan</th><th>dtype</th><th>status</th><th>message</th></tr></thead><tbody>\n")
    for c in cases:
        name = esc(c.id)
        if c.status in PAGE_STATUSES:
            name = f"<a href=\"cases/{c.slug}.html\">{name}</a>"
        out.append(f"<tr class=\"{STATUS_CLASS[c.status]}\" data-config=\"{esc(c.backend)}\" data-family=\"{esc(c.family)}\" "
                   f"data-plan=\"{esc(c.plan)}\" data-dtype=\"{esc(c.dtype)}\" data-status=\"{c.status}\">"
                   f"<td class=\"case\">{name}</td><td>{esc(c.backend)}</td><td>{esc(c.family)}</td><td>{esc(c.plan)}</td>"
                   f"<td>{esc(c.dtype)}</td><td>{badge(c.status)}{expectation_note(c)}</td><td>{esc(c.message[:300])}</td></tr>\n")
    out.append("</tbody></table>\n")
    return page("Engine configuration \u00d7 family \u00d7 plan", "matrix.html", "".join(out), script=True)


def render_changes(s: Site) -> str:
    """The configurations that differ only by the engine's version (`llama.cpp/default` and
    `llama.cpp-b11434/default`): every model/plan whose verdict changed between them."""
    groups: Dict[str, List[str]] = {}
    for c in s.cases:
        if c.suite != "engine":
            continue
        key = re.sub(r"^([^/]*?)-b?[0-9][0-9.]*(?=/|$)", r"\1", c.backend, count=1)
        if c.backend not in groups.setdefault(key, []):
            groups[key].append(c.backend)
    by: Dict[Tuple[str, str], Case] = {(c.backend, c.name): c for c in s.cases if c.suite == "engine"}
    rows = []
    for key, names in sorted(groups.items()):
        if len(names) < 2:
            continue
        names = sorted(names)
        plans = sorted({name for (b, name) in by if b in names})
        for p in plans:
            got = [by.get((n, p)) for n in names]
            if all(got) and len({g.status for g in got if g}) > 1:
                rows.append((key, names, p, got))
    if not rows:
        return ""
    out = ["<h2>Between versions</h2>\n<p class=\"meta\">Configurations that differ only by the engine's version, "
           "every model/plan whose verdict changed.</p>\n<table id=\"changes\"><thead><tr><th>configurations</th>"
           "<th>model/plan</th><th>verdicts</th></tr></thead><tbody>\n"]
    for key, names, p, got in rows:
        verdicts = " → ".join(f"<code>{esc(n)}</code> {badge(g.status if g else '')}" for n, g in zip(names, got))
        out.append(f"<tr><td><code>{esc(key)}</code></td><td><code>{esc(p)}</code></td><td>{verdicts}</td></tr>\n")
    out.append("</tbody></table>\n")
    return "".join(out)


def _plan_steps(root: str, c: Case) -> str:
    """The shrunk plan of a found case (regressions/engine/MODEL/HASH.json), one step a line."""
    if not c.plan.startswith("regressions/"):
        return ""
    path = os.path.join(root, "regressions", "engine", c.model, c.plan.split("/", 1)[1] + ".json")
    try:
        with open(path, encoding="utf-8") as f:
            plan = json.load(f)
    except (OSError, ValueError):
        return ""
    if not isinstance(plan, dict):
        return ""
    steps = plan.get("steps", [])
    items = "".join(f"<li>{esc(json.dumps(st, sort_keys=True, separators=(', ', ': ')))}</li>" for st in steps)
    return (f"<h2>Shrunk plan</h2>\n<p><code>{esc(os.path.relpath(path, root))}</code> ({esc(plan.get('name', ''))})</p>\n"
            f"<ol class=\"steps\" start=\"0\">{items}</ol>\n")


def render_case(s: Site, c: Case) -> str:
    out = [f"<p>{badge(c.status)} <code>{esc(c.id)}</code></p>\n<table class=\"facts\"><tbody>\n"]
    facts = [("configuration", c.backend), ("version", s.versions.get(c.backend, "")), ("family", c.family),
             ("model", c.model), ("plan", c.plan), ("parameters", c.params), ("dtype", c.dtype), ("suite", c.suite),
             ("report", s.reports[c.source].dir)]
    out += [f"<tr><th>{k}</th><td><code>{esc(v)}</code></td></tr>\n" for k, v in facts if v]
    out.append("</tbody></table>\n")
    out.append(f"<h2>Diagnosis</h2>\n<p class=\"message\" id=\"message\">{esc(c.message)}</p>\n")
    if c.findings:
        out.append("<p>Known deviation: " + ", ".join(
            f"<a href=\"../findings.html#finding-{i}\">finding {i}</a>" for i in c.findings) + "</p>\n")
    out.append(_plan_steps(s.root, c))
    if c.article:
        # report.html's own section of the case: message, mask pictures, expected vs got, reproduce.
        out.append(f"<h2>From the report</h2>\n<article class=\"{STATUS_CLASS[c.status]}\">\n{c.article}</article>\n")
    else:
        if c.detail:
            out.append(f"<h2>Detail</h2>\n<pre class=\"detail\">{esc(c.detail)}</pre>\n")
        if c.reproduce:
            out.append(f"<h2>Reproduce</h2>\n<pre class=\"cmd\">{esc(c.reproduce)}</pre>\n")
    repro = sorted({p for f in s.findings if f.index in c.findings for p in f.repro})
    if repro:
        out.append("<h2>Standalone reproduction</h2>\n<ul>" + "".join(
            f"<li><a href=\"../repro/{esc(p)}\"><code>{esc(p)}</code></a></li>" for p in repro) + "</ul>\n")
    return page(c.name or c.id, "", "".join(out), depth=1)


def render_findings(s: Site) -> str:
    out = ["<p class=\"meta\">Every known engine deviation the reports are judged with, the configurations and "
           "versions it was reported in, and its state in these reports: reported, passing now (an expectation "
           "to remove), or not run. Reproductions are copied under <code>repro/</code>.</p>\n"]
    states = _count_states(s.findings)
    plural = "s" if len(s.findings) != 1 else ""
    out.append(f"<p id=\"finding-totals\">{len(s.findings)} finding{plural}: " + ", ".join(
        f"{n} {k}" for k, n in states) + "</p>\n")
    out.append("<table id=\"findings\"><thead><tr><th>#</th><th>engine</th><th>family / model</th><th>plan</th>"
               "<th>expected</th><th>what</th><th>configurations (version)</th><th>state</th><th>reproduction</th>"
               "</tr></thead><tbody>\n")
    for f in s.findings:
        cls, state = finding_state(f)
        configs = sorted({c.backend for c in f.cases})
        seen = "<br>".join(f"<code>{esc(b)}</code> ({esc(s.versions.get(b, '?'))})" for b in configs)
        repro = [f"<a href=\"repro/{esc(p)}\"><code>{esc(p)}</code></a>" for p in f.repro]
        repro += [f"<code>{esc(p)}</code>" for p in f.corpus]
        if f.link:
            repro.append(f"<a href=\"{esc(f.link)}\">upstream</a>")
        first = sorted(f.cases, key=sort_key)[:1]
        repro += [f"<a href=\"cases/{c.slug}.html\">a case</a>" for c in first]
        where = " ".join(x for x in (f"case <code>{esc(f.case)}</code>" if f.case else "",
                                     f"<code>{esc(f.family)}</code>" if f.family else "",
                                     f"model <code>{esc(f.model)}</code>" if f.model else "") if x)
        out.append(f"<tr id=\"finding-{f.index}\" class=\"{cls}\" data-state=\"{cls}\"><td>{f.index}</td>"
                   f"<td><code>{esc(f.engine)}</code></td><td>{where}</td><td><code>{esc(f.plan)}</code></td>"
                   f"<td>{esc(f.kind)}</td><td>{esc(f.note)}<br><small><code>{esc(f.source)}</code></small></td>"
                   f"<td>{seen}</td><td><span class=\"badge {cls}\">{esc(state)}</span></td><td>{'<br>'.join(repro)}</td></tr>\n")
    out.append("</tbody></table>\n")
    return page("Findings: known engine deviations", "findings.html", "".join(out))


def _count_states(findings: Sequence[Finding]) -> List[Tuple[str, int]]:
    n: Dict[str, int] = {}
    for f in findings:
        k = {"dev": "reported", "ok": "passing now", "skip": "not reported", "none": "not run"}[finding_state(f)[0]]
        n[k] = n.get(k, 0) + 1
    return [(k, n[k]) for k in ("reported", "passing now", "not reported", "not run") if k in n]


def render_kernels(s: Site) -> str:
    rows: List[Tuple[str, List[Dict[str, Any]]]] = []
    for c in s.cases:
        if c.suite not in ("backend", "plugin"):
            continue
        d = {"suite": c.suite, "name": c.name, "dtype": c.dtype, "status": c.status, "message": c.message, "detail": c.detail}
        if kernel_pattern(d) is None:
            continue
        for name, got in rows:
            if name == c.backend:
                got.append(d)
                break
        else:
            rows.append((c.backend, [d]))
    out = ["<p class=\"meta\">Each kernel's cases on the built-in step patterns, grouped by scenario class: the worst "
           "result and the largest error against the float64 oracle (docs/conformance.md says how each is judged). "
           "From every <code>kvconform run -v</code> report read (<code>python3 scripts/matrix.py</code> runs them).</p>\n"]
    if not rows:
        out.append("<p id=\"no-kernels\">No kernel cases in these reports.</p>\n")
    else:
        out.append("<table id=\"kernels\"><thead><tr><th>implementation</th><th>dtype</th>"
                   + "".join(f"<th>{esc(n)}</th>" for n, _ in KERNEL_CLASSES) + "</tr></thead><tbody>\n")
        for r in kernel_rows(rows):
            out.append("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in r) + "</tr>\n")
        out.append("</tbody></table>\n")
    return page("Kernels \u00d7 dtype \u00d7 scenario class", "kernels.html", "".join(out))


def render_coverage(s: Site) -> str:
    rows, why = s.coverage
    out = [f"<p class=\"meta\">Every model folder of transformers {esc(s.release)} whose configuration speaks of "
           "sliding or chunked attention, or whose modeling file has attention sinks, beside the model types the "
           "model oracle's registry reads (<code>engines/models/coverage.py</code>).</p>\n"]
    if rows is None:
        out.append(f"<p id=\"no-coverage\">Not available: {esc(why)}.</p>\n")
    else:
        read = sum(1 for r in rows if not r[2].startswith("not read"))
        out.append(f"<p id=\"coverage-total\">{read} of {len(rows)} folders read by the registry.</p>\n")
        engines = coverage_engines(s.root, rows, s.cases)
        out.append(f"<table id=\"coverage\"><thead><tr><th>transformers {esc(s.release)} folder</th><th>local attention</th>"
                   "<th>registry reads</th><th>engines (this site's cases)</th></tr></thead><tbody>\n")
        out += [f"<tr class=\"{'skip' if m.startswith('not read') else 'ok'}\"><td><code>{esc(a)}</code></td><td>{esc(k)}</td>"
                f"<td>{esc(m)}</td><td class=\"engines\">{esc(engines.get(a, '-'))}</td></tr>\n" for a, k, m in rows]
        out.append("</tbody></table>\n")
    return page("Family coverage", "coverage.html", "".join(out))


# ---------------------------------------------------------------------------------------------------


def default_root() -> str:
    """The checkout the data files come from: the working folder when it is one, else the one this
    package sits in (python/kvconform)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for d in (os.getcwd(), here):
        if os.path.isdir(os.path.join(d, "engines")):
            return d
    return os.getcwd()


def build(report_dirs: Sequence[str], root: str, known: Optional[str] = None, models: Sequence[str] = (),
          release: Optional[str] = None) -> Dict[str, bytes]:
    """Every file of the site, by its path inside the output folder."""
    reports: List[Report] = []
    merged: Dict[str, Case] = {}
    for i, d in enumerate(report_dirs):
        report, cases = read_report(d, i)
        reports.append(report)
        for c in cases:
            merged.pop(c.id, None)  # a later report's result of the same case wins
            merged[c.id] = c
    cases = list(merged.values())
    families = Families(models)
    for c in cases:
        classify(c, families)
        c.slug = slug_of(c)
    findings = read_findings(root, known)
    attach_findings(findings, cases, root)
    release = release or coverage_release(root)
    site = Site(reports, cases, findings, engine_version(cases), root, coverage_rows(root, release), release)
    files: Dict[str, bytes] = {
        "site.css": CSS.encode(), "site.js": JS.encode(),
        "index.html": render_index(site).encode(), "matrix.html": render_matrix(site).encode(),
        "findings.html": render_findings(site).encode(), "kernels.html": render_kernels(site).encode(),
        "coverage.html": render_coverage(site).encode(),
    }
    for c in cases:
        if c.status in PAGE_STATUSES:
            files[f"cases/{c.slug}.html"] = render_case(site, c).encode()
    for f in findings:
        for p in f.repro:
            with open(os.path.join(root, p), "rb") as fh:
                files[f"repro/{p}"] = fh.read()
    return files


def write(files: Dict[str, bytes], out: str) -> None:
    """Writes the site into a new folder beside `out` and swaps it into place: a reader sees the old
    site or the new one, and nothing of an earlier site is left in it."""
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(out)}.tmp-{os.getpid()}")
    old = os.path.join(parent, f".{os.path.basename(out)}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for rel, data in sorted(files.items()):
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        if os.path.exists(out):
            if not os.path.isfile(os.path.join(out, "index.html")) and os.listdir(out):
                raise SiteError(f"{out}: exists and is not a kvconform site (no index.html): not replaced")
            os.rename(out, old)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="kvconform site", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("reports", nargs="+", metavar="REPORT_DIR", help="report folders (summary.json; report.html for pictures)")
    ap.add_argument("--out", default="reports/site", help="the site's folder (default reports/site), replaced whole")
    ap.add_argument("--root", default=None, help="the checkout: engines/, regressions/ (default: the working folder "
                    "when it is one, else this package's)")
    ap.add_argument("--known", default=None, help="known engine deviations (default engines/known_deviations.json, "
                    "else engines/*/expectations*.json)")
    ap.add_argument("--models", action="append", default=[], metavar="DIR",
                    help="model folders whose config.json names a model's family (repeatable; the --models of each "
                    "case's reproduce line is read first)")
    ap.add_argument("--release", default=None,
                    help="the transformers release of the coverage table (default: the newest pinned release)")
    a = ap.parse_args(argv)
    root = os.path.abspath(a.root) if a.root else default_root()
    try:
        files = build(a.reports, root, a.known, a.models, a.release)
        write(files, a.out)
    except SiteError as e:
        print(f"kvconform site: {e}", file=sys.stderr)
        return 2
    pages = sum(1 for k in files if k.startswith("cases/"))
    print(f"kvconform site: {os.path.join(a.out, 'index.html')}: {len(files)} files, {pages} case pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
