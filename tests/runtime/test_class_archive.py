"""The local driver's class-data archive: mapped by a local session started here only once built, built
complete or not at all (a truncated archive crashes the JVM), and (slow) a real build from a run on the
bundled sample that a session then maps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from privsyn_spark.errors import PrivsynError
from privsyn_spark.runtime.class_archive import archive_file, build
from privsyn_spark.runtime.session import JAVA_OPTIONS_KEY, LOCAL_DEFAULTS, jars_dir, local_settings

ROOT = Path(__file__).resolve().parents[2]
BASE = LOCAL_DEFAULTS[JAVA_OPTIONS_KEY]
REAL_JARS = jars_dir()  # the cache setup.sh filled (the tests' own cache is a temporary one)
WRITE_GARBAGE = ("import sys; path = sys.argv[-1].rsplit('-XX:ArchiveClassesAtExit=', 1)[1]; "
                 "open(path, 'wb').write(b'not an archive' * 1000)")
"""A stand-in for the sample run whose JVM leaves a broken archive where it was told to write one."""


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVSYN_SPARK_JARS_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVSYN_DRIVER_MEMORY", raising=False)
    return tmp_path / "cache"


def test_a_local_session_maps_the_archive_only_once_built(cache):
    assert local_settings({})[JAVA_OPTIONS_KEY] == BASE
    archive = archive_file(cache, "4g")
    cache.mkdir()
    archive.write_bytes(b"")
    assert local_settings({})[JAVA_OPTIONS_KEY] == f"{BASE} -XX:SharedArchiveFile={archive}"
    assert local_settings({"spark.driver.memory": "8g"})[JAVA_OPTIONS_KEY] == BASE  # another heap: another archive
    assert archive_file(cache, "8g") != archive
    assert JAVA_OPTIONS_KEY not in local_settings({JAVA_OPTIONS_KEY: "-Dmine=1"})  # the caller's options stay


def test_a_failed_sample_run_leaves_no_archive(cache):
    with pytest.raises(PrivsynError, match=r"the sample run failed \(exit 3\): boom"):
        build(cache, BASE, "4g", [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"])
    assert list(cache.iterdir()) == []


@pytest.mark.slow
def test_an_archive_the_jvm_cannot_map_is_never_installed(cache):
    """The check session maps it with -Xshare:on, which stops a JVM on an archive it cannot use."""
    with pytest.raises(PrivsynError, match=r"a session mapping the archive \(-Xshare:on\) failed"):
        build(cache, BASE, "4g", [sys.executable, "-c", WRITE_GARBAGE])
    assert list(cache.iterdir()) == []


@pytest.mark.slow
def test_the_built_archive_is_mapped_by_the_next_local_session(tmp_path, cache):
    cache.mkdir()
    for jar in REAL_JARS.glob("*.jar"):  # the Delta jars, so that the sample run writes Delta
        (cache / jar.name).symlink_to(jar)
    stale = cache / "driver-classes-0123456789abcdef.jsa"  # an archive for a java or pyspark since replaced
    stale.write_bytes(b"")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    done = subprocess.run([sys.executable, "-m", "privsyn_spark.cli", "jars", "--class-archive"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    archive = archive_file(cache, "4g")
    assert archive.is_file() and not list(cache.glob("*.partial")) and not stale.exists()
    assert f"class archive: {archive.name}, mapped by every local session started here" in done.stdout
    probe = ("from privsyn_spark.runtime.session import build_spark_session\n"
             "spark = build_spark_session(master='local[1]')\n"
             "print(spark.conf.get('spark.driver.extraJavaOptions'), spark.range(5).count())\n")
    used = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)
    assert used.returncode == 0, used.stderr[-3000:]
    assert used.stdout.split() == [*BASE.split(), f"-XX:SharedArchiveFile={archive}", "5"]
    assert "[warning][cds" not in used.stderr + used.stdout  # the JVM says so when it cannot map an archive
