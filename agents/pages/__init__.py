"""The agent pages at /agent/, one module per part of the workspace.

``workspace`` holds the lists, the chat and its actions; each other module
one feature of the pages. Every view is for a signed-in agent, shows only
what belongs to the agent's channels, and changes state only through
``agents.services``.
"""
