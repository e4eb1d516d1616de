from django.urls import include, path
from rest_framework.routers import DefaultRouter

from annotation.api import views

router = DefaultRouter()
router.register("participations", views.ParticipationViewSet, basename="participation")
router.register("queries", views.QueryViewSet, basename="query")
router.register("matches", views.MatchViewSet, basename="match")
# A study's participations, beside its design's routes under the same prefix (studies/api/urls.py).
router.register("admin/studies", views.StudyParticipationsAdminViewSet, basename="admin-study")
router.register("admin/failed-candidates", views.FailedCandidateAdminViewSet, basename="admin-failed-candidate")

urlpatterns = [
    path("invitations/<str:token>/accept/", views.InvitationAcceptApi.as_view(), name="invitation-accept"),
    path("", include(router.urls)),
]
