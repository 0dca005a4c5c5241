"""The local artifact storage: atomic writes, write-once files never replaced, URI joins."""

from __future__ import annotations

import pytest

from privsyn_spark.runtime.storage import ArtifactExists, LocalStorage, join


def test_local_storage_writes_atomically_and_never_replaces_a_write_once_file(tmp_path):
    storage = LocalStorage()
    target = join(str(tmp_path), "run", "measurements", "m.npz")
    storage.write(target, b"first", overwrite=False)
    with pytest.raises(ArtifactExists):
        storage.write(target, b"second", overwrite=False)
    assert storage.read(target) == b"first"
    storage.write(target, b"third")  # overwritable files (state, report) are replaced
    assert storage.read(target) == b"third"
    assert [p.name for p in (tmp_path / "run" / "measurements").iterdir()] == ["m.npz"]  # no temporary left
    assert join("s3a://bucket/runs/", "r", "m") == "s3a://bucket/runs/r/m"
