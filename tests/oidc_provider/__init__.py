"""A real OpenID provider for the single sign-on tests: a small Django
project of its own (django-oauth-toolkit with OpenID Connect), run in a
second process with its own SQLite file (``server.Provider``)."""
