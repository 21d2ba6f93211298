from django.contrib.auth import views as auth_views
from django.urls import path

from agents import sso, streams
from agents.pages import (
    blacklist,
    canned,
    files,
    labels,
    language,
    password,
    reports_page,
    second_factor,
    settings,
    team,
    transcript,
    transfer,
)
from agents.pages import workspace as views

app_name = "agent"

urlpatterns = [
    path("", views.home, name="home"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="agents/login.html", redirect_authenticated_user=True
        ),
        name="login",
    ),
    path("login/code", second_factor.signin_code, name="signin-code"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # Single sign-on (agents/sso.py): 404 unless configured.
    path("sso/", sso.StartView.as_view(), name="sso"),
    path("sso/callback/", sso.CallbackView.as_view(), name="sso-callback"),
    path("password/forgot/", password.forgot, name="password-forgot"),
    path("password/forgot/sent/", password.sent, name="password-forgot-sent"),
    path("password/reset/<uidb64>/<token>/", password.ResetView.as_view(), name="password-reset"),
    path("jsi18n/<str:language>.js", language.catalogue, name="catalogue"),
    path("live", views.live, name="live"),
    path("stream", streams.agent_stream, name="stream"),
    path("status", views.status, name="status"),
    path("history/", views.history, name="history"),
    path("canned/", canned.replies, name="canned"),
    path("canned/search", canned.search, name="canned-search"),
    path("canned/<int:reply_id>/", canned.edit, name="canned-edit"),
    path("canned/<int:reply_id>/delete", canned.delete, name="canned-delete"),
    path("team/", team.team, name="team"),
    path("team/live", team.team_live, name="team-live"),
    path("team/agents/<int:agent_id>/max-chats", team.max_chats, name="team-max-chats"),
    path("reports/", reports_page.reports_page, name="reports"),
    path("settings/", settings.settings_page, name="settings"),
    path("settings/token", settings.new_token, name="new-token"),
    path("settings/password", settings.change_password, name="change-password"),
    path("settings/two-factor/", second_factor.setup_page, name="second-factor"),
    path("settings/two-factor/begin", second_factor.begin_setup, name="second-factor-begin"),
    path("settings/two-factor/confirm", second_factor.confirm_setup, name="second-factor-confirm"),
    path("settings/two-factor/off", second_factor.turn_off, name="second-factor-off"),
    path("settings/token/revoke", settings.revoke_token, name="revoke-token"),
    path(
        "settings/sessions/<int:session_id>/sign-out",
        settings.sign_out_session,
        name="sign-out-session",
    ),
    path(
        "settings/sessions/sign-out-others",
        settings.sign_out_other_sessions,
        name="sign-out-other-sessions",
    ),
    path("chats/<int:chat_id>/", views.home, name="chat"),
    path("chats/<int:chat_id>/accept", views.accept, name="accept"),
    path("chats/<int:chat_id>/decline", views.decline, name="decline"),
    path("chats/<int:chat_id>/finish", views.finish, name="finish"),
    path("chats/<int:chat_id>/messages", views.send, name="send"),
    path("chats/<int:chat_id>/typing", views.typing, name="typing"),
    path("chats/<int:chat_id>/messages/<int:message_id>/retry", views.retry, name="retry"),
    path("chats/<int:chat_id>/assign", views.crm_assign, name="crm-assign"),
    path("chats/<int:chat_id>/transcript", transcript.send, name="transcript"),
    path("chats/<int:chat_id>/client-email", transcript.confirm_email, name="client-email"),
    path("chats/<int:chat_id>/transfer", transfer.transfer, name="transfer"),
    path("chats/<int:chat_id>/reassign", team.reassign, name="reassign"),
    path("chats/<int:chat_id>/files", files.attach, name="attach"),
    path("chats/<int:chat_id>/labels", labels.labels, name="labels"),
    path("chats/<int:chat_id>/blacklist", blacklist.blacklist, name="blacklist"),
    path("chats/<int:chat_id>/blacklist/lift", blacklist.lift, name="blacklist-lift"),
    path("calls/<int:call_id>/progress", views.call_progress, name="call-progress"),
    path(
        "offline-messages/<int:offline_message_id>/handled",
        views.offline_handled,
        name="offline-handled",
    ),
]
