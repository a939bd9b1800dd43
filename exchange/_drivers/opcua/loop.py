"""An asyncio event loop running in its own thread, driven from synchronous code.

asyncua is asyncio-only while Exchange calls drivers from many worker threads. Each OPC UA driver (and
each simulated OPC UA server) owns one :class:`LoopThread`: the connection lives on that loop, and
synchronous callers hand it coroutines with :meth:`LoopThread.run`.

Stopping is complete: pending tasks are cancelled, async generators and the default executor (which
``getaddrinfo`` uses) are shut down and the thread is joined, so no thread is left behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class LoopThread:
    """One event loop in one daemon thread; :meth:`run` submits coroutines from any other thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._started.wait()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def run(self, coro: Coroutine[Any, Any, _T], timeout_s: float | None) -> _T:
        """Run ``coro`` on the loop and return its result (or raise its exception).

        Raises :class:`TimeoutError` when it takes longer than ``timeout_s`` (the coroutine is then
        cancelled), and :class:`RuntimeError` when called from the loop's own thread (that would
        deadlock: e.g. a subscription callback calling back into the driver) or after :meth:`stop`.
        """
        if self.in_loop_thread():
            coro.close()
            raise RuntimeError(
                f"{self._thread.name}: blocking call made from its own event-loop thread "
                "(do not call the driver from inside a subscription callback)"
            )
        if not self.alive:
            coro.close()
            raise RuntimeError(f"{self._thread.name}: the event loop is stopped")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"{self._thread.name}: no answer within {timeout_s:.3f} s") from None
        except concurrent.futures.CancelledError:  # the loop stopped under it
            raise RuntimeError(f"{self._thread.name}: the event loop is stopped") from None

    def call_soon(self, callback: Any, *args: Any) -> None:
        """Schedule a plain callback on the loop from any thread (no-op once stopped)."""
        if self.alive:
            self.loop.call_soon_threadsafe(callback, *args)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop, clean up what still runs on it, close it and join the thread. Idempotent."""
        if self._thread.is_alive() and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # closed between the check and the call
                pass
        if not self.in_loop_thread():
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("%s did not stop within %.1f s", self._thread.name, timeout_s)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._started.set()
        try:
            self.loop.run_forever()
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        loop = self.loop
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        except Exception:  # cleanup must never keep the thread alive
            log.exception("%s: error while shutting the event loop down", self._thread.name)
        finally:
            asyncio.set_event_loop(None)
            loop.close()
