"""The agent REST API: the same operations as the agent pages."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import date
from typing import Any

from django.db.models import QuerySet
from django.http import Http404, HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import MultiPartParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents import attachments, inbound, reports, selectors, services, transcripts
from agents.api.serializers import (
    AgentsReportOut,
    AuditEntryOut,
    CallOut,
    CallProgressIn,
    ChatDetailOut,
    ChatOut,
    HoursReportOut,
    LabelOut,
    LabelsIn,
    MessageIn,
    MessageOut,
    OfflineMessageOut,
    ReassignIn,
    StatusIn,
    SummaryOut,
    TeamOut,
    TypingIn,
)
from agents.models import Agent, AuditEntry, Call, Chat, OfflineMessage


class ListPagination(PageNumberPagination):
    """50 a page: chats, calls and offline messages alike."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class AgentView(APIView):
    def agent(self, request: Request) -> Agent:
        assert isinstance(request.user, Agent)
        return request.user

    def chat(self, request: Request, chat_id: int) -> Chat:
        try:
            return selectors.chat_for_agent(agent=self.agent(request), chat_id=chat_id)
        except Chat.DoesNotExist as error:
            raise Http404 from error


class AgentListView(AgentView):
    """A list in pages; ``pagination_class`` also gives the schema its page shape."""

    pagination_class = ListPagination

    def page(
        self, request: Request, items: QuerySet[Any], out: type[serializers.Serializer[Any]]
    ) -> Response:
        paginator = self.pagination_class()
        page: list[Any] | None = paginator.paginate_queryset(items, request, view=self)
        return paginator.get_paginated_response(out(page, many=True).data)


class StatusView(AgentView):
    @extend_schema(responses=StatusIn, summary="My status: online or offline")
    def get(self, request: Request) -> Response:
        return Response({"status": self.agent(request).status})

    @extend_schema(request=StatusIn, responses=StatusIn, summary="Go online or offline")
    def post(self, request: Request) -> Response:
        data = StatusIn(data=request.data)
        data.is_valid(raise_exception=True)
        agent = services.set_agent_status(
            agent=self.agent(request), online=data.validated_data["status"] == "online"
        )
        return Response({"status": agent.status})


class ChatListView(AgentListView):
    class QueryIn(serializers.Serializer[Any]):
        state = serializers.ChoiceField(choices=Chat.State.values, required=False)

    @extend_schema(parameters=[QueryIn], responses=ChatOut(many=True), summary="My chats")
    def get(self, request: Request) -> Response:
        query = self.QueryIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        chats = selectors.chats_for_agent(
            agent=self.agent(request), state=query.validated_data.get("state")
        )
        return self.page(request, chats.prefetch_related("labels"), ChatOut)


class OfferListView(AgentListView):
    @extend_schema(
        responses=ChatOut(many=True),
        summary="Chats offered to me now (routing by offers), the oldest offer first",
    )
    def get(self, request: Request) -> Response:
        offers = selectors.offers_for_agent(agent=self.agent(request)).prefetch_related("labels")
        return self.page(request, offers, ChatOut)


class ChatDetailView(AgentView):
    @extend_schema(responses=ChatDetailOut, summary="One chat with contact info and CRM data")
    def get(self, request: Request, chat_id: int) -> Response:
        return Response(ChatDetailOut(self.chat(request, chat_id)).data)


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    description="One key per reply: a retry with a key you used in this chat is "
    "answered with the reply the first stored, and stores nothing new",
)


class ChatMessagesView(AgentView):
    @extend_schema(responses=MessageOut(many=True), summary="The chat's messages")
    def get(self, request: Request, chat_id: int) -> Response:
        chat = self.chat(request, chat_id)
        return Response(MessageOut(selectors.messages_of(chat=chat), many=True).data)

    @extend_schema(
        request=MessageIn,
        responses={201: MessageOut},
        parameters=[IDEMPOTENCY_KEY],
        summary="Reply in the chat",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        chat, agent = self.chat(request, chat_id), self.agent(request)
        try:
            key = inbound.idempotency_key(request)
        except inbound.Refused as refusal:
            raise exceptions.ValidationError(refusal.message) from refusal
        # As A2: a retry of a request acted on is answered as the first, before its body is read.
        message = key and selectors.replied_before(chat=chat, agent=agent, idempotency_key=key)
        if not message:
            data = MessageIn(data=request.data)
            data.is_valid(raise_exception=True)
            message = services.post_agent_message(
                chat=chat, agent=agent, content=data.validated_data["content"], idempotency_key=key
            )
        message.refresh_from_db()  # a channel may have started its delivery meanwhile
        return Response(MessageOut(message).data, status=201)


class NoteIn(serializers.Serializer[Any]):
    text = serializers.CharField(max_length=services.NOTE_LIMIT)


class NotesView(AgentView):
    @extend_schema(
        request=NoteIn,
        responses={201: MessageOut},
        summary="Add an internal note: only agents see it (author 'note')",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        body = NoteIn(data=request.data)
        body.is_valid(raise_exception=True)
        note = services.post_note(
            chat=self.chat(request, chat_id),
            agent=self.agent(request),
            text=body.validated_data["text"],
        )
        return Response(MessageOut(note).data, status=201)


class TransferIn(serializers.Serializer[Any]):
    agent_id = serializers.IntegerField(required=False, min_value=1)
    department_id = serializers.IntegerField(required=False, min_value=1)
    note = serializers.CharField(
        required=False, allow_blank=True, max_length=services.NOTE_LIMIT, default=""
    )


class TransferView(AgentView):
    @extend_schema(
        request=TransferIn,
        responses=ChatDetailOut,
        summary="Transfer my chat to an online agent (agent_id) or a department "
        "(department_id, back to the queue), with a note; the client is not told",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        body = TransferIn(data=request.data)
        body.is_valid(raise_exception=True)
        chat = self.chat(request, chat_id)
        data = body.validated_data
        to_agent, department = services.transfer_target(
            chat=chat, agent_id=data.get("agent_id"), department_id=data.get("department_id")
        )
        chat = services.transfer_chat(
            chat=chat,
            agent=self.agent(request),
            to_agent=to_agent,
            department=department,
            note=data["note"],
        )
        return Response(ChatDetailOut(chat).data)


class ChatLabelsView(AgentView):
    @extend_schema(
        request=LabelsIn,
        responses=ChatDetailOut,
        summary="Replace the chat's labels with the named ones of the list (any state, "
        "finished too); a name not on the list is a 400 naming it",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        body = LabelsIn(data=request.data)
        body.is_valid(raise_exception=True)
        chat = services.set_chat_labels(
            chat=self.chat(request, chat_id),
            agent=self.agent(request),
            names=body.validated_data["labels"],
        )
        return Response(ChatDetailOut(chat).data)


class LabelListView(AgentView):
    @extend_schema(responses=LabelOut(many=True), summary="The labels a chat may carry, by name")
    def get(self, request: Request) -> Response:
        return Response(LabelOut(selectors.labels(), many=True).data)


class FileUploadView(AgentView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "text": {"type": "string", "description": "An optional caption"},
                },
                "required": ["file"],
            }
        },
        responses={201: MessageOut},
        summary="Send a file (an image as a photo, else a document) in my chat",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        chat = self.chat(request, chat_id)
        upload = request.FILES.get("file")
        if upload is None:
            raise services.ServiceError("send the file as the multipart field 'file'")
        message = attachments.send_file(
            chat=chat, agent=self.agent(request), upload=upload, text=request.POST.get("text", "")
        )
        message.refresh_from_db()
        return Response(MessageOut(message).data, status=201)


class MessageRetryView(AgentView):
    @extend_schema(request=None, responses=MessageOut, summary="Send a failed message again")
    def post(self, request: Request, chat_id: int, message_id: int) -> Response:
        chat = self.chat(request, chat_id)
        message = chat.messages.filter(pk=message_id).first()
        if message is None:
            raise Http404
        message = services.retry_message(message=message, agent=self.agent(request))
        return Response(MessageOut(message).data)


class AcceptView(AgentView):
    @extend_schema(request=None, responses=ChatDetailOut, summary="Reply: take a queued chat")
    def post(self, request: Request, chat_id: int) -> Response:
        chat = services.accept_chat(chat=self.chat(request, chat_id), agent=self.agent(request))
        return Response(ChatDetailOut(chat).data)


class DeclineView(AgentView):
    @extend_schema(
        request=None,
        responses=ChatDetailOut,
        summary="Decline a chat offered to me: it is offered to the next agent",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        chat = services.decline_offer(chat=self.chat(request, chat_id), agent=self.agent(request))
        return Response(ChatDetailOut(self.chat(request, chat.pk)).data)


class ReassignView(AgentView):
    @extend_schema(
        request=ReassignIn,
        responses=ChatDetailOut,
        summary="Supervisors: give a chat to an online agent of its channel (an active "
        "chat becomes theirs, a queued one is offered to them); the client is not told",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        supervisor = self.agent(request)
        if not supervisor.supervises:
            raise services.NotAllowed("only supervisors and admins reassign chats")
        body = ReassignIn(data=request.data)
        body.is_valid(raise_exception=True)
        chat = self.chat(request, chat_id)
        to_agent = Agent.objects.filter(pk=body.validated_data["agent"]).first()
        if to_agent is None:
            raise services.ServiceError("that agent does not answer this channel")
        services.reassign_chat(chat=chat, by=supervisor, to_agent=to_agent)
        return Response(ChatDetailOut(self.chat(request, chat_id)).data)


class TeamView(AgentView):
    LENGTH = 200  # of each list: the longest waits come first

    @extend_schema(
        responses=TeamOut,
        summary="Supervisors: the agents of my channels (status, open chats against "
        "capacity, pending offers), the queue and the chats waiting for a reply",
    )
    def get(self, request: Request) -> Response:
        agent = self.agent(request)
        if not agent.supervises:
            raise services.NotAllowed("the Team view is for supervisors and admins")
        team = {
            "agents": selectors.team(agent=agent),
            "queue": selectors.team_queue(agent=agent).prefetch_related("labels")[: self.LENGTH],
            "waiting_for_reply": selectors.waiting_for_reply(agent=agent).prefetch_related(
                "labels"
            )[: self.LENGTH],
        }
        return Response(TeamOut(team).data)


class AuditListView(AgentListView):
    class QueryIn(serializers.Serializer[Any]):
        since = serializers.DateTimeField(
            required=False, help_text="ISO 8601: entries from then on"
        )

    @extend_schema(
        parameters=[QueryIn],
        responses=AuditEntryOut(many=True),
        summary="Admins: the audit log, newest first",
    )
    def get(self, request: Request) -> Response:
        if self.agent(request).role != Agent.Role.ADMIN:
            raise services.NotAllowed("the audit log is for admins")
        query = self.QueryIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        entries = AuditEntry.objects.order_by("-at", "-id")
        if "since" in query.validated_data:
            entries = entries.filter(at__gte=query.validated_data["since"])
        return self.page(request, entries, AuditEntryOut)


class FinishView(AgentView):
    @extend_schema(request=None, responses=ChatDetailOut, summary="Finish the chat")
    def post(self, request: Request, chat_id: int) -> Response:
        chat = services.finish_chat(chat=self.chat(request, chat_id), agent=self.agent(request))
        return Response(ChatDetailOut(chat).data)


class TypingView(AgentView):
    @extend_schema(request=TypingIn, responses=TypingIn, summary="Typing started or stopped")
    def post(self, request: Request, chat_id: int) -> Response:
        chat = self.chat(request, chat_id)
        data = TypingIn(data=request.data)
        data.is_valid(raise_exception=True)
        typing = data.validated_data["typing"]
        services.set_agent_typing(chat=chat, agent=self.agent(request), typing=typing)
        return Response({"typing": typing})


class CrmAssignView(AgentView):
    @extend_schema(
        request=None,
        responses=ChatDetailOut,
        summary="Assign to CRM card: bind the client to the CRM card of crm_link",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        chat = services.request_crm_assign(
            chat=self.chat(request, chat_id), agent=self.agent(request)
        )
        return Response(ChatDetailOut(chat).data)


class TranscriptIn(serializers.Serializer[Any]):
    to = serializers.CharField(required=False, allow_blank=True, max_length=254, default="")


class TranscriptOut(serializers.Serializer[Any]):
    to = serializers.CharField()
    status = serializers.CharField()


class TranscriptView(AgentView):
    @extend_schema(
        request=TranscriptIn,
        responses=TranscriptOut,
        summary="Mail the chat's transcript to the client, or to the address given",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        body = TranscriptIn(data=request.data)
        body.is_valid(raise_exception=True)
        chat = self.chat(request, chat_id)
        try:
            mail = transcripts.send_transcript(
                chat=chat, to=body.validated_data["to"], agent=self.agent(request)
            )
        except transcripts.TooManyTranscripts as error:
            raise exceptions.Throttled(detail=error.message) from None
        return Response({"to": mail.to, "status": mail.status})


class ClientEmailIn(serializers.Serializer[Any]):
    email = serializers.CharField(required=False, allow_blank=True, max_length=255, default="")


class ClientEmailOut(serializers.Serializer[Any]):
    email = serializers.CharField()
    confirmed = serializers.BooleanField()


class ClientEmailView(AgentView):
    @extend_schema(
        request=ClientEmailIn,
        responses=ClientEmailOut,
        summary="Enter the client's e-mail address, or confirm the one they gave: "
        "transcripts may go to it",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        body = ClientEmailIn(data=request.data)
        body.is_valid(raise_exception=True)
        client = services.confirm_client_email(
            chat=self.chat(request, chat_id),
            agent=self.agent(request),
            email=body.validated_data["email"],
        )
        return Response({"email": client.email, "confirmed": True})


class BlacklistIn(serializers.Serializer[Any]):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class BlacklistView(AgentView):
    @extend_schema(
        request=BlacklistIn,
        responses=ChatDetailOut,
        summary="Blacklist the chat's client: the chat is finished, their messages reach no one",
    )
    def post(self, request: Request, chat_id: int) -> Response:
        body = BlacklistIn(data=request.data)
        body.is_valid(raise_exception=True)
        chat = services.blacklist_client(
            chat=self.chat(request, chat_id),
            agent=self.agent(request),
            reason=body.validated_data["reason"],
        )
        return Response(ChatDetailOut(chat).data)

    # drf-spectacular documents a DELETE as a bodiless 204; this one answers the chat.
    @extend_schema(
        request=None, responses={200: ChatDetailOut}, summary="Lift the client's blacklist"
    )
    def delete(self, request: Request, chat_id: int) -> Response:
        chat = self.chat(request, chat_id)
        services.lift_blacklist(client=chat.client, by=self.agent(request))
        return Response(ChatDetailOut(chat).data)


class CallListView(AgentListView):
    @extend_schema(responses=CallOut(many=True), summary="Calls of my channels, open ones first")
    def get(self, request: Request) -> Response:
        return self.page(request, selectors.calls_for_agent(agent=self.agent(request)), CallOut)


class CallProgressView(AgentView):
    @extend_schema(request=CallProgressIn, responses=CallOut, summary="Record a step of a call")
    def post(self, request: Request, call_id: int) -> Response:
        agent = self.agent(request)
        try:
            call = selectors.call_for_agent(agent=agent, call_id=call_id)
        except Call.DoesNotExist as error:
            raise Http404 from error
        data = CallProgressIn(data=request.data)
        data.is_valid(raise_exception=True)
        call = services.record_call_progress(call=call, agent=agent, **data.validated_data)
        return Response(CallOut(call).data)


class OfflineMessageListView(AgentListView):
    @extend_schema(
        responses=OfflineMessageOut(many=True),
        summary="Offline messages of my channels, unhandled ones first",
    )
    def get(self, request: Request) -> Response:
        offline = selectors.offline_messages_for_agent(agent=self.agent(request))
        return self.page(request, offline, OfflineMessageOut)


class OfflineMessageHandledView(AgentView):
    @extend_schema(request=None, responses=OfflineMessageOut, summary="Mark handled")
    def post(self, request: Request, offline_message_id: int) -> Response:
        agent = self.agent(request)
        try:
            offline = selectors.offline_message_for_agent(
                agent=agent, offline_message_id=offline_message_id
            )
        except OfflineMessage.DoesNotExist as error:
            raise Http404 from error
        offline = services.mark_offline_message_handled(offline_message=offline, agent=agent)
        return Response(OfflineMessageOut(offline).data)


class ReportFormatNegotiation(DefaultContentNegotiation):
    """On the reports ``?format=`` is the report's own parameter (json or
    csv, answered by the view), not DRF's choice of renderer, which would
    answer 404 for a format it has no renderer for: errors stay JSON."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        renderer = next(iter(renderers))  # JSON, the API's one renderer; CSV is the view's
        return renderer, renderer.media_type


REPORT_PARAMETERS = [
    OpenApiParameter("from", date, required=True, description="The first day, YYYY-MM-DD"),
    OpenApiParameter("to", date, required=True, description="The last day, included (366 at most)"),
    OpenApiParameter(
        "tz", str, description="The days' and hours' time zone (IANA); default the installation's"
    ),
    OpenApiParameter("channel", str, description="A channel's public id"),
    OpenApiParameter("agent", int, description="An agent's id: the chats they held"),
    OpenApiParameter("label", str, description="A label's name"),
    OpenApiParameter("department", int, description="A department's id"),
    OpenApiParameter(
        "format", str, enum=["json", "csv"], description="csv: text/csv, a header row"
    ),
]


class ReportView(AgentView):
    """A report of docs/reports.md as JSON, or with ``?format=csv`` as CSV."""

    content_negotiation_class = ReportFormatNegotiation
    csv_name = ""
    header: tuple[str, ...] = ()  # of the CSV when there is no row

    def answer(self, query: reports.ReportQuery) -> dict[str, Any]:
        raise NotImplementedError

    def get(self, request: Request) -> Response | HttpResponse:
        params = request.query_params.dict()
        query = reports.query_from(viewer=self.agent(request), params=params)
        wanted = params.get("format") or "json"
        if wanted not in ("json", "csv"):
            raise services.ServiceError("format: json or csv")
        answer = self.answer(query)
        if wanted == "json":
            return Response(answer)
        rows = answer.get("results", [answer])
        csv = HttpResponse(
            reports.as_csv(rows, self.header), content_type="text/csv; charset=utf-8"
        )
        csv["Content-Disposition"] = f'attachment; filename="{self.csv_name}.csv"'
        return csv


def _report_schema(summary: str, out: type[serializers.Serializer[Any]]) -> Callable[[Any], Any]:
    return extend_schema(
        parameters=REPORT_PARAMETERS,
        responses={
            (200, "application/json"): out,
            (200, "text/csv"): OpenApiResponse(
                str, description="format=csv: a header row, then the rows"
            ),
        },
        summary=summary,
    )


@_report_schema("Supervisors: the figures of my channels' chats in a range", SummaryOut)
class SummaryReportView(ReportView):
    csv_name = "summary"

    def answer(self, query: reports.ReportQuery) -> dict[str, Any]:
        return dict(SummaryOut(reports.summary(query)).data)


@_report_schema(
    "Supervisors: each agent's chats, first response, handle time and CSAT", AgentsReportOut
)
class AgentsReportView(ReportView):
    csv_name = "agents"
    header = reports.AGENT_COLUMNS

    def answer(self, query: reports.ReportQuery) -> dict[str, Any]:
        return dict(AgentsReportOut({"results": reports.agents(query)}).data)


@_report_schema("Supervisors: chats by weekday (0 = Monday) and hour", HoursReportOut)
class HoursReportView(ReportView):
    csv_name = "hours"

    def answer(self, query: reports.ReportQuery) -> dict[str, Any]:
        return dict(HoursReportOut({"results": reports.hours(query)}).data)
