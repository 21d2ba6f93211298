"""``python -m tests.oidc_provider.prepare``: the test provider's database,
its people and its client (the redirect URIs from PROVIDER_REDIRECT_URIS,
space-separated), before its server starts."""

import os

import django


def main() -> None:
    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oauth2_provider.models import Application

    from tests.oidc_provider.claims import ID_TOKEN_ONLY, UNVERIFIED
    from tests.oidc_provider.people import CLIENT_ID, CLIENT_SECRET, EVERYONE, PASSWORD

    call_command("migrate", verbosity=0)
    unverified = Group.objects.create(name=UNVERIFIED)
    id_token_only = Group.objects.create(name=ID_TOKEN_ONLY)
    for person in EVERYONE:
        first, last = person.name.split(" ", 1)
        user = User.objects.create_user(
            person.username, person.email, PASSWORD, first_name=first, last_name=last
        )
        if not person.verified:
            user.groups.add(unverified)
        if not person.in_userinfo:
            user.groups.add(id_token_only)
    Application.objects.create(
        name="Switchboard",
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=os.environ["PROVIDER_REDIRECT_URIS"],
        algorithm=Application.RS256_ALGORITHM,
        skip_authorization=True,
    )


if __name__ == "__main__":
    main()
