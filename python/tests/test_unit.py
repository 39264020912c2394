"""No daemon needed: the ctypes mirrors against the C compiler's layout,
importing without libbrig, and the error classes against brig's codes."""

import ctypes
import os
import subprocess
import sys

import pytest

import brig
from brig import _lib, errors

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _layout():
    exe = os.environ.get("BRIG_PY_LAYOUT")
    if not exe:
        pytest.skip("BRIG_PY_LAYOUT (the layout program ctest builds) is not set")
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    sizes, offsets, versions = {}, {}, {}
    for line in out.splitlines():
        a, b, c = line.split()
        if a == "version":
            versions[b] = int(c)
        elif b == "sizeof":
            sizes[a] = int(c)
        else:
            offsets[(a, b)] = int(c)
    return sizes, offsets, versions


def test_struct_mirrors_match_the_headers():
    sizes, offsets, versions = _layout()
    assert sizes["brig_spec"] <= _lib.SPEC_SIZE, "brig_spec outgrew the buffer in _lib.SPEC_SIZE"
    for cname, mirror in _lib.STRUCTS.items():
        assert cname in sizes, f"layout.c does not print {cname}"
        assert ctypes.sizeof(mirror) == sizes[cname], f"sizeof({cname})"
        c_fields = {f for (s, f) in offsets if s == cname}
        py_fields = {f[0] for f in mirror._fields_}
        assert c_fields == py_fields, f"{cname}: fields differ: C {sorted(c_fields)} vs Python {sorted(py_fields)}"
        for f in py_fields:
            assert getattr(mirror, f).offset == offsets[(cname, f)], f"offsetof({cname}, {f})"
    assert versions == {"up_opts": _lib.UP_OPTS_VERSION, "guest_exec_opts": _lib.GUEST_EXEC_OPTS_VERSION,
                        "run_opts": _lib.RUN_OPTS_VERSION, "checkpoint_opts": _lib.CHECKPOINT_OPTS_VERSION}


def test_import_without_libbrig_says_how_to_install():
    code = (
        "import brig\n"
        "try:\n"
        "    brig.Sandbox()\n"
        "except brig.LibraryNotFound as e:\n"
        "    assert isinstance(e, ImportError)\n"
        "    print(e)\n"
    )
    env = dict(os.environ, BRIG_LIBRARY="/nonexistent/libbrig.so", PYTHONPATH=PKG)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "cmake --install build" in r.stdout
    assert "/nonexistent/libbrig.so" in r.stdout


def test_every_brig_code_has_its_class():
    lib = _lib.lib
    for code in range(-1, -20, -1):
        cls = errors.error_class(code)
        assert cls is not brig.Error and cls.code == code
        assert issubclass(cls, brig.Error)
        assert lib.brig_error_name(code).decode() == errors._NAMES[code]
        e = cls("msg", code)
        assert e.name == errors._NAMES[code] and e.message == "msg"
    assert issubclass(brig.InvalidSpec, ValueError)
    assert issubclass(brig.NotFound, LookupError)


def test_invalid_spec_is_refused_before_the_daemon():
    with pytest.raises(brig.InvalidSpec) as ei:
        brig.Sandbox(network="host", store="sqlite:///proc/brig-never/x.db")
    assert "network" in str(ei.value)
    # egress rules are checked as brig checks them (no URLs, no IP literals)
    with pytest.raises(brig.InvalidSpec) as ei:
        brig.Sandbox(network="egress", allow=["https://example.com/"], store="sqlite:///proc/brig-never/x.db")
    assert "egress rule" in str(ei.value)
    with pytest.raises(brig.InvalidSpec):
        brig.Sandbox(network="egress", allow="example.com", store="sqlite:///proc/brig-never/x.db")
    with pytest.raises(brig.InvalidSpec) as ei:
        brig.Sandbox(runtime="no such runtime", store="sqlite:///proc/brig-never/x.db")
    assert "runtime" in str(ei.value)
