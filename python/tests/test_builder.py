"""TransferData: the job JSON it builds, FTS3's documents it takes, and the
clear errors bad input gets before anything is sent."""

from __future__ import annotations

import datetime as dt

import pytest

from sluice import TransferData


def test_files_directories_and_options():
    t = TransferData(label="run42", batch=True, checksum="sha256", sync_level="checksum", preserve_mtime=True,
                     priority=4, retry=2, submission_id="run42-1", streams=8, optimization=True,
                     deadline=dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc))
    t.add("sluice://dtn1/a.h5", "sluice://dtn2/x/a.h5", size=10, checksum="adler32:0a1b2c3d", metadata={"run": 42})
    t.add_dir("sluice://dtn1/raw/", "sluice://dtn2/x/raw/")
    assert len(t) == 2
    assert t.to_dict() == {
        "files": [
            {"source": "sluice://dtn1/a.h5", "destination": "sluice://dtn2/x/a.h5", "size": 10,
             "checksum": "adler32:0a1b2c3d", "metadata": {"run": 42}},
            {"source": "sluice://dtn1/raw", "destination": "sluice://dtn2/x/raw", "recursive": True},
        ],
        "label": "run42", "class": "batch", "checksum_algorithm": "sha256", "sync_level": "checksum",
        "preserve_mtime": True, "priority": 4, "retry": 2, "submission_id": "run42-1", "streams": 8,
        "optimization": True, "deadline": "2030-01-02T03:04:05+00:00",
    }


def test_defaults_send_only_files():
    t = TransferData().add("sluice://a/f", "sluice://b/f")
    assert t.to_dict() == {"files": [{"source": "sluice://a/f", "destination": "sluice://b/f"}]}
    assert TransferData(batch=False, overwrite=True, verify=False).add("sluice://a/f", "sluice://b/f").to_dict() == {
        "files": [{"source": "sluice://a/f", "destination": "sluice://b/f"}],
        "class": "interactive", "overwrite": True, "verify_checksum": False}


@pytest.mark.parametrize("level,want", [(0, "exists"), (1, "size"), (2, "mtime"), (3, "checksum"), ("size", "size")])
def test_sync_levels_by_name_or_globus_number(level, want):
    t = TransferData().add_dir("sluice://a/d", "sluice://b/d", sync_level=level)
    assert t.to_dict()["sync_level"] == want


def test_fts3_transfer_and_job_documents():
    # What fts3.rest.client.easy's new_transfer and new_job build.
    transfer = {"sources": ["sluice://a/f", "sluice://c/f"], "destinations": ["sluice://b/f"],
                "filesize": 5, "checksum": "adler32:00000001", "metadata": {"rucio": 1}, "activity": None}
    fts3_job = {"files": [transfer], "params": {"overwrite": False, "verify_checksum": "both", "priority": 3,
                                                "job_metadata": {"scope": "x"}, "reuse": None},
                "delegation_id": None}
    t = TransferData.from_fts3(fts3_job, label="from-rucio")
    d = t.to_dict()
    assert d["files"] == [{"sources": ["sluice://a/f", "sluice://c/f"], "destinations": ["sluice://b/f"],
                           "filesize": 5, "checksum": "adler32:00000001", "metadata": {"rucio": 1}}]
    assert d["params"] == fts3_job["params"]
    assert d["label"] == "from-rucio"
    # A sync level asks for its replacing: FTS3's default overwrite false goes.
    t.sync_level = "size"
    assert "overwrite" not in t.to_dict()["params"]
    assert fts3_job["params"]["overwrite"] is False  # the caller's document is untouched


@pytest.mark.parametrize("make,message", [
    (lambda: TransferData().add("/local/path", "sluice://b/f"), "want a URL"),
    (lambda: TransferData().add("sluice://a/f"), "give a source and a destination"),
    (lambda: TransferData().add("sluice://a/f", "sluice://b/f", size=-1), "size -1"),
    (lambda: TransferData().add("sluice://a/f", "sluice://b/f", checksum="0a1b"), "ALGO:HEX"),
    (lambda: TransferData().add({"sources": ["sluice://a/f"]}), "want source(s) and destination(s)"),
    (lambda: TransferData().add({"source": "sluice://a/f", "destination": "sluice://b/f", "reuse": True}),
     "fields reuse are not a file's"),
    (lambda: TransferData(checksum="crc64"), "checksum 'crc64'"),
    (lambda: TransferData(priority=9), "priority 9"),
    (lambda: TransferData(sync_level="newer"), "sync level 'newer'"),
    (lambda: TransferData(sync_level=7), "sync level 7"),
    (lambda: TransferData(sync_level="size", overwrite=False), "give one"),
    (lambda: TransferData(sync_level="size").add_dir("sluice://a/d", "sluice://b/d", sync_level="exists"),
     "already has sync level size"),
    (lambda: TransferData().add_dir("sluice://a/d", "sluice://b/d", recursive=False), "copies a directory whole"),
    (lambda: TransferData().to_dict(), "no files"),
    (lambda: TransferData(deadline=dt.datetime(2030, 1, 1)).add("sluice://a/f", "sluice://b/f").to_dict(),
     "timezone-aware"),
    (lambda: TransferData.from_fts3({"params": {}}), "FTS3's job document"),
])
def test_bad_input_is_refused_saying_why(make, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()
