"""What the test provider says of its people: their address, whether it
verified it (not for those in the ``unverified`` group) and their name; of
those in the ``id-token-only`` group, the address in the ID token only, as
some providers do."""

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator

UNVERIFIED = "unverified"
ID_TOKEN_ONLY = "id-token-only"


class Validator(OAuth2Validator):
    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "email": user.email,
            "email_verified": not user.groups.filter(name=UNVERIFIED).exists(),
            "name": user.get_full_name(),
        }

    def get_userinfo_claims(self, request: Any) -> dict[str, Any]:
        claims: dict[str, Any] = super().get_userinfo_claims(request)
        if request.user.groups.filter(name=ID_TOKEN_ONLY).exists():
            del claims["email"], claims["email_verified"]
        return claims
