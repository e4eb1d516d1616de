"""Who may see statistics: admins (staff) and members of the "researchers" group; never annotators."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission

RESEARCHERS_GROUP = "researchers"


def is_researcher(user: Any) -> bool:
    if not (user and user.is_authenticated and user.is_active):
        return False
    return bool(user.is_staff or user.is_superuser or user.groups.filter(name=RESEARCHERS_GROUP).exists())


class IsResearcher(BasePermission):
    message = "Only researchers and admins can see study results."

    def has_permission(self, request: Any, view: Any) -> bool:
        return is_researcher(request.user)
