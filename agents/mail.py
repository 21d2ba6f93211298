"""E-mail out: an outbox row per mail, sent by a Celery task (docs/transcripts.md).

``queue_mail`` writes the row in the caller's transaction and hands its id
to the worker once that commits, so a rolled-back change mails nobody and a
committed one is never forgotten: a periodic task (``send_due_mails``) sends
what is due, whatever happened to the first hand-over. A send that fails
(the SMTP server is down, refuses, times out) is tried again later, the
pause doubling each time, up to ``MAIL_MAX_ATTEMPTS``; then the mail is
marked failed, logged, and listed in the admin, where it can be sent again.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import timedelta

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.db import transaction
from django.utils import timezone

from agents.models import Chat, Mail

logger = logging.getLogger(__name__)

# Refusals no later try will change.
PERMANENT = (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused)


def queue_mail(
    *, to: str, subject: str, text: str, html: str = "", chat: Chat | None = None
) -> Mail:
    mail = Mail.objects.create(to=to, subject=subject, text=text, html=html, chat=chat)
    transaction.on_commit(lambda: _hand_over(mail.pk))
    return mail


def _hand_over(mail_id: int) -> None:
    from agents.tasks import send_mail

    try:
        send_mail.delay(mail_id)
    except Exception:  # the broker is down: the periodic task sends it
        logger.warning("mail.hand_over_failed mail=%s", mail_id)


def _message(mail: Mail) -> EmailMultiAlternatives:
    message = EmailMultiAlternatives(
        subject=mail.subject, body=mail.text, from_email=settings.DEFAULT_FROM_EMAIL, to=[mail.to]
    )
    if mail.html:
        message.attach_alternative(mail.html, "text/html")
    return message


def send(mail_id: int) -> str:
    """Send one due mail; returns its status afterwards. A mail another
    worker is sending is left to it."""
    with transaction.atomic():
        mail = (
            Mail.objects.select_for_update(skip_locked=True)
            .filter(pk=mail_id, status=Mail.Status.PENDING, next_try_at__lte=timezone.now())
            .first()
        )
        if mail is None:
            return "not due"
        mail.attempts += 1
        try:
            _message(mail).send()
        except (smtplib.SMTPException, OSError) as error:
            _failed(mail, error)
        except Exception as error:  # the mail itself is wrong: no later try will change it
            logger.exception("mail.unsendable mail=%s", mail.pk)
            _failed(mail, error, permanent=True)
        else:
            mail.status = Mail.Status.SENT
            mail.sent_at = timezone.now()
            mail.last_error = ""
            logger.info("mail.sent mail=%s attempts=%s", mail.pk, mail.attempts)
        mail.save(update_fields=["attempts", "status", "sent_at", "last_error", "next_try_at"])
        return str(mail.status)


def _failed(mail: Mail, error: Exception, *, permanent: bool = False) -> None:
    mail.last_error = f"{type(error).__name__}: {error}"[:1000]
    permanent = permanent or isinstance(error, PERMANENT)
    if permanent or mail.attempts >= settings.MAIL_MAX_ATTEMPTS:
        mail.status = Mail.Status.FAILED
        logger.error(
            "mail.failed mail=%s attempts=%s error=%s", mail.pk, mail.attempts, type(error).__name__
        )
        return
    pause = settings.MAIL_RETRY_SECONDS * 2 ** (mail.attempts - 1)
    mail.next_try_at = timezone.now() + timedelta(seconds=pause)
    logger.warning(
        "mail.retry mail=%s attempts=%s in=%.0fs error=%s",
        mail.pk,
        mail.attempts,
        pause,
        type(error).__name__,
    )


def due_mail_ids(limit: int = 100) -> list[int]:
    due = Mail.objects.filter(status=Mail.Status.PENDING, next_try_at__lte=timezone.now())
    return list(due.order_by("next_try_at", "id").values_list("pk", flat=True)[:limit])


@transaction.atomic
def send_again(*, mail: Mail) -> Mail:
    """An admin's "send again" of a failed mail: a new round of tries."""
    Mail.objects.filter(pk=mail.pk).update(
        status=Mail.Status.PENDING, attempts=0, next_try_at=timezone.now(), last_error=""
    )
    transaction.on_commit(lambda: _hand_over(mail.pk))
    mail.refresh_from_db()
    return mail
