"""Drives Sluice's FTS3 API with FTS3's own Python client (package fts3).

Run by cmd/sluice/fts3_test.go against a live cluster. The case comes in
the environment: FTS3_ENDPOINT (http://SERVER/fts3), FTS3_TOKEN (a Sluice
API token) and FTS3_CASE (JSON: the files' URLs and local paths). Each
check that passes prints "ok NAME"; the first that fails raises, and the
script exits non-zero.
"""

import json
import os
import sys
import time
import zlib

import fts3.rest.client.easy as fts3
from fts3.rest.client.exceptions import ClientError, Unauthorized

TERMINAL = ("FINISHED", "FAILED", "FINISHEDDIRTY", "CANCELED")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def adler32(path):
    with open(path, "rb") as f:
        return "adler32:%08x" % (zlib.adler32(f.read()) & 0xFFFFFFFF)


def wait(ctx, job_id, states, timeout=90):
    """Follows a job with get_job_status until it is in one of states."""
    deadline = time.time() + timeout
    while True:
        job = fts3.get_job_status(ctx, job_id, list_files=True)
        if job["job_state"] in states:
            return job
        check(time.time() < deadline, "job %s still %s" % (job_id, job["job_state"]))
        time.sleep(0.3)


def main():
    endpoint, token = os.environ["FTS3_ENDPOINT"], os.environ["FTS3_TOKEN"]
    case = json.loads(os.environ["FTS3_CASE"])
    ctx = fts3.Context(endpoint, fts_access_token=token)
    check(ctx.get_endpoint_info()["api"]["major"] == 3, "api version")

    me = fts3.whoami(ctx)
    check(me["method"] == "oauth2" and me["vos"] and me["user_dn"], "whoami: %s" % me)
    print("ok whoami", me["user_dn"], me["vos"][0], flush=True)

    # Two files: one verified by algorithm only (the client's default
    # "ADLER32"), one against the checksum given.
    one, two = case["files"]
    # Each carries metadata, as Rucio's do (it finds its requests by
    # request_id), and the job too: both come back as sent.
    transfers = [
        fts3.new_transfer(one["source"], one["destination"], metadata={"request_id": "req-1", "scope": "cms"}),
        fts3.new_transfer(two["source"], two["destination"], checksum=adler32(two["path"]),
                          filesize=os.path.getsize(two["path"]), metadata={"request_id": "req-2"}),
    ]
    job_id = fts3.submit(ctx, fts3.new_job(transfers, verify_checksum=True, nostreams=0,
                                           metadata={"issuer": "rucio", "multi_sources": False}))
    job = wait(ctx, job_id, TERMINAL)
    check(job["job_state"] == "FINISHED", "job %s: %s" % (job_id, job["job_state"]))
    check(job["source_se"] and job["dest_se"], "job's storage: %s" % job)
    check(job["job_metadata"] == {"issuer": "rucio", "multi_sources": False}, "job metadata %s" % job["job_metadata"])
    for i, (want, got) in enumerate(zip(case["files"], sorted(job["files"], key=lambda f: f["file_index"]))):
        check(got["file_metadata"]["request_id"] == "req-%d" % (i + 1), "file metadata %s" % got["file_metadata"])
        check(got["file_state"] == "FINISHED", "file %s" % got)
        check(got["source_surl"] == want["source"] and got["dest_surl"] == want["destination"], "surls %s" % got)
        check(got["checksum"] == adler32(want["path"]), "checksum %s, want %s" % (got["checksum"], adler32(want["path"])))
        check(got["filesize"] == os.path.getsize(want["path"]), "filesize %s" % got)
        check(got["start_time"] and got["finish_time"], "times %s" % got)
    print("ok finished", job_id, flush=True)

    # A missing source: the file, and so the job, fails with a reason.
    missing = fts3.new_transfer(case["missing"]["source"], case["missing"]["destination"])
    job_id = fts3.submit(ctx, fts3.new_job([missing]))
    job = wait(ctx, job_id, TERMINAL)
    check(job["job_state"] == "FAILED" and job["reason"], "job %s: %s" % (job_id, job))
    f = job["files"][0]
    check(f["file_state"] == "FAILED" and f["reason"], "file %s" % f)
    print("ok failed", job_id, f["reason"], flush=True)

    # A long job, canceled: the cancel answers the job CANCELED.
    big = fts3.new_transfer(case["long"]["source"], case["long"]["destination"])
    job_id = fts3.submit(ctx, fts3.new_job([big]))
    wait(ctx, job_id, ("SUBMITTED", "ACTIVE"))
    canceled = fts3.cancel(ctx, job_id)
    check(canceled["job_state"] == "CANCELED", "cancel answered %s" % canceled)
    job = wait(ctx, job_id, TERMINAL)
    check(job["job_state"] == "CANCELED", "job %s: %s" % (job_id, job["job_state"]))
    check(all(f["file_state"] == "CANCELED" for f in job["files"]), "files %s" % job["files"])
    print("ok canceled", job_id, flush=True)

    # A wrong token: the client fails as it opens its context.
    try:
        fts3.Context(endpoint, fts_access_token="not-a-token")
        check(False, "a wrong token was accepted")
    except Unauthorized as e:
        print("ok unauthorized", e, flush=True)

    # A parameter Sluice refuses: staging from tape.
    try:
        fts3.submit(ctx, fts3.new_job([fts3.new_transfer(one["source"], one["destination"] + ".staged")], bring_online=3600))
        check(False, "bring_online was accepted")
    except ClientError as e:
        check("bring_online" in str(e), "refusal %s" % e)
        print("ok refused", e, flush=True)

    print("ALL OK", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # the Go test shows what failed
        print("FAIL %s: %s" % (type(e).__name__, e), flush=True)
        sys.exit(1)
