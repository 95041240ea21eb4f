"""The asyncio client against the real service: 100 submissions at once,
and each call as the synchronous client makes it."""

from __future__ import annotations

import asyncio

import pytest
from conftest import write

import sluice


def run(coro):
    return asyncio.run(coro)


def test_100_concurrent_submissions_and_waits(tree):
    name, p = tree
    write(p["a1"] / "small.dat", 512)

    async def main():
        async with sluice.AsyncClient() as c:
            jobs = [sluice.TransferData(label=f"{name}-{i}", submission_id=f"{name}-{i}").add(
                f"sluice://a1/{name}/small.dat", f"sluice://a1/{name}/out/{i}.dat") for i in range(100)]
            subs = await asyncio.gather(*(c.submit(j) for j in jobs))
            assert len({s.id for s in subs}) == 100 and all(s.created_now for s in subs)
            assert sorted(s.label for s in subs) == sorted(f"{name}-{i}" for i in range(100))
            # 100 waits at once: more than the 32 streams a user may hold,
            # so some read the job now and then instead.
            done = await asyncio.gather(*(c.wait(s, timeout=120) for s in subs))
            assert all(j.state == "done" for j in done)
            return subs

    subs = run(main())
    assert all((p["a1"] / "out" / f"{i}.dat").read_bytes() == (p["a1"] / "small.dat").read_bytes() for i in range(100))
    assert len(subs) == 100


def test_calls(service, tree):
    name, p = tree
    write(p["a1"] / "d" / "x", 3000)
    write(p["a1"] / "d" / "y", 100_000)

    async def main():
        async with sluice.AsyncClient() as c:
            assert (await c.whoami()).admin
            assert {e.name for e in await c.endpoints()} == {"a1", "a2"}
            sub = await c.submit(sluice.TransferData().add_dir(f"sluice://a1/{name}/d", f"sluice://a2/{name}/d"))
            kinds = [ev.type async for ev in c.events(sub, timeout=60)]
            assert kinds[0] == "resync" and kinds[-1] in ("job", "resync")
            j = await c.wait(sub)
            assert j.state == "done" and j.bytes_done == 103_000
            assert (await c.status(sub)).id == sub.id
            files = [f async for f in c.iter_files(sub, page_size=1)]
            assert sorted(f.size for f in files) == [3000, 100_000]
            assert len(await c.files(sub, 0, 1)) == 1
            assert sub.id in [x.id for x in await c.jobs(limit=1000)]
            est = await c.estimate(f"sluice://a1/{name}/d/y", f"sluice://a2/{name}/", size=1 << 20,
                                   sample_size=64 << 10)
            assert est.streams >= 1
            tok = await c.data_token(f"sluice://a1/{name}/d/x")
            assert tok.endpoint == "a1" and tok.scope == "read"

    run(main())


def test_errors_failed_file_and_cancel(service, tree):
    name, p = tree
    write(p["a1"] / "big.dat", 64 << 20)

    async def main():
        async with sluice.AsyncClient(token="wrong") as bad:
            with pytest.raises(sluice.Unauthorized) as e:
                await bad.endpoints()
            assert e.value.status == 401 and "unknown or expired token" in e.value.detail
            with pytest.raises(sluice.Unauthorized):
                async for _ in bad.events():
                    pass
        async with sluice.AsyncClient() as c:
            failing = await c.submit(sluice.TransferData().add(f"sluice://a1/{name}/nope", f"sluice://a2/{name}/nope"))
            with pytest.raises(sluice.JobFailed) as e:
                await c.wait(failing, timeout=60)
            assert [f.source for f in e.value.failed] == [f"sluice://a1/{name}/nope"]
            big = await c.submit(sluice.TransferData().add(f"sluice://a1/{name}/big.dat", f"sluice://a2/{name}/big.dat"))
            async for ev in c.events(big, timeout=30):
                if ev.type == "progress" and ev.bytes_done:
                    break
            await c.cancel(big)
            with pytest.raises(sluice.JobCanceled):
                await c.wait(big, timeout=30)

    run(main())


def test_a_dropped_stream_resumes(service, proxy, tree):
    name, p = tree
    write(p["a1"] / "slow.dat", 24 << 20)

    async def main():
        async with sluice.AsyncClient(f"https://127.0.0.1:{proxy.port}") as c:
            sub = await c.submit(sluice.TransferData().add(f"sluice://a1/{name}/slow.dat", f"sluice://a2/{name}/s"))
            seen, dropped = [], False
            async for ev in c.events(sub, timeout=60):
                seen.append(ev)
                if not dropped and ev.type == "progress":
                    dropped = True
                    proxy.drop()
            assert dropped
            assert any(e.type == "resync" and e.detail == "reconnected" for e in seen), seen
            assert (await c.status(sub)).state == "done"

    run(main())
