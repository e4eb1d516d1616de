"""The admin API's study paths, /api/v1/admin/studies/...; annotation/api/urls.py adds a study's participations
under the same prefix (a simple router: annotation's router serves the API's root)."""

from django.urls import include, path
from rest_framework.routers import SimpleRouter

from studies.api import views

router = SimpleRouter()
router.register("admin/studies", views.StudyAdminViewSet, basename="admin-study")

urlpatterns = [
    path("admin/studies/<slug:slug>/members/", views.StudyMembersApi.as_view(), name="admin-study-members"),
    path(
        "admin/studies/<slug:slug>/members/<str:username>/", views.StudyMemberApi.as_view(), name="admin-study-member"
    ),
    path("", include(router.urls)),
]
