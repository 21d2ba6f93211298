"""The test provider's people and the one client it knows. Each person
signs in at the provider with their username and ``PASSWORD``."""

from __future__ import annotations

from dataclasses import dataclass

PASSWORD = "provider-password-4711"
CLIENT_ID = "switchboard"
CLIENT_SECRET = "switchboard-client-secret"


@dataclass(frozen=True)
class Person:
    username: str
    email: str
    name: str
    verified: bool = True
    in_userinfo: bool = True  # the address: else in the ID token only


ALICE = Person("alice", "alice@example.com", "Alice Agent")
# Bob's provider spells his address with a capital (Django keeps the local
# part's case, and lowers the domain's: Bob@example.com); his agent's is lower case.
BOB = Person("bob", "Bob@Example.COM", "Bob Agent")
CAROL = Person("carol", "carol@example.com", "Carol Unverified", verified=False)
DAVE = Person("dave", "dave@example.com", "Dave Newcomer")
ERIN = Person("erin", "erin@example.com", "Erin Away")
FRANK = Person("frank", "frank@example.com", "Frank Tokens", in_userinfo=False)
EVERYONE = (ALICE, BOB, CAROL, DAVE, ERIN, FRANK)
