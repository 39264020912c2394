"""Shared fixtures: the package from this checkout, a unique run id (label
brig.test=<id>, as tests/testutil.c uses), a namespace of its own, a SQLite
store in a temporary directory, and cleanup of every container and volume
carrying the label, also when tests fail."""

import os
import secrets
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

RUN_ID = f"py{os.getpid()}-{secrets.token_hex(3)}"
IMAGE = os.environ.get("BRIG_TEST_IMAGE") or "brig-test:local"
LABELS = {"brig.test": RUN_ID}



def _docker():
    import docker  # Debian's python3-docker: tests only

    return docker.from_env()


def _cleanup():
    try:
        d = _docker()
    except Exception:
        return
    flt = {"label": f"brig.test={RUN_ID}"}
    for c in d.containers.list(all=True, filters=flt):
        try:
            c.remove(force=True, v=True)
        except Exception:
            pass
    for v in d.volumes.list(filters=flt):
        try:
            v.remove(force=True)
        except Exception:
            pass


@pytest.fixture(scope="session")
def tmpstore():
    d = tempfile.mkdtemp(prefix="brig-pytest-")
    os.environ["BRIG_CHECKPOINT_DIR"] = os.path.join(d, "checkpoints")
    yield f"sqlite://{d}/brig.db"
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def cleanup_docker():
    yield
    _cleanup()


@pytest.fixture(scope="session")
def docker_client():
    return _docker()


@pytest.fixture
def ns(request):
    # Namespaces are 1..63 of [A-Za-z0-9_.-]; one per test keeps them apart.
    name = request.node.name.replace("[", "-").replace("]", "")[:20]
    return f"{RUN_ID}-{name}"[:63].rstrip("-_.")


@pytest.fixture
def make_sandbox(tmpstore, ns):
    import brig

    made = []

    def make(**kw):
        kw.setdefault("ns", ns)
        kw.setdefault("store", tmpstore)
        kw.setdefault("labels", LABELS)
        sb = brig.Sandbox(kw.pop("image", IMAGE), **kw)
        made.append(sb)
        return sb

    yield make
    for sb in made:
        try:
            sb.close()
            if not sb.anonymous:
                sb.destroy()
        except Exception:
            pass


@pytest.fixture
def sb(make_sandbox):
    return make_sandbox(cpus=1.0, memory_mb=1024, workspace_mb=256, runtime_mb=128)
