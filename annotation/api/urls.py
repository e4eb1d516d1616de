from django.urls import include, path
from rest_framework.routers import DefaultRouter

from annotation.api import views

router = DefaultRouter()
router.register("participations", views.ParticipationViewSet, basename="participation")
router.register("queries", views.QueryViewSet, basename="query")
router.register("matches", views.MatchViewSet, basename="match")
router.register("admin/studies", views.StudyAdminViewSet, basename="admin-study")
router.register("admin/failed-candidates", views.FailedCandidateAdminViewSet, basename="admin-failed-candidate")

urlpatterns = [
    path("invitations/<str:token>/accept/", views.InvitationAcceptApi.as_view(), name="invitation-accept"),
    path("admin/studies/<slug:slug>/members/", views.StudyMembersApi.as_view(), name="admin-study-members"),
    path(
        "admin/studies/<slug:slug>/members/<str:username>/", views.StudyMemberApi.as_view(), name="admin-study-member"
    ),
    path("", include(router.urls)),
]
