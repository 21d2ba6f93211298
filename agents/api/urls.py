from django.urls import path

from agents.api import views

app_name = "agent_api"

urlpatterns = [
    path("status", views.StatusView.as_view(), name="status"),
    path("chats", views.ChatListView.as_view(), name="chats"),
    path("offers", views.OfferListView.as_view(), name="offers"),
    path("team", views.TeamView.as_view(), name="team"),
    path("labels", views.LabelListView.as_view(), name="labels"),
    path("audit", views.AuditListView.as_view(), name="audit"),
    path("reports/summary", views.SummaryReportView.as_view(), name="report-summary"),
    path("reports/agents", views.AgentsReportView.as_view(), name="report-agents"),
    path("reports/hours", views.HoursReportView.as_view(), name="report-hours"),
    path("chats/<int:chat_id>", views.ChatDetailView.as_view(), name="chat"),
    path("chats/<int:chat_id>/messages", views.ChatMessagesView.as_view(), name="messages"),
    path(
        "chats/<int:chat_id>/messages/<int:message_id>/retry",
        views.MessageRetryView.as_view(),
        name="retry",
    ),
    path("chats/<int:chat_id>/accept", views.AcceptView.as_view(), name="accept"),
    path("chats/<int:chat_id>/decline", views.DeclineView.as_view(), name="decline"),
    path("chats/<int:chat_id>/finish", views.FinishView.as_view(), name="finish"),
    path("chats/<int:chat_id>/typing", views.TypingView.as_view(), name="typing"),
    path("chats/<int:chat_id>/assign", views.CrmAssignView.as_view(), name="crm-assign"),
    path("chats/<int:chat_id>/transcript", views.TranscriptView.as_view(), name="transcript"),
    path("chats/<int:chat_id>/client-email", views.ClientEmailView.as_view(), name="client-email"),
    path("chats/<int:chat_id>/blacklist", views.BlacklistView.as_view(), name="blacklist"),
    path("chats/<int:chat_id>/notes", views.NotesView.as_view(), name="notes"),
    path("chats/<int:chat_id>/labels", views.ChatLabelsView.as_view(), name="chat-labels"),
    path("chats/<int:chat_id>/files", views.FileUploadView.as_view(), name="files"),
    path("chats/<int:chat_id>/transfer", views.TransferView.as_view(), name="transfer"),
    path("chats/<int:chat_id>/reassign", views.ReassignView.as_view(), name="reassign"),
    path("calls", views.CallListView.as_view(), name="calls"),
    path("calls/<int:call_id>/progress", views.CallProgressView.as_view(), name="call-progress"),
    path("offline-messages", views.OfflineMessageListView.as_view(), name="offline-messages"),
    path(
        "offline-messages/<int:offline_message_id>/handled",
        views.OfflineMessageHandledView.as_view(),
        name="offline-handled",
    ),
]
