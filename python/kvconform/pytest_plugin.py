"""`pytest --kvconform` and `pytest --kvconform-engine`: kvconform's cases as pytest items, one per case id.

Kernels come from --kvconform-adapter SPEC (repeatable; ini `kvconform_adapters`), from
@kvconform.kernel functions in collected test modules (one collector per function) and from
conftest.py files; engines from --kvconform-engine SPEC (repeatable; ini `kvconform_engines`), a
kvconform.Engine subclass. For each, kvconform is asked for its case ids at collection (`kvconform
run --list`, `kvconform engine --list`), and run ONCE, on the first selected item, for all the
selected ones, writing its JSON report; each item then passes, fails (with the case's FAIL line:
message, error, bound, margin, reproduce line) or skips from that report. With
--kvconform-expectations FILE (docs/expectations.md) an expected failure is an xfail, an unexpected
pass an XPASS (a failure under --kvconform-strict-expectations), an expected skip a skip.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pytest

from .__main__ import worker_command
from .binary import CHECKOUT_BUILD, OLD_CHECKOUT_BUILD, NotFound, ancestors, find
from .kernel import Kernel

_REGEX_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\])")
ENGINE_ROOT_MARK = os.path.join("engines", "models", "make_models.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvconform", "kvconform kernel and engine conformance (docs/plugins.md, docs/engines.md)")
    group.addoption("--kvconform", action="store_true", default=False,
                    help="check @kvconform.kernel functions: one test per kvconform case")
    group.addoption("--kvconform-adapter", action="append", default=[], metavar="SPEC",
                    help="a kernel to check, module:function or path/file.py:function (repeatable)")
    group.addoption("--kvconform-engine", action="append", default=[], metavar="SPEC",
                    help="an engine to check, path/adapter.py:EngineClass or module:EngineClass (repeatable): "
                         "one test per engine case (model x plan)")
    group.addoption("--kvconform-bin", metavar="PATH", default=None,
                    help="the kvconform binary (default: $KVCONFORM_BIN, PATH, then a checkout's "
                         "build/cli/kvconform)")
    group.addoption("--kvconform-filter", metavar="REGEX", default=None,
                    help="only the cases whose id (the test name: kernel/decode_across_window/static/float32, "
                         "mistral-w5/rollback) matches")
    group.addoption("--kvconform-dtype", metavar="DTYPE", default=None,
                    help="only kernel cases of this dtype (kvconform run --dtype): float32, float16, bfloat16, float64")
    group.addoption("--kvconform-args", metavar="ARGS", default=None,
                    help="more `kvconform run` arguments, one shell-quoted string "
                         "(e.g. '--plugin-iterations 20 --backend-timeout 30')")
    group.addoption("--kvconform-engine-args", metavar="ARGS", default=None,
                    help="more `kvconform engine` arguments, one shell-quoted string (e.g. \"--plans all --engine-options "
                         "'{\\\"cache\\\": \\\"paged\\\"}'\")")
    group.addoption("--kvconform-engine-python", metavar="PATH", default=None,
                    help="the interpreter that runs the engine worker (default: pytest's own), e.g. the engine's venv")
    group.addoption("--kvconform-root", metavar="DIR", default=None,
                    help="the kvconform checkout `kvconform engine` runs in (it needs engines/models/; default: "
                         "$KVCONFORM_ROOT, then the checkout of the binary, of the rootdir or of the working directory; "
                         "an installed kvconform, the wheel's, runs in the working directory with its own engines/models/)")
    group.addoption("--kvconform-report-dir", metavar="DIR", default=None,
                    help="keep kvconform's reports (junit.xml, summary.json, summary.md, report.html) in DIR/<kernel or engine>")
    group.addoption("--kvconform-expectations", action="append", default=[], metavar="FILE",
                    help="the implementation's expectations file (docs/expectations.md; repeatable): its expected "
                         "failures are xfail, its unexpected passes XPASS")
    group.addoption("--kvconform-strict-expectations", action="store_true", default=False,
                    help="an expectation whose cases all passed fails those tests (kvconform --strict-expectations)")
    parser.addini("kvconform_expectations", "expectations files (docs/expectations.md), as --kvconform-expectations",
                  type="linelist", default=[])
    parser.addini("kvconform_adapters", "kernels to check with --kvconform (module:function or path.py:function)",
                  type="linelist", default=[])
    parser.addini("kvconform_engines", "engines to check (module:Class or path.py:Class), as --kvconform-engine",
                  type="linelist", default=[])
    parser.addini("kvconform_args", "more `kvconform run` arguments for --kvconform", default="")
    parser.addini("kvconform_engine_args", "more `kvconform engine` arguments for --kvconform-engine", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kvconform: a kvconform case (pytest --kvconform, --kvconform-engine)")
    config.stash[_RUNS] = []


_RUNS = pytest.StashKey[List["_Run"]]()


def _engine_specs(config: pytest.Config) -> List[str]:
    return list(config.getoption("kvconform_engine")) + list(config.getini("kvconform_engines"))


def _kernels_enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("kvconform"))


def _enabled(config: pytest.Config) -> bool:
    return _kernels_enabled(config) or bool(config.getoption("kvconform_engine"))


class _Run:
    """One kernel's kvconform run: its case ids, then (once) its results."""

    subcommand = "run"
    prefix = "plugin/"

    def __init__(self, config: pytest.Config, label: str, spec: str, from_option: bool = False) -> None:
        self.config, self.label, self.spec, self.from_option = config, label, spec, from_option
        self.ids: List[str] = []       # full ids after --kvconform-filter
        self.all_ids: List[str] = []   # every id kvconform listed
        self.list_error: Optional[str] = None
        self.results: Optional[Dict[str, Dict[str, Any]]] = None  # id -> case of summary.json
        self.summary: Optional[Dict[str, Any]] = None
        self.run_error: Optional[str] = None
        self.output = ""
        self.report_dir = ""

    # --- the kvconform command line
    def _binary(self) -> str:
        return find(self.config.getoption("kvconform_bin"), start=str(self.config.rootpath))

    def _extra(self) -> List[str]:
        args = shlex.split(self.config.getini("kvconform_args") or "")
        args += shlex.split(self.config.getoption("kvconform_args") or "")
        dtype = self.config.getoption("kvconform_dtype")
        return args + (["--dtype", dtype] if dtype else [])

    def _expectations(self) -> List[str]:
        """--expectations FILE (absolute: an engine run starts in the kvconform checkout) and --strict-expectations."""
        files = list(self.config.getoption("kvconform_expectations")) + list(self.config.getini("kvconform_expectations"))
        args: List[str] = []
        for f in files:
            args += ["--expectations", os.path.abspath(f)]
        if self.config.getoption("kvconform_strict_expectations"):
            args.append("--strict-expectations")
        return args

    def _base(self) -> List[str]:
        binary, extra = self._binary(), self._extra() + self._expectations()
        if not any(a == "--cases" or a.startswith("--cases=") for a in extra) and not os.path.isdir("cases"):
            # a checkout's build: its golden cases (an installed kvconform finds its own share/ copy)
            checkout = _checkout_of_binary(binary)
            if checkout and os.path.isdir(os.path.join(checkout, "cases")):
                extra += ["--cases", os.path.join(checkout, "cases")]
        return [binary, "run", "--backend-cmd", worker_command(self.spec)] + extra

    def _cwd(self) -> Optional[str]:
        return None

    def short_id(self, full: str) -> str:
        """plugin/<kernel>/kernel/decode_across_window/static/float32 -> kernel/decode_across_window/static/float32"""
        parts = full.split("/", 2)
        return parts[2] if len(parts) == 3 and parts[0] == "plugin" else full

    def rerun_hint(self, name: str) -> str:
        return (f"pytest --kvconform --kvconform-filter {shlex.quote('^' + re.escape(name) + '$')}"
                + (f" --kvconform-adapter {shlex.quote(self.spec)}" if self.from_option else ""))

    def list(self) -> List[str]:
        try:
            command = self._base() + ["--list"]
            cwd = self._cwd()
        except NotFound as e:
            self.list_error = str(e)
            return []
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
        if done.returncode != 0:
            self.list_error = (f"`{_shell(command)}`{_where(cwd)} exited with status {done.returncode}:\n"
                               + _tail(done.stderr + done.stdout))
            return []
        self.ids = [line.strip() for line in done.stdout.splitlines() if line.startswith(self.prefix)]
        self.all_ids = list(self.ids)
        pattern = self.config.getoption("kvconform_filter")
        if pattern:
            self.ids = [i for i in self.ids if re.search(pattern, self.short_id(i))]
        if not self.ids:
            self.list_error = (f"no kvconform case selected for {self.label}"
                               + (f" (--kvconform-filter {pattern!r})" if pattern else "")
                               + f": `{_shell(command)}`{_where(cwd)} printed:\n" + _tail(done.stdout + done.stderr))
        return self.ids

    def run(self, session: pytest.Session) -> None:
        if self.results is not None or self.run_error is not None:
            return
        selected = [i.case_id for i in session.items if isinstance(i, CaseItem) and i.kvc_run is self]
        command = self._base()
        cwd = self._cwd()
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
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
        self.output = done.stdout
        try:
            with open(path) as f:
                self.summary = json.load(f)
        except (OSError, ValueError) as e:
            self.run_error = (f"`{_shell(command)}`{_where(cwd)} exited with status {done.returncode} and wrote no "
                              f"report ({path}: {e}):\n" + _tail(done.stdout))
            return
        self.report_dir = report_dir
        assert self.summary is not None
        self.results = {c["id"]: c for c in self.summary.get("cases", [])}

    def nothing_checked(self) -> bool:
        if not self.summary:
            return False
        totals = self.summary.get("totals", {})
        return bool(totals.get("passed", 0) + totals.get("deviations", 0) + totals.get("failed", 0) == 0)


class _EngineRun(_Run):
    """One engine's `kvconform engine` run, in a kvconform checkout (the model zoo's generator)."""

    subcommand = "engine"
    prefix = "engine/"

    def _extra(self) -> List[str]:
        args = shlex.split(self.config.getini("kvconform_engine_args") or "")
        return args + shlex.split(self.config.getoption("kvconform_engine_args") or "")

    def _base(self) -> List[str]:
        python = self.config.getoption("kvconform_engine_python")
        command = worker_command(self.spec, python, serve="serve-engine")
        return [self._binary(), "engine", "--engine-cmd", command] + self._extra() + self._expectations()

    def _cwd(self) -> Optional[str]:
        explicit = self.config.getoption("kvconform_root") or os.environ.get("KVCONFORM_ROOT")
        if explicit:
            if not os.path.isfile(os.path.join(explicit, ENGINE_ROOT_MARK)):
                raise NotFound(f"kvconform root {explicit} (--kvconform-root / KVCONFORM_ROOT) has no {ENGINE_ROOT_MARK}")
            return os.path.abspath(explicit)
        binary = self._binary()
        starts = [p for p in (_checkout_of_binary(binary), str(self.config.rootpath), os.getcwd()) if p]
        for start in starts:
            for folder in ancestors(start):
                if os.path.isfile(os.path.join(folder, ENGINE_ROOT_MARK)):
                    return folder
        if _installed_data(binary, ENGINE_ROOT_MARK):
            return None  # an installed kvconform (the wheel's): its own generator, the zoo in ./build/engine-models
        raise NotFound(f"`kvconform engine` runs in a kvconform checkout (it writes the model zoo with {ENGINE_ROOT_MARK}); "
                       f"none found above {', '.join(starts)}: pass --kvconform-root DIR or set KVCONFORM_ROOT")

    def short_id(self, full: str) -> str:
        """engine/<engine>/<model>/<plan> -> <model>/<plan> (the engine's name may hold slashes; models
        and plans do not)."""
        parts = full.split("/")
        return "/".join(parts[-2:]) if len(parts) >= 4 and parts[0] == "engine" else full

    def rerun_hint(self, name: str) -> str:
        return (f"pytest --kvconform-engine {shlex.quote(self.spec)} --kvconform-filter "
                f"{shlex.quote('^' + re.escape(name) + '$')}")


def _installed_data(binary: str, rel: str) -> bool:
    """Whether an installed binary (the wheel's kvconform/bin, or cmake --install's <prefix>/bin) has
    the data file REL in its share/kvconform/, where it looks first (cli/cli_util.cpp data_folder)."""
    return os.path.isfile(os.path.join(os.path.dirname(os.path.dirname(binary)), "share", "kvconform", rel))


def _checkout_of_binary(binary: str) -> Optional[str]:
    """The checkout whose build/cli/kvconform this is, if it is one."""
    for build in (CHECKOUT_BUILD, OLD_CHECKOUT_BUILD):
        if binary.endswith(os.sep + build):
            return binary[: -len(os.sep + build)]
    return None


def _shell(command: Sequence[str]) -> str:
    return " ".join(shlex.quote(str(c)) for c in command)


def _where(cwd: Optional[str]) -> str:
    return f" (in {cwd})" if cwd else ""


def _tail(text: str, lines: int = 40) -> str:
    rows = text.rstrip().splitlines()
    return "\n".join(rows[-lines:]) if rows else "(no output)"


class KvconformFailure(Exception):
    pass


class CaseItem(pytest.Item):
    def __init__(self, *, kvc_run: _Run, case_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kvc_run, self.case_id = kvc_run, case_id
        self.add_marker("kvconform")

    def runtest(self) -> None:
        self.kvc_run.run(self.session)
        if self.kvc_run.run_error:
            raise KvconformFailure(self.kvc_run.run_error)
        assert self.kvc_run.results is not None
        case = self.kvc_run.results.get(self.case_id)
        if case is None:
            raise KvconformFailure(f"kvconform's report has no result for {self.case_id}; its output:\n"
                                   + _tail(self.kvc_run.output))
        status, message = case.get("status"), case.get("message") or ""
        self.user_properties.append(("kvconform.status", status))
        if message:
            self.user_properties.append(("kvconform.message", message))
        expectation = case.get("expectation") or {}
        if expectation:
            self.user_properties.append(("kvconform.expectation", expectation.get("outcome")))
        if status == "SKIP":
            pytest.skip(f"kvconform SKIP: {message}")
        if status == "FAIL":
            raise KvconformFailure(self._failure(case))
        if expectation.get("outcome") == "expected_failure":
            pytest.xfail(message)
        if expectation.get("outcome") == "unexpected_pass":
            # An xfail mark added while the test runs makes its pass an XPASS (pytest re-reads the marks after the call).
            self.add_marker(pytest.mark.xfail(reason=f"unexpected pass: {expectation.get('file')}:{expectation.get('line')} "
                                                     f"expects it to fail ({expectation.get('reason')})", strict=False))

    def _failure(self, case: Dict[str, Any]) -> str:
        lines = [f"{case['id']}({case.get('params', '')}): FAIL {case.get('message', '')}"]
        if case.get("detail"):
            lines += ["  " + row for row in case["detail"].splitlines()]
        if case.get("error") is not None or case.get("bound") is not None:
            lines.append(f"  measured: error {_num(case.get('error'))}, bound {_num(case.get('bound'))}, "
                         f"margin {_num(case.get('margin'))} ({case.get('policy') or 'no policy'})")
        if case.get("reproduce"):
            lines.append(f"  reproduce: {case['reproduce']}")
        lines.append(f"  rerun under pytest: {self.kvc_run.rerun_hint(self.name)}")
        return "\n".join(lines)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Union[str, Any]:
        if isinstance(excinfo.value, KvconformFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> Tuple[Any, Optional[int], str]:
        return self.path, None, self.case_id


def _num(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{x:.3g}"


class ErrorItem(pytest.Item):
    """Stands for a kernel or engine whose cases could not be listed: fails with the reason, never a silent green."""

    def __init__(self, *, message: Optional[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message or "(no message)"

    def runtest(self) -> None:
        raise KvconformFailure(self.message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Union[str, Any]:
        return str(excinfo.value) if isinstance(excinfo.value, KvconformFailure) else super().repr_failure(excinfo)

    def reportinfo(self) -> Tuple[Any, Optional[int], str]:
        return self.path, None, self.name


class KernelCollector(pytest.Collector):
    run_class = _Run

    def __init__(self, *, spec: str, label: Optional[str] = None, from_option: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kvc_run = self.run_class(self.config, label or spec, spec, from_option)
        self.config.stash[_RUNS].append(self.kvc_run)

    def collect(self) -> List[Union[pytest.Item, pytest.Collector]]:
        ids = self.kvc_run.list()
        if not ids:
            return [ErrorItem.from_parent(self, name="kvconform", message=self.kvc_run.list_error)]
        return [CaseItem.from_parent(self, name=self.kvc_run.short_id(i), kvc_run=self.kvc_run, case_id=i) for i in ids]


class EngineCollector(KernelCollector):
    run_class = _EngineRun


def _spec_of(module: Any, attr: str) -> str:
    path = getattr(module, "__file__", None)
    return f"{os.path.abspath(path)}:{attr}" if path else f"{module.__name__}:{attr}"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: Union[pytest.Module, pytest.Class], name: str, obj: object) -> Optional[KernelCollector]:
    if isinstance(obj, Kernel) and _kernels_enabled(collector.config):
        module = collector.obj if isinstance(collector, pytest.Module) else sys.modules.get(obj.__module__)
        return KernelCollector.from_parent(collector, name=name, spec=_spec_of(module, name), label=name)
    return None


def _add(session: pytest.Session, items: List[pytest.Item], cls: type[KernelCollector], spec: str, label: str,
         from_option: bool) -> None:
    collector = cls.from_parent(session, name=label, nodeid=label, spec=spec, label=label, from_option=from_option)
    collected = list(collector.collect())
    # counted in "collected N items" like the items pytest found itself
    session.ihook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, collected))
    items.extend(i for i in collected if isinstance(i, pytest.Item))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: List[pytest.Item]) -> None:
    """--kvconform-adapter kernels, conftest kernels and --kvconform-engine engines: collected here,
    before -k / -m deselect. Not when the command line names test nodes (FILE::NAME): then only those run."""
    if not _enabled(config):
        return
    if not any("::" in str(a) for a in config.args):
        seen = {(type(r), r.spec) for r in config.stash[_RUNS]}
        if _kernels_enabled(config):
            adapters = list(config.getoption("kvconform_adapter")) + list(config.getini("kvconform_adapters"))
            specs = [(s, s, True) for s in adapters]
            for plugin in config.pluginmanager.get_plugins():
                path = getattr(plugin, "__file__", "") or ""
                if os.path.basename(path) == "conftest.py":
                    where = os.path.relpath(path, str(config.rootpath))
                    specs += [(_spec_of(plugin, k), f"{where}:{k}", False)
                              for k, v in sorted(vars(plugin).items()) if isinstance(v, Kernel)]
            for spec, label, from_option in specs:
                if (_Run, spec) not in seen:
                    seen.add((_Run, spec))
                    _add(session, items, KernelCollector, spec, label, from_option)
        for spec in _engine_specs(config):
            if (_EngineRun, spec) not in seen:
                seen.add((_EngineRun, spec))
                _add(session, items, EngineCollector, spec, spec, True)
    if _kernels_enabled(config) and not any(type(r) is _Run for r in config.stash[_RUNS]):
        items.append(ErrorItem.from_parent(session, name="kvconform", nodeid="kvconform", message=(
            "pytest --kvconform found no kernel: give --kvconform-adapter module:function (or path.py:function), "
            "set kvconform_adapters in the ini file, or define an @kvconform.kernel function in a collected "
            "test module or conftest.py")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if isinstance(item, CaseItem) and report.skipped and isinstance(report.longrepr, tuple):
        report.longrepr = (item.nodeid, None, report.longrepr[2])  # the case, not this file's line


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _enabled(session.config):
        return
    if any(r.nothing_checked() for r in session.config.stash[_RUNS]) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _enabled(config):
        return
    for r in config.stash[_RUNS]:
        if r.summary is None:
            continue
        t = r.summary.get("totals", {})
        terminalreporter.write_line(
            f"kvconform {r.label}: {t.get('passed', 0)} passed, {t.get('failed', 0)} failed, "
            f"{t.get('skipped', 0)} skipped"
            + (f" ({t['expected_failures']} expected failures)" if t.get("expected_failures") else "")
            + f"; reports in {r.report_dir}")
        if r.nothing_checked():
            terminalreporter.write_line(
                f"kvconform {r.label}: NOTHING WAS CHECKED (every selected case is a SKIP): this run fails",
                red=True, bold=True)
