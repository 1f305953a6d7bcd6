"""Which kvconform binary the package runs, in a fake wheel layout (no build needed): the wheel's own
binary comes before PATH's, the wheel's `kvconform` command runs it (with the installed torch's lib/
on LD_LIBRARY_PATH only where torch is not beside the package), and the engine plugin runs an
installed binary in the working folder when no checkout is around. scripts/wheel_smoke.sh runs the
real wheel."""
import os
import stat

import pytest

from kvconform import _launch, binary, pytest_plugin


def _executable(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def wheel(tmp_path, monkeypatch):
    """site-packages/kvconform/bin/kvconform with share/kvconform/ beside it, and another kvconform on PATH."""
    site = tmp_path / "site-packages"
    packaged = _executable(site / "kvconform" / "bin" / "kvconform")
    monkeypatch.setattr(binary, "PACKAGED", packaged)
    monkeypatch.setattr(_launch, "PACKAGED", packaged)
    other = _executable(tmp_path / "elsewhere" / "kvconform")
    monkeypatch.setenv("PATH", os.path.dirname(other) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.delenv("KVCONFORM_BIN", raising=False)
    return site, packaged, other


def test_the_wheels_binary_comes_before_path(wheel, tmp_path):
    _, packaged, other = wheel
    assert binary.find(start=str(tmp_path)) == packaged
    os.chmod(packaged, 0o644)  # the pure-Python package: no binary inside, PATH's
    assert binary.find(start=str(tmp_path)) == other


def test_an_explicit_binary_still_wins(wheel, tmp_path, monkeypatch):
    _, _, other = wheel
    monkeypatch.setenv("KVCONFORM_BIN", other)
    assert binary.find(start=str(tmp_path)) == other


def _launched(monkeypatch, argv):
    seen = {}

    def execv(path, args):
        seen.update(path=path, args=args, ld=os.environ.get("LD_LIBRARY_PATH"))
        raise SystemExit(0)

    monkeypatch.setattr(os, "execv", execv)
    with pytest.raises(SystemExit):
        _launch.main(argv)
    return seen


def test_the_command_runs_the_packaged_binary_with_torch_beside_it(wheel, monkeypatch):
    site, packaged, _ = wheel
    (site / "torch" / "lib").mkdir(parents=True)
    monkeypatch.setenv("LD_LIBRARY_PATH", "/keep")
    seen = _launched(monkeypatch, ["run", "--list"])
    assert seen["path"] == packaged and seen["args"] == [packaged, "run", "--list"]
    assert seen["ld"] == "/keep"  # the run path finds torch: nothing added


def test_the_command_finds_a_torch_installed_elsewhere(wheel, tmp_path, monkeypatch):
    elsewhere = tmp_path / "user-site" / "torch"
    (elsewhere / "lib").mkdir(parents=True)
    monkeypatch.setattr(_launch, "torch_lib", lambda: str(elsewhere / "lib"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    seen = _launched(monkeypatch, ["engine"])
    assert seen["ld"] == str(elsewhere / "lib")


def test_the_command_without_a_binary_says_where_it_looked(wheel, monkeypatch):
    _, packaged, _ = wheel
    os.remove(packaged)
    with pytest.raises(SystemExit) as e:
        _launch.main(["run"])
    assert packaged in str(e.value)


def test_an_installed_binary_has_its_engine_generator(wheel):
    site, packaged, other = wheel
    assert not pytest_plugin._installed_data(packaged, pytest_plugin.ENGINE_ROOT_MARK)
    _executable(site / "kvconform" / "share" / "kvconform" / pytest_plugin.ENGINE_ROOT_MARK)
    assert pytest_plugin._installed_data(packaged, pytest_plugin.ENGINE_ROOT_MARK)
    assert not pytest_plugin._installed_data(other, pytest_plugin.ENGINE_ROOT_MARK)
