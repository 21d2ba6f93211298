"""Admin: each half of the Developer API registers its own pages."""

from devhooks.webhooks import admin as webhooks_admin
from devhooks.widget import admin as widget_admin

__all__ = ["webhooks_admin", "widget_admin"]
