"""The master's core driven event by event on a fake clock, as its loop drives it on the real one."""

import contextlib
import inspect
from typing import Any

from gangsched.master.clock import Now
from gangsched.master.core import MasterCore
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.protocol.messages import ExitAck, TaskExit


class FakeClock:
    """The clocks a test sets by hand: the monotonic one and Unix time read the same."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def read(self) -> Now:
        return Now.at(round(self.now * 1e9), self.now)


class OnClock:
    """A part of a core whose events are each given the fake clock's reading at the call, as the
    daemon's loop gives the real one's, and are each a turn of the loop: the event, the turn's scheduling
    pass, and a commit of the store (one that fails leaves the writes pending, for the next)."""

    def __init__(self, part: object, clock: FakeClock, store: JobStore, core: MasterCore) -> None:
        self._part, self._clock, self._store, self._core = part, clock, store, core

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._part, name)
        if not callable(attribute):
            return attribute
        on_clock = "now" in inspect.signature(attribute).parameters

        def event(*args: Any, **kwargs: Any) -> Any:
            now = self._clock.read()
            result = attribute(*args, now=now, **kwargs) if on_clock else attribute(*args, **kwargs)
            self._core.scheduling_pass(now)
            with contextlib.suppress(StoreWriteError):
                self._store.commit()
            return result

        return event


class DrivenMaster:
    """A ``MasterCore`` driven on a fake clock: its events read the clock as the master's loop does."""

    def __init__(self, core: MasterCore, clock: FakeClock, store: JobStore) -> None:
        self.core, self.clock, self.store = core, clock, store
        self.node_events = OnClock(core.node_events, clock, store, core)
        self.node_reports = OnClock(core.node_reports, clock, store, core)
        self.task_exits = OnClock(core.task_exits, clock, store, core)
        self.pmi_relay = OnClock(core.pmi_relay, clock, store, core)
        self.clients = OnClock(core.client_requests, clock, store, core)
        self.users = OnClock(core.users, clock, store, core)
        self.step_starts = OnClock(core.step_starts, clock, store, core)

    def task_ended(self, message: TaskExit) -> ExitAck:
        """A task's end as the master's loop takes it from a drain of the report socket: a turn of its own."""
        acknowledged: ExitAck = self.task_exits.ended(message)
        return acknowledged

    def tick(self) -> Any:
        """A quantum boundary and the switch it sends."""
        self.core.tick(self.clock.read())
        switch = self.core.switch(self.clock.read().monotonic_ns)
        with contextlib.suppress(StoreWriteError):
            self.store.commit()
        return switch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)


def driven_master(settings: Any, endpoints: Any, store: Any, clock: FakeClock, partitions: Any = None) -> DrivenMaster:
    return DrivenMaster(MasterCore(settings, endpoints, store, clock.read(), partitions), clock, store)
