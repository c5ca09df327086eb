"""Holds outlive no crash: each replica keeps a lease, and the holds of a dead one are given back.

Every admitted request's hold is a row of ``deeptutor_hold`` naming the replica and the process
(its incarnation) that made it; settling or releasing the request deletes the row. A replica
beats (``deeptutor_replica.beat``) every third of ``hold_lease_seconds``. Holds are swept:

- at start, every hold of the same replica name from an earlier incarnation: the service's name
  is its host and port, and a process that could bind that port knows the previous one is gone;
- by any replica, every hold of a replica whose beat is older than ``hold_lease_seconds``.

A swept request is billed its prompt (the upstream had read it) and counted in the usage under
the model ``interrupted``; its answer, never seen whole, is not billed. A settlement arriving
after a sweep (a replica that was only slow) finds its hold gone and gives nothing back twice.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa

from deeptutor_jupyter.hub.quota import (
    _COUNT_USAGE,
    _DROP_HOLD,
    _SETTLE_BUDGET,
    QuotaStore,
    holds,
    insert_missing,
    replicas,
    run_sql,
)

log = logging.getLogger("deeptutor.hub")
INTERRUPTED = "interrupted"


def beat(store: QuotaStore) -> None:
    """This replica is alive (and, from now on, this incarnation is the one of its name)."""
    now = int(store.clock().timestamp())
    row = {"incarnation": store.incarnation, "beat": now}
    with store.engine.begin() as conn:
        insert_missing(conn, replicas, {"name": store.replica, **row})
        conn.execute(replicas.update().where(replicas.c.name == store.replica).values(**row))


def sweep(store: QuotaStore, lease_seconds: int) -> int:
    """Give back the holds of dead processes; how many were given back."""
    stale = int(store.clock().timestamp()) - lease_seconds
    mine = sa.and_(holds.c.replica == store.replica, holds.c.incarnation != store.incarnation)
    dead = sa.and_(
        holds.c.replica != store.replica,
        sa.or_(replicas.c.name.is_(None), replicas.c.beat < stale),
    )
    query = (
        sa.select(holds.c.id, holds.c.student, holds.c.day, holds.c.held, holds.c.prompt)
        .select_from(holds.outerjoin(replicas, holds.c.replica == replicas.c.name))
        .where(sa.or_(mine, dead))
        .order_by(holds.c.student)
    )
    with store.engine.connect() as conn:
        found = conn.execute(query).all()
    given = 0
    for hold in found:
        # One transaction each: a hold and its student's budget row, like a settlement.
        with store.engine.begin() as conn:
            if run_sql(conn, _DROP_HOLD, {"id": hold.id}) != 1:
                continue  # settled meanwhile
            params: dict[str, Any] = {"student": hold.student, "day": hold.day}
            run_sql(conn, _SETTLE_BUDGET, {**params, "used": hold.prompt, "held": hold.held})
            usage = {**params, "model": INTERRUPTED, "prompt": hold.prompt, "completion": 0}
            run_sql(conn, _COUNT_USAGE, usage)
        given += 1
    if given:
        log.warning("gave back %d holds of requests a stopped service process left", given)
    return given


def keep(store: QuotaStore, lease_seconds: int) -> int:
    """One beat and one sweep: what the service runs at start and every third of the lease."""
    beat(store)
    return sweep(store, lease_seconds)
