"""The widget in the visitor's language (docs/widget.md, "Languages"): the
host page's <html lang>, the channel's language, svc_api.setLocale; Arabic
right to left; every text inside its box on a phone's 375 px."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from agents import services
from agents.models import Agent, Chat
from devhooks.models import WidgetChannel
from devhooks.widget import languages
from devhooks.widget import services as widgets
from tests.devhooks.widget.test_languages import PLURALS
from tests.e2e.host_pages import HostSite
from tests.e2e.test_widget import LIVE, site, wait_loaded  # noqa: F401 (fixtures)
from tests.e2e.test_widget_experience import RECORDER, SHADOW, say, watch
from tests.factories import AgentFactory, text

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

VIEWPORT = "<meta name='viewport' content='width=device-width, initial-scale=1'>"
STUB = (
    "<script>window.svc_api=window.svc_api||new Proxy({q:[]},{get:(t,n)=>n==='q'?t.q:"
    "(...a)=>{t.q.push([n,a])}});</script>"
)
# Every shown element of the widget whose content is wider than its box, or
# whose box reaches out of the window's sides (or of the screen, closed).
OVERFLOWING = f"""(() => {{
  const root = {SHADOW}, out = [];
  const open = !root.querySelector('.window').hidden;
  const frame = (open ? root.querySelector('.window') : document.documentElement)
    .getBoundingClientRect();
  for (const el of root.querySelectorAll(open ? '.window *' : '.label, .label *')) {{
    if (!(el instanceof HTMLElement) || !el.getClientRects().length) continue;
    const r = el.getBoundingClientRect();
    const name = el.className + ' ' + (el.textContent || '').slice(0, 40);
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1) out.push('wider: ' + name);
    if (r.left < frame.left - 1 || r.right > frame.right + 1) out.push('outside: ' + name);
  }}
  return out;
}})()"""


@pytest.fixture
def alice(db: None) -> Agent:
    return AgentFactory.create(email="alice@example.com", name="Alice Agent", is_online=True)


@pytest.fixture
def widget(alice: Agent) -> WidgetChannel:
    # The default title: the widget says it in the visitor's language.
    return widgets.create_widget_channel(name="Website", agent_emails=[alice.email])


@pytest.fixture
def phone(chromium: Browser) -> Iterator[Page]:
    # A phone 375 px wide, where the window fills the screen.
    context = chromium.new_context(
        viewport={"width": 375, "height": 740}, is_mobile=True, has_touch=True
    )
    yield context.new_page()
    context.close()


def lang_page(
    site: HostSite,  # noqa: F811
    service: str,
    widget: WidgetChannel,
    lang: str = "",
    head: str = "",
) -> str:
    """A host page in ``lang`` (none: no lang attribute)."""
    site.script("/record.js", RECORDER)
    attribute = f" lang='{lang}'" if lang else ""
    html = (
        f"<!doctype html><html{attribute}><head><meta charset='utf-8'><title>Shop</title>"
        f"{VIEWPORT}{head}<script src='/record.js'></script></head><body><h1>Shop</h1>"
        f'<script src="{service}/widget/{widget.widget_id}.js" async></script></body></html>'
    )
    return site.page("/shop", html)


def catalogues_asked(page: Page) -> list[str]:
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/widget/lang/" in r.url else None)
    return asked


def host(page: Page, attribute: str) -> str | None:
    found: str | None = page.locator("#svc-widget").get_attribute(attribute)
    return found


def margins(page: Page, selector: str) -> tuple[float, float]:
    """The space left and right of the element in the message list."""
    box = page.locator(selector).last.bounding_box()
    frame = page.get_by_test_id("svc-messages").bounding_box()
    assert box and frame
    return box["x"] - frame["x"], frame["x"] + frame["width"] - (box["x"] + box["width"])


def fits(page: Page) -> None:
    assert page.evaluate(OVERFLOWING) == []


# What each language's page must read: the label, the header, the button,
# and the end of a chat.
SAYS = {
    "ru": ("Напишите нам", "Мы на связи", "Отправить", "Чат завершён.", "Начать новый чат"),
    "de": ("Chatten Sie mit uns", "Wir sind online", "Senden", "Der Chat ist beendet.",
           "Neuen Chat beginnen"),
    "ar": ("تحدّث معنا", "نحن متصلون الآن", "إرسال", "انتهت المحادثة.", "بدء محادثة جديدة"),
}  # fmt: skip
# What the visitor writes, and the agent answers, in each language.
CHATS = {
    "ru": ("Здравствуйте! Где мой заказ?", "Добрый день! Сейчас посмотрю."),
    "de": ("Hallo! Wo ist meine Bestellung?", "Guten Tag! Ich schaue gleich nach."),
    "ar": ("مرحبا! أين طلبي؟", "أهلًا! سأتحقق الآن."),
}


@pytest.mark.parametrize("lang", list(SAYS))
def test_a_page_in_a_language_gets_the_widget_in_it_and_every_text_fits_a_phone(
    phone: Page, lang: str, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent, screenshots: Path,
) -> None:  # fmt: skip
    label, online, send, ended, new_chat = SAYS[lang]
    question, answer = CHATS[lang]
    errors = watch(phone)
    asked = catalogues_asked(phone)
    phone.goto(lang_page(site, web_process.url, widget, lang))
    wait_loaded(phone)
    expect(phone.get_by_test_id("svc-label")).to_have_text(label)
    assert (host(phone, "lang"), host(phone, "dir")) == (lang, "rtl" if lang == "ar" else "ltr")
    # Its own language only, at its version's URL.
    version = languages.versions()[lang]
    assert [url.split("/widget/lang/")[1] for url in asked] == [f"{lang}.json?v={version}"]
    fits(phone)

    phone.get_by_test_id("svc-label").click()
    expect(phone.get_by_test_id("svc-who")).to_have_text(online)
    expect(phone.get_by_test_id("svc-send")).to_have_text(send)
    fits(phone)
    phone.get_by_test_id("svc-introduce").click()
    expect(phone.get_by_test_id("svc-contact")).to_be_visible()
    fits(phone)
    phone.get_by_test_id("svc-introduce").click()

    say(phone, question)
    chat = Chat.objects.get(channel=widget.channel)
    assert chat.language == lang  # what the transcript will speak
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=text(answer))
    expect(phone.locator("[data-author=agent]")).to_contain_text(answer, timeout=LIVE)
    fits(phone)
    if lang == "ru":  # the README's picture
        phone.get_by_test_id("svc-window").screenshot(path=screenshots / "widget-russian.png")
    services.finish_chat(chat=chat, agent=alice)
    end = phone.get_by_test_id("svc-end")
    expect(end).to_contain_text(ended, timeout=LIVE)
    expect(phone.get_by_test_id("svc-new-chat")).to_have_text(new_chat)
    fits(phone)
    assert errors == []


def test_arabic_mirrors_the_window(
    phone: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent, screenshots: Path,
) -> None:  # fmt: skip
    phone.goto(lang_page(site, web_process.url, widget, "ar"))
    wait_loaded(phone)
    phone.get_by_test_id("svc-label").click()
    say(phone, "مرحبا")
    direction = phone.get_by_test_id("svc-window").evaluate("el => getComputedStyle(el).direction")
    assert direction == "rtl"
    # The header reads from the right: the title there, the close button on the left.
    title = phone.locator("#svc-widget h2").bounding_box()
    close = phone.get_by_test_id("svc-close").bounding_box()
    assert title and close and close["x"] + close["width"] <= title["x"] + 1, (close, title)
    # The visitor's own message keeps to the left, as the right is the agent's.
    left, right = margins(phone, "[data-author=client]")
    assert left < right, (left, right)
    fits(phone)

    # The agent's answer keeps to the right.
    chat = Chat.objects.get(channel=widget.channel)
    services.accept_chat(chat=chat, agent=alice)
    services.post_agent_message(chat=chat, agent=alice, content=text("أهلًا! كيف يمكنني مساعدتك؟"))
    expect(phone.locator("[data-author=agent]")).to_contain_text("مساعدتك", timeout=LIVE)
    left, right = margins(phone, "[data-author=agent]")
    assert right < left, (left, right)
    fits(phone)
    phone.get_by_test_id("svc-window").screenshot(path=screenshots / "widget-arabic.png")


def test_the_queue_line_uses_the_languages_plural_forms(
    phone: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
) -> None:  # fmt: skip
    place: dict[str, Any] = {"position": 2, "wait_seconds": 60}

    def queue(route: Route) -> None:
        answer = {"queue": {**place, "text": "English", "refresh_seconds": 1}, "result": "ok"}
        route.fulfill(
            status=200, body=json.dumps(answer), content_type="application/json",
            headers={"Access-Control-Allow-Origin": "*"},
        )  # fmt: skip

    phone.route("**/v1/queue", queue)
    phone.goto(lang_page(site, web_process.url, widget, "ru"))
    wait_loaded(phone)
    phone.get_by_test_id("svc-label").click()
    say(phone, "Здравствуйте")
    line = phone.get_by_test_id("svc-queue")
    expected = [
        (2, 60, "Ваше место в очереди: 2, ждать около 1 минуты"),
        (3, 180, "Ваше место в очереди: 3, ждать около 3 минут"),
        (5, 300, "Ваше место в очереди: 5, ждать около 5 минут"),
        (21, 21 * 60, "Ваше место в очереди: 21, ждать около 21 минуты"),
        (1, 20, "Ваша очередь следующая, ждать меньше минуты"),
    ]
    for position, wait, line_text in expected:
        place.update(position=position, wait_seconds=wait)
        expect(line).to_have_text(line_text, timeout=LIVE)


def test_the_channels_language_without_a_page_language_and_setlocale_live(
    phone: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
) -> None:  # fmt: skip
    WidgetChannel.objects.filter(pk=widget.pk).update(language="de")
    errors = watch(phone)
    phone.goto(lang_page(site, web_process.url, widget))
    wait_loaded(phone)
    expect(phone.get_by_test_id("svc-label")).to_have_text("Chatten Sie mit uns")
    phone.evaluate("svc_api.open()")
    say(phone, "Hallo")
    expect(phone.get_by_test_id("svc-waiting")).to_have_text(
        "Gleich antwortet Ihnen jemand aus unserem Team."
    )

    # The page switches: the open window speaks French at once, its messages kept.
    assert phone.evaluate("svc_api.setLocale('fr')") == {"result": "ok"}
    expect(phone.get_by_test_id("svc-send")).to_have_text("Envoyer")
    expect(phone.get_by_test_id("svc-who")).to_have_text("Nous sommes en ligne")
    expect(phone.get_by_test_id("svc-window")).to_be_visible()
    expect(phone.locator("[data-author=client]")).to_have_text(["Hallo"])
    assert host(phone, "lang") == "fr"

    # A language it does not speak: refused, with the reason; nothing changes.
    refused = phone.evaluate("svc_api.setLocale('tlh')")
    assert refused["result"] == "fail" and "tlh" in refused["reason"], refused
    assert phone.evaluate("svc_api.setLocale()")["result"] == "fail"
    expect(phone.get_by_test_id("svc-send")).to_have_text("Envoyer")

    # A region resolves to the language it has; Arabic turns the window round.
    assert phone.evaluate("svc_api.setLocale('pt-PT')") == {"result": "ok"}
    expect(phone.get_by_test_id("svc-send")).to_have_text("Enviar")
    assert host(phone, "lang") == "pt-BR"
    assert phone.evaluate("svc_api.setLocale('ar')") == {"result": "ok"}
    expect(phone.locator("#svc-widget[dir=rtl]")).to_have_count(1)
    assert phone.evaluate("svc_api.setLocale('en-GB')") == {"result": "ok"}
    expect(phone.get_by_test_id("svc-send")).to_have_text("Send")
    assert (host(phone, "lang"), host(phone, "dir")) == ("en", "ltr")
    fits(phone)
    # The chat keeps the language it started in.
    assert Chat.objects.get(channel=widget.channel).language == "de"
    assert errors == []


def test_a_language_asked_for_just_before_the_widget_is_destroyed_draws_nothing_again(
    phone: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
) -> None:  # fmt: skip
    # The catalogue arrives after svc_destroy (one task asks both, so it
    # cannot come before): the widget stays gone, with no error on the page.
    errors = watch(phone)
    phone.goto(lang_page(site, web_process.url, widget))
    wait_loaded(phone)
    with phone.expect_response(lambda r: "/widget/lang/fr.json" in r.url) as came:
        phone.evaluate("svc_api.setLocale('fr'); svc_destroy()")
    assert came.value.ok
    phone.evaluate("new Promise(r => setTimeout(r, 200))")  # its handlers have run
    expect(phone.locator("#svc-widget")).to_have_count(0)
    # Put back, the widget speaks the language last asked for.
    phone.evaluate("svc_init()")
    expect(phone.get_by_test_id("svc-label")).to_have_text("Discutez avec nous")
    assert errors == []


@pytest.mark.parametrize(
    ("lang", "label"),
    [("xx-YY", "Chatten Sie mit uns"), ("de-AT", "Chatten Sie mit uns"), ("en-GB", "Chat with us")],
)
def test_an_unknown_page_language_falls_back_to_the_channels_and_a_region_to_its_language(
    phone: Page, lang: str, label: str, web_process: Any, site: HostSite,  # noqa: F811
    widget: WidgetChannel,
) -> None:  # fmt: skip
    WidgetChannel.objects.filter(pk=widget.pk).update(language="de")
    phone.goto(lang_page(site, web_process.url, widget, lang))
    wait_loaded(phone)
    expect(phone.get_by_test_id("svc-label")).to_have_text(label)


def test_setlocale_before_the_widget_loads_wins_over_the_page_language(
    phone: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
) -> None:  # fmt: skip
    stub = STUB + "<script>svc_api.setLocale('es');</script>"
    phone.goto(lang_page(site, web_process.url, widget, "ru", head=stub))
    wait_loaded(phone)
    expect(phone.get_by_test_id("svc-label")).to_have_text("Chatea con nosotros")


def test_the_catalogues_plural_categories_are_the_browsers(phone: Page) -> None:
    # The table the catalogue test holds every catalogue to, against the
    # Intl.PluralRules the widget chooses a form with.
    found = phone.evaluate(
        """(codes) => Object.fromEntries(codes.map((c) => [c, [
            new Intl.PluralRules(c).resolvedOptions().pluralCategories.sort(),
            new Intl.PluralRules(c, {type: 'ordinal'}).resolvedOptions().pluralCategories.sort(),
        ]]))""",
        list(PLURALS),
    )
    table = {
        code: [sorted(cardinal), sorted(ordinal)] for code, (cardinal, ordinal) in PLURALS.items()
    }
    assert found == table


def test_a_message_that_could_not_go_out_is_said_in_the_visitors_language(
    phone: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
) -> None:  # fmt: skip
    phone.goto(lang_page(site, web_process.url, widget, "de"))
    wait_loaded(phone)
    phone.get_by_test_id("svc-label").click()
    # The network fails: no sentence of the service's to show, the widget's own.
    phone.route("**/v1/message", lambda route: route.abort())
    phone.get_by_test_id("svc-input").fill("Hallo")
    phone.get_by_test_id("svc-input").press("Enter")
    expect(phone.locator(".note").last).to_have_text(
        "Nicht gesendet: Der Chat ist nicht erreichbar. "
        "Prüfen Sie Ihre Verbindung und versuchen Sie es erneut."
    )


def test_a_refusal_of_the_service_is_said_in_the_visitors_language(
    phone: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
) -> None:  # fmt: skip
    phone.goto(lang_page(site, web_process.url, widget, "ru"))
    wait_loaded(phone)
    phone.get_by_test_id("svc-label").click()
    # The site removes its widget while the visitor writes: the service
    # answers 404 in English (the wire's); the visitor reads Russian.
    answers: list[Any] = []
    phone.on("response", lambda r: answers.append(r) if r.url.endswith("/v1/message") else None)
    WidgetChannel.objects.filter(pk=widget.pk).delete()
    phone.get_by_test_id("svc-input").fill("Привет")
    phone.get_by_test_id("svc-input").press("Enter")
    expect(phone.locator(".note").last).to_have_text(
        "Не отправлено: Этот чат больше недоступен на сайте. "  # noqa: RUF001
        "Обновите страницу, чтобы начать заново."
    )
    assert answers[-1].status == 404
    assert answers[-1].json()["error"] == {
        "code": "not_found",
        "message": "no such widget or action",
    }


def test_the_offline_forms_refusal_is_said_in_the_visitors_language(
    phone: Page, web_process: Any, site: HostSite, widget: WidgetChannel,  # noqa: F811
    alice: Agent,
) -> None:  # fmt: skip
    services.set_agent_status(agent=alice, online=False)
    heard = (
        "(window.heard = []) && svc_api.sendOfflineMessage("
        "{name: 'Аня', email: 'anya@example.com', message: 'Тест'},"
    )
    phone.goto(lang_page(site, web_process.url, widget, "ru"))
    wait_loaded(phone)
    phone.get_by_test_id("svc-label").click()
    form = phone.get_by_test_id("svc-offline")
    form.get_by_label("Имя").fill("Аня")
    form.get_by_label("Эл. почта").fill("anya@example.com")
    form.get_by_label("Сообщение").fill("Вы доставляете в Казань?")
    WidgetChannel.objects.filter(pk=widget.pk).delete()  # the site removes its widget meanwhile
    errors = watch(phone)
    form.get_by_role("button", name="Отправить").click()
    expect(form.locator(".status.error")).to_have_text(
        "Не отправлено: Этот чат больше недоступен на сайте. "  # noqa: RUF001
        "Обновите страницу, чтобы начать заново."
    )
    # The page's own callback still reads the service's message, as the spec's does.
    phone.evaluate(f"{heard} (error) => window.heard.push(error))")
    phone.wait_for_function("window.heard.length === 1")
    assert phone.evaluate("window.heard") == ["no such widget or action"]
    assert errors == []
