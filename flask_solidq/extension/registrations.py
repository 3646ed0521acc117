"""The registrations a :class:`~flask_solidq.SolidQ` object keeps for every app it serves:
the dashboard's access check and the lifecycle hooks, which run in the processes of each of
those apps (:class:`~flask_solidq.lifecycle.LifecycleHooks`)."""

from __future__ import annotations

import typing as t

from flask_solidq.lifecycle import H as _Hook
from flask_solidq.lifecycle import Lifecycle
from flask_solidq.lifecycle import LifecycleHooks


class Registrations:
    """``dashboard_auth``, ``on_process_start``, ``on_worker_start`` and ``on_worker_stop``:
    the part of :class:`~flask_solidq.SolidQ` that registers the app's functions."""

    _lifecycle_hooks: LifecycleHooks
    _dashboard_rules: list[t.Callable[[], bool]]

    def dashboard_auth(self, rule: t.Callable[[], bool]) -> t.Callable[[], bool]:
        """Register the dashboard's access check: ``rule()`` is called for every dashboard
        request, inside its request context, and the request is refused with 403 unless it
        returns True (``return current_user.is_authenticated and current_user.is_admin``).
        It takes precedence over ``SOLIDQ_DASHBOARD_BASIC_AUTH`` and the debug/testing
        opening. Usable as a decorator; the last check registered decides.

        :raises TypeError: ``rule`` isn't callable.
        """
        if not callable(rule):
            raise TypeError(f"@solidq.dashboard_auth registers a function, not {rule!r}.")
        self._dashboard_rules.append(rule)
        return rule

    def on_process_start(self, hook: _Hook) -> _Hook:
        """Register ``hook(process)`` to run in each queue process (worker, dispatcher,
        scheduler) as it starts, right after the fork and before it registers or works: the
        place to re-create what must not cross a fork (clients, connection pools, SDKs).

        Runs inside the app context, in the process's own thread; ``process`` is a
        :class:`~flask_solidq.lifecycle.ProcessInfo` (``kind``, ``name``, ``pid``,
        ``metadata``). In thread mode (``--mode thread``) it runs once per process thread.
        A hook that raises stops the process with the error; the supervisor logs it and
        starts the process again, as for any crash. Usable as a decorator.
        """
        return self._lifecycle_hooks.add(Lifecycle.PROCESS_START, hook)

    def on_worker_start(self, hook: _Hook) -> _Hook:
        """Register ``hook(process)`` to run in each worker once it has booted (registered,
        its threads started) and before it claims its first job; after the
        :meth:`on_process_start` hooks. As those, it runs in the app context and a hook that
        raises stops the worker with the error. Usable as a decorator.
        """
        return self._lifecycle_hooks.add(Lifecycle.WORKER_START, hook)

    def on_worker_stop(self, hook: _Hook) -> _Hook:
        """Register ``hook(process)`` to run in each worker as it stops gracefully, once its
        jobs finished (or were released after ``SOLIDQ_SHUTDOWN_TIMEOUT``) and before it
        deregisters; e.g. to flush an error tracker's queue. Runs only when the worker's
        :meth:`on_worker_start` hooks did; not on QUIT or a kill. A hook that raises makes the
        worker exit with an error, after deregistering. Usable as a decorator.
        """
        return self._lifecycle_hooks.add(Lifecycle.WORKER_STOP, hook)
