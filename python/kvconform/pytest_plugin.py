"""`pytest --kvconform`: kvconform's kernel cases as pytest items, one per case id.

Kernels come from --kvconform-adapter SPEC (repeatable; ini `kvconform_adapters`), from
@kvconform.kernel functions in collected test modules (one collector per function) and from
conftest.py files. For each kernel, kvconform is asked for its case ids at collection
(`kvconform run --list`), and run ONCE, on the first selected item, for all the selected ones,
writing its JSON report; each item then passes, fails (with the case's message, error, bound,
margin and reproduce line) or skips from that report.
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import pytest

from .__main__ import worker_command
from .binary import NotFound, find
from .kernel import Kernel

_REGEX_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\])")


def pytest_addoption(parser):
    group = parser.getgroup("kvconform", "kvconform kernel conformance (docs/plugins.md)")
    group.addoption("--kvconform", action="store_true", default=False,
                    help="check @kvconform.kernel functions: one test per kvconform case")
    group.addoption("--kvconform-adapter", action="append", default=[], metavar="SPEC",
                    help="a kernel to check, module:function or path/file.py:function (repeatable)")
    group.addoption("--kvconform-bin", metavar="PATH", default=None,
                    help="the kvconform binary (default: $KVCONFORM_BIN, PATH, then a checkout's build/harness/cli/kvconform)")
    group.addoption("--kvconform-filter", metavar="REGEX", default=None,
                    help="only the cases whose id (the test name, e.g. kernel/decode_across_window/static/float32) matches")
    group.addoption("--kvconform-dtype", metavar="DTYPE", default=None,
                    help="only cases of this dtype (kvconform run --dtype): float32, float16, bfloat16, float64")
    group.addoption("--kvconform-args", metavar="ARGS", default=None,
                    help="more `kvconform run` arguments, one shell-quoted string (e.g. '--plugin-iterations 20 --backend-timeout 30')")
    group.addoption("--kvconform-report-dir", metavar="DIR", default=None,
                    help="keep kvconform's reports (junit.xml, summary.json, summary.md, report.html) in DIR/<kernel>")
    parser.addini("kvconform_adapters", "kernels to check with --kvconform (module:function or path.py:function)",
                  type="linelist", default=[])
    parser.addini("kvconform_args", "more `kvconform run` arguments for --kvconform", default="")


def pytest_configure(config):
    config.addinivalue_line("markers", "kvconform: a kvconform case (pytest --kvconform)")
    config._kvconform_runs = []


def _enabled(config):
    return config.getoption("kvconform")


class _Run:
    """One kernel's kvconform run: its case ids, then (once) its results."""

    def __init__(self, config, label, spec, from_option=False):
        self.config, self.label, self.spec, self.from_option = config, label, spec, from_option
        self.items = []
        self.ids = []           # full ids (plugin/<name>/<case>/<dtype>) after --kvconform-filter
        self.all_ids = []       # every id kvconform listed
        self.list_error = None
        self.results = None     # id -> case of summary.json
        self.summary = None
        self.run_error = None
        self.command = None
        self.output = ""

    # --- the kvconform command line
    def _binary(self):
        return find(self.config.getoption("kvconform_bin"), start=str(self.config.rootpath))

    def _extra(self):
        args = shlex.split(self.config.getini("kvconform_args") or "")
        args += shlex.split(self.config.getoption("kvconform_args") or "")
        dtype = self.config.getoption("kvconform_dtype")
        return args + (["--dtype", dtype] if dtype else [])

    def _base(self):
        binary, extra = self._binary(), self._extra()
        if not any(a == "--cases" or a.startswith("--cases=") for a in extra) and not os.path.isdir("cases"):
            # a checkout's build: its golden cases (an installed kvconform finds its own share/ copy)
            checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(binary))))
            if binary.endswith(os.path.join("build", "harness", "cli", "kvconform")) \
                    and os.path.isdir(os.path.join(checkout, "cases")):
                extra += ["--cases", os.path.join(checkout, "cases")]
        return [binary, "run", "--backend-cmd", worker_command(self.spec)] + extra

    def list(self):
        try:
            command = self._base() + ["--list"]
        except NotFound as e:
            self.list_error = str(e)
            return []
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            self.list_error = (f"`{_shell(command)}` exited with status {done.returncode}:\n"
                               + _tail(done.stderr + done.stdout))
            return []
        self.ids = [line.strip() for line in done.stdout.splitlines() if line.startswith("plugin/")]
        self.all_ids = list(self.ids)
        pattern = self.config.getoption("kvconform_filter")
        if pattern:
            self.ids = [i for i in self.ids if re.search(pattern, short_id(i))]
        if not self.ids:
            self.list_error = (f"no kvconform case selected for {self.label}"
                               + (f" (--kvconform-filter {pattern!r})" if pattern else "")
                               + f": `{_shell(command)}` printed:\n" + _tail(done.stdout + done.stderr))
        return self.ids

    def run(self, session):
        if self.results is not None or self.run_error is not None:
            return
        selected = [i.case_id for i in session.items if isinstance(i, CaseItem) and i.run is self]
        command = self._base()
        if sorted(selected) != sorted(self.all_ids):  # a selection: run only those
            command += ["--filter", "^(" + "|".join(_REGEX_SPECIAL.sub(r"\\\1", i) for i in selected) + ")$"]
        keep = self.config.getoption("kvconform_report_dir")
        if keep:
            report_dir = os.path.join(os.path.abspath(keep), re.sub(r"[^A-Za-z0-9_.-]", "_", self.label))
        else:
            report_dir = tempfile.mkdtemp(prefix="kvconform-")
        command += ["--report-dir", report_dir]
        path = os.path.join(report_dir, "summary.json")
        if os.path.exists(path):
            os.remove(path)  # a kept folder's previous report must not stand in for this run's
        self.command = command
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output = done.stdout
        try:
            with open(path) as f:
                self.summary = json.load(f)
        except (OSError, ValueError) as e:
            self.run_error = (f"`{_shell(command)}` exited with status {done.returncode} and wrote no report "
                              f"({path}: {e}):\n" + _tail(done.stdout))
            return
        self.returncode = done.returncode
        self.report_dir = report_dir
        self.results = {c["id"]: c for c in self.summary.get("cases", [])}

    def nothing_checked(self):
        if not self.summary:
            return False
        totals = self.summary.get("totals", {})
        return totals.get("passed", 0) + totals.get("deviations", 0) + totals.get("failed", 0) == 0


def short_id(full):
    """plugin/<kernel>/kernel/decode_across_window/static/float32 -> kernel/decode_across_window/static/float32"""
    parts = full.split("/", 2)
    return parts[2] if len(parts) == 3 and parts[0] == "plugin" else full


def _shell(command):
    return " ".join(shlex.quote(str(c)) for c in command)


def _tail(text, lines=40):
    rows = text.rstrip().splitlines()
    return "\n".join(rows[-lines:]) if rows else "(no output)"


class KvconformFailure(Exception):
    pass


class CaseItem(pytest.Item):
    def __init__(self, *, run, case_id, **kwargs):
        super().__init__(**kwargs)
        self.run, self.case_id = run, case_id
        self.add_marker("kvconform")

    def runtest(self):
        self.run.run(self.session)
        if self.run.run_error:
            raise KvconformFailure(self.run.run_error)
        case = self.run.results.get(self.case_id)
        if case is None:
            raise KvconformFailure(f"kvconform's report has no result for {self.case_id}; its output:\n"
                                   + _tail(self.run.output))
        status, message = case.get("status"), case.get("message") or ""
        self.user_properties.append(("kvconform.status", status))
        if message:
            self.user_properties.append(("kvconform.message", message))
        if status == "SKIP":
            pytest.skip(f"kvconform SKIP: {message}")
        if status == "FAIL":
            raise KvconformFailure(self._failure(case))

    def _failure(self, case):
        lines = [f"{case['id']}({case.get('params', '')}): FAIL {case.get('message', '')}"]
        if case.get("detail"):
            lines += ["  " + row for row in case["detail"].splitlines()]
        if case.get("error") is not None or case.get("bound") is not None:
            lines.append(f"  measured: error {_num(case.get('error'))}, bound {_num(case.get('bound'))}, "
                         f"margin {_num(case.get('margin'))} ({case.get('policy') or 'no policy'})")
        if case.get("reproduce"):
            lines.append(f"  reproduce: {case['reproduce']}")
        lines.append(f"  rerun under pytest: pytest --kvconform --kvconform-filter "
                     f"{shlex.quote('^' + re.escape(self.name) + '$')}"
                     + (f" --kvconform-adapter {shlex.quote(self.run.spec)}" if self.run.from_option else ""))
        return "\n".join(lines)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, KvconformFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return getattr(self, "path", None) or self.fspath, None, self.case_id


def _num(x):
    return "n/a" if x is None else f"{x:.3g}"


class ErrorItem(pytest.Item):
    """Stands for a kernel whose cases could not be listed: fails with the reason, never a silent green."""

    def __init__(self, *, message, **kwargs):
        super().__init__(**kwargs)
        self.message = message

    def runtest(self):
        raise KvconformFailure(self.message)

    def repr_failure(self, excinfo):
        return str(excinfo.value) if isinstance(excinfo.value, KvconformFailure) else super().repr_failure(excinfo)

    def reportinfo(self):
        return getattr(self, "path", None) or self.fspath, None, self.name


class KernelCollector(pytest.Collector):
    def __init__(self, *, spec, label=None, from_option=False, **kwargs):
        super().__init__(**kwargs)
        self.kvc_run = _Run(self.config, label or spec, spec, from_option)
        self.config._kvconform_runs.append(self.kvc_run)

    def collect(self):
        ids = self.kvc_run.list()
        if not ids:
            return [ErrorItem.from_parent(self, name="kvconform", message=self.kvc_run.list_error)]
        items = [CaseItem.from_parent(self, name=short_id(i), run=self.kvc_run, case_id=i) for i in ids]
        self.kvc_run.items = items
        return items


def _spec_of(kernel_obj, module, attr):
    path = getattr(module, "__file__", None)
    return f"{os.path.abspath(path)}:{attr}" if path else f"{module.__name__}:{attr}"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector, name, obj):
    if isinstance(obj, Kernel) and _enabled(collector.config):
        module = collector.obj if isinstance(collector, pytest.Module) else sys.modules.get(obj.__module__)
        return KernelCollector.from_parent(collector, name=name, spec=_spec_of(obj, module, name), label=name)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """--kvconform-adapter kernels and conftest kernels: collected here, before -k / -m deselect.
    Not when the command line names test nodes (FILE::NAME): then only those run."""
    if not _enabled(config):
        return
    if not any("::" in str(a) for a in config.args):
        specs = [(s, s, True) for s in list(config.getoption("kvconform_adapter")) + list(config.getini("kvconform_adapters"))]
        for plugin in config.pluginmanager.get_plugins():
            path = getattr(plugin, "__file__", "") or ""
            if os.path.basename(path) == "conftest.py":
                where = os.path.relpath(path, str(config.rootpath))
                specs += [(_spec_of(v, plugin, k), f"{where}:{k}", False)
                          for k, v in sorted(vars(plugin).items()) if isinstance(v, Kernel)]
        seen = {r.spec for r in config._kvconform_runs}
        for spec, label, from_option in specs:
            if spec in seen:
                continue
            seen.add(spec)
            collector = KernelCollector.from_parent(session, name=label, nodeid=label, spec=spec, label=label,
                                                    from_option=from_option)
            collected = collector.collect()
            # counted in "collected N items" like the items pytest found itself
            session.ihook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, collected))
            items.extend(collected)
    if not any(isinstance(i, (CaseItem, ErrorItem)) for i in items):
        items.append(ErrorItem.from_parent(session, name="kvconform", nodeid="kvconform", message=(
            "pytest --kvconform found no kernel: give --kvconform-adapter module:function (or path.py:function), "
            "set kvconform_adapters in the ini file, or define an @kvconform.kernel function in a collected "
            "test module or conftest.py")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if isinstance(item, CaseItem) and report.skipped and isinstance(report.longrepr, tuple):
        report.longrepr = (item.nodeid, None, report.longrepr[2])  # the case, not this file's line


def pytest_sessionfinish(session, exitstatus):
    if not _enabled(session.config):
        return
    if any(r.nothing_checked() for r in session.config._kvconform_runs) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _enabled(config):
        return
    for r in config._kvconform_runs:
        if r.summary is None:
            continue
        t = r.summary.get("totals", {})
        terminalreporter.write_line(
            f"kvconform {r.label}: {t.get('passed', 0)} passed, {t.get('failed', 0)} failed, "
            f"{t.get('skipped', 0)} skipped; reports in {r.report_dir}")
        if r.nothing_checked():
            terminalreporter.write_line(
                f"kvconform {r.label}: NOTHING WAS CHECKED (every selected case is a SKIP): this run fails",
                red=True, bold=True)
