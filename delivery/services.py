"""Every change of endpoints and deliveries (docs/delivery.md).

The life of a delivery::

    enqueue ──► pending ──try──► delivered
                  ▲  │
         retry ───┘  ├──► failed    (final error, or the policy's tries used up)
                     └──► dropped   (not sent before it went stale)

``enqueue`` writes the row in the caller's transaction and hands its id to
Celery on commit. ``attempt_delivery`` (the task's service) makes one try in
three steps: claim the row in a short transaction (a lease, so a second
message for the same row does nothing), send without holding a transaction,
store the outcome and tell the owner in a second short transaction.
``sweep_overdue`` (a beat task) re-sends rows whose next try is overdue and
whose message was lost or whose worker died.

An endpoint has ``in_flight_limit`` slots: a claim takes one (its lease)
under the endpoint's row lock, or the delivery waits asleep
(``waiting_for_slot``) until a try of that endpoint ends and hands the slot
to the first in line. The limit adapts to the receiver as each try ends
(``policies.limit_after``: grown by quick successes, halved by time-outs and
errors), so a healthy receiver gets hundreds of tries in flight and a slow
or dead one holds one or two delivery threads.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import OperationalError, connection, transaction
from django.db.models import F, Field, Model, Q, QuerySet, Value
from django.db.models.functions import Greatest, Least
from django.db.models.sql import InsertQuery
from django.utils import timezone

from config.text import storable
from delivery import handlers, signing, transport
from delivery.models import Delivery, DeliveryAttempt, Endpoint
from delivery.policies import Policy, Verdict, get_policy, judge, limit_after
from delivery.ssrf import validate_endpoint_url

__all__ = [
    "DeliveryError",
    "attempt_delivery",
    "create_endpoint",
    "enqueue",
    "forget",
    "redeliver",
    "rotate_secret",
    "sweep_overdue",
    "update_endpoint",
    "validate_endpoint_url",
]

logger = logging.getLogger(__name__)

# A delivery waiting for an earlier one with its ordering key, or for a free
# slot of its endpoint, is woken when that one ends or a slot frees; these
# re-checks are only the safety net for a lost wake-up message.
ORDER_RECHECK = timedelta(seconds=60)
SLOT_RECHECK = timedelta(seconds=60)
# A thread whose try freed a slot tries the next delivery waiting for it
# itself, for this long at most, and no longer once its worker wants the
# thread for other work (a retry come due, a shutdown: ``attempt_delivery``);
# then that one goes through Celery. Not shorter: each hand-over through
# Celery costs a message and a claim, and a delivery woken so races the
# others for the free slot, out of their enqueue order (docs/performance.md).
CARRY_ON_SECONDS = 60.0
# The order in which the broker hands out the delivery queue's messages
# (a lower number first, on Redis as on the embedded broker:
# config/broker.py; kombu's Redis transport knows the steps 0, 3, 6 and 9).
# A retry goes first: its schedule is a promise (tries 3 s apart), and it
# must not wait behind the wake-ups of a burst's chats. Then a try that may
# start now — a delivery woken for a free slot or after its ordering key's
# earlier one, or sent again by the sweep — before any new delivery's first
# message, so it never waits behind a burst; a new delivery whose message
# would most likely only put it to wait (``_pending_before``) goes last.
PRIORITY_RETRY = 0
PRIORITY_DUE = 3
PRIORITY_NEW = 6
PRIORITY_BEHIND = 9
# A message may run a little before the row's due time (clocks of two hosts).
EARLY_TOLERANCE = timedelta(milliseconds=500)
Status = Delivery.Status


class DeliveryError(Exception):
    """A request the delivery's state does not allow."""


def _log(event: str, *, level: int = logging.INFO, **fields: Any) -> None:
    text = " ".join(
        f"{key}={json.dumps(value) if isinstance(value, str) else value}"
        for key, value in fields.items()
    )
    logger.log(level, "%s %s", event, text, extra={"event": event, "fields": fields})


def encode_body(body: Any) -> str:
    """The exact JSON text sent (and signed) for ``body``."""
    return json.dumps(body, cls=DjangoJSONEncoder, ensure_ascii=False, separators=(",", ":"))


# --- endpoints ----------------------------------------------------------------


@transaction.atomic
def create_endpoint(*, url: str, chunked: bool = False) -> tuple[Endpoint, str]:
    """A new endpoint and its signing secret; the secret is not shown again."""
    validate_endpoint_url(url)
    secret = signing.new_secret()
    endpoint = Endpoint.objects.create(url=url, chunked=chunked, secret=secret)
    _log("delivery.endpoint_created", endpoint=endpoint.pk)
    return endpoint, secret


@transaction.atomic
def update_endpoint(
    *,
    endpoint: Endpoint,
    url: str | None = None,
    chunked: bool | None = None,
    active: bool | None = None,
) -> Endpoint:
    """Change what is given; switching an endpoint on clears its failure count."""
    current = Endpoint.objects.select_for_update().get(pk=endpoint.pk)
    changed: list[str] = []
    if url is not None and url != current.url:
        validate_endpoint_url(url)
        current.url = url
        changed.append("url")
    if chunked is not None and chunked != current.chunked:
        current.chunked = chunked
        changed.append("chunked")
    if active is not None and active != current.active:
        current.active = active
        changed.append("active")
        if active:
            current.consecutive_failures = 0
            current.disabled_reason = ""
            changed += ["consecutive_failures", "disabled_reason"]
    if changed:
        current.save(update_fields=[*changed, "updated"])
        _log("delivery.endpoint_updated", endpoint=current.pk, fields=",".join(changed))
    endpoint.refresh_from_db()
    return endpoint


@transaction.atomic
def rotate_secret(*, endpoint: Endpoint) -> str:
    """A new signing secret; the old one keeps signing too for
    ``DELIVERY_SECRET_GRACE_SECONDS``, so a receiver can switch without a gap."""
    current = Endpoint.objects.select_for_update().get(pk=endpoint.pk)
    secret = signing.new_secret()
    grace = timedelta(seconds=settings.DELIVERY_SECRET_GRACE_SECONDS)
    current.previous_secret = current.secret
    current.previous_secret_expires = timezone.now() + grace
    current.secret = secret
    current.save(update_fields=["secret", "previous_secret", "previous_secret_expires", "updated"])
    endpoint.refresh_from_db()
    _log("delivery.secret_rotated", endpoint=current.pk, grace_seconds=grace.total_seconds())
    return secret


# --- enqueue, redeliver, sweep ----------------------------------------------


def _dispatch_on_commit(
    delivery_id: int, *, countdown: float = 0.0, priority: int = PRIORITY_DUE
) -> None:
    """Hand the id to Celery once the transaction commits, at ``priority``
    (one of the ``PRIORITY_*``).

    A failure to publish (the broker is down) is logged, not raised: the row
    is in the database, marked never dispatched, and the next sweep sends
    it, the one a delivery worker runs as it reconnects to the broker
    (config/celery.py) or beat's, whichever comes first.
    """

    def publish() -> None:
        from delivery import tasks  # tasks imports this module

        try:
            tasks.deliver.apply_async(
                (delivery_id,), countdown=countdown or None, priority=priority
            )
        except Exception:
            logger.exception(
                "delivery.dispatch_failed id=%s (the sweep will send it)",
                delivery_id,
                extra={"event": "delivery.dispatch_failed", "fields": {"id": delivery_id}},
            )
            Delivery.objects.filter(pk=delivery_id, status=Status.PENDING).update(
                dispatched_at=None
            )

    transaction.on_commit(publish)


def _expiry(policy: Policy, now: datetime) -> datetime | None:
    if policy.expires_after is None:
        return None
    return now + timedelta(seconds=policy.expires_after)


def enqueue(
    *,
    endpoint: Endpoint,
    purpose: str,
    event: str,
    body: Any,
    policy: str,
    ordering_key: str = "",
    subject: str = "",
    link: Model | None = None,
) -> Delivery:
    """Write a delivery in the caller's transaction; it is sent after commit.

    ``purpose`` picks the handlers that hear the outcome; ``subject`` is the
    owner's own reference (e.g. ``"message:123"``); deliveries to one endpoint
    with the same non-empty ``ordering_key`` arrive in the order enqueued.
    ``link``: an unsaved row of the owner's whose ``delivery`` field points
    at this delivery, inserted with it (``_insert``).
    """
    rules = get_policy(policy)
    if not purpose:
        raise ValueError("a delivery needs a purpose")
    now = timezone.now()
    # The caller's transaction when there is one (no savepoint: nothing here
    # is caught to carry on); alone, its own.
    with transaction.atomic(savepoint=False):
        delivery = Delivery(
            endpoint=endpoint,
            webhook_id=signing.new_webhook_id(),
            purpose=purpose,
            event=event,
            subject=subject,
            body=encode_body(body),
            policy=rules.name,
            ordering_key=ordering_key,
            next_attempt_at=now,
            dispatched_at=now,
            expires_at=_expiry(rules, now),
            created=now,
        )
        behind = _insert(delivery, link)
        _dispatch_on_commit(delivery.pk, priority=PRIORITY_BEHIND if behind else PRIORITY_NEW)
    _log(
        "delivery.enqueued",
        id=delivery.pk,
        endpoint=endpoint.pk,
        purpose=purpose,
        delivery_event=event,
        policy=rules.name,
        subject=subject,
    )
    return delivery


def _insert(delivery: Delivery, link: Model | None) -> bool:
    """INSERT the delivery and the owner's ``link`` to it: on PostgreSQL in one
    statement (``WITH d AS (INSERT … RETURNING id) INSERT … SELECT … FROM d``),
    which saves a round trip on the path of every agent and bot message;
    elsewhere one after the other.

    Returns whether its try would most likely only wait (``_pending_before``,
    read by the same statement on PostgreSQL; False elsewhere): a hint for
    its message's priority only — its claim decides."""
    if link is None or connection.vendor != "postgresql":
        delivery.save(force_insert=True)
        if link is not None:
            link.delivery = delivery  # type: ignore[attr-defined]
            link.save(force_insert=True)
        return False
    query = InsertQuery(Delivery)
    query.insert_values(_inserted_fields(Delivery), [delivery])
    [(delivery_sql, delivery_params)] = query.get_compiler(connection=connection).as_sql()
    to = link._meta.get_field("delivery")
    assert isinstance(to, Field)
    fields = [field for field in _inserted_fields(type(link)) if field is not to]
    columns = ", ".join(_quoted(field.column) for field in [*fields, to])
    values = "".join(f"CAST(%s AS {field.db_type(connection)}), " for field in fields)
    params = [field.get_db_prep_save(field.pre_save(link, True), connection) for field in fields]
    table, link_pk, delivery_pk = _quoted(link._meta.db_table), _pk(type(link)), _pk(Delivery)
    behind_sql, behind_params = _pending_before(delivery)
    # Django's own INSERT and the models' quoted names; every value a parameter.
    sql = (
        f"WITH d AS ({delivery_sql} RETURNING {delivery_pk}, {behind_sql} AS behind) "  # noqa: S608
        f"INSERT INTO {table} ({columns}) SELECT {values}d.{delivery_pk} FROM d "
        f"RETURNING {link_pk}, {_quoted(to.column)}, (SELECT behind FROM d)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*delivery_params, *behind_params, *params])
        link.pk, delivery.pk, behind = cursor.fetchone()
    for row in (delivery, link):
        row._state.adding, row._state.db = False, connection.alias
    link.delivery = delivery  # type: ignore[attr-defined]
    return bool(behind)


def _pending_before(delivery: Delivery) -> tuple[str, list[Any]]:
    """SQL (and its parameters) for "its try would most likely only wait":
    an earlier delivery with its ordering key is pending, or its endpoint
    has as many pending deliveries as it has slots. Read in the statement
    that inserts it, which does not see its own row."""
    meta = Delivery._meta
    table = _quoted(meta.db_table)
    endpoint, key, status = (
        _column(Delivery, name) for name in ("endpoint", "ordering_key", "status")
    )
    # At most ``limit`` rows of the endpoint's line are read (delivery_line_idx).
    limit = _limit(delivery.endpoint.in_flight_limit)
    sql = (
        f"(SELECT count(*) FROM (SELECT 1 FROM {table} AS line "  # noqa: S608
        f"WHERE line.{endpoint} = %s AND line.{status} = %s LIMIT %s) AS taken) >= %s"
    )
    params: list[Any] = [delivery.endpoint_id, Status.PENDING.value, limit, limit]
    if delivery.ordering_key:
        sql += (
            f" OR EXISTS (SELECT 1 FROM {table} AS earlier "  # noqa: S608
            f"WHERE earlier.{endpoint} = %s AND earlier.{key} = %s AND earlier.{status} = %s)"
        )
        params += [delivery.endpoint_id, delivery.ordering_key, Status.PENDING.value]
    return f"({sql})", params


def _column(model: type[Model], name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)
    return _quoted(field.column)


def _quoted(name: str | None) -> str:
    assert name is not None
    return connection.ops.quote_name(name)


def _pk(model: type[Model]) -> str:
    assert model._meta.pk is not None
    return _quoted(model._meta.pk.column)


def _inserted_fields(model: type[Model]) -> list[Field[Any, Any]]:
    """The columns Django's own INSERT of ``model`` names (not its own id)."""
    meta = model._meta
    return [field for field in meta.local_concrete_fields if field is not meta.auto_field]


@transaction.atomic
def redeliver(*, delivery: Delivery) -> Delivery:
    """Send a failed or dropped delivery again, with its policy's full tries.

    It keeps its ``webhook-id``: to the receiver it is the same message
    again, so one that did process it can tell. The log keeps every earlier
    try; ``attempts`` counts from zero again.
    """
    current = Delivery.objects.select_for_update().get(pk=delivery.pk)
    if current.status not in (Status.FAILED, Status.DROPPED):
        raise DeliveryError(
            f"delivery {current.pk} is {current.status}; only a failed or dropped "
            "delivery can be redelivered"
        )
    now = timezone.now()
    current.status = Status.PENDING
    current.attempts = 0
    current.next_attempt_at = now
    current.dispatched_at = now
    current.locked_until = None
    current.waiting_for_slot = False
    current.holds_slot = False  # (a final delivery holds none)
    current.expires_at = _expiry(get_policy(current.policy), now)
    current.last_error = ""
    current.reply_body = None
    current.completed_at = None
    current.save()
    _dispatch_on_commit(current.pk, priority=PRIORITY_NEW)
    _log("delivery.redelivered", id=current.pk, endpoint=current.endpoint_id)
    delivery.refresh_from_db()
    return delivery


# What an erased delivery's body becomes (docs/privacy.md): valid JSON, so
# the log and ``Delivery.payload`` still read it.
FORGOTTEN_BODY = '{"erased": true}'


def forget(*, delivery_ids: list[int], reason: str) -> int:
    """Forget what these deliveries carried (a client's data was erased):
    a pending one is dropped unsent with ``reason``, and every one's body,
    reply and tries' answers are blanked. Runs in the caller's transaction;
    returns how many were dropped."""
    if not delivery_ids:
        return 0
    now = timezone.now()
    dropped = 0
    with transaction.atomic():
        pending = Delivery.objects.select_for_update().filter(
            pk__in=delivery_ids, status=Status.PENDING
        )
        for delivery in pending.order_by("pk"):
            held = delivery.holds_slot
            _finish_dropped(delivery, now, reason=reason)
            _give_back(delivery.endpoint_id, 1 if held else 0)
            dropped += 1
        Delivery.objects.filter(pk__in=delivery_ids).update(body=FORGOTTEN_BODY, reply_body=None)
        DeliveryAttempt.objects.filter(delivery_id__in=delivery_ids).update(
            response_excerpt="", error=""
        )
    return dropped


def sweep_overdue(*, limit: int | None = None) -> int:
    """Re-send pending deliveries whose try is overdue and not in flight.

    Catches a message the broker lost, a worker killed mid-try (once its
    lease runs out) and waits too long for a Celery countdown. Returns how
    many were sent.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.DELIVERY_REDISPATCH_AFTER_SECONDS)
    with transaction.atomic():
        overdue = (
            Delivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=now)
            .filter(Q(locked_until__isnull=True) | Q(locked_until__lt=now))
            .filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=stale))
            .order_by("next_attempt_at")
            .values_list("pk", flat=True)
        )
        ids = list(overdue[: limit or settings.DELIVERY_SWEEP_BATCH])
        if ids:
            Delivery.objects.filter(pk__in=ids).update(dispatched_at=now)
            for pk in ids:
                _dispatch_on_commit(pk)
    if ids:
        _log("delivery.swept", count=len(ids))
    return len(ids)


# --- one try ------------------------------------------------------------------


@dataclass(frozen=True)
class _Claim:
    delivery_id: int
    endpoint_id: int
    attempt_id: int
    number: int
    policy: Policy
    url: str
    body: bytes
    headers: dict[str, str]
    chunked: bool
    started_at: datetime


def attempt_delivery(*, delivery_id: int, wanted: Callable[[], bool] | None = None) -> None:
    """Make the try that is due for ``delivery_id``, if one is (idempotent).

    A delivery that is final, in flight, not yet due, waiting for an earlier
    one with its ordering key or waiting for a free slot of its endpoint is
    left alone. When the try ends, its slot goes to the next try in line
    (see ``_record``), which this call then makes too, for up to
    ``CARRY_ON_SECONDS`` — and only while ``wanted`` (the worker's "is this
    thread wanted for other work now?") says no: a retry come due must not
    wait for a thread behind another endpoint's line.
    """
    started = time.monotonic()
    claim = _again_after_deadlock(_claim, delivery_id)
    while claim is not None:
        exchange = transport.post(
            url=claim.url,
            body=claim.body,
            headers=claim.headers,
            chunked=claim.chunked,
            timeout=claim.policy.timeout,
        )
        # The slot this try frees goes to the next in line — this delivery's
        # own next try when it is due at once, else the endpoint's earliest
        # enqueued delivery ready for a try — and this thread makes that try
        # itself: no trip through the broker. It is claimed in the same
        # transaction, so the slot never looks free to others meanwhile.
        carry_on = time.monotonic() - started < CARRY_ON_SECONDS and not (wanted and wanted())
        endpoint_id = claim.endpoint_id
        claim = _again_after_deadlock(_record, claim, exchange, carry_on=carry_on)
        if claim is None:
            # A delivery that went to wait while this try ended may have been
            # missed by ``_record``: look again.
            claim = _hand_over_free_slot(endpoint_id, carry_on=carry_on)


# PostgreSQL's SQLSTATEs for a transaction it ended to let others go on: a
# deadlock, a serialization failure. Run again, it most often goes through.
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001"})
TRANSIENT_TRIES = 3
P = ParamSpec("P")
R = TypeVar("R")


def _again_after_deadlock(step: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """``step`` (a whole transaction), run again when PostgreSQL ended it to
    break a deadlock: a try's outcome is stored although two tries that
    ended together waited for each other's rows, instead of being lost
    until its lease runs out and the sweep sends the try again."""
    for attempt in range(1, TRANSIENT_TRIES + 1):
        try:
            return step(*args, **kwargs)
        except OperationalError as error:
            sqlstate = getattr(error.__cause__, "sqlstate", None)
            if sqlstate not in TRANSIENT_SQLSTATES or attempt == TRANSIENT_TRIES:
                raise
            _log("delivery.transaction_repeated", level=logging.WARNING, sqlstate=sqlstate)
    raise AssertionError("unreachable")


def _locked(delivery_id: int) -> Delivery | None:
    return (
        Delivery.objects.select_for_update(of=("self",))
        .select_related("endpoint")
        .filter(pk=delivery_id)
        .first()
    )


def _limit(stored: int) -> int:
    """The tries an endpoint may have in flight: its own adaptive limit, within
    1 and ``DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT``."""
    return max(1, min(stored, settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT))


def _claim(delivery_id: int) -> _Claim | None:
    """Start the due try of ``delivery_id``, or leave it waiting or ended.

    Only the delivery's own row is locked while it looks; a slot is taken by
    one conditional statement at the end (``_take_slot``). A delivery that
    finds every slot taken goes to wait, then looks once more whether one
    freed meanwhile (``_hand_over_free_slot``): the try that freed it may
    not have seen it waiting.
    """
    with transaction.atomic():
        delivery = _locked(delivery_id)
        now = timezone.now()
        if not _ready(delivery, now):
            if delivery is None:
                _log("delivery.missing", level=logging.WARNING, id=delivery_id)
            return None
        assert delivery is not None
        in_line = delivery.waiting_for_slot
        claim = _start_in_slot(delivery, now)
    if claim is None and (in_line or delivery.waiting_for_slot):
        # It went to wait for a slot, or it ended while it waited for one.
        return _hand_over_free_slot(delivery.endpoint_id, carry_on=True)
    return claim


def _ready(delivery: Delivery | None, now: datetime) -> bool:
    """Whether the message finds a try to make: pending, not in flight, due."""
    if delivery is None:
        return False  # deleted in between
    reason = ""
    if delivery.status != Status.PENDING:
        reason = delivery.status
    elif delivery.locked_until is not None and delivery.locked_until > now:
        reason = "in flight"
    elif delivery.next_attempt_at is None or delivery.next_attempt_at > now + EARLY_TOLERANCE:
        reason = "not due"
    if reason:
        _log("delivery.skipped", level=logging.DEBUG, id=delivery.pk, reason=reason)
    return not reason


def _start_in_slot(delivery: Delivery, now: datetime, *, handed: bool = False) -> _Claim | None:
    """Under the delivery's row lock: start its try in a slot of its endpoint,
    or end it, or leave it waiting (for an earlier delivery with its key, or
    for a slot: then ``waiting_for_slot`` is set on the instance).

    The slot is the one it still holds (its last try's worker was lost and
    the lease ran out), the one ``handed`` to it by a try that ended, or a
    free one it takes now — unless a delivery enqueued before it already
    waits for one: those go first. A slot it held or was handed and does not
    use is given back.
    """
    own = delivery.holds_slot
    if not _may_start(delivery, now):
        if own:  # (a handed slot stays the hand-over's to give)
            _give_back(delivery.endpoint_id, 1)
        return None
    logged = DeliveryAttempt.objects.filter(delivery=delivery).count() + 1
    if not (own or handed) and not _slot_taken(delivery):
        _wait_for_slot(delivery, now)
        return None
    return _start(delivery, now, logged=logged)


def _may_start(delivery: Delivery, now: datetime) -> bool:
    """Whether a try may start now; if not, the delivery ends or waits for
    the earlier delivery with its ordering key (its slot, if it held one,
    is then no longer its: ``holds_slot`` is cleared)."""
    policy = get_policy(delivery.policy)
    if delivery.locked_until is not None:
        # A lease was taken and never given back: its worker was lost mid-try.
        DeliveryAttempt.objects.filter(delivery=delivery, finished_at__isnull=True).update(
            finished_at=now, error="no result: the worker was lost during this try"
        )
    if delivery.attempts >= policy.max_attempts:
        # The last try's outcome was never stored (its worker died, or storing
        # it failed): end here rather than try beyond the policy.
        _finish_failed(delivery, now, error="no result from the last try (the worker was lost)")
        return False
    if delivery.expires_at is not None and now >= delivery.expires_at:
        _finish_dropped(delivery, now, reason=f"not sent within {policy.expires_after:g} s")
        return False
    if delivery.ordering_key and _has_pending_predecessor(delivery):
        _wait_for_predecessor(delivery, now)
        return False
    if not delivery.endpoint.active:
        _finish_failed(delivery, now, error="endpoint is disabled", counts=False)
        return False
    return True


def _start(delivery: Delivery, now: datetime, *, logged: int) -> _Claim:
    """Count the try, take the lease, log the try as number ``logged`` (the
    log numbers every try, redeliveries included); the request is the
    caller's. The delivery holds its slot until the try's outcome is stored."""
    policy = get_policy(delivery.policy)
    endpoint = delivery.endpoint
    number = delivery.attempts + 1  # this round's count, which the policy limits
    body = delivery.body.encode()
    headers = {
        "Content-Type": "application/json",
        **signing.signature_headers(
            secrets=endpoint.signing_secrets(at=now),
            webhook_id=delivery.webhook_id,
            timestamp=int(now.timestamp()),
            body=body,
        ),
    }
    framing = (
        {"Transfer-Encoding": "chunked"} if endpoint.chunked else {"Content-Length": str(len(body))}
    )
    Delivery.objects.filter(pk=delivery.pk).update(
        attempts=number,
        locked_until=now + timedelta(seconds=policy.lease_seconds),
        dispatched_at=None,
        waiting_for_slot=False,
        holds_slot=True,
    )
    attempt = DeliveryAttempt.objects.create(
        delivery=delivery,
        number=logged,
        started_at=now,
        url=endpoint.url,
        request_headers={"User-Agent": transport.USER_AGENT, **headers, **framing},
    )
    return _Claim(
        delivery_id=delivery.pk,
        endpoint_id=endpoint.pk,
        attempt_id=attempt.pk,
        number=number,
        policy=policy,
        url=endpoint.url,
        body=body,
        headers=headers,
        chunked=endpoint.chunked,
        started_at=now,
    )


def _wait_for_predecessor(delivery: Delivery, now: datetime) -> None:
    """Asleep until the earlier delivery with its key ends (``_wake_successor``)."""
    Delivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=now + ORDER_RECHECK,
        dispatched_at=None,
        waiting_for_slot=False,
        holds_slot=False,
    )
    delivery.waiting_for_slot = False
    _log("delivery.waiting_for_predecessor", id=delivery.pk)


def _has_pending_predecessor(delivery: Delivery) -> bool:
    return Delivery.objects.filter(
        endpoint_id=delivery.endpoint_id,
        ordering_key=delivery.ordering_key,
        status=Status.PENDING,
        pk__lt=delivery.pk,
    ).exists()


# --- slots: tries in flight per endpoint ---------------------------------------
#
# ``Endpoint.in_flight`` counts the deliveries whose ``holds_slot`` is set:
# each change of one changes the other in the same transaction. The count
# changes by one conditional statement, the last of its transaction where it
# can be, so the endpoint's row is locked only for that statement and the
# commit: a burst's tries do not queue on it (docs/delivery.md, "Many in
# flight"). A slot handed from a try that ended to the next in line changes
# neither the count nor the row.


def _slot_taken(delivery: Delivery) -> bool:
    """Whether the delivery took a free slot of its endpoint: none is taken
    when a delivery enqueued before it waits for one, nor when its endpoint
    as read with it (``_locked``) had none free — then without waiting for
    the endpoint's row, which a try's end may hold."""
    endpoint = delivery.endpoint
    if endpoint.in_flight >= _limit(endpoint.in_flight_limit) or _waits_behind(delivery):
        return False
    return _take_slot(endpoint.pk)


def _take_slot(endpoint_id: int) -> bool:
    """Take one of the endpoint's slots if one is free (its count below its
    limit); False when every one is taken."""
    ceiling = settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT
    limit = Greatest(Value(1), Least(F("in_flight_limit"), Value(ceiling)))
    taken = Endpoint.objects.filter(pk=endpoint_id, in_flight__lt=limit).update(
        in_flight=F("in_flight") + 1
    )
    return taken == 1


def _give_back(endpoint_id: int, slots: int) -> None:
    """``slots`` that deliveries of the endpoint held are free again."""
    if slots:
        Endpoint.objects.filter(pk=endpoint_id).update(in_flight=F("in_flight") - slots)


def _free_slots(endpoint_id: int, now: datetime) -> int:
    """How many slots of the endpoint are free, read without a lock. When none
    is, a slot held past its lease is taken back first: its try is over or
    its worker was lost (the lease covers the try's hard deadline)."""
    row = Endpoint.objects.filter(pk=endpoint_id).values("in_flight", "in_flight_limit").first()
    if row is None:
        return 0
    free = _limit(row["in_flight_limit"]) - row["in_flight"]
    if free <= 0:
        lapsed = Delivery.objects.filter(endpoint_id=endpoint_id, holds_slot=True).filter(
            Q(locked_until__isnull=True) | Q(locked_until__lte=now)
        )
        taken_back = lapsed.update(holds_slot=False)
        _give_back(endpoint_id, taken_back)
        free += taken_back
    return free


def _waits_behind(delivery: Delivery) -> bool:
    """Whether a delivery of its endpoint enqueued before it waits, asleep,
    for a slot: it goes first."""
    return Delivery.objects.filter(
        endpoint_id=delivery.endpoint_id,
        status=Status.PENDING,
        waiting_for_slot=True,
        dispatched_at__isnull=True,
        pk__lt=delivery.pk,
    ).exists()


def _wait_for_slot(delivery: Delivery, now: datetime) -> None:
    """Wait, asleep, until a slot of the endpoint is free and it is this one's turn.

    Handed a slot by a try that ends (``_record``) or woken when one frees
    (``_hand_over_free_slot``); the sweep's re-check (or the delivery's
    expiry, when sooner) is only the safety net for a lost wake-up.
    """
    wake_by = now + SLOT_RECHECK
    if delivery.expires_at is not None:
        wake_by = min(wake_by, delivery.expires_at)
    Delivery.objects.filter(pk=delivery.pk).update(
        waiting_for_slot=True, next_attempt_at=wake_by, dispatched_at=None
    )
    delivery.waiting_for_slot = True
    _log("delivery.waiting_for_slot", id=delivery.pk, endpoint=delivery.endpoint_id)


def _in_line(endpoint_id: int, now: datetime) -> QuerySet[Delivery]:
    """The endpoint's deliveries ready for a try, in enqueue order: asleep
    waiting for a slot, or due now (a message may be on its way). A retry due
    a moment from now is not: it waits its delay, although its message may
    come that much early (``EARLY_TOLERANCE``)."""
    return (
        Delivery.objects.filter(endpoint_id=endpoint_id, status=Status.PENDING, holds_slot=False)
        .filter(Q(locked_until__isnull=True) | Q(locked_until__lte=now))
        .filter(Q(waiting_for_slot=True) | Q(next_attempt_at__lte=now))
        .order_by("pk")
    )


def _free_in_line(endpoint_id: int, now: datetime) -> QuerySet[Delivery]:
    """``_in_line``, each row locked as it is read, with its endpoint; rows
    another worker has locked are passed over: that worker is deciding
    about them."""
    line = _in_line(endpoint_id, now).select_related("endpoint")
    return line.select_for_update(of=("self",), skip_locked=True)


# A try that ends looks at most this many deliveries in line for one to take
# its slot (one may end, or wait for an earlier one with its key, instead).
HAND_OVER_LOOKS = 3


def _hand_over(endpoint_id: int, now: datetime) -> _Claim | None:
    """Give a slot that a try frees to the first in line that can start, and
    start its try (for the caller to make)."""
    line = _free_in_line(endpoint_id, now)
    passed = 0
    for _ in range(HAND_OVER_LOOKS):
        # One row at a time: a row locked here stays locked until the commit,
        # and another try ending meanwhile must find the next one.
        delivery = line.filter(pk__gt=passed).first()
        if delivery is None:
            return None
        claim = _start_in_slot(delivery, now, handed=True)
        if claim is not None:
            _log("delivery.handed_over", id=delivery.pk, endpoint=endpoint_id)
            return claim
        passed = delivery.pk
    return None


def _hand_over_free_slot(endpoint_id: int, *, carry_on: bool) -> _Claim | None:
    """After a commit that freed a slot or put a delivery to wait for one:
    when a slot is free and a delivery waits asleep, the first of them takes
    it — its try is claimed for the caller to make (``carry_on``), or it is
    woken through Celery. One that ends instead (gone stale, its endpoint
    switched off) lets the next one look. Cheap when no slot is free: one
    read, no lock."""
    while True:
        now = timezone.now()
        if _free_slots(endpoint_id, now) <= 0:
            return None
        with transaction.atomic():
            delivery = _free_in_line(endpoint_id, now).filter(waiting_for_slot=True).first()
            if delivery is None:
                return None
            if not carry_on:
                _wake(delivery.pk, now)
                return None
            claim = _start_in_slot(delivery, now)
            if claim is not None or delivery.waiting_for_slot:
                return claim  # (waiting still: another took the slot first)


def _wake(delivery_id: int, now: datetime) -> None:
    """Send a delivery asleep waiting for a slot a message now: a slot is free."""
    Delivery.objects.filter(pk=delivery_id).update(next_attempt_at=now, dispatched_at=now)
    _dispatch_on_commit(delivery_id)
    _log("delivery.woken", id=delivery_id)


def _wake_asleep(endpoint_id: int, now: datetime, count: int) -> None:
    """Wake the first ``count`` deliveries asleep waiting for a slot (a grown
    limit made room for them).

    Rows another transaction has locked are passed over, not waited for:
    that one is deciding about them (a try that ended handing its slot on,
    a delivery's own message), and two tries ending together, each holding
    the row the other wakes, would otherwise deadlock — PostgreSQL then
    ends one of them, and with it that try's outcome (docs/delivery.md).
    """
    asleep = (
        Delivery.objects.filter(
            endpoint_id=endpoint_id,
            status=Status.PENDING,
            waiting_for_slot=True,
            dispatched_at__isnull=True,
        )
        .order_by("pk")
        .select_for_update(skip_locked=True)
    )
    for pk in list(asleep.values_list("pk", flat=True)[:count]):
        _wake(pk, now)


# --- the outcome ----------------------------------------------------------------


def _text_for_db(text: str) -> str:
    storable_text: str = storable(text)  # no NUL, no lone surrogate
    return storable_text


@transaction.atomic
def _record(claim: _Claim, exchange: transport.Exchange, *, carry_on: bool) -> _Claim | None:
    """Store the try's outcome; the endpoint's in-flight limit learns from it.
    With ``carry_on``, the slot the try held goes on to the try the caller
    makes next: this delivery's own, when it is due at once and nobody waits
    before it, else the first in line's (``_hand_over``); otherwise it is
    given back. The endpoint's row changes last, in one statement."""
    now = timezone.now()
    verdict = judge(exchange, now=now, policy=claim.policy)
    excerpt = exchange.body[: DeliveryAttempt.EXCERPT_BYTES].decode("utf-8", errors="ignore")
    DeliveryAttempt.objects.filter(pk=claim.attempt_id).update(
        finished_at=now,
        duration_ms=exchange.duration_ms,
        status_code=exchange.status_code,
        error=_text_for_db(verdict.error),
        response_excerpt=_text_for_db(excerpt),
    )
    delivery = _locked(claim.delivery_id)
    if delivery is None:
        return None
    endpoint = delivery.endpoint
    limit = _limit(endpoint.in_flight_limit)
    adapted = limit_after(
        limit,
        exchange,
        ceiling=settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT,
        quick_seconds=settings.DELIVERY_QUICK_REPLY_SECONDS,
    )
    held = delivery.holds_slot
    next_claim = None
    if _store_outcome(delivery, claim, exchange, verdict, now, keep_due_retry=carry_on and held):
        next_claim = _start_in_slot(delivery, now)
    freed = held and not delivery.holds_slot
    if freed and carry_on and endpoint.in_flight <= adapted:
        next_claim = _hand_over(endpoint.pk, now)
        freed = next_claim is None
    if adapted > limit:
        _wake_asleep(endpoint.pk, now, adapted - limit)
    _settle(endpoint.pk, freed=freed, limit=limit, adapted=adapted)
    return next_claim


def _settle(endpoint_id: int, *, freed: bool, limit: int, adapted: int) -> None:
    """The endpoint's row after a try: the slot given back when ``freed``, and
    its in-flight limit moved from ``limit`` towards ``adapted`` (one more,
    or half: relative to the stored value, so the outcomes of tries that end
    together all count)."""
    changes: dict[str, Any] = {}
    if freed:
        changes["in_flight"] = F("in_flight") - 1
    ceiling = Value(settings.DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT)
    if adapted > limit:
        changes["in_flight_limit"] = Least(F("in_flight_limit") + 1, ceiling)
    elif adapted < limit:
        changes["in_flight_limit"] = Greatest(Value(1), Least(F("in_flight_limit"), ceiling) / 2)
        _log("delivery.limit_cut", endpoint=endpoint_id, limit=adapted)
    if changes:
        Endpoint.objects.filter(pk=endpoint_id).update(**changes)


def _store_outcome(
    delivery: Delivery,
    claim: _Claim,
    exchange: transport.Exchange,
    verdict: Verdict,
    now: datetime,
    *,
    keep_due_retry: bool,
) -> bool:
    """End or reschedule the delivery (locked) after its try; True when its
    next try is due now and kept for the caller to make (see ``_schedule``)."""
    _log(
        "delivery.attempted",
        id=delivery.pk,
        endpoint=delivery.endpoint_id,
        purpose=delivery.purpose,
        attempt=claim.number,
        status_code=exchange.status_code,
        duration_ms=exchange.duration_ms,
        delivered=verdict.delivered,
        error=verdict.error,
    )
    if delivery.status != Status.PENDING:
        return False  # ended meanwhile (a redelivery or a duplicate try); nothing to change
    if verdict.delivered:
        _finish_delivered(delivery, now, reply=verdict.reply)
        return False
    if delivery.attempts != claim.number:
        return False  # a later try has started since; its outcome decides
    error = _text_for_db(verdict.error)
    policy = claim.policy
    if verdict.final or delivery.attempts >= policy.max_attempts:
        _finish_failed(delivery, now, error=error)
        return False
    delay = policy.delay_after(claim.number) * settings.DELIVERY_RETRY_SCALE
    next_at = claim.started_at + timedelta(seconds=delay)
    if verdict.retry_after is not None:
        wait = min(verdict.retry_after, settings.DELIVERY_MAX_RETRY_AFTER_SECONDS)
        next_at = max(next_at, now + timedelta(seconds=wait))
    if delivery.expires_at is not None and next_at >= delivery.expires_at:
        _finish_failed(delivery, now, error=error)
        return False
    keep = keep_due_retry and next_at <= now and not _waits_behind(delivery)
    return _schedule(delivery, next_at, now, error=error, keep_if_due=keep)


def _schedule(
    delivery: Delivery, at: datetime, now: datetime, *, error: str, keep_if_due: bool = False
) -> bool:
    """The next try at ``at``: a Celery countdown when it is soon, else the sweep's.

    With ``keep_if_due``, a try due now (a timeout ends when the next try is
    due) is left to the caller, in the slot the delivery holds — no message;
    True then. It counts as sent, so the sweep sends it should the caller be
    lost. Otherwise the delivery's slot is no longer its own.
    """
    countdown = max(0.0, (at - now).total_seconds())
    soon = countdown <= settings.DELIVERY_MAX_COUNTDOWN_SECONDS
    kept = keep_if_due and countdown == 0
    delivery.next_attempt_at = at
    delivery.locked_until = None
    delivery.last_error = error
    delivery.dispatched_at = at if soon else None
    delivery.holds_slot = delivery.holds_slot and kept
    Delivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=at,
        locked_until=None,
        last_error=error,
        dispatched_at=delivery.dispatched_at,
        holds_slot=delivery.holds_slot,
    )
    if soon and not kept:
        _dispatch_on_commit(delivery.pk, countdown=countdown, priority=PRIORITY_RETRY)
    _log("delivery.retry_scheduled", id=delivery.pk, seconds=round(countdown, 3), kept=kept)
    return kept


def _end(delivery: Delivery, now: datetime, *, status: str, error: str = "") -> None:
    delivery.status = status
    delivery.last_error = error
    delivery.next_attempt_at = None
    delivery.locked_until = None
    delivery.dispatched_at = None
    delivery.waiting_for_slot = False
    delivery.holds_slot = False
    delivery.completed_at = now
    delivery.save(
        update_fields=[
            "status",
            "last_error",
            "reply_body",
            "next_attempt_at",
            "locked_until",
            "dispatched_at",
            "waiting_for_slot",
            "holds_slot",
            "completed_at",
        ]
    )
    _wake_successor(delivery, now)


def _finish_delivered(delivery: Delivery, now: datetime, *, reply: Any) -> None:
    delivery.reply_body = reply
    _end(delivery, now, status=Status.DELIVERED)
    _log("delivery.delivered", id=delivery.pk, purpose=delivery.purpose)
    handlers.tell_success(delivery, reply)
    if delivery.endpoint.consecutive_failures:  # as read with the delivery: most often none
        Endpoint.objects.filter(pk=delivery.endpoint_id, consecutive_failures__gt=0).update(
            consecutive_failures=0
        )


def _finish_failed(delivery: Delivery, now: datetime, *, error: str, counts: bool = True) -> None:
    _end(delivery, now, status=Status.FAILED, error=error)
    _log(
        "delivery.failed",
        level=logging.WARNING,
        id=delivery.pk,
        purpose=delivery.purpose,
        attempts=delivery.attempts,
        error=error,
    )
    if get_policy(delivery.policy).tell_owner_of_failure:
        handlers.tell_failure(delivery, error)
    if counts:
        _count_failure(delivery.endpoint_id, error=error)


def _finish_dropped(delivery: Delivery, now: datetime, *, reason: str) -> None:
    _end(delivery, now, status=Status.DROPPED, error=reason)
    _log("delivery.dropped", id=delivery.pk, purpose=delivery.purpose, reason=reason)


def _count_failure(endpoint_id: int, *, error: str) -> None:
    """Count a final failure; past ``DELIVERY_AUTO_DISABLE_AFTER`` (0: never),
    switch the endpoint off."""
    Endpoint.objects.filter(pk=endpoint_id).update(
        consecutive_failures=F("consecutive_failures") + 1
    )
    limit = settings.DELIVERY_AUTO_DISABLE_AFTER
    if limit <= 0:
        return
    endpoint = Endpoint.objects.select_for_update(no_key=True).get(pk=endpoint_id)
    if endpoint.active and endpoint.consecutive_failures >= limit:
        reason = (
            f"switched off after {endpoint.consecutive_failures} consecutive failed "
            f"deliveries; last error: {error}"
        )
        Endpoint.objects.filter(pk=endpoint_id).update(active=False, disabled_reason=reason[:1000])
        _log(
            "delivery.endpoint_disabled",
            level=logging.WARNING,
            endpoint=endpoint_id,
            failures=endpoint.consecutive_failures,
        )


def _wake_successor(delivery: Delivery, now: datetime) -> None:
    """Start the next pending delivery with the same ordering key, if it waits.

    The successor's row is locked, so a successor that is deciding to wait
    right now either sees this delivery ended or is woken after it decided.
    """
    if not delivery.ordering_key:
        return
    successor = (
        Delivery.objects.select_for_update(of=("self",))
        .filter(
            endpoint_id=delivery.endpoint_id,
            ordering_key=delivery.ordering_key,
            status=Status.PENDING,
            pk__gt=delivery.pk,
        )
        .order_by("pk")
        .first()
    )
    if successor is None:
        return
    if successor.locked_until is not None and successor.locked_until > now:
        return  # in flight already
    Delivery.objects.filter(pk=successor.pk).update(next_attempt_at=now, dispatched_at=now)
    _dispatch_on_commit(successor.pk)
