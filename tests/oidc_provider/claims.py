"""What the test provider says of its people: their address, whether it
verified it (not for those in the ``unverified`` group) and their name."""

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator

UNVERIFIED = "unverified"


class Validator(OAuth2Validator):
    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "email": user.email,
            "email_verified": not user.groups.filter(name=UNVERIFIED).exists(),
            "name": user.get_full_name(),
        }
