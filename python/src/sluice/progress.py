"""Progress bars of a job (``Client.wait(job, progress=True)``), with tqdm
(``pip install 'sluice[progress]'``): bytes moved of the job's bytes, the
rate and the time left, and the files done; a widget in Jupyter when
ipywidgets is there, text on a terminal or in a log otherwise.
"""

from __future__ import annotations

from typing import Any, Callable

from .models import Event, Job

__all__ = ["JobProgress", "progress_factory"]


def progress_factory(progress: Any) -> Callable[..., Any] | None:
    """The tqdm class for wait's progress argument: True picks one for
    where the code runs, a callable (a tqdm class) is used as is, False or
    None shows nothing."""
    if progress is None or progress is False:
        return None
    if callable(progress):
        return progress
    if progress is not True:
        raise TypeError(f"progress={progress!r}: want True, False or a tqdm class")
    try:
        from tqdm.std import tqdm as std
    except ImportError as e:
        raise ImportError("progress=True needs tqdm: pip install 'sluice[progress]'") from e
    if _in_notebook():
        try:
            import ipywidgets  # noqa: F401  (tqdm.notebook's widgets)
            from tqdm.notebook import tqdm as nb

            return nb
        except ImportError:
            pass  # text bars, rather than tqdm.auto's warning
    return std


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # type: ignore[import-not-found]
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


class JobProgress:
    """One job's bar, fed with the job's status and its events. The bar's
    position is the job's bytes done, so tqdm's rate and ETA are the job's;
    the postfix counts files. It is redrawn at most once per progress
    event (about a second): a notebook's output stays short."""

    def __init__(self, factory: Callable[..., Any], job: int, **kw: Any) -> None:
        self.factory = factory
        self.job = job
        self.kw = kw
        self.bar: Any = None
        self.files_done = 0
        self.files = 0

    def _files(self) -> str:
        if self.files >= self.files_done and self.files:
            return f"{self.files_done}/{self.files} files"
        return f"{self.files_done} files"  # a directory still being listed

    def _show(self, bytes_done: int, total: int) -> None:
        created = self.bar is None
        if created:
            opts = dict(desc=f"job {self.job}", unit="B", unit_scale=True, unit_divisor=1000,
                        total=total or None, dynamic_ncols=True, leave=True, postfix=self._files())
            opts.update(self.kw)
            self.bar = self.factory(**opts)
        bar = self.bar
        if total and bar.total != total:
            bar.total = total  # a directory's listing adds files as it goes
        bar.set_postfix_str(self._files(), refresh=False)
        delta = bytes_done - bar.n
        if delta > 0:
            bar.update(delta)
        elif not created:
            bar.refresh()

    def job_status(self, j: Job) -> None:
        self.files_done, self.files = j.files_done, j.files
        self._show(j.bytes_done, j.bytes)

    def event(self, e: Event) -> None:
        if e.type in ("progress", "resync"):
            self.files_done = max(self.files_done, e.files_done)
            if e.files:
                self.files = e.files
            total = e.bytes or (self.bar.total if self.bar is not None and self.bar.total else 0)
            self._show(e.bytes_done, total)
        elif e.type == "task" and e.state == "done":
            self.files_done += 1  # shown with the next progress event

    def close(self, final: Job | None = None) -> None:
        if final is not None:
            self.job_status(final)
            if self.bar is not None:
                self.bar.set_description_str(f"job {final.id} {final.state}", refresh=False)
        if self.bar is not None:
            self.bar.close()
